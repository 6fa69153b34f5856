"""The front of a split endpoint (modes ``disaggregated`` and ``both``): the proxy that sends
each request to a prefill pod, then to decode with that pod's bootstrap address, so the
decoder pulls the KV from the very engine that computed it (DESIGN decision 8).

- A fixed prefill count: the proxy the pinned vLLM image carries, given every prefill pod by
  its stable StatefulSet name. A topology change changes its peer list, so it rolls.
- Autoscaled prefill: vllm-router with Kubernetes discovery of the role pods (it reads each
  prefill pod's bootstrap port from an annotation), under a ServiceAccount that may only
  read pods of the namespace.
"""

from __future__ import annotations

from typing import Any

from components import naming
from components.catalog import pins
from components.render.classic import service
from components.render.kube import metadata
from components.render.mooncake_env import ADMIN_KEY_IN_SECRET
from components.render.mooncake_roles import mooncake_of, prefill_autoscaled
from components.render.placement import PlacedEndpoint
from components.render.pods import PORT_NAME, base_pod_spec, locked_down, tmp_mount, tmp_volume

PROXY_PORT = 8000
PROXY_HEALTH_PATH = "/v1/completions"
PROXY_HEALTH_CODES = "405"
"""The bundled proxy serves only POST /v1/completions and /v1/chat/completions: the load
balancer's GET on the first answers 405 exactly when the proxy is up."""


def prefill_urls(endpoint: PlacedEndpoint) -> list[str]:
    """Each prefill pod by its stable name under the headless Service."""
    mooncake = mooncake_of(endpoint)
    assert mooncake.topology is not None
    service_name = naming.object_name(endpoint.name, "prefill")
    return [
        f"http://{service_name}-{index}.{service_name}.{endpoint.namespace}.svc:{endpoint.spec.port}"
        for index in range(mooncake.topology.prefill)
    ]


def decode_url(endpoint: PlacedEndpoint) -> str:
    return f"http://{naming.object_name(endpoint.name, 'decode')}.{endpoint.namespace}.svc:{endpoint.spec.port}"


def bundled_proxy(endpoint: PlacedEndpoint) -> dict[str, Any]:
    mooncake = mooncake_of(endpoint)
    assert mooncake.proxy is not None
    bootstrap = str(mooncake.transfer.bootstrap_base_port)
    args = ["--host", "0.0.0.0", "--port", str(PROXY_PORT)]
    for url in prefill_urls(endpoint):
        args += ["--prefill", url, bootstrap]
    args += ["--decode", decode_url(endpoint)]
    container: dict[str, Any] = {
        "name": "proxy",
        "image": mooncake.proxy.image,
        "command": ["python3", pins().vllm.proxy_script],
        "args": args,
    }
    if mooncake.proxy.admin_api_key_secret is not None:
        # Sent as the Bearer token to the role servers, which require it (VLLM_API_KEY).
        ref = {"secretKeyRef": {"name": mooncake.proxy.admin_api_key_secret, "key": ADMIN_KEY_IN_SECRET}}
        container["env"] = [{"name": "OPENAI_API_KEY", "valueFrom": ref}]
    return container


def router(endpoint: PlacedEndpoint) -> dict[str, Any]:
    mooncake = mooncake_of(endpoint)
    assert mooncake.proxy is not None
    image = mooncake.proxy.image if mooncake.proxy.image != endpoint.spec.image else pins().vllm.router_image
    args = [
        "--vllm-pd-disaggregation",
        "--kv-connector",
        "mooncake",
        "--policy",
        mooncake.proxy.scheduling,
        "--host",
        "0.0.0.0",
        "--port",
        str(PROXY_PORT),
        "--service-discovery",
        "--service-discovery-namespace",
        endpoint.namespace,
        "--service-discovery-port",
        str(endpoint.spec.port),
    ]
    roles: tuple[naming.Role, ...] = ("prefill", "decode")
    for role in roles:
        labels = naming.selector_labels(endpoint.name, role)
        args += [f"--{role}-selector", *(f"{key}={value}" for key, value in labels.items())]
    return {"name": "proxy", "image": image, "command": ["vllm-router"], "args": args}


def proxy_deployment(endpoint: PlacedEndpoint) -> dict[str, Any]:
    container = router(endpoint) if prefill_autoscaled(endpoint) else bundled_proxy(endpoint)
    amounts = {"cpu": "1", "memory": "1Gi"}
    container.update(
        {
            "ports": [{"name": PORT_NAME, "containerPort": PROXY_PORT, "protocol": "TCP"}],
            "resources": {"requests": dict(amounts), "limits": dict(amounts)},
            "readinessProbe": {"tcpSocket": {"port": PORT_NAME}, "periodSeconds": 10},
            "livenessProbe": {"tcpSocket": {"port": PORT_NAME}, "periodSeconds": 15, "failureThreshold": 4},
            "volumeMounts": [tmp_mount()],
            "securityContext": locked_down(),
        }
    )
    pod = base_pod_spec(termination_grace_seconds=60)
    pod["volumes"] = [tmp_volume()]
    if prefill_autoscaled(endpoint):
        pod["serviceAccountName"] = naming.object_name(endpoint.name, "proxy")
        pod["automountServiceAccountToken"] = True  # the router watches pods through the API
    pod["containers"] = [container]
    name = naming.object_name(endpoint.name, "proxy")
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(name, endpoint.namespace, endpoint.labels("proxy")),
        "spec": {
            "replicas": 0 if endpoint.spec.desired_state == "stopped" else 1,
            "selector": {"matchLabels": naming.selector_labels(endpoint.name, "proxy")},
            "template": {"metadata": {"labels": endpoint.labels("proxy")}, "spec": pod},
        },
    }


def proxy_service(endpoint: PlacedEndpoint) -> dict[str, Any]:
    return service(endpoint, "proxy")


def router_access(endpoint: PlacedEndpoint) -> dict[str, dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding of the router: read pods of its namespace, nothing more."""
    name = naming.object_name(endpoint.name, "proxy")
    labels = endpoint.labels("proxy")
    subject = {"kind": "ServiceAccount", "name": name, "namespace": endpoint.namespace}
    return {
        "proxy-account": {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": metadata(name, endpoint.namespace, labels),
        },
        "proxy-role": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata(name, endpoint.namespace, labels),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
        "proxy-role-binding": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata(name, endpoint.namespace, labels),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [subject],
        },
    }
