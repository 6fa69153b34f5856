"""The README's commands work when typed literally in a checkout: each `fleetctl` command it shows
is typed as `.venv/bin/fleetctl` (no activated virtualenv needed), the offline ones run as shown
and print what the README says they print, and its claims about them hold."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fleetctl.stackfile import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
FLEETCTL = ".venv/bin/fleetctl"


def _commands() -> list[str]:
    """Every command line of the README's sh blocks and every inline `...` span that runs fleetctl."""
    text = README.read_text()
    lines = [
        line.split("  #", 1)[0].strip()
        for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)
        for line in block.splitlines()
    ]
    lines += [span for span in re.findall(r"`([^`\n]+)`", text) if "fleetctl" in span and "--" in span]
    return [line for line in lines if line]


def _fleetctl_commands() -> list[str]:
    return [command for command in _commands() if "fleetctl " in command]


def test_every_fleetctl_command_is_typed_with_its_virtualenv_path() -> None:
    commands = _fleetctl_commands()
    assert len(commands) >= 3
    assert [command for command in commands if not command.startswith(f"{FLEETCTL} ")] == []


def _run(command: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    words = shlex.split(command)
    words[0] = str(Path(sys.executable).parent / "fleetctl")  # this test's virtualenv, typed as .venv/bin/
    environment = {**os.environ, "FLEETCTL_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run(words, cwd=PROJECT_ROOT, env=environment, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("command", [command for command in _fleetctl_commands() if "--dry-run" in command])
def test_the_readmes_dry_runs_run_as_typed_and_change_nothing(command: str, tmp_path: Path) -> None:
    stacks = {path: path.read_bytes() for path in (PROJECT_ROOT / "stacks").iterdir()}
    result = _run(command, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "dry run, nothing written" in result.stdout
    assert {path: path.read_bytes() for path in (PROJECT_ROOT / "stacks").iterdir()} == stacks


def test_the_scale_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    text = README.read_text()
    [command] = [command for command in _fleetctl_commands() if " scale " in command]
    shown = re.search(r"infrastructure change it makes, without\nwriting anything:\n\n```\n(.*?)```", text, re.DOTALL)
    assert shown is not None
    result = _run(command, tmp_path)
    assert result.returncode == 0, result.stderr
    for line in shown.group(1).splitlines():
        if line != "...":
            assert line.rstrip() in result.stdout


def test_the_replica_count_the_readme_says_is_refused_is_refused(tmp_path: Path) -> None:
    found = re.search(r"ask for (\d+) replicas and it tells you which group is too small", README.read_text())
    assert found is not None
    result = _run(f"{FLEETCTL} scale assistant {found.group(1)} --stack dev --dry-run", tmp_path)
    assert result.returncode == 1
    assert "cannot hold" in result.stderr


def test_the_base_ref_diff_is_a_command_fleetctl_takes(tmp_path: Path) -> None:
    """Offline there may be no origin/main; the command is held to fleetctl's grammar instead."""
    from fleetctl.diff.command import _parser

    [command] = [command for command in _fleetctl_commands() if " diff " in command]
    arguments = _parser().parse_args(shlex.split(command)[2:])
    assert arguments.base_ref == "origin/main"
    assert (PROJECT_ROOT / arguments.sides[0]).is_file()
