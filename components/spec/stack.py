"""The whole stack config: parsed once, at the edge, into frozen models (docs/design.md, decision 1)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, ValidationError

from components.catalog import aws_regions, instance_catalog
from components.spec.base import SpecModel
from components.spec.checks import (
    Placement,
    check_canary_names,
    check_derived_names,
    check_endpoint_name,
    check_group_names,
    check_region,
    check_region_name,
    place_endpoint,
)
from components.spec.endpoint import Endpoint
from components.spec.errors import Problem, SpecError, dotted, problems_from, root_causes
from components.spec.existing_checks import check_existing_region, check_kubeconfig_placements
from components.spec.front import GlobalFront, check_front
from components.spec.metrics import needs_pipeline
from components.spec.region import Region

NAMESPACE = "inference-fleet"


class StackConfig(SpecModel):
    """The project's keys of a stack file (``inference-fleet:<key>``)."""

    regions: dict[str, Region] = Field(
        min_length=1, description="AWS regions by code; each gets a cluster, node groups and a cold tier."
    )
    endpoints: dict[str, Endpoint] = Field(
        default_factory=dict, description="Inference endpoints by name (a DNS-1035 label)."
    )
    global_front: GlobalFront = Field(
        default_factory=GlobalFront,
        alias="global",
        description="One address for every endpoint across the regions, with a traffic dial per region.",
    )


CONFIG_KEYS = tuple(field.alias or name for name, field in StackConfig.model_fields.items())


@dataclass(frozen=True)
class StackSpec:
    """A validated stack: the models plus where each endpoint runs."""

    regions: Mapping[str, Region]
    endpoints: Mapping[str, Endpoint]
    placements: tuple[Placement, ...]
    global_front: GlobalFront = field(default_factory=GlobalFront)

    def placements_in(self, region: str) -> tuple[Placement, ...]:
        return tuple(placement for placement in self.placements if placement.region == region)


def parse_stack_config(config: Mapping[str, Any], stack: str | None = None) -> StackSpec:
    """Validate the project's config keys (namespace stripped); raise SpecError with every problem.

    With ``stack``, the AWS names derived from it are checked against AWS's limits too.
    """
    problems: list[Problem] = []
    for key in config:
        if key not in CONFIG_KEYS:
            close = difflib.get_close_matches(str(key), CONFIG_KEYS, n=1, cutoff=0.6)
            hint = (
                f"did you mean {f'{NAMESPACE}:{close[0]}'!r}?" if close else f"allowed keys: {', '.join(CONFIG_KEYS)}"
            )
            problems.append(Problem(dotted([key]), f"unknown key {f'{NAMESPACE}:{key}'!r}; {hint}"))
    raw_regions = config.get("regions")
    raw_endpoints = config.get("endpoints", {})
    if raw_endpoints is None:
        raw_endpoints = {}
    regions = _parse_map("regions", raw_regions, Region, problems, required=True)
    endpoints = _parse_map("endpoints", raw_endpoints, Endpoint, problems, required=False)

    catalog = instance_catalog()
    known_regions = aws_regions()
    for name in raw_regions if isinstance(raw_regions, Mapping) else ():
        if isinstance(name, str) and name not in regions:
            problems += check_region_name(name, known_regions)  # a region whose body is invalid too
    for name, region in list(regions.items()):
        name_problems = check_region_name(name, known_regions)
        if name_problems:
            # Reported once, against the region: its zones and derived names are judged by its name,
            # so they would only echo it; endpoints are not placed there.
            problems += name_problems
            del regions[name]
            continue
        problems += check_region(name, region, catalog)
        if stack is not None:
            problems += check_derived_names(stack, name, region)
    placements: list[Placement] = []
    declared = tuple(raw_regions) if isinstance(raw_regions, Mapping) else ()
    for name in raw_endpoints if isinstance(raw_endpoints, Mapping) else ():
        problems += check_endpoint_name(str(name))
    problems += check_canary_names(endpoints)
    problems += check_group_names(endpoints)
    for name, endpoint in endpoints.items():
        endpoint_placements, endpoint_problems = place_endpoint(name, endpoint, declared, regions, catalog)
        placements += endpoint_placements
        problems += endpoint_problems
    front = _parse_front(config.get("global"), problems)
    if front is not None:
        targets = {name: endpoint.target_regions for name, endpoint in endpoints.items()}
        problems += check_front(front, regions, targets)
    problems += _pipeline_problems(regions, endpoints, placements)
    regions = _resolve_metrics(regions, endpoints, placements)
    for name, region in regions.items():
        problems += check_existing_region(name, region, catalog, base=None)
    problems += check_kubeconfig_placements(regions, endpoints, placements, front)
    if problems:
        raise SpecError(sorted(set(root_causes(problems))))
    return StackSpec(
        regions=regions, endpoints=endpoints, placements=tuple(placements), global_front=front or GlobalFront()
    )


def _pipeline_problems(
    regions: Mapping[str, Region], endpoints: Mapping[str, Endpoint], placements: list[Placement]
) -> list[Problem]:
    """An autoscaler placed in a region whose pipeline is turned off would never act: its
    ScaledObject needs KEDA's CRDs and controller, which run with the pipeline."""
    found = []
    for placement in placements:
        endpoint = endpoints[placement.endpoint]
        if needs_pipeline(endpoint) and regions[placement.region].metrics.enabled is False:
            where = "autoscaling" if endpoint.mooncake is None else "mooncake.autoscaling"
            found.append(
                Problem(
                    f"endpoints.{placement.endpoint}.{where}",
                    f"autoscales in {placement.region}, whose metrics pipeline is off "
                    f"(regions.{placement.region}.metrics.enabled: false); KEDA, which runs every autoscaler, "
                    "comes with it: remove that line (or set it true), or turn the autoscaler off",
                )
            )
    return found


def _resolve_metrics(
    regions: dict[str, Region], endpoints: Mapping[str, Endpoint], placements: list[Placement]
) -> dict[str, Region]:
    """Each region's ``metrics.enabled`` as given, else on exactly when an endpoint placed there
    autoscales (components/spec/metrics.py)."""
    resolved = {}
    for name, region in regions.items():
        enabled = region.metrics.enabled
        if enabled is None:
            enabled = any(needs_pipeline(endpoints[p.endpoint]) for p in placements if p.region == name)
            region = region.model_copy(update={"metrics": region.metrics.model_copy(update={"enabled": enabled})})
        resolved[name] = region
    return resolved


def _parse_front(raw: Any, problems: list[Problem]) -> GlobalFront | None:
    if raw is None:
        return GlobalFront()
    try:
        return GlobalFront.model_validate(raw)
    except ValidationError as error:
        problems += problems_from(error, ["global"], GlobalFront)
        return None


def _parse_map(
    key: str, raw: Any, model: type[Region] | type[Endpoint], problems: list[Problem], *, required: bool
) -> dict[str, Any]:
    """Validate each entry on its own, so one bad entry does not hide the problems of the others."""
    if raw is None and required:
        problems.append(Problem(key, f"is required: add {NAMESPACE}:{key} to the stack config"))
        return {}
    if not isinstance(raw, Mapping):
        problems.append(Problem(key, f"must be a mapping of name to {key[:-1]}, got {type(raw).__name__}"))
        return {}
    if required and not raw:
        problems.append(Problem(key, f"is empty: declare at least one {key[:-1]}"))
    parsed = {}
    for name, value in raw.items():
        if not isinstance(name, str):
            problems.append(Problem(dotted([key, str(name)]), f"{key[:-1]} names must be strings, got {name!r}"))
            continue
        try:
            parsed[name] = model.model_validate(value)
        except ValidationError as error:
            problems += problems_from(error, [key, name], model)
    return parsed
