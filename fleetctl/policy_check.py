"""The policy pack's rules (policy/rules.py), run offline over a plan."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from policy.rules import Resource, Violation, check


def plan_resources(resources: Iterable[Mapping[str, Any]]) -> list[Resource]:
    """plan.json entries as the rules see them: inputs for props, protect from the options."""
    return [
        Resource(
            type=str(entry["type"]),
            name=str(entry["name"]),
            urn=str(entry["urn"]),
            props=entry["inputs"],
            protect=bool(entry["options"].get("protect", False)),
            parent=entry.get("parent"),
            provider=entry.get("provider"),
        )
        for entry in resources
    ]


def check_plan(resources: Iterable[Mapping[str, Any]]) -> list[Violation]:
    return check(plan_resources(resources))


def report(violations: Iterable[Violation]) -> list[str]:
    return [f"policy {violation.rule}: {violation.urn}: {violation.message}" for violation in violations]
