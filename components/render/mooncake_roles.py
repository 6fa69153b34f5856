"""The vLLM workloads of a Mooncake endpoint: prefill and decode (Deployments; the proxy finds the
prefill pods through a headless Service and reaches the very pod that prefilled by its address:
docs/design.md, decision 8), or the one server of mode ``store``; each with its role's connector
config, the store config and the EFA needs."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from components import naming
from components.render.classic import deployment, service
from components.render.kube import metadata, quantity
from components.render.kv_transfer import (
    ColdTierTarget,
    MooncakeRole,
    as_argument,
    kv_transfer_config,
    writes_cold_tier,
)
from components.render.mooncake_env import ADMIN_KEY_IN_SECRET
from components.render.mooncake_store import (
    CHECKSUM_ANNOTATION,
    CONFIG_DIR,
    CONFIG_PATH,
    REAL_CLIENT_PORT,
    config_checksum,
    offloads_to_disk,
    ssd_volume,
    store_client_container,
)
from components.render.placement import PlacedEndpoint
from components.render.pods import PORT_NAME, pod_template
from components.render.route import SERVICE_PORT
from components.scheduling import (
    EFA_RESOURCE,
    HUGEPAGES_2MI_RESOURCE,
    LIBFABRIC_HUGEPAGES_2MI_BYTES,
    hugepages_quantity,
)
from components.spec.mooncake import Mooncake

HASH_SEED = "0"
STORE_HUGEPAGE_ENV = {"MC_STORE_USE_HUGEPAGE": "1", "MC_STORE_HUGEPAGE_SIZE": "2MB"}
"""Mooncake's store then maps every segment and its buffer with MAP_HUGETLB in 2 MiB pages, and fails
rather than fall back to 4 KiB pages (mooncake-store/include/utils.h get_hugepage_size_from_env: any
value of MC_STORE_USE_HUGEPAGE turns it on; "2MB" is 2 MiB to its size parser). docs/efa.md."""
COLD_TIER_STAGING_PER_GPU = 4 * 2**30
"""Host memory per GPU of the OffloadingConnector's CPU tier, through which the cold tier writes."""
CONFIG_VOLUME = "mooncake-config"


def mooncake_of(endpoint: PlacedEndpoint) -> Mooncake:
    mooncake = endpoint.spec.mooncake
    assert mooncake is not None
    return mooncake


def rdma(endpoint: PlacedEndpoint) -> bool:
    return mooncake_of(endpoint).transfer.protocol == "rdma"


def cold_tier_staging(endpoint: PlacedEndpoint) -> int:
    return max(endpoint.spec.gpu_count, 1) * COLD_TIER_STAGING_PER_GPU


def ranks(endpoint: PlacedEndpoint) -> int:
    """vLLM processes of a pod, one per GPU: each runs its own store client."""
    return max(endpoint.spec.gpu_count, 1)


def role_memory(endpoint: PlacedEndpoint, role: MooncakeRole, cold: bool) -> int:
    """The server's own memory, plus what each rank (GPU) gives the store pool and its
    transfer buffer when they are ordinary memory (an rdma store takes them from huge pages,
    which are not memory to Kubernetes: ``role_hugepages``), plus the cold tier's staging
    memory on the roles that write it."""
    spec = endpoint.spec
    mooncake = mooncake_of(endpoint)
    store = mooncake.store
    assert spec.resources.memory is not None
    memory = int(spec.resources.memory)
    if mooncake.store_enabled and not mooncake.store_on_hugepages:
        assert store.global_segment_size is not None
        assert store.local_buffer_size is not None
        # With offload disk, the segments live in the store-client container instead.
        segment = 0 if offloads_to_disk(endpoint) else int(store.global_segment_size)
        memory += ranks(endpoint) * (segment + int(store.local_buffer_size))
    if cold and writes_cold_tier(role):
        memory += cold_tier_staging(endpoint)
    return memory


def role_hugepages(endpoint: PlacedEndpoint) -> int:
    """An rdma pod's 2 MiB huge pages: libfabric's share, plus every rank's store segment and
    buffer when the store runs over EFA. Its node group must reserve at least this much
    (``hugepages_2mi``; the schedulability check says so)."""
    return LIBFABRIC_HUGEPAGES_2MI_BYTES + mooncake_of(endpoint).store_hugepage_bytes(ranks(endpoint))


CONNECTOR_TIMEOUT_SECONDS = 30
"""vLLM 0.33.0's VLLM_MOONCAKE_CONNECTOR_TIMEOUT default (vllm/envs.py): each HTTP call of the
MooncakeConnector to the prefill's bootstrap server (a worker's registration, a decoder's query)."""
CONNECTOR_TIMEOUT_PER_SEGMENT_GIB = 1
"""Our allowance, per GiB of one rank's store segment, for the bootstrap server's slow answers while
that segment mounts. vLLM's docs give no rate (below)."""


def bootstrap_timeout(endpoint: PlacedEndpoint) -> int | None:
    """The connector's HTTP timeout in mode ``both``, sized from the store segment; None elsewhere.

    vLLM 0.33.0 docs/features/mooncake_connector_usage.md: global rank 0 hosts the bootstrap server
    in the process that mounts the store's host segment, so a large segment "can delay responses for
    several seconds during startup"; raise VLLM_MOONCAKE_CONNECTOR_TIMEOUT on hosts with very large
    segments. Only mode ``both`` has both the bootstrap server and an in-process segment (mode
    ``store`` has no bootstrap server; with offload disk the segment is the store client's, in its own
    container). The docs give "several seconds" and no rate, so the allowance is ours: the default plus
    1 s per GiB of the rank's segment (64 GiB: 94 s), generous against the page faulting and memory
    registration that mount it. The cost of a larger timeout is only a slower failure when a prefill is
    really gone: a query tries 3 times (mooncake_connector.py ``_BOOTSTRAP_MAX_ATTEMPTS``)."""
    mooncake = mooncake_of(endpoint)
    if not (mooncake.split and mooncake.store_enabled) or offloads_to_disk(endpoint):
        return None
    segment = mooncake.store.global_segment_size
    assert segment is not None
    return CONNECTOR_TIMEOUT_SECONDS + CONNECTOR_TIMEOUT_PER_SEGMENT_GIB * math.ceil(int(segment) / 2**30)


def _env(endpoint: PlacedEndpoint, role: MooncakeRole) -> list[dict[str, Any]]:
    mooncake = mooncake_of(endpoint)
    env: list[dict[str, Any]] = [
        {"name": "PYTHONHASHSEED", "value": HASH_SEED},
        {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    transfer = mooncake.transfer
    if role == "prefill":
        env.append({"name": "VLLM_MOONCAKE_BOOTSTRAP_PORT", "value": str(transfer.bootstrap_base_port)})
    if role in ("prefill", "decode"):
        # Both ends read it: the prefiller frees a request's KV after it, and the decoder waits that
        # long (plus 60 s) for the prefiller's answer to a pull (0.33.0 mooncake_connector.py, the
        # ZMQ RCVTIMEO of its transfer request), so the two must agree.
        env.append({"name": "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT", "value": str(transfer.abort_request_timeout)})
    connector_timeout = bootstrap_timeout(endpoint)
    if role in ("prefill", "decode") and connector_timeout is not None:
        env.append({"name": "VLLM_MOONCAKE_CONNECTOR_TIMEOUT", "value": str(connector_timeout)})
    if mooncake.store_enabled:
        env.append({"name": "MOONCAKE_CONFIG_PATH", "value": CONFIG_PATH})
        if mooncake.store_on_hugepages:
            # Registered on every EFA device, 4 KiB pages would exhaust its page entries (docs/efa.md).
            env += [{"name": name, "value": value} for name, value in STORE_HUGEPAGE_ENV.items()]
        if offloads_to_disk(endpoint):
            # Put into the pod's own store-client first (declared after VLLM_HOST_IP, which it uses).
            segment_owner = f"$(VLLM_HOST_IP):{REAL_CLIENT_PORT}"
            env.append({"name": "MOONCAKE_PREFERRED_SEGMENT", "value": segment_owner})
    if rdma(endpoint):
        env += [
            {"name": "FI_PROVIDER", "value": "efa"},
            {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"},
            # libfabric's shared-memory path fails on GPU buffers between processes of one node.
            {"name": "FI_EFA_ENABLE_SHM_TRANSFER", "value": "0"},
            # VMM-backed (expandable) CUDA segments make EFA reads and writes fail.
            {"name": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:False"},
        ]
    secret = mooncake.proxy.admin_api_key_secret if mooncake.proxy is not None else None
    if secret is not None:
        # Only the proxy, which holds the same key, may call the role servers.
        ref = {"secretKeyRef": {"name": secret, "key": ADMIN_KEY_IN_SECRET}}
        env.append({"name": "VLLM_API_KEY", "valueFrom": ref})
    return env


def store_tp_size(endpoint: PlacedEndpoint) -> int | None:
    """The tensor parallelism the store shards KV by when prefill and decode differ in theirs.

    Without it the pinned vLLM's MooncakeStoreConnector keys each rank's shard by its rank alone
    (``@tp_rank:<r>``, vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/data.py), so a
    decoder of another size would look up shards holding other heads. With ``store_tp_size`` (a
    multiple of both sizes: their least common multiple) both roles write and read one sharded
    layout, or, where the model's KV heads do not split that way, a layout namespaced by their own
    size (store/worker.py ``_select_store_layout``): never another size's shards."""
    mooncake = mooncake_of(endpoint)
    if not (mooncake.split and mooncake.store_enabled):
        return None
    sizes = {endpoint.spec.tensor_parallel_size(role) for role in ("prefill", "decode")}
    return math.lcm(*sizes) if len(sizes) > 1 else None


def role_template(endpoint: PlacedEndpoint, role: MooncakeRole, cold: ColdTierTarget | None) -> dict[str, Any]:
    """The pod template of ``role``, shaped and placed as the role is (``PlacedEndpoint.for_role``)."""
    store_tp = store_tp_size(endpoint)
    endpoint = endpoint.for_role(role)
    if cold is not None:
        # The CPU tier the cold tier stages through is sized by the role's own GPUs.
        cold = dataclasses.replace(cold, staging_bytes=cold_tier_staging(endpoint))
    mooncake = mooncake_of(endpoint)
    template = pod_template(endpoint, role, endpoint.image)
    pod = template["spec"]
    writes_cold = cold is not None and writes_cold_tier(role)
    if writes_cold:
        # The endpoint's own identity: KV objects under its own prefix of the cold tier only.
        # Other roles keep the pod template's workload ServiceAccount (weights only).
        pod["serviceAccountName"] = naming.kv_service_account(endpoint.name)
    container = pod["containers"][0]
    container["args"] = [
        *container["args"],
        "--kv-transfer-config",
        as_argument(kv_transfer_config(mooncake, role, cold, store_tp)),
    ]
    container["env"] = [*_env(endpoint, role), *container.get("env", [])]
    if role == "prefill":
        bootstrap = mooncake.transfer.bootstrap_base_port
        container["ports"].append({"name": "bootstrap", "containerPort": bootstrap, "protocol": "TCP"})
    resources = container["resources"]
    for amounts in (resources["requests"], resources["limits"]):
        amounts["memory"] = quantity(role_memory(endpoint, role, cold is not None))
        if rdma(endpoint):
            # Every EFA device of the node, so the transfer uses all of its bandwidth.
            amounts[EFA_RESOURCE] = str(endpoint.efa_interfaces)
            amounts[HUGEPAGES_2MI_RESOURCE] = hugepages_quantity(role_hugepages(endpoint))
    if rdma(endpoint):
        # Registering GPU and host buffers with the NIC pins memory.
        container["securityContext"]["capabilities"]["add"] = ["IPC_LOCK"]
    annotations: dict[str, str] = {}
    if mooncake.store_enabled:
        container["volumeMounts"].append({"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True})
        config_map = naming.mooncake_config_name(endpoint.name)
        pod["volumes"].append({"name": CONFIG_VOLUME, "configMap": {"name": config_map}})
        annotations[CHECKSUM_ANNOTATION] = config_checksum(endpoint)
        if offloads_to_disk(endpoint):
            pod["containers"].append(store_client_container(endpoint))
            pod["volumes"].append(ssd_volume(endpoint))
    if annotations:
        template["metadata"]["annotations"] = annotations
    return template


def role_replicas(endpoint: PlacedEndpoint, role: MooncakeRole) -> int | None:
    """The role's count; None leaves it to the role's autoscaler (docs/design.md, decision 9)."""
    mooncake = mooncake_of(endpoint)
    if endpoint.spec.desired_state == "stopped":
        return 0
    if role == "server":
        return 1
    scaling = mooncake.autoscaling
    if scaling.enabled and getattr(scaling, role) is not None:
        return None
    assert mooncake.topology is not None
    return int(getattr(mooncake.topology, role))


def prefill_headless_service(endpoint: PlacedEndpoint) -> dict[str, Any]:
    name = naming.object_name(endpoint.name, "prefill")
    bootstrap = mooncake_of(endpoint).transfer.bootstrap_base_port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(name, endpoint.namespace, endpoint.labels("prefill")),
        "spec": {
            "clusterIP": "None",
            # The proxy finds the ready prefill pods by this name (and checks each one's /health
            # itself). Not-ready addresses are not published: with them, a terminating pod stays a
            # ready endpoint (EndpointConditions.ready is true for terminating endpoints only under
            # publishNotReadyAddresses), so the DNS name would go on listing a prefill that drains and
            # the proxy would go on sending it requests it refuses (components/render/drain.py).
            "selector": naming.selector_labels(endpoint.name, "prefill"),
            "ports": [
                {"name": PORT_NAME, "port": endpoint.spec.port, "targetPort": PORT_NAME, "protocol": "TCP"},
                {"name": "bootstrap", "port": bootstrap, "targetPort": "bootstrap", "protocol": "TCP"},
            ],
        },
    }


def role_deployment(endpoint: PlacedEndpoint, role: MooncakeRole, cold: ColdTierTarget | None) -> dict[str, Any]:
    """A role of single pods (prefill, decode), or the one server of mode store: a Deployment, so it rolls
    with a surge (a new pod loads its model before an old one stops) and a one-replica role keeps
    serving through an image change or a ``mooncake.json`` roll. Prefill was a StatefulSet for stable
    per-pod names, which nothing uses now: the proxy resolves the headless Service above to the pods'
    addresses and hands the decoder the address and engine id of the very pod that prefilled
    (docs/design.md, decision 8), and a StatefulSet's roll stops a pod before it starts its successor
    (apps/v1 RollingUpdateStatefulSetStrategy has no maxSurge)."""
    return deployment(endpoint, role, role_replicas(endpoint, role), role_template(endpoint, role, cold))


def role_service(endpoint: PlacedEndpoint, role: MooncakeRole) -> dict[str, Any]:
    """Decode: what the proxy sends to, on the server's own port; store: the route's backend."""
    return service(endpoint, role, endpoint.spec.port if role == "decode" else SERVICE_PORT)
