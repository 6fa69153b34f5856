"""The front of a split endpoint (modes ``disaggregated`` and ``both``): the proxy that sends
each request to a prefill pod, then to decode with that pod's bootstrap address and engine id,
so the decoder pulls the KV from the very engine that computed it (docs/design.md, decision 8).

The proxy is our own program (the package ``front/`` at the top of the repository, docs/front.md),
its files shipped in the ConfigMap ``<name>-proxy`` and run with the python3 of the endpoint's vLLM
image (``program_volume`` says how). It finds the
prefill pods through the headless prefill Service's DNS name, so a fixed topology and an
autoscaled prefill role render alike and a topology change leaves the proxy alone; it reads
each pod's engine ids again every few seconds, so a prefill restart or roll never leaves it
stale, and its ``/health`` (readiness and the load balancer's check) is 200 only while a
prefill engine and the decode Service answer (or while only roles its autoscaler may take to zero
are missing: then it answers requests 503 with Retry-After, and counts them on ``/metrics``, port
8090, for the autoscaler to wake them). The vLLM image's own example proxy reads the
engine ids once at start (and waits for every listed pod before serving), so it is not used.

With ``routing`` it chooses the prefill engine and the decode pod of each request itself
(``--routing``, ``--decode-pods``: components/render/routing.py); without, it takes prefill engines in
turn and decode through its Service.

The same program, with ``--forward``, is the gate of a classic endpoint that may scale to zero or routes
(components/render/gate.py): the builders below take the front's role (``proxy`` or ``gate``).
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from components import naming
from components.render.classic import service
from components.render.drain import FRONT_DRAIN_SECONDS, FRONT_GRACE_SECONDS, pre_stop
from components.render.kube import metadata
from components.render.mooncake_env import ADMIN_KEY_IN_SECRET
from components.render.mooncake_roles import mooncake_of
from components.render.placement import PlacedEndpoint
from components.render.pods import METRICS_PORT_NAME, PORT_NAME, base_pod_spec, locked_down, tmp_mount, tmp_volume
from components.render.route import IDLE_TIMEOUT_SECONDS
from components.render.routing import routing_args

PROXY_PORT = 8000
PROXY_METRICS_PORT = 8090
"""Where the proxy serves /metrics (its container port ``metrics``): what wakes a role at zero."""
PROXY_HEALTH_PATH = "/health"
"""200 while the proxy reaches a prefill engine and the decode Service, 503 otherwise."""
PROXY_REPLICAS = 2
REFRESH_SECONDS = 2
"""How often the proxy looks up the prefill pods and reads their engine ids."""
PROGRAM_PACKAGE = "front"
"""The program's package (never imported here: its files are read as text)."""
PROGRAM_DIR = "/etc/front"
"""Where the pods mount the program: its ``__main__.py`` at the top, the package beside it."""
LAUNCHER = "__main__.py"
PROGRAM_VOLUME = "program"
PROGRAM_CHECKSUM_ANNOTATION = "inference-fleet/proxy-program-sha256"
"""On the proxy's pod template: a change of any file of the program rolls the proxy."""
PROXY_CONTAINER = "proxy"
"""The one container of the proxy's pods and of the gate's (the same program)."""
Front = Literal["proxy", "gate"]
"""The role of the pods running the program: a split endpoint's proxy, or a classic endpoint's gate."""


def program_source() -> Path:
    """The package's directory, found without importing it (it imports aiohttp, which the Pulumi program
    does not need)."""
    spec = importlib.util.find_spec(PROGRAM_PACKAGE)
    assert spec is not None, f"the {PROGRAM_PACKAGE} package is missing"
    assert spec.submodule_search_locations, f"{PROGRAM_PACKAGE} is a module, not a package"
    return Path(next(iter(spec.submodule_search_locations)))


def program_files() -> dict[str, str]:
    """Every module of the program by file name: the ConfigMap's keys (flat: a key holds no ``/``)."""
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(program_source().glob("*.py"))}


def program_checksum() -> str:
    """Of every file, name and text, so that a rename rolls the pods as an edit does."""
    digest = hashlib.sha256()
    for name, text in program_files().items():
        digest.update(f"{name}\0{len(text.encode())}\0".encode())
        digest.update(text.encode())
    return digest.hexdigest()


def mounted_path(key: str) -> str:
    """Where a ConfigMap key lands under ``PROGRAM_DIR``: the launcher at the top, so ``python3 PROGRAM_DIR``
    runs it with ``PROGRAM_DIR`` first on the path, and every module in the package beside it."""
    return key if key == LAUNCHER else f"{PROGRAM_PACKAGE}/{key}"


def program_volume(config_map: str) -> dict[str, Any]:
    """The ConfigMap as a package on disk: Python runs a directory holding ``__main__.py`` as a program
    (as it runs a zipapp), and that file imports ``front`` from beside it."""
    items = [{"key": key, "path": mounted_path(key)} for key in program_files()]
    return {"name": PROGRAM_VOLUME, "configMap": {"name": config_map, "items": items}}


def prefill_service_host(endpoint: PlacedEndpoint) -> str:
    """The headless prefill Service's name: it resolves to every ready prefill pod (a terminating one
    leaves it at once, so the proxy stops sending it requests during its preStop)."""
    return f"{naming.object_name(endpoint.name, 'prefill')}.{endpoint.namespace}.svc"


def decode_url(endpoint: PlacedEndpoint) -> str:
    return f"http://{naming.object_name(endpoint.name, 'decode')}.{endpoint.namespace}.svc:{endpoint.spec.port}"


def program_config_map(endpoint: PlacedEndpoint, role: Front = "proxy") -> dict[str, Any]:
    name = naming.object_name(endpoint.name, role)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(name, endpoint.namespace, endpoint.labels(role)),
        "data": program_files(),
    }


def scaled_to_zero_roles(endpoint: PlacedEndpoint) -> list[str]:
    """The roles whose autoscaler may take them to no pod (``min_replicas: 0``): the proxy stays ready
    and answers 503 with Retry-After while only these are missing (docs/mooncake-proxy.md)."""
    scaling = mooncake_of(endpoint).autoscaling
    if not scaling.enabled:
        return []
    blocks = {"prefill": scaling.prefill, "decode": scaling.decode}
    return [role for role, block in blocks.items() if block is not None and block.min_replicas == 0]


def front_container(image: str, peers: list[str], scaled_to_zero: Sequence[str]) -> dict[str, Any]:
    """The program's container in front of an endpoint (a split endpoint's proxy, a classic one's
    gate): ``peers`` are the arguments naming what it sends requests to, ``scaled_to_zero`` the
    backends that may have no pod."""
    args = [
        "--host",
        "0.0.0.0",
        "--port",
        str(PROXY_PORT),
        *peers,
        "--refresh-seconds",
        str(REFRESH_SECONDS),
        # Longer than the load balancer's idle timeout, so it never reuses a connection we closed.
        "--keepalive-seconds",
        str(IDLE_TIMEOUT_SECONDS + 30),
        "--metrics-port",
        str(PROXY_METRICS_PORT),
    ]
    for backend in scaled_to_zero:
        args += ["--scale-to-zero", backend]
    # After SIGTERM (and the preStop before it), the streams in flight get the drain of the servers
    # behind them; the pod's grace period is above both (components/render/drain.py). Last, so a role
    # going to zero adds its argument where it did.
    args += ["--drain-seconds", str(FRONT_DRAIN_SECONDS)]
    return {
        "name": PROXY_CONTAINER,
        "image": image,
        "command": ["python3", PROGRAM_DIR],
        "args": args,
    }


def proxy_container(endpoint: PlacedEndpoint) -> dict[str, Any]:
    mooncake = mooncake_of(endpoint)
    assert mooncake.proxy is not None
    assert mooncake.proxy.image is not None, "filled in by the spec"
    peers = [
        "--prefill-service",
        prefill_service_host(endpoint),
        "--prefill-port",
        str(endpoint.spec.port),
        "--bootstrap-port",
        str(mooncake.transfer.bootstrap_base_port),
        "--decode",
        decode_url(endpoint),
        # With routing: the prefill engine by the mode, and each decode to a pod it chooses (the decode
        # Service stays the peer of every route that is not split).
        *routing_args(endpoint, "decode"),
    ]
    container = front_container(mooncake.proxy.image, peers, scaled_to_zero_roles(endpoint))
    if mooncake.proxy.admin_api_key_secret is not None:
        # Sent as the Bearer token to the role servers, which require it (their VLLM_API_KEY).
        ref = {"secretKeyRef": {"name": mooncake.proxy.admin_api_key_secret, "key": ADMIN_KEY_IN_SECRET}}
        container["env"] = [{"name": "VLLM_API_KEY", "valueFrom": ref}]
    return container


HOSTNAME_LABEL = "kubernetes.io/hostname"


def proxy_deployment(endpoint: PlacedEndpoint) -> dict[str, Any]:
    return front_deployment(endpoint, "proxy", proxy_container(endpoint))


def front_deployment(endpoint: PlacedEndpoint, role: Front, container: dict[str, Any]) -> dict[str, Any]:
    """The Deployment running the program as ``container`` (its command and arguments): its ports,
    resources, probes, program volume, anti-affinity and checksum annotation are the same for both."""
    amounts = {"cpu": "1", "memory": "1Gi"}
    container.update(
        {
            "ports": [
                {"name": PORT_NAME, "containerPort": PROXY_PORT, "protocol": "TCP"},
                {"name": METRICS_PORT_NAME, "containerPort": PROXY_METRICS_PORT, "protocol": "TCP"},
            ],
            "resources": {"requests": dict(amounts), "limits": dict(amounts)},
            # Ready while it can serve; alive while it listens (a peer's outage must not restart it).
            "readinessProbe": {
                "httpGet": {"path": PROXY_HEALTH_PATH, "port": PORT_NAME},
                "periodSeconds": 5,
                "timeoutSeconds": 3,
                "failureThreshold": 2,
            },
            "livenessProbe": {"tcpSocket": {"port": PORT_NAME}, "periodSeconds": 15, "failureThreshold": 4},
            # Serving, untouched, until the ALB and the Service stop sending; then SIGTERM drains it.
            "lifecycle": pre_stop(),
            "volumeMounts": [tmp_mount(), {"name": PROGRAM_VOLUME, "mountPath": PROGRAM_DIR, "readOnly": True}],
            "securityContext": locked_down(),
        }
    )
    pod = base_pod_spec(termination_grace_seconds=FRONT_GRACE_SECONDS)
    name = naming.object_name(endpoint.name, role)
    pod["volumes"] = [tmp_volume(), program_volume(name)]
    pod["containers"] = [container]
    # Preferably on different nodes, so that one node's loss never takes every proxy. Preferred, not
    # required: a small system group still holds both replicas and the surge of a roll.
    pod["affinity"] = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": naming.selector_labels(endpoint.name, role)},
                        "topologyKey": HOSTNAME_LABEL,
                    },
                }
            ]
        }
    }
    template_metadata = {
        "labels": endpoint.labels(role),
        "annotations": {PROGRAM_CHECKSUM_ANNOTATION: program_checksum()},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(name, endpoint.namespace, endpoint.labels(role)),
        "spec": {
            "replicas": 0 if endpoint.spec.desired_state == "stopped" else PROXY_REPLICAS,
            "selector": {"matchLabels": naming.selector_labels(endpoint.name, role)},
            "template": {"metadata": template_metadata, "spec": pod},
        },
    }


def proxy_service(endpoint: PlacedEndpoint) -> dict[str, Any]:
    return service(endpoint, "proxy")
