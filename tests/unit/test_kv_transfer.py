"""Every --kv-transfer-config we render, held to what the pinned vLLM release accepts
(config/vllm_kv_transfer.yaml): known fields only, registered connectors, valid roles,
each connector's own extra keys, complete MultiConnector children."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from components import naming
from components.catalog import kv_transfer_schema
from components.render.kv_transfer import (
    ColdTierTarget,
    MooncakeRole,
    as_argument,
    cold_tier,
    kv_transfer_config,
    object_tier_prefix,
    writes_cold_tier,
)
from components.spec.mooncake import Mooncake

COLD = ColdTierTarget(bucket="kv-bucket", region="us-east-1", prefix="mooncake-kv/chat/", staging_bytes=2**33)


def problems(config: Any, where: str = "config") -> list[str]:
    """Why the pinned release would refuse ``config`` (empty: it accepts it)."""
    schema = kv_transfer_schema()
    if not isinstance(config, dict):
        return [f"{where}: not an object"]
    found = [f"{where}: unknown field {key!r}" for key in config if key not in schema.kv_transfer_config_fields]
    connector = config.get("kv_connector")
    if connector not in schema.connectors:
        return [*found, f"{where}: connector {connector!r} is not registered"]
    if config.get("kv_role") not in schema.kv_roles:
        found.append(f"{where}: kv_role {config.get('kv_role')!r}")
    extra = config.get("kv_connector_extra_config", {})
    allowed = schema.connectors[connector].extra_config
    found += [f"{where}: {connector} reads no {key!r}" for key in extra if key not in allowed]
    if connector == "MooncakeConnector" and extra.get("mooncake_protocol") not in schema.mooncake_protocols:
        found.append(f"{where}: mooncake_protocol {extra.get('mooncake_protocol')!r}")
    if connector == "MultiConnector":
        children = extra.get("connectors", [])
        if not children:
            found.append(f"{where}: MultiConnector without children")
        for index, child in enumerate(children):
            found += problems(child, f"{where}.connectors[{index}]")
    for index, tier in enumerate(extra.get("secondary_tiers", [])):
        found += [f"{where}: tier {index} key {key!r}" for key in tier if key not in schema.object_tier_keys]
        found += [
            f"{where}: tier {index} store_config key {key!r}"
            for key in tier.get("store_config", {})
            if key not in schema.object_store_config_keys
        ]
    return found


def mooncake(mode: str, protocol: str) -> Mooncake:
    block: dict[str, Any] = {"mode": mode, "transfer": {"protocol": protocol}}
    if mode != "store":
        block["topology"] = {"prefill": 2, "decode": 1}
    return Mooncake.model_validate(block)


ROLES: dict[str, tuple[MooncakeRole, ...]] = {
    "disaggregated": ("prefill", "decode"),
    "store": ("server",),
    "both": ("prefill", "decode"),
}
CASES = [
    (mode, protocol, role, cold)
    for mode, protocol, cold in itertools.product(ROLES, ("rdma", "tcp"), (None, COLD))
    for role in ROLES[mode]
    if cold is None or mode != "disaggregated"
]


@pytest.mark.parametrize(("mode", "protocol", "role", "cold"), CASES)
def test_every_rendered_config_is_accepted_by_the_pinned_release(
    mode: str, protocol: str, role: MooncakeRole, cold: ColdTierTarget | None
) -> None:
    config = kv_transfer_config(mooncake(mode, protocol), role, cold)
    assert problems(json.loads(as_argument(config))) == []


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"kv_connector": "MooncakeConnector", "kv_role": "kv_producer", "kv_rank": 0}, "unknown field 'kv_rank'"),
        ({"kv_connector": "MooncakeConnectorV2", "kv_role": "kv_producer"}, "is not registered"),
        ({"kv_connector": "MooncakeStoreConnector", "kv_role": "producer"}, "kv_role 'producer'"),
        (
            {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [{}]}},
            "connector None is not registered",
        ),
        (
            {
                "kv_connector": "MooncakeConnector",
                "kv_role": "kv_producer",
                "kv_connector_extra_config": {"mooncake_protocol": "rdma", "bootstrap_port": 8998},
            },
            "reads no 'bootstrap_port'",
        ),
    ],
)
def test_the_schema_check_refuses_what_the_release_refuses(config: dict[str, Any], problem: str) -> None:
    assert any(problem in found for found in problems(config))


def test_disaggregated_prefill_pushes_over_efa_with_its_sender_pool() -> None:
    config = kv_transfer_config(mooncake("disaggregated", "rdma"), "prefill", None)
    assert config == {
        "kv_connector": "MooncakeConnector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"mooncake_protocol": "efa", "device_name": "", "num_workers": 10},
    }


def test_both_puts_point_to_point_first_and_the_store_second_with_matching_roles() -> None:
    decode = kv_transfer_config(mooncake("both", "tcp"), "decode", COLD)
    children = decode["kv_connector_extra_config"]["connectors"]
    assert decode["kv_connector"] == "MultiConnector"
    assert [(child["kv_connector"], child["kv_role"]) for child in children] == [
        ("MooncakeConnector", "kv_consumer"),
        ("MooncakeStoreConnector", "kv_consumer"),
    ]


def test_the_cold_tier_is_the_last_child_of_the_prompt_computing_roles_and_names_the_region_bucket() -> None:
    prefill = kv_transfer_config(mooncake("both", "rdma"), "prefill", COLD)
    cold = prefill["kv_connector_extra_config"]["connectors"][-1]
    assert cold["kv_connector"] == "OffloadingConnector"
    (tier,) = cold["kv_connector_extra_config"]["secondary_tiers"]
    assert tier["prefix"] == "mooncake-kv/chat"
    assert tier["store_config"] == {
        "bucket": "kv-bucket",
        "endpoint_override": "s3.us-east-1.amazonaws.com",
        "scheme": "https",
        "region": "us-east-1",
    }


def vllm_object_tier_root(prefix: str) -> str:
    """How vLLM 0.33.0 roots its keys (vllm/v1/kv_offload/tiering/obj/manager.py)."""
    return f"{prefix}/" if prefix else ""


@pytest.mark.parametrize("endpoint", ["chat", "a", "summarize-v2"])
def test_the_object_tier_roots_its_keys_at_exactly_the_prefix_iam_grants(endpoint: str) -> None:
    target = ColdTierTarget(bucket="b", region="us-east-1", prefix=naming.kv_prefix(endpoint), staging_bytes=1)
    (tier,) = cold_tier(target)["kv_connector_extra_config"]["secondary_tiers"]
    assert "//" not in tier["prefix"]
    assert vllm_object_tier_root(tier["prefix"]) == naming.kv_prefix(endpoint) == f"mooncake-kv/{endpoint}/"


@pytest.mark.parametrize("prefix", ["", "/", "mooncake-kv/chat", "mooncake-kv/chat//", "mooncake-kv//chat/"])
def test_an_object_tier_prefix_needs_exactly_one_trailing_slash_and_no_repeated_one(prefix: str) -> None:
    with pytest.raises(ValueError, match="ends in one '/'"):
        object_tier_prefix(prefix)


def test_only_the_prompt_computing_roles_run_the_object_tier() -> None:
    every_role: tuple[MooncakeRole, ...] = ("prefill", "decode", "server")
    assert [role for role in every_role if writes_cold_tier(role)] == ["prefill", "server"]
    for mode in ("both", "store"):
        for role in ROLES[mode]:
            text = as_argument(kv_transfer_config(mooncake(mode, "tcp"), role, COLD))
            assert ("OffloadingConnector" in text) is writes_cold_tier(role), (mode, role)


@pytest.mark.parametrize(
    ("protocol", "role", "cold"), itertools.product(("rdma", "tcp"), ("prefill", "decode"), (None, COLD))
)
def test_a_store_sharded_for_roles_of_different_tensor_parallelism_is_accepted(
    protocol: str, role: MooncakeRole, cold: ColdTierTarget | None
) -> None:
    """mooncake.roles with different gpu_counts in mode both: the store child carries store_tp_size."""
    config = kv_transfer_config(mooncake("both", protocol), role, cold, store_tp_size=8)
    children = config["kv_connector_extra_config"]["connectors"]
    (store,) = [child for child in children if child["kv_connector"] == "MooncakeStoreConnector"]
    assert store["kv_connector_extra_config"]["store_tp_size"] == 8
    assert problems(json.loads(as_argument(config))) == []
