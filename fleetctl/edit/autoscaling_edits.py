"""Edits of an autoscaler: a classic endpoint's ``autoscaling`` or a Mooncake role's
``mooncake.autoscaling.<role>``."""

from __future__ import annotations

from collections.abc import Sequence

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import ScalarString

from fleetctl.edit.sections import (
    AUTOSCALING_ORDER,
    ENDPOINT_ORDER,
    MOONCAKE_AUTOSCALING_ORDER,
    MOONCAKE_ORDER,
    endpoint_of,
    mooncake_of,
    new_block,
    refuse,
)
from fleetctl.edit.tree import flow_seq, remove_entry, set_entry

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
        raise refuse(path, "nothing to set: give --min, --max, --metric or --enable/--disable")
    endpoint = endpoint_of(config, name)
    if "mooncake" in endpoint:
        return _set_role_autoscaling(endpoint, name, bounds, metrics, enabled, role)
    if role is not None:
        raise refuse(path, f"--role is for Mooncake endpoints; {name} is classic, with one autoscaler")
    block = endpoint.get("autoscaling")
    if block is None:
        if enabled is False:
            return [f"{name} is not autoscaled"]
        block = new_block(endpoint, "autoscaling", ENDPOINT_ORDER, path[:-1])
        notes = [f"{name} is autoscaled from now on"]
    elif not isinstance(block, CommentedMap):
        raise refuse(path, "is not a mapping; fix it by hand (fleetctl validate shows how)")
    else:
        notes = []
    _set_bounds(block, bounds, metrics)
    if enabled is False:
        set_entry(block, "enabled", False, AUTOSCALING_ORDER)
    elif enabled is True and block.get("enabled") is False and len(block) > 1:
        remove_entry(block, "enabled")  # on is what a present block means: --disable, --enable is no change
    elif (enabled is True and block.get("enabled") is False) or not block:
        set_entry(block, "enabled", True, AUTOSCALING_ORDER)  # not a bare `autoscaling: {}`
    if block.get("enabled") is not False and "replicas" in endpoint:
        # An autoscaled workload leaves spec.replicas to its ScaledObject (components/render/autoscaling.py),
        # so the line would say a count nothing runs; `scale` refuses it for the same reason.
        notes.append(
            f"replicas ({endpoint['replicas']}) is removed: the autoscaler sets the count between its bounds "
            f"(after `fleetctl autoscaling set {name} --disable`, `fleetctl scale {name} N` sets one again)"
        )
        remove_entry(endpoint, "replicas")
    return notes


def _set_role_autoscaling(
    endpoint: CommentedMap,
    name: str,
    bounds: dict[str, int | None],
    metrics: Sequence[str],
    enabled: bool | None,
    role: str | None,
) -> list[str]:
    mooncake = mooncake_of(endpoint, name, "")
    path: list[str | int] = ["endpoints", name, "mooncake", "autoscaling"]
    given = any(value is not None for value in bounds.values()) or bool(metrics)
    if given and role is None:
        raise refuse(
            path,
            f"{name} is a Mooncake endpoint whose prefill and decode roles autoscale on their own: "
            "give --role prefill or --role decode",
        )
    existed = "autoscaling" in mooncake
    block = new_block(mooncake, "autoscaling", MOONCAKE_ORDER, path[:-1])
    if given and role is not None:
        _set_bounds(new_block(block, role, MOONCAKE_AUTOSCALING_ORDER, path), bounds, metrics)
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
