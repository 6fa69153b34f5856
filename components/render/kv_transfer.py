"""The vLLM ``--kv-transfer-config`` of each Mooncake role, for the pinned release
(config/vllm_kv_transfer.yaml lists every key it accepts; tests hold each rendering to it).

- disaggregated: MooncakeConnector, prefill ``kv_producer`` pushing to decode ``kv_consumer``;
- store: MooncakeStoreConnector, ``kv_both`` (it saves to and loads from the shared pool);
- both: MultiConnector, point-to-point first (loads are served by the first child with a hit),
  store second;
- cold tier: vLLM's own OffloadingConnector with an S3 object tier as the last child of the
  roles that compute prompts, so KV reaches the region's bucket asynchronously.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from components.spec.mooncake import Mooncake, Protocol, Transfer

MooncakeRole = Literal["prefill", "decode", "server"]
"""``server``: the one vLLM workload of mode ``store``."""

KV_ROLES: dict[MooncakeRole, str] = {"prefill": "kv_producer", "decode": "kv_consumer", "server": "kv_both"}

# What MooncakeConnector hands TransferEngine as its protocol: EFA has no RC queue pairs,
# so the spec's high-performance intent "rdma" is Mooncake's libfabric transport "efa".
MOONCAKE_PROTOCOLS: dict[Protocol, str] = {"rdma": "efa", "tcp": "tcp"}


@dataclass(frozen=True)
class ColdTierTarget:
    bucket: str
    region: str
    prefix: str
    """``mooncake-kv/<endpoint>/``: the only prefix the endpoint's role may write (as IAM reads it)."""
    staging_bytes: int
    """Host memory of the OffloadingConnector's CPU tier, through which every object write is staged."""


def s3_endpoint(region: str) -> str:
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"s3.{region}.{suffix}"


def point_to_point(transfer: Transfer, role: MooncakeRole) -> dict[str, Any]:
    extra: dict[str, Any] = {
        "mooncake_protocol": MOONCAKE_PROTOCOLS[transfer.protocol],
        "device_name": transfer.device_name,
    }
    if role == "prefill":
        extra["num_workers"] = transfer.num_workers  # the prefiller's sender pool; decoders only pull
    return {"kv_connector": "MooncakeConnector", "kv_role": KV_ROLES[role], "kv_connector_extra_config": extra}


def store(role: MooncakeRole, store_tp_size: int | None = None, behind_point_to_point: bool = False) -> dict[str, Any]:
    """The store connector reads everything else from mooncake.json (MOONCAKE_CONFIG_PATH);
    ``store_tp_size`` where the roles' tensor parallelism differs (mooncake_roles.store_tp_size).

    ``behind_point_to_point`` (mode ``both``): the decode's store child comes after MooncakeConnector,
    and every request the proxy sends the decode carries ``do_remote_prefill``, for which the
    point-to-point child claims the prompt's tokens. vLLM 0.33.0's MultiConnector asks every child
    and keeps the first one with a hit (v1/multi_connector.py ``get_num_new_matched_tokens``:
    ``if to_return[0] == 0 and toks > 0``), so the store's lookup, a round trip to the pool per
    request, is always discarded; and where the point-to-point child has nothing to load (the
    decode's own prefix cache holds the prompt) the store has nothing beyond it either. So its lookup
    is off (v1/mooncake/store/scheduler.py ``if not self.enable_lookup: return 0, False``): a
    ``kv_consumer`` without lookup or ``save_decode_cache`` is the store's "capacity-only" client,
    which still contributes its segment to the pool (store/connector.py ``_capacity_only``)."""
    config: dict[str, Any] = {
        "kv_connector": "MooncakeStoreConnector",
        "kv_role": "kv_consumer" if role == "decode" else "kv_both",
    }
    extra: dict[str, Any] = {}
    if store_tp_size is not None:
        extra["store_tp_size"] = store_tp_size
    if behind_point_to_point and role == "decode":
        extra["enable_lookup"] = False
    if extra:
        config["kv_connector_extra_config"] = extra
    return config


def object_tier_prefix(prefix: str) -> str:
    """The object tier's ``prefix`` for the IAM prefix ``mooncake-kv/<endpoint>/``: without the
    trailing ``/``, which vLLM 0.33.0 adds itself (``root_dir = f"{prefix}/"`` in
    vllm/v1/kv_offload/tiering/obj/manager.py), so its root is exactly the prefix IAM grants."""
    trimmed = prefix.removesuffix("/")
    if not trimmed or "//" in prefix or trimmed == prefix:
        raise ValueError(f"a cold-tier prefix is non-empty and ends in one '/', got {prefix!r}")
    return trimmed


def cold_tier(target: ColdTierTarget) -> dict[str, Any]:
    return {
        "kv_connector": "OffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "spec_name": "TieringOffloadingSpec",
            "cpu_bytes_to_use": target.staging_bytes,
            "secondary_tiers": [
                {
                    "type": "obj",
                    "prefix": object_tier_prefix(target.prefix),
                    # No keys: the NIXL OBJ plugin falls back to the AWS SDK chain (EKS Pod Identity).
                    "store_config": {
                        "bucket": target.bucket,
                        "endpoint_override": s3_endpoint(target.region),
                        "scheme": "https",
                        "region": target.region,
                    },
                }
            ],
        },
    }


def writes_cold_tier(role: MooncakeRole) -> bool:
    """The roles that compute prompts (prefill, the store's server) run the object tier; decode
    only consumes KV its prefiller computed, so it has no OffloadingConnector and never reaches the bucket."""
    return role != "decode"


def kv_transfer_config(
    mooncake: Mooncake, role: MooncakeRole, cold: ColdTierTarget | None, store_tp_size: int | None = None
) -> dict[str, Any]:
    children = []
    if mooncake.split:
        children.append(point_to_point(mooncake.transfer, role))
    if mooncake.store_enabled:
        children.append(store(role, store_tp_size, behind_point_to_point=mooncake.split))
    if cold is not None and writes_cold_tier(role):
        children.append(cold_tier(cold))
    if len(children) == 1:
        return children[0]
    return {
        "kv_connector": "MultiConnector",
        "kv_role": KV_ROLES[role],
        "kv_connector_extra_config": {"connectors": children},
    }


def as_argument(config: dict[str, Any]) -> str:
    return json.dumps(config, separators=(",", ":"), sort_keys=True)
