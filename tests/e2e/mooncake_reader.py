"""How the pinned vLLM reads mooncake.json (vllm/distributed/mooncake_store.py,
MooncakeStoreConfig.from_file and setup_mooncake_store), restated for the tests: the keys it
reads with their defaults, its size parser, and the call it makes on the real store client."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 1024**3
DEFAULTS: dict[str, Any] = {
    "metadata_server": "",
    "master_server_address": "",
    "protocol": "rdma",
    "device_name": "",
    "mode": "embedded",
    "global_segment_size": 4 * GIB,
    "local_buffer_size": 4 * GIB,
    "enable_offload": False,
    "tenant_id": "default",
}
"""Every key the reader takes, with the default it uses when the key is absent."""

_SIZE = re.compile(r"^\s*([\d.]+)\s*(gb|mb|kb|b)?\s*$")
_UNITS = {"gb": 1024**3, "mb": 1024**2, "kb": 1024, "b": 1}


def parse_size(value: Any) -> int:
    if isinstance(value, int):
        return value
    match = _SIZE.match(str(value).strip().lower())
    if not match:
        raise ValueError(f"Invalid format: {value!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2) or "b"])


@dataclass(frozen=True)
class StoreConfig:
    metadata_server: str
    master_server_address: str
    protocol: str
    device_name: str
    mode: str
    global_segment_size: int
    local_buffer_size: int
    enable_offload: bool


def read(path: Path) -> StoreConfig:
    config = json.loads(path.read_text())
    value = {key: config.get(key, default) for key, default in DEFAULTS.items()}
    result = StoreConfig(
        metadata_server=value["metadata_server"],
        master_server_address=value["master_server_address"],
        protocol=value["protocol"],
        device_name=value["device_name"],
        mode=value["mode"],
        global_segment_size=parse_size(value["global_segment_size"]),
        local_buffer_size=parse_size(value["local_buffer_size"]),
        enable_offload=bool(value["enable_offload"]),
    )
    if result.local_buffer_size <= 0:
        raise ValueError("local_buffer_size must be > 0")
    if result.mode == "embedded" and result.global_segment_size == 0:
        raise ValueError("embedded mode requires global_segment_size > 0")
    return result
