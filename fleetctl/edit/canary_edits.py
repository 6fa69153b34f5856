"""Edits of a canary: start it, move its weight, promote it, roll it back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ruamel.yaml.comments import CommentedMap

from components.spec import Canary
from components.spec.mooncake import SPLIT_MODES, Topology
from fleetctl.edit.sections import (
    CANARY_ORDER,
    ENDPOINT_ORDER,
    TOPOLOGY_ORDER,
    canary_of,
    drop_region_images,
    endpoint_of,
    refuse,
)
from fleetctl.edit.tree import flow_map, remove_entry, set_entry


def start_canary(
    config: CommentedMap,
    name: str,
    *,
    image: str,
    weight: int,
    replicas: int | None = None,
    prefill: int | None = None,
    decode: int | None = None,
) -> list[str]:
    """A classic endpoint's canary (``replicas``), or a Mooncake endpoint's canary set (its
    ``prefill`` and ``decode`` counts, each the endpoint's when not given). A split endpoint's canary is
    written with both counts, so a later topology edit of the endpoint leaves the canary's as it started."""
    endpoint = endpoint_of(config, name)
    current = endpoint.get("canary")
    counts: dict[str, Any] = {
        key: count for key, count in (("prefill", prefill), ("decode", decode)) if count is not None
    }
    mooncake = endpoint.get("mooncake")
    topology = mooncake.get("topology") if isinstance(mooncake, CommentedMap) else None
    if isinstance(mooncake, CommentedMap) and mooncake.get("mode") in SPLIT_MODES and isinstance(topology, Mapping):
        defaults = {key: field.default for key, field in Topology.model_fields.items()}
        counts = {key: counts.get(key, topology.get(key, defaults[key])) for key in TOPOLOGY_ORDER}
    if isinstance(current, CommentedMap) and _same_canary(current, image.strip(), weight, replicas, counts):
        return [f"{name} already has this canary"]
    if current is not None:
        described = (
            f" (image {current.get('image')}, weight {current.get('weight', 10)})"
            if isinstance(current, CommentedMap)
            else ""
        )
        raise refuse(
            ["endpoints", name, "canary"],
            f"already exists{described}; move it with canary weight, or promote or roll it back first",
        )
    canary = CommentedMap()
    canary["image"] = image.strip()
    canary["weight"] = weight
    if replicas is not None:
        canary["replicas"] = replicas
    if counts:
        canary["topology"] = flow_map(counts)
    set_entry(endpoint, "canary", canary, ENDPOINT_ORDER)
    return []


def _same_canary(canary: CommentedMap, image: str, weight: int, replicas: int | None, counts: dict[str, int]) -> bool:
    """The canary is the one asked for (the replicas and counts only when they are asked for)."""
    fields = Canary.model_fields
    same = str(canary.get("image", "")).strip() == image and canary.get("weight", fields["weight"].default) == weight
    topology = canary.get("topology")
    given = topology if isinstance(topology, CommentedMap) else {}
    same_counts = all(given.get(key) == count for key, count in counts.items())
    return same and same_counts and (replicas is None or canary.get("replicas", fields["replicas"].default) == replicas)


def set_canary_weight(config: CommentedMap, name: str, weight: int) -> list[str]:
    canary = canary_of(endpoint_of(config, name), name)
    if canary.get("weight") == weight:
        return [f"the canary of {name} already has weight {weight}"]
    set_entry(canary, "weight", weight, CANARY_ORDER)
    return []


def promote_canary(config: CommentedMap, name: str) -> list[str]:
    endpoint = endpoint_of(config, name)
    if endpoint.get("canary") is None:
        return [f"{name} has no canary to promote (promoted or rolled back already?)"]
    image = canary_of(endpoint, name).get("image")
    if not isinstance(image, str) or not image.strip():
        raise refuse(["endpoints", name, "canary", "image"], "is required to promote the canary: add it")
    set_entry(endpoint, "image", str(image).strip(), ENDPOINT_ORDER)
    remove_entry(endpoint, "canary")
    return drop_region_images(endpoint)


def rollback_canary(config: CommentedMap, name: str) -> list[str]:
    endpoint = endpoint_of(config, name)
    if endpoint.get("canary") is None:
        return [f"{name} has no canary to roll back (rolled back or promoted already?)"]
    canary_of(endpoint, name)
    remove_entry(endpoint, "canary")
    return []
