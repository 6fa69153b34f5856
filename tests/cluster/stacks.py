"""What the cluster tests apply: an example stack's plan (the manifests `fleetctl plan` writes,
from the real program under the recording mocks), or a stack's objects rendered directly (for
crafted stacks the program would refuse: the offline check stops it before anything renders)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from components.render.classic import namespace, workload_service_account
from components.render.endpoint import endpoint_objects
from components.render.placement import placed
from components.spec import StackSpec, parse_stack_config
from fleetctl.plan import Plan, manifest_files
from fleetctl.stackfile import read_stack_file


def spec_of(path: Path) -> StackSpec:
    """The stack's validated fields, without the placement check (which is what is under test)."""
    stack_file = read_stack_file(path)
    return parse_stack_config(stack_file.project_config, stack=stack_file.stack)


def plan_manifests(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """Region -> every Kubernetes object of the plan there, as `fleetctl plan` writes them."""
    yaml = YAML(typ="safe")
    regions: dict[str, list[dict[str, Any]]] = {}
    for path, text in sorted(manifest_files(plan).items()):
        _, region, _ = path.split("/", 2)
        regions.setdefault(region, []).append(yaml.load(text))
    return regions


def rendered_manifests(
    spec: StackSpec, region: str, endpoints: Collection[str] | None = None
) -> list[Mapping[str, Any]]:
    """The region's namespaces, workload ServiceAccounts and endpoint objects (of ``endpoints``
    only, if given), straight from the renderers the program registers
    (components/workloads/regional.py)."""
    placements = [p for p in spec.placements_in(region) if endpoints is None or p.endpoint in endpoints]
    found: list[Mapping[str, Any]] = []
    for name in sorted({spec.endpoints[placement.endpoint].namespace for placement in placements}):
        found += [namespace(name), workload_service_account(name)]
    for placement in placements:
        found += endpoint_objects(placed(spec, placement)).values()
    return found
