"""A stack config validated whole: its fields and rules (components/spec), then whether every
pod it renders can be placed on the nodes it can have (components/schedulability)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from components.schedulability import check_schedulable
from components.spec import SpecError, StackSpec, parse_stack_config

_last: tuple[str, StackSpec] | None = None
"""The last config that validated (as :func:`_key` writes it) and its spec: ``fleetctl plan``
validates the stack file, then runs ``__main__.py``, which validates the same config again."""


def validate_stack(config: Mapping[str, Any], stack: str | None = None) -> StackSpec:
    """``parse_stack_config``, then the schedulability check on what parsed; raises SpecError with
    every problem. Placement runs only on a config whose fields hold, so its errors never echo a
    field error. A config equal to the last one that validated (same stack) gets the same spec
    (models are frozen) without a second validation."""
    global _last
    key = _key(config, stack)
    if key is not None and _last is not None and _last[0] == key:
        return _last[1]
    spec = parse_stack_config(config, stack=stack)
    problems = check_schedulable(spec)
    if problems:
        raise SpecError(problems)
    if key is not None:
        _last = (key, spec)
    return spec


def forget() -> None:
    """Drop the remembered result: the next validation runs in full."""
    global _last
    _last = None


def _key(config: Mapping[str, Any], stack: str | None) -> str | None:
    """The config and stack as canonical JSON, or None when the config holds anything but JSON's
    own types (a YAML date, say), which JSON could not tell from a string: such a config is
    always validated afresh."""
    if not _plain(config):
        return None
    return json.dumps([stack, config], sort_keys=True, separators=(",", ":"), allow_nan=True)


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, str | bool | int | float):
        return True
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    if isinstance(value, Mapping):
        return all(isinstance(key, str) and _plain(item) for key, item in value.items())
    return False
