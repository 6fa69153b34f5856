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

from typing import Any

from ruamel.yaml.comments import CommentedMap

from components.spec.front import ACCELERATOR, KEY, FrontRegion, GlobalFront
from fleetctl.edit.operations import EditError, _refuse, _section, declared_regions
from fleetctl.edit.tree import flow_map, remove_entry, set_entry

FRONT_ORDER = tuple(field.alias or name for name, field in GlobalFront.model_fields.items())
REGION_ORDER = tuple(FrontRegion.model_fields)
FULL = 100
"""The default dial: the region takes all the traffic Global Accelerator sends it."""
FAILOVER_NOTE = (
    "{region} still takes failover traffic: while no other region has a healthy endpoint, Global Accelerator "
    "ignores the traffic dial and may send their clients here (keep its endpoints serving until the others are "
    "healthy, or set global.regions.{region}.weight: 0 by hand to keep it out of failover too)"
)
"""What a drain of an accelerator's region does not do (AWS Global Accelerator Developer Guide, "How failover
works for unhealthy endpoints": "for this failover, Global Accelerator ignores the traffic dial setting")."""


def _front(config: CommentedMap, region: str) -> CommentedMap:
    """The enabled global block of a stack that has ``region``."""
    regions = declared_regions(config)
    if region not in regions:
        raise _refuse([KEY, "regions", region], f"is not a region of this stack (regions: {', '.join(regions)})")
    front = _section(config, KEY)
    if front is None or front.get("enabled") is not True:
        raise _refuse(
            [KEY, "enabled"],
            "is not true: without the global front door there is no traffic dial to move "
            "(set inference-fleet:global.enabled: true first; docs/global.md)",
        )
    return front


def _dial(front: CommentedMap, region: str) -> tuple[Any, Any]:
    """The region's dial and weight as the file has them (None when absent)."""
    regions = front.get("regions")
    entry = regions.get(region) if isinstance(regions, CommentedMap) else None
    if regions is not None and not isinstance(regions, CommentedMap):
        raise _refuse([KEY, "regions"], "is not a mapping; fix it by hand (fleetctl validate shows how)")
    if entry is not None and not isinstance(entry, CommentedMap):
        raise _refuse([KEY, "regions", region], "is not a mapping; fix it by hand (fleetctl validate shows how)")
    if entry is None:
        return None, None
    return entry.get("traffic_dial"), entry.get("weight")


def _serves(dial: Any, weight: Any) -> bool:
    return (dial is None or dial != 0) and (weight is None or weight != 0)


def drain(config: CommentedMap, region: str) -> list[str]:
    front = _front(config, region)
    dial, weight = _dial(front, region)
    if dial == 0:
        return [f"{region} is already drained (traffic_dial 0)"]
    others = [other for other in declared_regions(config) if other != region and _serves(*_dial(front, other))]
    if _serves(dial, weight) and not others:
        raise _refuse(
            [KEY, "regions", region, "traffic_dial"],
            f"{region} is the last region serving through the global address (every other region is drained): "
            "undrain another region first (fleetctl region undrain REGION)",
        )
    regions = front.get("regions")
    if regions is None:
        regions = CommentedMap()
        set_entry(front, "regions", regions, FRONT_ORDER)
    entry = regions.get(region)
    if entry is None:
        set_entry(regions, region, flow_map({"traffic_dial": 0}))
    else:
        set_entry(entry, "traffic_dial", 0, REGION_ORDER)
    if weight == 0:
        return [f"{region} also has weight 0"]
    # Route 53 latency records: a drain deletes the region's record, so it takes no failover either.
    return [FAILOVER_NOTE.format(region=region)] if front.get("kind", ACCELERATOR) == ACCELERATOR else []


def undrain(config: CommentedMap, region: str) -> list[str]:
    front = _front(config, region)
    dial, weight = _dial(front, region)
    notes = [f"{region} has weight 0, so it still takes no traffic: set its weight by hand"] if weight == 0 else []
    if dial is None or dial == FULL:
        return [f"{region} already serves at traffic_dial {FULL}", *notes]
    regions = front["regions"]
    entry = regions[region]
    remove_entry(entry, "traffic_dial")
    if not entry:
        remove_entry(regions, region)
    if not regions:
        remove_entry(front, "regions")
    return notes


__all__ = ["EditError", "drain", "undrain"]
