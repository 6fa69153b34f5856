"""The operations of docs/operations.md as edits of a stack file's ``config:`` mapping.

Each function edits the round-trip mapping in place and returns notes for the
user. It refuses (EditError) what it can tell is wrong before editing; every
other rule is left to the validation of the whole resulting config, so the
messages are those of ``fleetctl validate``. Nothing here reads or writes files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_core import PydanticCustomError
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, ScalarString

from components.spec import NAMESPACE, Canary, Endpoint, Mooncake
from components.spec.errors import Problem, ProblemsError, did_you_mean, dotted
from components.spec.mooncake import SPLIT_MODES, STORE_MODES, Store, Topology
from components.spec.sizes import canonical_byte_size
from fleetctl.edit.tree import append_item, flow_map, flow_seq, remove_entry, remove_item, set_entry

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


def _refuse(path: Sequence[str | int], message: str) -> EditError:
    return EditError([Problem(dotted(path), message)])


# Finding things.


def _section_key(config: CommentedMap, name: str) -> str | None:
    """The key holding ``regions`` or ``endpoints``: namespaced, or bare as Pulumi also reads it."""
    for key in (f"{NAMESPACE}:{name}", name):
        if key in config:
            return key
    return None


def _section(config: CommentedMap, name: str) -> CommentedMap | None:
    key = _section_key(config, name)
    value = config.get(key) if key is not None else None
    return value if isinstance(value, CommentedMap) else None


def declared_regions(config: CommentedMap) -> list[str]:
    regions = _section(config, "regions")
    return [str(region) for region in regions] if regions is not None else []


def endpoint_names(config: CommentedMap) -> list[str]:
    endpoints = _section(config, "endpoints")
    return [str(name) for name in endpoints] if endpoints is not None else []


def _endpoint(config: CommentedMap, name: str) -> CommentedMap:
    endpoints = _section(config, "endpoints")
    if endpoints is None or name not in endpoints:
        known = ", ".join(endpoint_names(config)) or "none"
        raise _refuse(["endpoints", name], f"no such endpoint in this stack (endpoints: {known})")
    endpoint = endpoints[name]
    if not isinstance(endpoint, CommentedMap):
        raise _refuse(["endpoints", name], "is not a mapping; fix it by hand (fleetctl validate shows how)")
    return endpoint


def _mooncake(endpoint: CommentedMap, name: str, use_instead: str) -> CommentedMap:
    mooncake = endpoint.get("mooncake")
    if not isinstance(mooncake, CommentedMap):
        raise _refuse(["endpoints", name, "mooncake"], f"is absent: {name} is a classic endpoint; {use_instead}")
    return mooncake


def _block(parent: CommentedMap, key: str, order: Sequence[str], path: Sequence[str | int]) -> CommentedMap:
    """``parent[key]`` as a mapping to edit, created empty when absent."""
    value = parent.get(key)
    if value is None:
        value = CommentedMap()
        set_entry(parent, key, value, order)
    if not isinstance(value, CommentedMap):
        raise _refuse([*path, key], "is not a mapping; fix it by hand (fleetctl validate shows how)")
    return value


def _plain(value: Any) -> Any:
    """A round-trip value as plain data: mappings compare without their key order."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _set_unless_default(mapping: CommentedMap, key: str, value: Any, default: Any, order: Sequence[str]) -> None:
    """Change a present key; add an absent one only if the value differs from what absence means."""
    if key in mapping or value != default:
        set_entry(mapping, key, value, order)


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
        if _plain(_endpoint(config, name)) == _plain(endpoint):
            return [f"{name} already exists as given"]
        raise _refuse(path, "already exists; change it with the other fleetctl commands, or remove it first")
    endpoints = _section(config, "endpoints")
    if endpoints is None:
        endpoints = CommentedMap()
        set_entry(config, _section_key(config, "endpoints") or f"{NAMESPACE}:endpoints", endpoints)
    set_entry(endpoints, name, endpoint)
    return []


def remove_endpoint(config: CommentedMap, name: str) -> list[str]:
    if name not in endpoint_names(config):
        known = ", ".join(endpoint_names(config)) or "none"
        return [f"{name} is not an endpoint of this stack (endpoints: {known}): nothing to remove"]
    _endpoint(config, name)
    key = _section_key(config, "endpoints")
    endpoints = _section(config, "endpoints")
    assert key is not None
    assert endpoints is not None
    if len(endpoints) == 1:
        remove_entry(config, key)  # no endpoints left: the section goes too
        return [f"{name} was the last endpoint; {key} is removed with it"]
    remove_entry(endpoints, name)
    return []


# Sizes and states.


def scale(config: CommentedMap, name: str, replicas: int) -> list[str]:
    endpoint = _endpoint(config, name)
    path: list[str | int] = ["endpoints", name, "replicas"]
    if "mooncake" in endpoint:
        raise _refuse(
            path,
            f"{name} is a Mooncake endpoint, sized by its prefill/decode topology: use topology "
            f"(fleetctl topology set {name} --prefill X --decode Y)",
        )
    autoscaling = endpoint.get("autoscaling")
    if isinstance(autoscaling, CommentedMap) and autoscaling.get("enabled", True) is not False:
        bounds = f"{autoscaling.get('min_replicas', 1)} to {autoscaling.get('max_replicas', 10)}"
        raise _refuse(
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
        raise _refuse(path, "nothing to set: give --prefill, --decode or both")
    endpoint = _endpoint(config, name)
    mooncake = _mooncake(endpoint, name, f"size it with fleetctl scale {name} N")
    mode = mooncake.get("mode")
    if mode not in SPLIT_MODES:
        raise _refuse(path, f"mode {mode!r} has no prefill/decode topology; only 'disaggregated' and 'both' do")
    if not canary:
        _refuse_autoscaled_roles(mooncake, name, path, {"prefill": prefill, "decode": decode})
    owner, order = (_canary(endpoint, name), CANARY_ORDER) if canary else (mooncake, MOONCAKE_ORDER)
    topology = owner.get("topology")
    if topology is None:
        topology = flow_map({})
        set_entry(owner, "topology", topology, order)
    if not isinstance(topology, CommentedMap):
        raise _refuse(path, "is not a mapping; fix it by hand (fleetctl validate shows how)")
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
            raise _refuse(
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
        raise _refuse(
            path, "nothing to configure: give a size, --offload, --cold-tier/--no-cold-tier or --enable/--disable"
        )
    if cold_tier and enabled is False:
        raise _refuse([*path, "cold_tier_enabled"], "--cold-tier needs the store enabled; drop --disable")
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
    endpoint = _endpoint(config, name)
    mooncake = _mooncake(endpoint, name, "the store belongs to a mooncake block (mode 'store' or 'both')")
    existed = "store" in mooncake
    store = _block(mooncake, "store", MOONCAKE_ORDER, path[:-1])
    on_by_default = mooncake.get("mode") in STORE_MODES
    notes = []
    if cold_tier:
        if store.get("enabled", on_by_default) is not True:
            notes.append("the cold tier needs the store, so the store is enabled too")
        enabled = True
    if enabled is not None:
        _set_unless_default(store, "enabled", enabled, on_by_default, STORE_ORDER)
    for key, size in given.items():
        current = store.get(key)
        if current is not None and _same_size(current, size):
            continue  # the file already says so, in its own spelling
        set_entry(store, key, _size_scalar(size, current), STORE_ORDER)
    if offload is not None:
        _set_unless_default(store, "offload", offload, "cpu", STORE_ORDER)
    if cold_tier is not None:
        _set_unless_default(store, "cold_tier_enabled", cold_tier, False, STORE_ORDER)
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
    endpoint = _endpoint(config, name)
    if endpoint.get("desired_state", "running") == state:
        return [f"{name} is already {state}"]
    if state == "running":
        remove_entry(endpoint, "desired_state")  # running is what no desired_state means: stop, start is no change
    else:
        set_entry(endpoint, "desired_state", state, ENDPOINT_ORDER)
    return []


def set_image(config: CommentedMap, name: str, image: str) -> list[str]:
    endpoint = _endpoint(config, name)
    set_entry(endpoint, "image", image.strip(), ENDPOINT_ORDER)
    return _drop_region_images(endpoint)


def _drop_region_images(endpoint: CommentedMap) -> list[str]:
    if "region_image_uris" not in endpoint:
        return []
    remove_entry(endpoint, "region_image_uris")
    return ["region_image_uris (per-region images of the old image) is dropped"]


# Autoscaling.


def set_autoscaling(
    config: CommentedMap,
    name: str,
    *,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    metrics: Sequence[str] = (),
    enabled: bool | None = None,
    role: str | None = None,
) -> list[str]:
    """The autoscaler of a classic endpoint (``autoscaling``) or of one Mooncake role
    (``mooncake.autoscaling.<role>``, switched by ``mooncake.autoscaling.enabled``)."""
    path: list[str | int] = ["endpoints", name, "autoscaling"]
    bounds = {"min_replicas": min_replicas, "max_replicas": max_replicas}
    if all(value is None for value in bounds.values()) and not metrics and enabled is None:
        raise _refuse(path, "nothing to set: give --min, --max, --metric or --enable/--disable")
    endpoint = _endpoint(config, name)
    if "mooncake" in endpoint:
        return _set_role_autoscaling(endpoint, name, bounds, metrics, enabled, role)
    if role is not None:
        raise _refuse(path, f"--role is for Mooncake endpoints; {name} is classic, with one autoscaler")
    block = endpoint.get("autoscaling")
    if block is None:
        if enabled is False:
            return [f"{name} is not autoscaled"]
        block = _block(endpoint, "autoscaling", ENDPOINT_ORDER, path[:-1])
        notes = [f"{name} is autoscaled from now on"]
        if "replicas" in endpoint:
            notes[0] += f"; replicas ({endpoint['replicas']}) no longer applies, the autoscaler sets the count"
    elif not isinstance(block, CommentedMap):
        raise _refuse(path, "is not a mapping; fix it by hand (fleetctl validate shows how)")
    else:
        notes = []
    _set_bounds(block, bounds, metrics)
    if enabled is False:
        set_entry(block, "enabled", False, AUTOSCALING_ORDER)
    elif enabled is True and block.get("enabled") is False and len(block) > 1:
        remove_entry(block, "enabled")  # on is what a present block means: --disable, --enable is no change
    elif (enabled is True and block.get("enabled") is False) or not block:
        set_entry(block, "enabled", True, AUTOSCALING_ORDER)  # not a bare `autoscaling: {}`
    return notes


def _set_role_autoscaling(
    endpoint: CommentedMap,
    name: str,
    bounds: dict[str, int | None],
    metrics: Sequence[str],
    enabled: bool | None,
    role: str | None,
) -> list[str]:
    mooncake = _mooncake(endpoint, name, "")
    path: list[str | int] = ["endpoints", name, "mooncake", "autoscaling"]
    given = any(value is not None for value in bounds.values()) or bool(metrics)
    if given and role is None:
        raise _refuse(
            path,
            f"{name} is a Mooncake endpoint whose prefill and decode roles autoscale on their own: "
            "give --role prefill or --role decode",
        )
    existed = "autoscaling" in mooncake
    block = _block(mooncake, "autoscaling", MOONCAKE_ORDER, path[:-1])
    if given and role is not None:
        _set_bounds(_block(block, role, MOONCAKE_AUTOSCALING_ORDER, path), bounds, metrics)
    if enabled is True:
        set_entry(block, "enabled", True, MOONCAKE_AUTOSCALING_ORDER)
    elif enabled is False and "enabled" in block:
        remove_entry(block, "enabled")  # off is what no enabled means: --enable, --disable is no change
    if not existed and not block:
        remove_entry(mooncake, "autoscaling")
    if block.get("enabled") is not True and given:
        return [f"mooncake.autoscaling.enabled is not true: the {role} bounds apply once it is (--enable)"]
    return []


def _set_bounds(block: CommentedMap, bounds: dict[str, int | None], metrics: Sequence[str]) -> None:
    for key, value in bounds.items():
        if value is not None:
            set_entry(block, key, value, AUTOSCALING_ORDER)
    if not metrics:
        return
    current = block.get("metrics")
    if isinstance(current, CommentedSeq):
        if [str(item) for item in current] != list(metrics):
            # In place: the list keeps its style, and each metric the quotes of the first one.
            style = type(current[0]) if current and isinstance(current[0], ScalarString) else str
            del current[:]
            current.extend(style(metric) for metric in metrics)
    else:
        set_entry(block, "metrics", flow_seq(list(metrics)), AUTOSCALING_ORDER)


# Regions.


def add_region(config: CommentedMap, name: str, region: str) -> list[str]:
    endpoint = _endpoint(config, name)
    path: list[str | int] = ["endpoints", name, "target_regions"]
    _check_declared(config, path, region)
    targets = endpoint.get("target_regions")
    if targets is None:
        return [f"{name} has no target_regions, so it already serves every region of the stack, {region} included"]
    if not isinstance(targets, CommentedSeq):
        raise _refuse(path, "is not a list; fix it by hand (fleetctl validate shows how)")
    if region in targets:
        return [f"{name} already serves {region}"]
    append_item(targets, region)
    return []


def remove_region(config: CommentedMap, name: str, region: str) -> list[str]:
    endpoint = _endpoint(config, name)
    path: list[str | int] = ["endpoints", name, "target_regions"]
    last = f"{region!r} is the last region of {name}: remove the endpoint instead (fleetctl endpoint remove {name})"
    targets = endpoint.get("target_regions")
    notes = []
    if targets is None:
        _check_declared(config, path, region)
        others = [other for other in declared_regions(config) if other != region]
        if not others:
            raise _refuse(path, last)
        set_entry(endpoint, "target_regions", flow_seq(others), ENDPOINT_ORDER)
        notes.append(f"{name} served every region; target_regions now lists the others: {', '.join(others)}")
    elif not isinstance(targets, CommentedSeq):
        raise _refuse(path, "is not a list; fix it by hand (fleetctl validate shows how)")
    elif region not in targets:
        _check_declared(config, path, region)
        return [f"{name} does not serve {region}"]
    elif len(targets) == 1:
        raise _refuse(path, last)
    else:
        remove_item(targets, targets.index(region))
    images = endpoint.get("region_image_uris")
    if isinstance(images, CommentedMap) and region in images:
        if len(images) == 1:
            remove_entry(endpoint, "region_image_uris")
        else:
            remove_entry(images, region)
        notes.append(f"region_image_uris.{region} is dropped with the region")
    return notes


def _check_declared(config: CommentedMap, path: Sequence[str | int], region: str) -> None:
    declared = declared_regions(config)
    if region not in declared:
        raise _refuse(
            path,
            f"{region!r} is not a region of this stack (regions: {', '.join(declared) or 'none'}); "
            + (did_you_mean(region, declared) or f"declare it under {NAMESPACE}:regions first"),
        )


# Canaries.


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
    endpoint = _endpoint(config, name)
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
        raise _refuse(
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


def _canary(endpoint: CommentedMap, name: str) -> CommentedMap:
    canary = endpoint.get("canary")
    if canary is None:
        raise _refuse(
            ["endpoints", name, "canary"],
            f"is absent: {name} has no canary (start one with fleetctl canary start {name} --image IMAGE --weight W)",
        )
    if not isinstance(canary, CommentedMap):
        raise _refuse(["endpoints", name, "canary"], "is not a mapping; fix it by hand (fleetctl validate shows how)")
    return canary


def set_canary_weight(config: CommentedMap, name: str, weight: int) -> list[str]:
    canary = _canary(_endpoint(config, name), name)
    if canary.get("weight") == weight:
        return [f"the canary of {name} already has weight {weight}"]
    set_entry(canary, "weight", weight, CANARY_ORDER)
    return []


def promote_canary(config: CommentedMap, name: str) -> list[str]:
    endpoint = _endpoint(config, name)
    if endpoint.get("canary") is None:
        return [f"{name} has no canary to promote (promoted or rolled back already?)"]
    image = _canary(endpoint, name).get("image")
    if not isinstance(image, str) or not image.strip():
        raise _refuse(["endpoints", name, "canary", "image"], "is required to promote the canary: add it")
    set_entry(endpoint, "image", str(image).strip(), ENDPOINT_ORDER)
    remove_entry(endpoint, "canary")
    return _drop_region_images(endpoint)


def rollback_canary(config: CommentedMap, name: str) -> list[str]:
    endpoint = _endpoint(config, name)
    if endpoint.get("canary") is None:
        return [f"{name} has no canary to roll back (rolled back or promoted already?)"]
    _canary(endpoint, name)
    remove_entry(endpoint, "canary")
    return []
