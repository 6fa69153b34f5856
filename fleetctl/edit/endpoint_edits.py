"""Edits of an endpoint as a whole: add and remove it, scale it, size its Mooncake topology and
store, stop and start it, change its image."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_core import PydanticCustomError
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, ScalarString

from components.spec import NAMESPACE
from components.spec.errors import Problem, dotted
from components.spec.mooncake import SPLIT_MODES, STORE_MODES
from components.spec.sizes import canonical_byte_size
from fleetctl.edit.sections import (
    CANARY_ORDER,
    ENDPOINT_ORDER,
    MOONCAKE_ORDER,
    STORE_ORDER,
    TOPOLOGY_ORDER,
    EditError,
    canary_of,
    drop_region_images,
    endpoint_names,
    endpoint_of,
    mooncake_of,
    new_block,
    plain,
    refuse,
    section,
    section_key,
    set_unless_default,
)
from fleetctl.edit.tree import flow_map, flow_seq, remove_entry, set_entry

# Endpoints: deploy and delete.


def add_endpoint(
    config: CommentedMap,
    name: str,
    *,
    image: str | None = None,
    framework: str | None = None,
    regions: Sequence[str] = (),
    replicas: int | None = None,
    gpu_count: int | None = None,
    node_group: str | None = None,
    model: str | None = None,
    model_source: str | None = None,
    mooncake_mode: str | None = None,
    prefill: int | None = None,
    decode: int | None = None,
    protocol: str | None = None,
    cold_tier: bool = False,
) -> list[str]:
    path: list[str | int] = ["endpoints", name]
    if mooncake_mode is None:
        given = {"--prefill": prefill, "--decode": decode, "--protocol": protocol, "--cold-tier": cold_tier or None}
        problems = [
            Problem(dotted([*path, "mooncake"]), f"{flag} needs --mooncake-mode (disaggregated, store or both)")
            for flag, value in given.items()
            if value is not None
        ]
        if problems:
            raise EditError(problems)
    endpoint = CommentedMap()
    if image is not None:
        endpoint["image"] = image.strip()
    if framework is not None:
        endpoint["framework"] = framework
    if regions:
        endpoint["target_regions"] = flow_seq(list(regions))
    if replicas is not None:
        endpoint["replicas"] = replicas
    if gpu_count is not None:
        endpoint["gpu_count"] = gpu_count
    if node_group is not None:
        endpoint["node_group"] = node_group
    if model is not None:
        endpoint["model"] = model
    if model_source is not None:
        endpoint["model_source"] = model_source
    if mooncake_mode is not None:
        mooncake = CommentedMap()
        mooncake["mode"] = mooncake_mode
        if mooncake_mode in SPLIT_MODES or prefill is not None or decode is not None:
            topology = {"prefill": 1 if prefill is None else prefill, "decode": 1 if decode is None else decode}
            mooncake["topology"] = flow_map(topology)
        if cold_tier:
            mooncake["store"] = CommentedMap(cold_tier_enabled=True)
        if protocol is not None:
            mooncake["transfer"] = CommentedMap(protocol=protocol)
        endpoint["mooncake"] = mooncake
    if name in endpoint_names(config):
        if plain(endpoint_of(config, name)) == plain(endpoint):
            return [f"{name} already exists as given"]
        raise refuse(path, "already exists; change it with the other fleetctl commands, or remove it first")
    endpoints = section(config, "endpoints")
    if endpoints is None:
        endpoints = CommentedMap()
        set_entry(config, section_key(config, "endpoints") or f"{NAMESPACE}:endpoints", endpoints)
    set_entry(endpoints, name, endpoint)
    return []


def remove_endpoint(config: CommentedMap, name: str) -> list[str]:
    if name not in endpoint_names(config):
        known = ", ".join(endpoint_names(config)) or "none"
        return [f"{name} is not an endpoint of this stack (endpoints: {known}): nothing to remove"]
    endpoint_of(config, name)
    key = section_key(config, "endpoints")
    endpoints = section(config, "endpoints")
    assert key is not None
    assert endpoints is not None
    if len(endpoints) == 1:
        remove_entry(config, key)  # no endpoints left: the section goes too
        return [f"{name} was the last endpoint; {key} is removed with it"]
    remove_entry(endpoints, name)
    return []


# Sizes and states.


def scale(config: CommentedMap, name: str, replicas: int) -> list[str]:
    endpoint = endpoint_of(config, name)
    path: list[str | int] = ["endpoints", name, "replicas"]
    if "mooncake" in endpoint:
        raise refuse(
            path,
            f"{name} is a Mooncake endpoint, sized by its prefill/decode topology: use topology "
            f"(fleetctl topology set {name} --prefill X --decode Y)",
        )
    autoscaling = endpoint.get("autoscaling")
    if isinstance(autoscaling, CommentedMap) and autoscaling.get("enabled", True) is not False:
        bounds = f"{autoscaling.get('min_replicas', 1)} to {autoscaling.get('max_replicas', 10)}"
        raise refuse(
            path,
            f"{name} is autoscaled ({bounds} replicas), so the autoscaler owns its replica count: "
            f"change min/max or disable autoscaling instead (fleetctl autoscaling set {name} --min N --max M, "
            "or --disable)",
        )
    set_entry(endpoint, "replicas", replicas, ENDPOINT_ORDER)
    return []


def set_topology(
    config: CommentedMap, name: str, *, prefill: int | None, decode: int | None, canary: bool = False
) -> list[str]:
    """The endpoint's XpYd, or with ``canary`` its canary set's (each count not given stays what it is)."""
    path: list[str | int] = ["endpoints", name, "canary" if canary else "mooncake", "topology"]
    if prefill is None and decode is None:
        raise refuse(path, "nothing to set: give --prefill, --decode or both")
    endpoint = endpoint_of(config, name)
    mooncake = mooncake_of(endpoint, name, f"size it with fleetctl scale {name} N")
    mode = mooncake.get("mode")
    if mode not in SPLIT_MODES:
        raise refuse(path, f"mode {mode!r} has no prefill/decode topology; only 'disaggregated' and 'both' do")
    if not canary:
        _refuse_autoscaled_roles(mooncake, name, path, {"prefill": prefill, "decode": decode})
    owner, order = (canary_of(endpoint, name), CANARY_ORDER) if canary else (mooncake, MOONCAKE_ORDER)
    topology = owner.get("topology")
    if topology is None:
        topology = flow_map({})
        set_entry(owner, "topology", topology, order)
    if not isinstance(topology, CommentedMap):
        raise refuse(path, "is not a mapping; fix it by hand (fleetctl validate shows how)")
    for key, count in (("prefill", prefill), ("decode", decode)):
        if count is not None:
            set_entry(topology, key, count, TOPOLOGY_ORDER)
    return []


def _refuse_autoscaled_roles(
    mooncake: CommentedMap, name: str, path: list[str | int], counts: Mapping[str, int | None]
) -> None:
    """A role under its autoscaler takes no count from its topology (the ScaledObject owns its replicas,
    components/render/autoscaling.py): setting one would change nothing, so it is refused."""
    autoscaling = mooncake.get("autoscaling")
    if not isinstance(autoscaling, Mapping) or autoscaling.get("enabled") is not True:
        return
    for role, count in counts.items():
        scaler = autoscaling.get(role)
        if count is not None and isinstance(scaler, Mapping):
            bounds = f"{scaler.get('min_replicas', 1)} to {scaler.get('max_replicas')}"
            raise refuse(
                path,
                f"{name}'s {role} role is autoscaled ({bounds} replicas), so its autoscaler owns its count: "
                f"change its bounds instead (fleetctl autoscaling set {name} --role {role} --min N --max M), "
                "or disable it (--disable)",
            )


def configure_store(
    config: CommentedMap,
    name: str,
    *,
    global_segment_size: str | None = None,
    local_buffer_size: str | None = None,
    offload: str | None = None,
    cold_tier: bool | None = None,
    enabled: bool | None = None,
) -> list[str]:
    path: list[str | int] = ["endpoints", name, "mooncake", "store"]
    sizes = {"global_segment_size": global_segment_size, "local_buffer_size": local_buffer_size}
    if all(value is None for value in (*sizes.values(), offload, cold_tier, enabled)):
        raise refuse(
            path, "nothing to configure: give a size, --offload, --cold-tier/--no-cold-tier or --enable/--disable"
        )
    if cold_tier and enabled is False:
        raise refuse([*path, "cold_tier_enabled"], "--cold-tier needs the store enabled; drop --disable")
    given: dict[str, str] = {}
    problems = []
    for key, size in sizes.items():
        if size is None:
            continue
        try:
            canonical_byte_size(size)  # refused here, before any edit, when it is no byte size
        except PydanticCustomError as error:
            problems.append(Problem(dotted([*path, key]), error.message()))
        given[key] = size.strip()
    if problems:
        raise EditError(problems)
    endpoint = endpoint_of(config, name)
    mooncake = mooncake_of(endpoint, name, "the store belongs to a mooncake block (mode 'store' or 'both')")
    existed = "store" in mooncake
    store = new_block(mooncake, "store", MOONCAKE_ORDER, path[:-1])
    on_by_default = mooncake.get("mode") in STORE_MODES
    notes = []
    if cold_tier:
        if store.get("enabled", on_by_default) is not True:
            notes.append("the cold tier needs the store, so the store is enabled too")
        enabled = True
    if enabled is not None:
        set_unless_default(store, "enabled", enabled, on_by_default, STORE_ORDER)
    for key, size in given.items():
        current = store.get(key)
        if current is not None and _same_size(current, size):
            continue  # the file already says so, in its own spelling
        set_entry(store, key, _size_scalar(size, current), STORE_ORDER)
    if offload is not None:
        set_unless_default(store, "offload", offload, "cpu", STORE_ORDER)
    if cold_tier is not None:
        set_unless_default(store, "cold_tier_enabled", cold_tier, False, STORE_ORDER)
    if not existed and not store:
        remove_entry(mooncake, "store")
    return notes


def _same_size(current: Any, size: str) -> bool:
    try:
        return canonical_byte_size(current) == canonical_byte_size(size)
    except PydanticCustomError:
        return False  # the file's value is no size; the given one replaces it


def _size_scalar(size: str, current: Any) -> Any:
    """A byte size as the user wrote it (``32GiB`` stays ``32GiB``). Digits alone are quoted, so
    YAML keeps them a string; a quoted value keeps the file's quotes."""
    if isinstance(current, ScalarString):
        return type(current)(size)
    return DoubleQuotedScalarString(size) if size.isdigit() else size


def set_desired_state(config: CommentedMap, name: str, state: str) -> list[str]:
    endpoint = endpoint_of(config, name)
    if endpoint.get("desired_state", "running") == state:
        return [f"{name} is already {state}"]
    if state == "running":
        remove_entry(endpoint, "desired_state")  # running is what no desired_state means: stop, start is no change
    else:
        set_entry(endpoint, "desired_state", state, ENDPOINT_ORDER)
    return []


def set_image(config: CommentedMap, name: str, image: str) -> list[str]:
    endpoint = endpoint_of(config, name)
    set_entry(endpoint, "image", image.strip(), ENDPOINT_ORDER)
    return drop_region_images(endpoint)
