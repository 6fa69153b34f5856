"""The gate of a classic endpoint whose server may scale to zero (``autoscaling.min_replicas: 0``), or
whose requests are routed (``routing``).

Nothing but the load balancer is in front of a classic server, and it answers 503 itself while no
target is registered: no request reaches anything a scaler could count. So such an endpoint gets a
gate: the front's program (the package ``front/``) with ``--forward``, two replicas that never scale to
zero, between the route and the server Service. It forwards every request as it came, counts them on
``/metrics`` (port 8090, the ``proxy`` scrape job's ``role="gate"`` series), answers 503
``scaled_to_zero`` with ``Retry-After`` while the server has no pod, and stays healthy meanwhile, so
the route keeps sending it the requests that wake the server (components/render/autoscaling.py,
``wake_query``). With ``routing`` the gate chooses the server pod of each request itself, through the
headless Service ``<name>-pods`` (``--forward-pods``, components/render/routing.py), at any
``min_replicas``; the load balancer alone could only spread requests over the pods. It exists only for
these two: it costs two small pods and one more hop.

It runs with the python3 of the endpoint's own image, which must carry aiohttp: vLLM's and SGLang's
do (components/spec/autoscaling.py, ``GATELESS``, names the frameworks whose images do not).
"""

from __future__ import annotations

from typing import Any

from components import naming
from components.render.classic import pod_disruption_budget, service
from components.render.kube import endpoint_pods, network_policy, scraper_rule, tcp_ports
from components.render.placement import PlacedEndpoint
from components.render.proxy import (
    PROXY_HEALTH_PATH,
    PROXY_METRICS_PORT,
    PROXY_PORT,
    front_container,
    front_deployment,
    program_config_map,
)
from components.render.route import SERVICE_PORT
from components.render.routing import pods_service, routing_args
from components.spec.endpoint import Endpoint

GATE_HEALTH_PATH = PROXY_HEALTH_PATH
"""The gate's own /health: 200 while the server answers, or while it is at zero (then naming it)."""


def scales_to_zero(spec: Endpoint) -> bool:
    """Whether the endpoint is a classic one whose autoscaler may take the server to zero."""
    scaling = spec.autoscaling
    return spec.mooncake is None and scaling is not None and scaling.enabled and scaling.min_replicas == 0


def has_gate(spec: Endpoint) -> bool:
    """Whether the endpoint is a classic one with a gate: its server may scale to zero, or it routes."""
    return spec.mooncake is None and (spec.routing is not None or scales_to_zero(spec))


def gated(endpoint: PlacedEndpoint) -> bool:
    return has_gate(endpoint.spec)


def server_url(endpoint: PlacedEndpoint) -> str:
    """The server Service, where the gate sends every request."""
    return f"http://{naming.object_name(endpoint.name, 'server')}.{endpoint.namespace}.svc:{SERVICE_PORT}"


def gate_container(endpoint: PlacedEndpoint) -> dict[str, Any]:
    health = endpoint.spec.health_check_path
    assert health is not None, "filled in with the framework's (components/spec/endpoint.py)"
    peers = ["--forward", server_url(endpoint), "--forward-health", health, *routing_args(endpoint, "server")]
    return front_container(endpoint.image, peers, ["server"] if scales_to_zero(endpoint.spec) else [])


def gate_objects(endpoint: PlacedEndpoint) -> dict[str, dict[str, Any]]:
    """The gate's ConfigMap (the program), Deployment, Service, disruption budget and NetworkPolicy:
    its serving port from anywhere (the load balancer), its metrics port from the region's Prometheus;
    with ``routing``, the headless Service of the server's pods it chooses between."""
    name = naming.object_name(endpoint.name, "gate")
    rules = [{"ports": tcp_ports((PROXY_PORT, PROXY_PORT))}, scraper_rule(PROXY_METRICS_PORT)]
    objects = {
        "gate-program": program_config_map(endpoint, "gate"),
        "gate": front_deployment(endpoint, "gate", gate_container(endpoint)),
        "gate-service": service(endpoint, "gate"),
        "gate-disruption-budget": pod_disruption_budget(endpoint, "gate"),
        "gate-network-policy": network_policy(name, endpoint, endpoint_pods(endpoint, "gate"), rules),
    }
    if endpoint.spec.routing is not None:
        # The primary's server pods only (role server): a canary's share reaches the canary from the route.
        objects["pods-service"] = pods_service(endpoint, "server", {})
    return objects


def server_rules(endpoint: PlacedEndpoint, metrics_port: int) -> list[dict[str, Any]]:
    """Into a gated server's pods: its port from the gate's pods only (through the server Service, or
    straight to each pod with ``routing``: a policy sees the pod's port either way), and the region's
    Prometheus to its metrics port (the server port itself when the framework has no port of its own)."""
    port = endpoint.spec.port
    gate = {"from": [{"podSelector": endpoint_pods(endpoint, "gate")}], "ports": tcp_ports((port, port))}
    return [gate, scraper_rule(metrics_port)]
