"""Run a small Pulumi program, written for one point, under the same recording mocks as the real one."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from fleetctl.plan import Plan, run_program
from fleetctl.stackfile import StackFile

PRELUDE = "import pulumi\nimport pulumi_aws as aws\nimport pulumi_kubernetes as k8s\n"


def run_snippet(tmp_path: Path, body: str, config: dict[str, str] | None = None, stack: str = "test") -> Plan:
    program = tmp_path / "program.py"
    program.write_text(PRELUDE + textwrap.dedent(body))
    stack_file = StackFile(
        path=tmp_path / f"Pulumi.{stack}.yaml", stack=stack, project_config={}, engine_config=config or {}
    )
    return run_program(stack_file, program=program)


def by_type(plan: Plan, resource_type: str) -> list[dict[str, Any]]:
    return [resource for resource in plan.resources if resource["type"] == resource_type]
