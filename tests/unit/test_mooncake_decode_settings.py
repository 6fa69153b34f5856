"""What a Mooncake decode is told that it reads itself (vLLM 0.33.0 mooncake_connector.py and
store/scheduler.py): the prefiller's abort timeout, the bootstrap timeout sized from the store segment in
mode ``both``, and, in mode ``both``, no store lookup whose result MultiConnector would discard."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.render.mooncake import mooncake_objects
from components.render.mooncake_roles import CONNECTOR_TIMEOUT_SECONDS

from .stack_builders import placed_endpoint, with_mooncake

TCP = {"transfer": {"protocol": "tcp"}, "store": {"protocol": "tcp"}}
GPU = {"node_group": "gpu", "gpu_count": 1}


def role_env(mooncake: dict[str, Any], role: str) -> dict[str, str]:
    objects = mooncake_objects(placed_endpoint(with_mooncake({**GPU, "mooncake": mooncake})), None)
    container = objects[role]["spec"]["template"]["spec"]["containers"][0]
    return {entry["name"]: entry.get("value", "") for entry in container["env"]}


def kv_config(mooncake: dict[str, Any], role: str) -> dict[str, Any]:
    objects = mooncake_objects(placed_endpoint(with_mooncake({**GPU, "mooncake": mooncake})), None)
    args = objects[role]["spec"]["template"]["spec"]["containers"][0]["args"]
    config: dict[str, Any] = json.loads(args[args.index("--kv-transfer-config") + 1])
    return config


@pytest.mark.parametrize("mode", ["disaggregated", "both"])
def test_the_decoder_waits_for_a_pull_as_long_as_the_prefiller_keeps_its_kv(mode: str) -> None:
    """The decoder's ZMQ receive timeout is its own VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT + 60 s."""
    mooncake = {"mode": mode, **TCP, "transfer": {"protocol": "tcp", "abort_request_timeout": 300}}
    assert role_env(mooncake, "decode")["VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT"] == "300"
    assert role_env(mooncake, "prefill")["VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT"] == "300"


@pytest.mark.parametrize(("segment", "timeout"), [("4GiB", 34), ("16GiB", 46), ("64GiB", 94)])
def test_in_mode_both_the_bootstrap_timeout_grows_with_the_segment_rank_0_mounts(segment: str, timeout: int) -> None:
    mooncake = {"mode": "both", **TCP, "store": {"protocol": "tcp", "global_segment_size": segment}}
    for role in ("prefill", "decode"):
        assert role_env(mooncake, role)["VLLM_MOONCAKE_CONNECTOR_TIMEOUT"] == str(timeout)
    assert timeout > CONNECTOR_TIMEOUT_SECONDS


def test_without_a_store_segment_in_process_the_default_bootstrap_timeout_stays() -> None:
    assert "VLLM_MOONCAKE_CONNECTOR_TIMEOUT" not in role_env({"mode": "disaggregated", **TCP}, "decode")


def test_in_mode_both_the_decodes_store_child_contributes_its_segment_and_looks_nothing_up() -> None:
    config = kv_config({"mode": "both", **TCP}, "decode")
    point_to_point, store = config["kv_connector_extra_config"]["connectors"]
    assert point_to_point["kv_connector"] == "MooncakeConnector"
    assert store["kv_connector"] == "MooncakeStoreConnector"
    assert store["kv_role"] == "kv_consumer"
    assert store["kv_connector_extra_config"]["enable_lookup"] is False


def test_the_prefills_store_child_still_looks_up_the_pool() -> None:
    config = kv_config({"mode": "both", **TCP}, "prefill")
    store = config["kv_connector_extra_config"]["connectors"][1]
    assert "enable_lookup" not in store.get("kv_connector_extra_config", {})
