"""What the real-engine suite runs: the parts tools/vllm-cpu/build.sh made, and the split endpoint whose
rendered prefill, decode and proxy the scenes start (tests/vllm/test_real_pair.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.render.placement import PlacedEndpoint
from tests.e2e.namespace import ROOT
from tests.unit.stack_builders import mooncake_endpoint, placed_endpoint, stack_config

BUILD = ROOT / "tools" / "vllm-cpu" / "build.sh"
ADMIN_SECRET = "chat-admin"


def built() -> dict[str, Path]:
    """Where build.sh put each part (``venv``, ``model``, ``sdist``); `make test` builds them first."""
    checked = subprocess.run([str(BUILD), "--check"], capture_output=True, text=True, check=False)
    if checked.returncode != 0:
        pytest.fail(checked.stderr.strip() or "tools/vllm-cpu/build.sh --check failed")
    return {name: Path(path) for name, _, path in (line.partition("=") for line in checked.stdout.split())}


def split_endpoint() -> PlacedEndpoint:
    """One prefill and one decode of one GPU each, over TCP, behind an admin key."""
    mooncake = {"transfer": {"protocol": "tcp"}, "proxy": {"admin_api_key_secret": ADMIN_SECRET}}
    spec = mooncake_endpoint({"node_group": "gpu", "gpu_count": 1, "mooncake": mooncake})
    return placed_endpoint(stack_config(endpoints={"chat": spec}))


def both_endpoint() -> PlacedEndpoint:
    """Mode ``both``: two prefills and one decode over TCP, the store's pool small (each of the three
    servers gives it 256 MiB of ordinary memory here)."""
    mooncake = {
        "mode": "both",
        "topology": {"prefill": 2, "decode": 1},
        "transfer": {"protocol": "tcp"},
        "store": {"global_segment_size": "256MiB", "local_buffer_size": "64MiB"},
        "proxy": {"admin_api_key_secret": ADMIN_SECRET},
    }
    spec = mooncake_endpoint({"node_group": "gpu", "gpu_count": 1, "mooncake": mooncake})
    return placed_endpoint(stack_config(endpoints={"chat": spec}))


def server(objects: dict[str, dict[str, Any]], role: str) -> dict[str, Any]:
    """The one container of a role's pod."""
    (container,) = objects[role]["spec"]["template"]["spec"]["containers"]
    return dict(container)
