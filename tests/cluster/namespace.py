"""A program started in a private network namespace of its own (``unshare -n``) that prints one
JSON line once it serves, then runs until its standard input closes: the cluster tests' control
plane (tests/cluster/control_plane.py) and the real-engine tests' local cluster
(tests/cluster/local_cluster.py serve)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
STOP_SECONDS = 30


@contextmanager
def serving(arguments: list[str], log: Path, start_seconds: float, logs: Callable[[], str]) -> Iterator[dict[str, Any]]:
    """``python -m <arguments>`` in a new network namespace; yields its first line, parsed. The
    test fails, with ``logs()``, if the line does not come within ``start_seconds``."""
    with log.open("wb") as driver_log:
        process = subprocess.Popen(
            ["unshare", "-n", sys.executable, "-m", *arguments],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=driver_log,
        )
    assert process.stdout is not None
    assert process.stdin is not None
    try:
        deadline = time.monotonic() + start_seconds
        line = b""
        while not line.endswith(b"\n"):
            ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(process.stdout.fileno(), 4096) if ready else b""
            if not chunk:
                pytest.fail(f"{arguments[0]} did not start (exit {process.poll()}):\n{logs()}")
            line += chunk
        yield json.loads(line)
    finally:
        process.stdin.close()
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
