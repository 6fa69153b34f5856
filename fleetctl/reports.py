"""What ``validate`` and ``plan`` print with ``--output json``: one JSON document on stdout,
whether the command succeeded or not, so a script reads one place. Every document names its
command and lists its problems (empty on success), each as path, message and, when the stack
file holds the path, file, line and column."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from components.spec import StackSpec
from components.spec.errors import Problem
from fleetctl.mocks import STACK_TYPE
from fleetctl.plan import Plan, region_of
from fleetctl.stackfile import StackFile, display_path
from policy.rules import Violation


def problem_record(problem: Problem | str) -> dict[str, Any]:
    if isinstance(problem, Problem):
        return problem.as_json()
    return {"path": "", "message": problem.removeprefix("error: ")}


def failure_record(command: str, problems: Sequence[Problem | str]) -> dict[str, Any]:
    record: dict[str, Any] = {"command": command}
    if command == "validate":
        record["valid"] = False
    record["problems"] = [problem_record(problem) for problem in problems]
    return record


def validate_record(stack_file: StackFile, spec: StackSpec) -> dict[str, Any]:
    return {
        "command": "validate",
        "file": display_path(stack_file.path),
        "stack": stack_file.stack,
        "valid": True,
        "regions": list(spec.regions),
        "endpoints": list(spec.endpoints),
        "placements": [asdict(placement) for placement in spec.placements],
        "problems": [],
    }


def plan_record(plan: Plan, stack_file: StackFile, out: Path, files: Mapping[str, str]) -> dict[str, Any]:
    """The plan's resources counted per region and type, as the table of ``fleetctl plan`` shows them."""
    by_urn = {resource["urn"]: resource for resource in plan.resources}
    regions: dict[str, dict[str, int]] = {}
    for resource in plan.resources:
        if resource["type"] == STACK_TYPE:
            continue
        kinds = regions.setdefault(region_of(resource, by_urn) or "global", {})
        kinds[resource["type"]] = kinds.get(resource["type"], 0) + 1
    return {
        "command": "plan",
        "file": display_path(stack_file.path),
        "stack": plan.stack,
        "out": display_path(out),
        "plan": display_path(out / "plan.json"),
        "manifests": sum(1 for path in files if path.startswith("manifests/")),
        "resources": sum(sum(kinds.values()) for kinds in regions.values()),
        "regions": {region: dict(sorted(kinds.items())) for region, kinds in sorted(regions.items())},
        "problems": [],
    }


def with_policy(record: dict[str, Any], violations: Sequence[Violation], lines: Sequence[str]) -> dict[str, Any]:
    """The plan's record with the policy pack's verdict; each violation is a problem too."""
    return {
        **record,
        "policy": {"violations": [asdict(violation) for violation in violations]},
        "problems": [*record["problems"], *(problem_record(line) for line in lines)],
    }
