"""``fleetctl region drain`` / ``undrain``: a region's traffic dial on the global front door
(``global.regions.<region>.traffic_dial``, docs/global.md) as an edit of the stack file.

Draining writes ``traffic_dial: 0``; undraining goes back to the default (100) by removing the key,
and the region's entry and ``regions`` when nothing else is left in them, so a drain and an undrain
leave the file byte for byte as it was. The plan diff of either is one endpoint group's
``trafficDialPercentage``, labelled ``traffic only``.

A dial of 0 takes a region out of Global Accelerator's normal routing only: when the regions that
serve have no healthy endpoint, its failover ignores the dial and may send their clients to the
drained region (Developer Guide, "How failover works for unhealthy endpoints"). A drain says so; it
never promises a region that takes no traffic at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ruamel.yaml.comments import CommentedMap

from components.spec.errors import did_you_mean, dotted
from components.spec.front import ACCELERATOR, KEY, FrontEndpoint, FrontRegion, GlobalFront
from fleetctl.edit.sections import EditError, declared_regions, refuse, section
from fleetctl.edit.tree import flow_map, remove_entry, set_entry

FRONT_ORDER = tuple(field.alias or name for name, field in GlobalFront.model_fields.items())
REGION_ORDER = tuple(FrontRegion.model_fields)
ENDPOINT_ORDER = tuple(FrontEndpoint.model_fields)
FULL = 100
"""The default dial: the region takes all the traffic Global Accelerator sends it."""
FAILOVER_NOTE = (
    "{what} still takes failover traffic: while no other region has a healthy endpoint, Global Accelerator "
    "ignores the traffic dial and may send their clients here (keep it serving until the others are "
    "healthy, or set {weight}: 0 by hand to keep it out of failover too)"
)
"""What a drain of an accelerator's region does not do (AWS Global Accelerator Developer Guide, "How failover
works for unhealthy endpoints": "for this failover, Global Accelerator ignores the traffic dial setting")."""


def _front(config: CommentedMap, region: str) -> CommentedMap:
    """The enabled global block of a stack that has ``region``."""
    regions = declared_regions(config)
    if region not in regions:
        hint = did_you_mean(region, regions)
        raise refuse(
            [KEY, "regions", region],
            f"is not a region of this stack (regions: {', '.join(regions)}){f'; {hint}' if hint else ''}",
        )
    front = section(config, KEY)
    if front is None or front.get("enabled") is not True:
        raise refuse(
            [KEY, "enabled"],
            "is not true: without the global front door there is no traffic dial to move "
            "(set inference-fleet:global.enabled: true first; docs/global.md)",
        )
    return front


def _dial(holder: CommentedMap, region: str, path: list[str]) -> tuple[Any, Any]:
    """The region's dial and weight as ``holder`` (the front, or an endpoint's own listener entry)
    has them under ``regions`` (None when absent)."""
    regions = holder.get("regions")
    entry = regions.get(region) if isinstance(regions, CommentedMap) else None
    if regions is not None and not isinstance(regions, CommentedMap):
        raise refuse([*path, "regions"], "is not a mapping; fix it by hand (fleetctl validate shows how)")
    if entry is not None and not isinstance(entry, CommentedMap):
        raise refuse([*path, "regions", region], "is not a mapping; fix it by hand (fleetctl validate shows how)")
    if entry is None:
        return None, None
    return entry.get("traffic_dial"), entry.get("weight")


def _serves(dial: Any, weight: Any) -> bool:
    return (dial is None or dial != 0) and (weight is None or weight != 0)


@dataclass(frozen=True)
class _Dials:
    """Where a drain writes: the front's regions, or one endpoint's on its own listener
    (``global.endpoints.<name>.regions``, falling back to the front's for a region it does not list)."""

    front: CommentedMap
    holder: CommentedMap
    path: list[str]
    regions: list[str]
    """The regions the dial is about: the stack's, or the endpoint's."""
    endpoint: str | None

    def own(self, region: str) -> tuple[Any, Any]:
        return _dial(self.holder, region, self.path)

    def effective(self, region: str) -> tuple[Any, Any]:
        dial, weight = self.own(region)
        if self.endpoint is None:
            return dial, weight
        region_dial, region_weight = _dial(self.front, region, [KEY])
        return (region_dial if dial is None else dial), (region_weight if weight is None else weight)

    def order(self) -> tuple[str, ...]:
        return FRONT_ORDER if self.endpoint is None else ENDPOINT_ORDER


def _dials(config: CommentedMap, region: str, endpoint: str | None) -> _Dials:
    front = _front(config, region)
    if endpoint is None:
        return _Dials(front, front, [KEY], declared_regions(config), None)
    path = [KEY, "endpoints", endpoint]
    endpoints = front.get("endpoints")
    entry = endpoints.get(endpoint) if isinstance(endpoints, CommentedMap) else None
    if not isinstance(entry, CommentedMap):
        raise refuse(
            path,
            f"is not set: {endpoint} has no listener of its own, so it moves with its regions on the shared "
            f"listener (fleetctl region drain {region}, without --endpoint); or give it "
            f"global.endpoints.{endpoint}.port first (docs/global.md)",
        )
    served = _endpoint_regions(config, endpoint)
    if region not in served:
        raise refuse([*path, "regions", region], f"is not a region {endpoint} runs in ({', '.join(served)})")
    return _Dials(front, entry, path, served, endpoint)


def _endpoint_regions(config: CommentedMap, endpoint: str) -> list[str]:
    endpoints = section(config, "endpoints")
    entry = endpoints.get(endpoint) if endpoints is not None else None
    targets = entry.get("target_regions") if isinstance(entry, CommentedMap) else None
    declared = declared_regions(config)
    return [region for region in declared if not isinstance(targets, list) or region in targets]


def drain(config: CommentedMap, region: str, endpoint: str | None = None) -> list[str]:
    dials = _dials(config, region, endpoint)
    dial, weight = dials.effective(region)
    what = region if endpoint is None else f"{endpoint} in {region}"
    if dial == 0:
        return [f"{what} is already drained (traffic_dial 0)"]
    others = [other for other in dials.regions if other != region and _serves(*dials.effective(other))]
    if _serves(dial, weight) and not others:
        served = "the global address" if endpoint is None else f"{endpoint}'s global address"
        raise refuse(
            [*dials.path, "regions", region, "traffic_dial"],
            f"{region} is the last region serving through {served} (every other region is drained): "
            "undrain another region first (fleetctl region undrain REGION)",
        )
    regions = dials.holder.get("regions")
    if regions is None:
        regions = CommentedMap()
        set_entry(dials.holder, "regions", regions, dials.order())
    entry = regions.get(region)
    if entry is None:
        set_entry(regions, region, flow_map({"traffic_dial": 0}))
    else:
        set_entry(entry, "traffic_dial", 0, REGION_ORDER)
    if weight == 0:
        return [f"{what} also has weight 0"]
    # Route 53 latency records: a drain deletes the region's record, so it takes no failover either.
    if dials.front.get("kind", ACCELERATOR) != ACCELERATOR:
        return []
    return [FAILOVER_NOTE.format(what=what, weight=dotted([*dials.path, "regions", region, "weight"]))]


def undrain(config: CommentedMap, region: str, endpoint: str | None = None) -> list[str]:
    dials = _dials(config, region, endpoint)
    dial, weight = dials.own(region)
    what = region if endpoint is None else f"{endpoint} in {region}"
    notes = [f"{what} has weight 0, so it still takes no traffic: set its weight by hand"] if weight == 0 else []
    if endpoint is not None and dials.effective(region)[0] == 0 and dial is None:
        return [f"{what} is drained by global.regions.{region}.traffic_dial: undrain the region", *notes]
    if dial is None or dial == FULL:
        return [f"{what} already serves at traffic_dial {FULL}", *notes]
    regions = dials.holder["regions"]
    entry = regions[region]
    remove_entry(entry, "traffic_dial")
    if not entry:
        remove_entry(regions, region)
    if not regions:
        remove_entry(dials.holder, "regions")
    return notes


__all__ = ["EditError", "drain", "undrain"]
