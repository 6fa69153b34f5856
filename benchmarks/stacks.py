"""Generated stacks for the benchmarks: N endpoints across R regions, endpoints of chosen modes.

Every region is the same shape (a ``system`` group and one ``gpu`` group of
g6e.12xlarge, no EFA), so every endpoint lands on ``gpu`` by default and each
region costs the same. Endpoints are one-GPU: a classic endpoint has one
replica, a split Mooncake endpoint (disaggregated, both) is 1P1D, all over TCP.
Modes are dealt round-robin from ``mix``, so a mix of all four modes gives
equal shares (N=10: 3 classic, 3 disaggregated, 2 store, 2 both).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal

from ruamel.yaml import YAML

from components.spec import NAMESPACE

Mode = Literal["classic", "disaggregated", "store", "both"]
MODES: Final[tuple[Mode, ...]] = ("classic", "disaggregated", "store", "both")

REGIONS: Final[tuple[str, ...]] = ("us-east-1", "us-west-2", "eu-west-1")
"""Region codes in the order regions are added (R=1 uses the first)."""

IMAGE: Final = "vllm/vllm-openai:v0.33.0"
MODEL: Final = "Qwen/Qwen3-0.6B"
STACK: Final = "bench"
GPU_GROUP_MAX_SIZE: Final = 16
"""The GPU group's size for small stacks; larger ones get a node per endpoint, enough for the
schedulability check (a split endpoint runs three one-GPU pods while it rolls, four to a node)."""
SYSTEM_NODES_PER_ENDPOINT: Final = 2
"""System nodes (m7i.xlarge, 4 vCPUs) per endpoint: a split one's two proxies, their surge and a
store master need about 4 CPUs."""

_NAME_PREFIX: Final[dict[Mode, str]] = {"classic": "cl", "disaggregated": "pd", "store": "kv", "both": "pdkv"}


def region(name: str, index: int, endpoints: int = 0) -> dict[str, Any]:
    """A valid region ``name`` with its own /16 (10.<20+index>.0.0/16), two zones, and node groups
    large enough for ``endpoints`` endpoints."""
    return {
        "kubernetes_version": "1.34",
        "cluster_access": {"public_access_cidrs": ["203.0.113.0/24"]},  # the runner's egress
        "vpc": {"cidr": f"10.{20 + index}.0.0/16", "availability_zones": [f"{name}a", f"{name}b"]},
        "node_groups": {
            "system": {
                "instance_types": ["m7i.xlarge"],
                "min_size": 2,
                "max_size": 4 + SYSTEM_NODES_PER_ENDPOINT * endpoints,
                "desired_size": 2,
            },
            "gpu": {
                "instance_types": ["g6e.12xlarge"],
                "min_size": 0,
                "max_size": max(GPU_GROUP_MAX_SIZE, endpoints),
                "desired_size": 1,
            },
        },
        "cold_tier": {"enabled": False},
        "ingress": {"scheme": "internal"},
    }


def endpoint(mode: Mode) -> dict[str, Any]:
    """A one-GPU endpoint of ``mode``; Mooncake modes over TCP, split modes 1P1D."""
    if mode == "classic":
        return {"image": IMAGE, "model": MODEL, "gpu_count": 1, "replicas": 1}
    mooncake: dict[str, Any] = {"mode": mode, "transfer": {"protocol": "tcp"}}
    if mode != "store":
        mooncake["topology"] = {"prefill": 1, "decode": 1}
    return {"model": MODEL, "gpu_count": 1, "mooncake": mooncake}


def endpoint_name(mode: Mode, index: int) -> str:
    """``<mode prefix>-<index>``: a DNS label far below the 44-character limit."""
    return f"{_NAME_PREFIX[mode]}-{index:04d}"


def stack_config(endpoints: int, regions: int, mix: Sequence[Mode] = MODES) -> dict[str, Any]:
    """The project's config keys: ``regions`` regions and ``endpoints`` endpoints, modes dealt from ``mix``."""
    if not 1 <= regions <= len(REGIONS):
        raise ValueError(f"regions must be 1 to {len(REGIONS)}, got {regions}")
    if endpoints < 0:
        raise ValueError(f"endpoints must be >= 0, got {endpoints}")
    if not mix:
        raise ValueError("mix names no mode")
    modes = [mix[index % len(mix)] for index in range(endpoints)]
    return {
        "regions": {name: region(name, index, endpoints) for index, name in enumerate(REGIONS[:regions])},
        "endpoints": {endpoint_name(mode, index): endpoint(mode) for index, mode in enumerate(modes)},
    }


def mode_counts(endpoints: int, mix: Sequence[Mode] = MODES) -> dict[Mode, int]:
    """How many endpoints of each mode :func:`stack_config` deals."""
    counts: dict[Mode, int] = dict.fromkeys(MODES, 0)
    for index in range(endpoints):
        counts[mix[index % len(mix)]] += 1
    return counts


def write_stack_file(path: Path, config: dict[str, Any]) -> Path:
    """Write ``config`` as a stack file, the way ``fleetctl plan --stack-file`` reads one."""
    document = {"config": {f"{NAMESPACE}:{key}": value for key, value in config.items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    with path.open("w", encoding="utf-8") as stream:
        yaml.dump(document, stream)
    return path
