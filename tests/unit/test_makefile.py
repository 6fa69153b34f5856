"""The README's two commands: `make plan` installs only what the program needs, `make test` the rest."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST_TOOLING = ("requirements-dev.txt", "policy/requirements.txt", "tools/checkov", "npm ci", "apt-get")


def planned_commands(target: str) -> str:
    """What make would run for ``target`` on a fresh machine (-B: as if nothing were built yet)."""
    if shutil.which("make") is None:
        pytest.fail("make is needed")
    completed = subprocess.run(
        ["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    )
    return completed.stdout


def test_make_plan_installs_only_the_programs_requirements() -> None:
    commands = planned_commands("plan")
    assert "-r requirements.txt" in commands
    assert "fleetctl plan --stack dev" in commands
    for tooling in TEST_TOOLING:
        assert tooling not in commands, tooling


def test_make_test_installs_the_test_tooling_too() -> None:
    commands = planned_commands("test")
    for needed in ("-r requirements.txt", "requirements-dev.txt", "policy/requirements.txt", "tools/checkov", "npm ci"):
        assert needed in commands, needed
    assert "-m pytest" in commands
