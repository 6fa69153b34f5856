"""The Mooncake store of an endpoint (modes ``store`` and ``both``): its master
(``mooncake_master`` with the built-in HTTP metadata server, from Mooncake's own image when the
endpoint runs a pinned vLLM image) and the ``mooncake.json`` every store-connected vLLM rank reads.

The store is *embedded*: each vLLM rank contributes ``global_segment_size`` of its own host
memory to the pool and moves KV peer to peer; the master only places and evicts. One master
per endpoint, so an endpoint's store edits and deletion touch no other endpoint.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from components import naming
from components.catalog import pins
from components.render.drain import sidecar_pre_stop
from components.render.kube import metadata, quantity
from components.render.kv_transfer import MOONCAKE_PROTOCOLS
from components.render.placement import PlacedEndpoint
from components.render.pods import NON_ROOT_ID, base_pod_spec, restricted
from components.spec.mooncake import Store

MASTER_CONTAINER = "master"
MASTER_RPC_PORT = 50051
METADATA_PORT = 8080
MASTER_METRICS_PORT = 9003
CONFIG_FILE = "mooncake.json"
CONFIG_DIR = "/etc/mooncake"
CONFIG_PATH = f"{CONFIG_DIR}/{CONFIG_FILE}"
REAL_CLIENT_PORT = 50052
"""The store-client's one fixed port: its RPC service (vLLM's standalone-store requests) and, as
rendered, its disk-tier reads and the port of its segment's name (``store_client_container``)."""
OFFLOAD_STAGING_BYTES = 1280 * 2**20
"""The store-client's buffer for disk-tier reads and writes: Mooncake's FileStorageConfig
local_buffer_size default (mooncake-store/include/storage_backend.h), rendered so the container's
memory is sized from the figure it runs with."""
STORE_CLIENT_OVERHEAD_BYTES = 2**30
"""The store-client process beyond its segment and staging buffer (its 32 MiB bucket write buffer,
the transfer engine, the RPC servers)."""
SSD_DIR = "/var/lib/mooncake/ssd"
SSD_VOLUME = "mooncake-ssd"
CHECKSUM_ANNOTATION = "inference-fleet/mooncake-config-sha256"
"""On each pod template that reads mooncake.json: a store edit rolls exactly those pods."""
ZONE_LABEL = "topology.kubernetes.io/zone"

# The master evicts when the pool is 90 % full, 5 % at a time (mooncake_master defaults,
# rendered so a reviewer sees them).
EVICTION_HIGH_WATERMARK = 0.9
EVICTION_RATIO = 0.05


def _store(endpoint: PlacedEndpoint) -> Store:
    mooncake = endpoint.spec.mooncake
    assert mooncake is not None
    assert mooncake.store_enabled
    return mooncake.store


def offloads_to_disk(endpoint: PlacedEndpoint) -> bool:
    """offload disk: the pool and its SSD tier belong to a mooncake_client beside each server
    ("standalone-store"); the vLLM ranks contribute no memory of their own."""
    return _store(endpoint).offload == "disk"


def master_host(endpoint: PlacedEndpoint) -> str:
    return f"{naming.object_name(endpoint.name, 'store')}.{endpoint.namespace}.svc"


def mooncake_json(endpoint: PlacedEndpoint) -> dict[str, Any]:
    """Exactly the keys vLLM's MooncakeStoreConfig.from_file reads (config/vllm_kv_transfer.yaml)."""
    store = _store(endpoint)
    assert store.protocol is not None
    assert store.global_segment_size is not None
    assert store.local_buffer_size is not None
    host = master_host(endpoint)
    disk = store.offload == "disk"
    return {
        "metadata_server": store.metadata_server or f"http://{host}:{METADATA_PORT}/metadata",
        "master_server_address": store.master_server_address or f"{host}:{MASTER_RPC_PORT}",
        # The store connector hands this to store.setup: on EFA it must be libfabric's "efa".
        "protocol": MOONCAKE_PROTOCOLS[store.protocol],
        "device_name": store.device_name,
        "mode": "standalone-store" if disk else "embedded",
        # Integers: the reader parses "4GB"-style strings as binary units, digits as bytes.
        "global_segment_size": 0 if disk else int(store.global_segment_size),
        "local_buffer_size": int(store.local_buffer_size),
        "enable_offload": disk,  # a JSON boolean: the reader's bool() takes "false" for true
    }


def config_text(endpoint: PlacedEndpoint) -> str:
    return json.dumps(mooncake_json(endpoint), indent=2, sort_keys=True) + "\n"


def config_checksum(endpoint: PlacedEndpoint) -> str:
    return hashlib.sha256(config_text(endpoint).encode()).hexdigest()


def config_map(endpoint: PlacedEndpoint) -> dict[str, Any]:
    name = naming.mooncake_config_name(endpoint.name)
    labels = endpoint.labels("store")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(name, endpoint.namespace, labels),
        "data": {CONFIG_FILE: config_text(endpoint)},
    }


def master_args(endpoint: PlacedEndpoint) -> list[str]:
    args = [
        f"--rpc_port={MASTER_RPC_PORT}",
        "--enable_http_metadata_server=true",
        f"--http_metadata_server_port={METADATA_PORT}",
        f"--metrics_port={MASTER_METRICS_PORT}",
        f"--eviction_high_watermark_ratio={EVICTION_HIGH_WATERMARK}",
        f"--eviction_ratio={EVICTION_RATIO}",
    ]
    if offloads_to_disk(endpoint):
        args.append("--enable_offload=true")
    return args


def store_client_segment(endpoint: PlacedEndpoint) -> str:
    """The name the store-client's segment is registered under, which vLLM's
    MOONCAKE_PREFERRED_SEGMENT names (with the pod IP as ``$(VLLM_HOST_IP)``)."""
    return f"$(POD_IP):{REAL_CLIENT_PORT}"


def store_client_container(endpoint: PlacedEndpoint) -> dict[str, Any]:
    """offload disk: the mooncake_client that owns the pod's share of the pool (every rank's
    segment) and its SSD tier, registered under the pod IP.

    It listens on ``REAL_CLIENT_PORT`` and on the transfer engine's two ports in
    MC_MIN_RPC_PORT..MC_MAX_RPC_PORT, nothing else (tests/e2e/test_mooncake_store.py reads its
    sockets): ``--host`` carries the port, so the segment is named ``<pod IP>:50052`` instead of a
    port the client would pick in 12300-14300 (mooncake-store/src/real_client.cpp setup_internal,
    MC_STORE_CLIENT_MIN_PORT/MAX_PORT), which only names the segment and is never listened on; and
    ``--start_offload_rpc_server=false`` keeps disk-tier reads off the server it would open on a
    port the kernel picks (port 0) and on the client's own service port, which answers the same
    two calls (mooncake-store/src/real_client_main.cpp RegisterClientRpcService)."""
    store = _store(endpoint)
    config = mooncake_json(endpoint)
    assert store.global_segment_size is not None
    assert store.offload_disk_size is not None
    segment = max(endpoint.spec.gpu_count, 1) * int(store.global_segment_size)
    args = [
        f"--host={store_client_segment(endpoint)}",
        f"--port={REAL_CLIENT_PORT}",
        "--start_offload_rpc_server=false",
        f"--global_segment_size={segment}",
        f"--master_server_address={config['master_server_address']}",
        f"--metadata_server={config['metadata_server']}",
        f"--protocol={config['protocol']}",
        "--enable_offload=true",
    ]
    if config["device_name"]:
        args.append(f"--device_names={config['device_name']}")
    amounts = {"cpu": "2", "memory": quantity(segment + OFFLOAD_STAGING_BYTES + STORE_CLIENT_OVERHEAD_BYTES)}
    return {
        "name": "store-client",
        "image": endpoint.image,
        "command": ["mooncake_client"],
        "args": args,
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", "value": SSD_DIR},
            {"name": "MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES", "value": str(OFFLOAD_STAGING_BYTES)},
            # Stay inside the volume's size limit (the kubelet evicts a pod that exceeds it).
            {
                "name": "MOONCAKE_OFFLOAD_BUCKET_MAX_PHYSICAL_BYTES",
                "value": str(int(store.offload_disk_size) * 9 // 10),
            },
            # The CUDA builds of mooncake_client (every vLLM image's) link libcuda.so.1, which only the
            # NVIDIA runtime mounts: "none" gives this container the driver libraries and no GPU.
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
        ],
        "ports": [{"name": "store-client", "containerPort": REAL_CLIENT_PORT, "protocol": "TCP"}],
        "resources": {"requests": dict(amounts), "limits": dict(amounts)},
        "volumeMounts": [{"name": SSD_VOLUME, "mountPath": SSD_DIR}],
        # The server reads and writes its segments until it has drained: this one outlives it.
        "lifecycle": sidecar_pre_stop(),
        "securityContext": restricted(),
    }


def ssd_volume(endpoint: PlacedEndpoint) -> dict[str, Any]:
    size = _store(endpoint).offload_disk_size
    assert size is not None
    return {"name": SSD_VOLUME, "emptyDir": {"sizeLimit": quantity(size)}}


def _tcp(port: str, period: int, failures: int) -> dict[str, Any]:
    # The metadata server answers 400 to a GET without ?key=, so probes open a connection.
    return {"tcpSocket": {"port": port}, "periodSeconds": period, "failureThreshold": failures}


def slim_master(endpoint: PlacedEndpoint) -> bool:
    """Whether the master runs Mooncake's own image (config/pins.yaml mooncake.master_image, the
    release the pinned vLLM images carry): only beside a pinned vLLM image, so master and store
    clients are always one Mooncake release. Another image keeps the master in that image."""
    pinned = pins().vllm
    return endpoint.spec.image in (pinned.image, pinned.efa_image)


def master_container_image(endpoint: PlacedEndpoint) -> str:
    return pins().mooncake.master_image if slim_master(endpoint) else endpoint.image


def master_security_context(endpoint: PlacedEndpoint) -> dict[str, Any]:
    if not slim_master(endpoint):
        return restricted()
    # The image's own user, which owns its Mooncake package (Mooncake docker/master.Dockerfile).
    return {**restricted(), "runAsNonRoot": True, "runAsUser": NON_ROOT_ID, "runAsGroup": NON_ROOT_ID}


def master_stateful_set(endpoint: PlacedEndpoint, replicas: int) -> dict[str, Any]:
    name = naming.object_name(endpoint.name, "store")
    labels = endpoint.labels("store")
    amounts = {"cpu": "1", "memory": "2Gi"}
    pod = base_pod_spec(termination_grace_seconds=30)
    pod["containers"] = [
        {
            "name": MASTER_CONTAINER,
            "image": master_container_image(endpoint),
            "command": ["mooncake_master"],
            "args": master_args(endpoint),
            "ports": [
                {"name": "rpc", "containerPort": MASTER_RPC_PORT, "protocol": "TCP"},
                {"name": "metadata", "containerPort": METADATA_PORT, "protocol": "TCP"},
                {"name": "metrics", "containerPort": MASTER_METRICS_PORT, "protocol": "TCP"},
            ],
            "resources": {"requests": dict(amounts), "limits": dict(amounts)},
            "startupProbe": _tcp("rpc", 5, 30),
            "livenessProbe": _tcp("rpc", 15, 4),
            "readinessProbe": _tcp("metadata", 10, 3),
            "securityContext": master_security_context(endpoint),
        }
    ]
    if endpoint.zone is not None:
        # Next to the endpoint's node group, whose pods hold the pool.
        pod["nodeSelector"] = {ZONE_LABEL: endpoint.zone}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata(name, endpoint.namespace, labels),
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": naming.selector_labels(endpoint.name, "store")},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def master_service(endpoint: PlacedEndpoint) -> dict[str, Any]:
    name = naming.object_name(endpoint.name, "store")
    labels = endpoint.labels("store")
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(name, endpoint.namespace, labels),
        "spec": {
            "type": "ClusterIP",
            "selector": naming.selector_labels(endpoint.name, "store"),
            "ports": [
                {"name": "rpc", "port": MASTER_RPC_PORT, "targetPort": "rpc", "protocol": "TCP"},
                {"name": "metadata", "port": METADATA_PORT, "targetPort": "metadata", "protocol": "TCP"},
            ],
        },
    }
