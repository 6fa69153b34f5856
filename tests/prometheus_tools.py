"""Debian's Prometheus binaries (promtool and the server), unpacked by tools/prometheus/unpack.sh
(run by `make test`) into a cache outside the checkout; the tests that need them fail, never skip,
when they are missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
BIN = CACHE / "inference-fleet" / "prometheus" / "usr" / "bin"


def binary(name: str) -> str:
    """The path of ``promtool`` or ``prometheus``."""
    path = BIN / name
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: `make test` unpacks Debian's prometheus package (tools/prometheus/unpack.sh)")
    return str(path)
