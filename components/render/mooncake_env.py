"""Environment variables the Mooncake role pods get from inference-fleet (a user ``env``
entry of the same name is refused, naming the field that sets it)."""

from __future__ import annotations

ADMIN_KEY_IN_SECRET = "ADMIN_API_KEY"
"""The key read from ``mooncake.proxy.admin_api_key_secret``."""

ROLE_ENV: dict[str, str] = {
    "PYTHONHASHSEED": "the same seed on every role (store keys hash alike)",
    "VLLM_HOST_IP": "the pod IP",
    "VLLM_MOONCAKE_BOOTSTRAP_PORT": "mooncake.transfer.bootstrap_base_port",
    "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT": "mooncake.transfer.abort_request_timeout",
    "VLLM_MOONCAKE_CONNECTOR_TIMEOUT": "mooncake.store.global_segment_size (mode both)",
    "MOONCAKE_CONFIG_PATH": "mooncake.store (the mounted mooncake.json)",
    "MOONCAKE_PREFERRED_SEGMENT": "mooncake.store.offload disk (the pod's own store-client)",
    "MC_STORE_USE_HUGEPAGE": "mooncake.store.protocol rdma (the store on huge pages)",
    "MC_STORE_HUGEPAGE_SIZE": "mooncake.store.protocol rdma (the store on huge pages)",
    "FI_PROVIDER": "mooncake.transfer.protocol rdma",
    "FI_EFA_USE_DEVICE_RDMA": "mooncake.transfer.protocol rdma",
    "FI_EFA_ENABLE_SHM_TRANSFER": "mooncake.transfer.protocol rdma",
    "PYTORCH_CUDA_ALLOC_CONF": "mooncake.transfer.protocol rdma (no expandable segments with Mooncake EFA)",
    "VLLM_API_KEY": "mooncake.proxy.admin_api_key_secret",
}
"""name -> what sets it."""
