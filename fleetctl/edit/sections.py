"""What every edit of a stack file's ``config:`` shares: finding the sections it changes (regions,
endpoints, an endpoint's mooncake and canary blocks), where new keys go, and the refusal
(EditError) of what it can tell is wrong before editing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ruamel.yaml.comments import CommentedMap

from components.spec import NAMESPACE, Canary, Endpoint, Mooncake
from components.spec.errors import Problem, ProblemsError, dotted
from components.spec.mooncake import Store, Topology
from fleetctl.edit.tree import remove_entry, set_entry

# New keys go where the models declare them, so an added line lands among its kin.
ENDPOINT_ORDER = tuple(Endpoint.model_fields)
MOONCAKE_ORDER = tuple(Mooncake.model_fields)
STORE_ORDER = tuple(Store.model_fields)
TOPOLOGY_ORDER = tuple(Topology.model_fields)
CANARY_ORDER = tuple(Canary.model_fields)

STORE_SIZES = ("global_segment_size", "local_buffer_size")
AUTOSCALING_ORDER = ("enabled", "min_replicas", "max_replicas", "metrics")
"""Where new autoscaler keys go: the switch, the bounds, then what it scales on (as prod writes them)."""
MOONCAKE_AUTOSCALING_ORDER = ("enabled", "prefill", "decode")


class EditError(ProblemsError):
    """An edit that cannot be made; the file is left as it was."""


def refuse(path: Sequence[str | int], message: str) -> EditError:
    return EditError([Problem(dotted(path), message)])


# Finding things.


def section_key(config: CommentedMap, name: str) -> str | None:
    """The key holding ``regions`` or ``endpoints``: namespaced, or bare as Pulumi also reads it."""
    for key in (f"{NAMESPACE}:{name}", name):
        if key in config:
            return key
    return None


def section(config: CommentedMap, name: str) -> CommentedMap | None:
    key = section_key(config, name)
    value = config.get(key) if key is not None else None
    return value if isinstance(value, CommentedMap) else None


def declared_regions(config: CommentedMap) -> list[str]:
    regions = section(config, "regions")
    return [str(region) for region in regions] if regions is not None else []


def endpoint_names(config: CommentedMap) -> list[str]:
    endpoints = section(config, "endpoints")
    return [str(name) for name in endpoints] if endpoints is not None else []


def endpoint_of(config: CommentedMap, name: str) -> CommentedMap:
    endpoints = section(config, "endpoints")
    if endpoints is None or name not in endpoints:
        known = ", ".join(endpoint_names(config)) or "none"
        raise refuse(["endpoints", name], f"no such endpoint in this stack (endpoints: {known})")
    endpoint = endpoints[name]
    if not isinstance(endpoint, CommentedMap):
        raise refuse(["endpoints", name], "is not a mapping; fix it by hand (fleetctl validate shows how)")
    return endpoint


def mooncake_of(endpoint: CommentedMap, name: str, use_instead: str) -> CommentedMap:
    mooncake = endpoint.get("mooncake")
    if not isinstance(mooncake, CommentedMap):
        raise refuse(["endpoints", name, "mooncake"], f"is absent: {name} is a classic endpoint; {use_instead}")
    return mooncake


def new_block(parent: CommentedMap, key: str, order: Sequence[str], path: Sequence[str | int]) -> CommentedMap:
    """``parent[key]`` as a mapping to edit, created empty when absent."""
    value = parent.get(key)
    if value is None:
        value = CommentedMap()
        set_entry(parent, key, value, order)
    if not isinstance(value, CommentedMap):
        raise refuse([*path, key], "is not a mapping; fix it by hand (fleetctl validate shows how)")
    return value


def plain(value: Any) -> Any:
    """A round-trip value as plain data: mappings compare without their key order."""
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def set_unless_default(mapping: CommentedMap, key: str, value: Any, default: Any, order: Sequence[str]) -> None:
    """Change a present key; add an absent one only if the value differs from what absence means."""
    if key in mapping or value != default:
        set_entry(mapping, key, value, order)


def canary_of(endpoint: CommentedMap, name: str) -> CommentedMap:
    canary = endpoint.get("canary")
    if canary is None:
        raise refuse(
            ["endpoints", name, "canary"],
            f"is absent: {name} has no canary (start one with fleetctl canary start {name} --image IMAGE --weight W)",
        )
    if not isinstance(canary, CommentedMap):
        raise refuse(["endpoints", name, "canary"], "is not a mapping; fix it by hand (fleetctl validate shows how)")
    return canary


def drop_region_images(endpoint: CommentedMap) -> list[str]:
    if "region_image_uris" not in endpoint:
        return []
    remove_entry(endpoint, "region_image_uris")
    return ["region_image_uris (per-region images of the old image) is dropped"]
