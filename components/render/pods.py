"""The pod template every endpoint workload shares: server container, model sync (or the region a
streamed load signs for),
probes sized for model loading, scheduling on the endpoint's node group."""

from __future__ import annotations

from typing import Any

from components import naming
from components.catalog import pins
from components.render import node_cache
from components.render.drain import SERVER_GRACE_SECONDS, pre_stop
from components.render.kube import framework_metrics_port, quantity
from components.render.model_loading import REGION_ENV
from components.render.placement import PlacedEndpoint
from components.render.startup import STARTUP_PERIOD_SECONDS, failure_threshold
from components.scheduling import (
    CAPACITY_TYPE_LABEL,
    DEVICE_RESOURCES,
    NODE_GROUP_LABEL,
    eks_capacity_type,
    tolerations,
)

SERVER_CONTAINER = "server"
PORT_NAME = "http"
METRICS_PORT_NAME = "metrics"
SHM_VOLUME = "dshm"
WEIGHTS_VOLUME = "model-weights"

TERMINATION_GRACE_SECONDS = SERVER_GRACE_SECONDS
"""The preStop (the load balancer, kube-proxy and DNS stop sending), the server's drain of its
in-flight generations, and the engine's teardown (components/render/drain.py)."""


def restricted() -> dict[str, Any]:
    """A container's security context: no privilege escalation, no capabilities."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


NON_ROOT_ID = 65532
TMP_VOLUME = "tmp"


def locked_down() -> dict[str, Any]:
    """For helpers that write nothing but /tmp (model sync, proxy): also a read-only root
    filesystem and a non-root user. The servers and Mooncake's binaries cannot have these:
    frameworks compile kernels into caches on the root filesystem at start, and Mooncake's
    launchers make their bundled binary executable in place."""
    return {
        **restricted(),
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": NON_ROOT_ID,
        "runAsGroup": NON_ROOT_ID,
    }


def tmp_volume() -> dict[str, Any]:
    return {"name": TMP_VOLUME, "emptyDir": {"sizeLimit": "1Gi"}}


def tmp_mount() -> dict[str, Any]:
    return {"name": TMP_VOLUME, "mountPath": "/tmp"}


def _http_get(path: str) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": PORT_NAME}}


def probes(health_path: str, startup_seconds: int) -> dict[str, Any]:
    """Model loading takes minutes: the startup probe allows the endpoint's whole startup budget
    (components/render/startup.py) before liveness starts counting, so a slow load is never
    mistaken for a hung server."""
    return {
        "startupProbe": {
            **_http_get(health_path),
            "periodSeconds": STARTUP_PERIOD_SECONDS,
            "timeoutSeconds": 5,
            "failureThreshold": failure_threshold(startup_seconds),
        },
        "readinessProbe": {**_http_get(health_path), "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {**_http_get(health_path), "periodSeconds": 15, "timeoutSeconds": 10, "failureThreshold": 4},
    }


def pod_resources(endpoint: PlacedEndpoint) -> dict[str, Any]:
    """Requests equal limits: with the GPUs, a Guaranteed pod that is evicted last."""
    spec = endpoint.spec
    assert spec.resources.cpu is not None
    assert spec.resources.memory is not None
    amounts: dict[str, str] = {"cpu": spec.resources.cpu, "memory": quantity(spec.resources.memory)}
    if spec.gpu_count:
        amounts[DEVICE_RESOURCES[spec.accelerator]] = str(spec.gpu_count)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def shm_size(endpoint: PlacedEndpoint) -> str:
    """Half the pod's memory: /dev/shm is memory-backed and counted against the pod's limit."""
    assert endpoint.spec.resources.memory is not None
    return quantity(int(endpoint.spec.resources.memory) // 2)


def _env(endpoint: PlacedEndpoint, launch_env: dict[str, str]) -> list[dict[str, Any]]:
    spec = endpoint.spec
    env: list[dict[str, Any]] = [{"name": name, "value": value} for name, value in launch_env.items()]
    if spec.streams_weights:
        env.append({"name": REGION_ENV, "value": endpoint.region})
    if spec.caches_weights:
        env += node_cache.server_env(endpoint)
    env += [{"name": name, "value": value} for name, value in spec.env.items()]  # disjoint: validated
    env += [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": ref.secret, "key": ref.key}}}
        for name, ref in spec.secret_env.items()
    ]
    return env


def server_container(endpoint: PlacedEndpoint, image: str) -> dict[str, Any]:
    spec = endpoint.spec
    launch = spec.server_launch()
    assert spec.health_check_path is not None
    container: dict[str, Any] = {"name": SERVER_CONTAINER, "image": image}
    if launch.command:
        container["command"] = list(launch.command)
    container["args"] = [*launch.args, *spec.args]
    container["ports"] = [{"name": PORT_NAME, "containerPort": spec.port, "protocol": "TCP"}]
    metrics_port = framework_metrics_port(endpoint)
    if metrics_port is not None:
        container["ports"].append({"name": METRICS_PORT_NAME, "containerPort": metrics_port, "protocol": "TCP"})
    env = _env(endpoint, launch.env)
    if env:
        container["env"] = env
    container["resources"] = pod_resources(endpoint)
    container.update(probes(spec.health_check_path, spec.startup_seconds))
    container["lifecycle"] = pre_stop()
    mounts: list[dict[str, Any]] = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
    if spec.syncs_weights:
        assert spec.model_path is not None
        mounts.append({"name": WEIGHTS_VOLUME, "mountPath": spec.model_path, "readOnly": True})
    if spec.caches_weights:
        mounts += node_cache.server_mounts(endpoint)
    container["volumeMounts"] = mounts
    container["securityContext"] = restricted()
    return container


def model_sync_container(endpoint: PlacedEndpoint) -> dict[str, Any]:
    """Copies model_source into the weights volume with the workload identity (EKS Pod Identity)."""
    spec = endpoint.spec
    assert spec.model_source is not None
    assert spec.syncs_weights
    assert spec.model_path is not None
    amounts = {"cpu": "2", "memory": "4Gi"}
    return {
        "name": "model-sync",
        "image": pins().tools.aws_cli,
        "args": ["s3", "sync", spec.model_source, spec.model_path, "--only-show-errors"],
        # HOME on the writable /tmp: the CLI keeps nothing else on disk.
        "env": [{"name": "AWS_REGION", "value": endpoint.region}, {"name": "HOME", "value": "/tmp"}],
        "resources": {"requests": dict(amounts), "limits": dict(amounts)},
        "volumeMounts": [{"name": WEIGHTS_VOLUME, "mountPath": spec.model_path}, tmp_mount()],
        "securityContext": locked_down(),
    }


def node_selector(endpoint: PlacedEndpoint) -> dict[str, str]:
    spec = endpoint.spec
    selector: dict[str, str] = {}
    if endpoint.group_labels is not None:
        selector.update(endpoint.group_labels)  # an existing cluster's group, by its own labels
    elif endpoint.node_group is not None:
        selector[NODE_GROUP_LABEL] = endpoint.node_group
    if spec.capacity_type is not None:
        selector[CAPACITY_TYPE_LABEL] = eks_capacity_type(spec.capacity_type)
    return {**selector, **spec.node_selector}


def base_pod_spec(termination_grace_seconds: int) -> dict[str, Any]:
    """What every pod of an endpoint shares: the workload identity, no API token, seccomp."""
    return {
        "serviceAccountName": naming.WORKLOAD_SERVICE_ACCOUNT,
        # Pods never call the Kubernetes API; EKS Pod Identity mounts its own token for AWS.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": termination_grace_seconds,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    }


def pod_template(endpoint: PlacedEndpoint, role: naming.Role, image: str) -> dict[str, Any]:
    spec = endpoint.spec
    volumes: list[dict[str, Any]] = [
        {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": shm_size(endpoint)}}
    ]
    pod = base_pod_spec(TERMINATION_GRACE_SECONDS)
    if spec.syncs_weights:
        volumes += [{"name": WEIGHTS_VOLUME, "emptyDir": {}}, tmp_volume()]
        pod["initContainers"] = [model_sync_container(endpoint)]
    if spec.caches_weights:
        volumes.append(node_cache.cache_volume())
        if spec.model_source is not None:
            volumes.append(tmp_volume())
            pod["initContainers"] = [node_cache.fill_container(endpoint, image, restricted())]
    pod["containers"] = [server_container(endpoint, image)]
    pod["volumes"] = volumes
    selector = node_selector(endpoint)
    if selector:
        pod["nodeSelector"] = selector
    if endpoint.taints:
        pod["tolerations"] = tolerations(endpoint.taints)
    metadata: dict[str, Any] = {"labels": endpoint.labels(role)}
    metrics_port = framework_metrics_port(endpoint)
    if metrics_port is not None:
        metadata["annotations"] = {naming.METRICS_PORT_ANNOTATION: str(metrics_port)}
    return {"metadata": metadata, "spec": pod}
