"""The fleet: regions x endpoints placement, and what the stack exports about it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components.spec import StackSpec


@dataclass(frozen=True)
class FleetArgs:
    spec: StackSpec
    aws_providers: Mapping[str, aws.Provider]
    """One explicit provider per region of the spec, created by ``__main__``."""


class Fleet(pulumi.ComponentResource):
    """Every region's platform and workloads, grouped under one component."""

    placements: pulumi.Output[dict[str, Any]]
    """endpoint -> region -> {node_group, image}: where each endpoint runs."""

    def __init__(self, name: str, args: FleetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:fleet:Fleet", name, None, opts)
        missing = sorted(set(args.spec.regions) - set(args.aws_providers))
        if missing:
            raise ValueError(f"no AWS provider for region(s) {', '.join(missing)}")
        self.placements = pulumi.Output.from_input(placement_table(args.spec))
        self.register_outputs({"placements": self.placements})


def placement_table(spec: StackSpec) -> dict[str, Any]:
    table: dict[str, dict[str, Any]] = {name: {} for name in spec.endpoints}
    for placement in spec.placements:
        table[placement.endpoint][placement.region] = {
            "node_group": placement.node_group,
            "image": placement.image,
        }
    return table
