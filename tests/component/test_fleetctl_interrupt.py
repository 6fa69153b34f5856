"""Ctrl-C at any moment of a real ``fleetctl`` process: exit status 130 and the one line
``fleetctl: interrupted`` (docs/fleetctl.md, "Exit statuses"), or, when it lands after the work is
done, the command's own ending; never a traceback, an ``Exception ignored`` or a failure that reads
like a broken install, and an interrupted edit leaves its stack file byte for byte as it was.

Each command runs once uninterrupted to learn how long it takes, then again with SIGINT sent at
delays spread over that time (from the import of the SDKs to the last write)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleetctl.stackfile import stack_path

FLEETCTL = str(Path(sys.executable).parent / "fleetctl")
"""The console script pip installed: the process a user runs."""


@pytest.fixture(scope="module")
def first_delay() -> float:
    """How long ``fleetctl --help`` takes here and now, twice over: the interpreter's own start, before
    fleetctl's entry point runs, is not fleetctl's to handle, and a loaded machine starts it slowly."""
    start = time.monotonic()
    subprocess.run([FLEETCTL, "--help"], capture_output=True, check=True)
    return 2 * (time.monotonic() - start)


def _environment(cache: Path) -> dict[str, str]:
    return {**os.environ, "FLEETCTL_CACHE_DIR": str(cache)}


def _run(argv: list[str], cwd: Path, cache: Path, delay: float | None) -> tuple[int, str, str]:
    process = subprocess.Popen(
        [FLEETCTL, *argv],
        cwd=cwd,
        env=_environment(cache),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if delay is not None:
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=600)
    return process.returncode, out, err


def _delays(first: float, duration: float, count: int = 7) -> list[float]:
    """``count`` delays from ``first`` to a little past ``duration``, denser early, where the imports are."""
    last = max(duration * 1.05, first * 1.5)
    ratio = (last / first) ** (1 / (count - 1))
    return [first * ratio**index for index in range(count)]


def _assert_interrupted_or_done(status: int, out: str, err: str, done: int) -> bool:
    """True when the signal interrupted the command, False when it came after the command ended."""
    if status == 130:
        assert err == "fleetctl: interrupted\n"
        return True
    assert status == done, err
    assert "Traceback" not in err
    assert "KeyboardInterrupt" not in err
    assert "interrupted" not in err
    return False


def _leftovers(directory: Path) -> list[str]:
    return sorted(entry.name for entry in directory.iterdir() if entry.name.startswith("."))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory with the dev stack file, outside any project (so commands take --stack-file)."""
    directory = tmp_path / "work"
    directory.mkdir()
    shutil.copyfile(stack_path("dev"), directory / "Pulumi.dev.yaml")
    return directory


def test_ctrl_c_during_a_plan_is_one_line_and_status_130_and_leaves_no_partial_plan(
    project: Path, tmp_path: Path, first_delay: float
) -> None:
    cache = tmp_path / "cache"
    argv = ["plan", "--stack-file", "Pulumi.dev.yaml", "--out", "plan"]
    start = time.monotonic()
    status, _, err = _run(argv, project, cache, None)
    duration = time.monotonic() - start
    assert status == 0, err
    shutil.rmtree(project / "plan")
    interrupted = 0
    for delay in _delays(first_delay, duration):
        status, out, err = _run(argv, project, cache, delay)
        if _assert_interrupted_or_done(status, out, err, 0):
            interrupted += 1
            assert not (project / "plan").exists()  # no plan, or a whole one: never a part
        else:
            shutil.rmtree(project / "plan")
        assert _leftovers(project) == []
    assert interrupted >= 3  # the delays do land inside the command


def test_ctrl_c_during_a_diff_is_one_line_and_status_130(project: Path, tmp_path: Path, first_delay: float) -> None:
    cache = tmp_path / "cache"
    edited = project / "Pulumi.edited.yaml"
    edited.write_text((project / "Pulumi.dev.yaml").read_text().replace("replicas: 1", "replicas: 2", 1))
    argv = ["diff", "--stack-name", "dev", "Pulumi.dev.yaml", "Pulumi.edited.yaml"]
    start = time.monotonic()
    status, _, err = _run(argv, project, cache, None)
    duration = time.monotonic() - start
    assert status == 2, err
    shutil.rmtree(cache)  # each run plans both sides again
    interrupted = 0
    for delay in _delays(first_delay, duration):
        status, out, err = _run(argv, project, cache, delay)
        interrupted += _assert_interrupted_or_done(status, out, err, 2)
        shutil.rmtree(cache, ignore_errors=True)
    assert interrupted >= 3


EDITS = [
    ["scale", "assistant", "3"],
    ["endpoint", "add", "extra", "--image", "vllm/vllm-openai:v0.33.0", "--gpu-count", "1", "--model", "Qwen/Qwen3-8B"],
    ["endpoint", "remove", "assistant"],
    ["topology", "set", "chat-pd", "--decode", "3"],
    ["store", "configure", "kv-cache", "--global-segment-size", "32GiB"],
    ["stop", "assistant"],
    ["image", "set", "assistant", "vllm/vllm-openai:v0.34.0"],
    ["canary", "start", "assistant", "--image", "vllm/vllm-openai:v0.34.0", "--weight", "10"],
    ["canary", "weight", "chat-pd", "20"],
    ["autoscaling", "set", "assistant", "--min", "1", "--max", "2"],
]
"""One edit of each family, with --plan (the slow path, where Ctrl-C is pressed)."""


@pytest.mark.parametrize("edit", EDITS, ids=lambda edit: "-".join(edit[:2]))
def test_ctrl_c_during_a_planned_edit_writes_nothing(
    edit: list[str], project: Path, tmp_path: Path, first_delay: float
) -> None:
    cache = tmp_path / "cache"
    stack = project / "Pulumi.dev.yaml"
    original = stack.read_bytes()
    argv = [*edit, "--stack-file", "Pulumi.dev.yaml", "--plan"]
    start = time.monotonic()
    status, _, err = _run(argv, project, cache, None)
    duration = time.monotonic() - start
    assert status == 0, err
    edited = stack.read_bytes()
    assert edited != original
    interrupted = 0
    for delay in _delays(first_delay, duration, count=4):
        stack.write_bytes(original)
        shutil.rmtree(cache, ignore_errors=True)  # the "before" side is planned again, as on a first edit
        status, out, err = _run(argv, project, cache, delay)
        if _assert_interrupted_or_done(status, out, err, 0):
            interrupted += 1
            assert stack.read_bytes() == original
            assert out == ""
        else:
            assert stack.read_bytes() == edited
            assert ": written" in out
        assert _leftovers(project) == []
    assert interrupted >= 2
