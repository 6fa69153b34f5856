"""A stack config validated whole: its fields and rules (components/spec), then whether every
pod it renders can be placed on the nodes it can have (components/schedulability)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.schedulability import check_schedulable
from components.spec import SpecError, StackSpec, parse_stack_config


def validate_stack(config: Mapping[str, Any], stack: str | None = None) -> StackSpec:
    """``parse_stack_config``, then the schedulability check on what parsed; raises SpecError with
    every problem. Placement runs only on a config whose fields hold, so its errors never echo a
    field error."""
    spec = parse_stack_config(config, stack=stack)
    problems = check_schedulable(spec)
    if problems:
        raise SpecError(problems)
    return spec
