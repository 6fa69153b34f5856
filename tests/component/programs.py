"""Run a small Pulumi program, written for one point, under the same recording mocks as the real one."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from functools import cache
from pathlib import Path
from typing import Any

from fleetctl.plan import Plan, run_program, write_plan
from fleetctl.stackfile import PROJECT_ROOT, StackFile, read_stack_file, stack_path

PRELUDE = "import pulumi\nimport pulumi_aws as aws\nimport pulumi_kubernetes as k8s\n"


def run_snippet(tmp_path: Path, body: str, config: dict[str, str] | None = None, stack: str = "test") -> Plan:
    program = tmp_path / "program.py"
    program.write_text(PRELUDE + textwrap.dedent(body))
    stack_file = StackFile(
        path=tmp_path / f"Pulumi.{stack}.yaml", stack=stack, project_config={}, engine_config=config or {}
    )
    return run_program(stack_file, program=program)


@cache
def example_plan(stack: str) -> Plan:
    """An example stack (stacks/Pulumi.<stack>.yaml) planned once per test run; shared, so
    copy an entry before changing it."""
    return run_program(read_stack_file(stack_path(stack)))


def by_type(plan: Plan, resource_type: str) -> list[dict[str, Any]]:
    return [resource for resource in plan.resources if resource["type"] == resource_type]


def edited(directory: Path, stack: str, *replacements: tuple[str, str]) -> Path:
    """A copy of an example stack file, each ``old`` text (found exactly once) replaced."""
    text = stack_path(stack).read_text()
    for old, new in replacements:
        assert text.count(old) == 1, f"{old!r} is not unique in Pulumi.{stack}.yaml"
        text = text.replace(old, new)
    directory.mkdir(parents=True, exist_ok=True)
    copy = directory / f"Pulumi.{stack}.yaml"
    copy.write_text(text)
    return copy


def plan_directory(stack_file: Path, out: Path) -> Path:
    write_plan(run_program(read_stack_file(stack_file)), out)
    return out


PROJECT_FILES = ("Pulumi.yaml", "__main__.py", "requirements.txt", "constraints.txt")
PROJECT_DIRECTORIES = ("components", "config", "fleetctl", "policy", "stacks")


def project_copy(directory: Path) -> Path:
    """A copy of this checkout's program, fleetctl and stacks (what a plan needs), in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_FILES:
        shutil.copyfile(PROJECT_ROOT / name, directory / name)
    for name in PROJECT_DIRECTORIES:
        shutil.copytree(PROJECT_ROOT / name, directory / name, ignore=shutil.ignore_patterns("__pycache__", "venv"))
    return directory


def git(repository: Path, *arguments: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *arguments],
        cwd=repository,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout
