"""A classic endpoint (no mooncake block) in one region: Deployment, Service,
PodDisruptionBudget, KEDA ScaledObject, canary Deployment and Service, and its route; with
``autoscaling.min_replicas: 0`` or ``routing``, the gate in front of the server (components/render/gate.py).
Also the objects each namespace gets once per region."""

from __future__ import annotations

from typing import Any

from components import naming
from components.render.autoscaling import scaled_object
from components.render.kube import (
    endpoint_pods,
    metadata,
    metrics_port,
    network_policy,
    pod_identity_account,
    scraper_rule,
    tcp_ports,
)
from components.render.placement import PlacedEndpoint
from components.render.pods import PORT_NAME, pod_template
from components.render.route import ALB, SERVICE_PORT, route
from components.render.startup import progress_deadline_seconds
from components.spec.images import rewrite_for_region


def deployment(
    endpoint: PlacedEndpoint, role: naming.Role, replicas: int | None, template: dict[str, Any]
) -> dict[str, Any]:
    """``replicas`` None leaves the count to the ScaledObject's HorizontalPodAutoscaler (docs/design.md, decision 9):
    a field Pulumi does not send is a field its server-side apply does not own."""
    spec: dict[str, Any] = {}
    if replicas is not None:
        spec["replicas"] = replicas
    spec.update(
        {
            "selector": {"matchLabels": naming.selector_labels(endpoint.name, role)},
            # Keep serving while a new pod loads; GPU capacity for one extra pod is needed to roll.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "progressDeadlineSeconds": progress_deadline_seconds(endpoint.spec.startup_seconds),
            "template": template,
        }
    )
    name = naming.object_name(endpoint.name, role)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(name, endpoint.namespace, endpoint.labels(role)),
        "spec": spec,
    }


def service(endpoint: PlacedEndpoint, role: naming.Role, port: int = SERVICE_PORT) -> dict[str, Any]:
    name = naming.object_name(endpoint.name, role)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(name, endpoint.namespace, endpoint.labels(role)),
        "spec": {
            "type": "ClusterIP",
            "selector": naming.selector_labels(endpoint.name, role),
            "ports": [{"name": PORT_NAME, "port": port, "targetPort": PORT_NAME, "protocol": "TCP"}],
        },
    }


def pod_disruption_budget(endpoint: PlacedEndpoint, role: naming.Role) -> dict[str, Any]:
    """Node drains take one pod of the role at a time."""
    name = naming.object_name(endpoint.name, role)
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(name, endpoint.namespace, endpoint.labels(role)),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": naming.selector_labels(endpoint.name, role)}},
    }


def primary_replicas(endpoint: PlacedEndpoint) -> int | None:
    spec = endpoint.spec
    if spec.desired_state == "stopped":
        return 0  # its ScaledObject is paused at zero (components/render/autoscaling.py)
    if spec.autoscaled:
        return None
    assert spec.replicas is not None
    return spec.replicas


def canary_image(endpoint: PlacedEndpoint) -> str:
    spec = endpoint.spec
    assert spec.canary is not None
    image = spec.canary.image
    return rewrite_for_region(image, endpoint.region) if spec.rewrite_image else image


def classic_objects(endpoint: PlacedEndpoint) -> dict[str, dict[str, Any]]:
    """Every object of a classic endpoint in its region, keyed by a stable part name."""
    # Imported here: the gate's builders are the proxy's, which take the Service builder of this module.
    from components.render.gate import GATE_HEALTH_PATH, gate_objects, gated, scales_to_zero, server_rules

    spec = endpoint.spec
    gate = gated(endpoint)
    objects = {
        "deployment": deployment(
            endpoint, "server", primary_replicas(endpoint), pod_template(endpoint, "server", endpoint.image)
        ),
        "service": service(endpoint, "server"),
        "disruption-budget": pod_disruption_budget(endpoint, "server"),
    }
    if spec.autoscaling is not None and spec.autoscaling.enabled:
        name = naming.object_name(endpoint.name, "server")
        objects["autoscaler"] = scaled_object(
            name,
            endpoint.namespace,
            endpoint.labels("server"),
            endpoint=endpoint.name,
            role="server",
            framework=spec.framework,
            min_replicas=spec.autoscaling.min_replicas,
            max_replicas=spec.autoscaling.max_replicas,
            metrics=spec.autoscaling.parsed_metrics,
            stopped=spec.desired_state == "stopped",
            # Only a server that may be at zero needs waking; a gate that routes counts requests all the same.
            wake="gate" if scales_to_zero(spec) else None,
        )
    if spec.canary is not None:
        canary = pod_template(endpoint, "canary", canary_image(endpoint))
        objects["canary-deployment"] = deployment(endpoint, "canary", spec.canary.replicas, canary)
        objects["canary-service"] = service(endpoint, "canary")
    # Into the server and canary pods comes only the load balancer's traffic to the server port,
    # and the region's Prometheus to a metrics port of the framework's own (docs/metrics.md).
    port = endpoint.spec.port
    rules = [{"ports": tcp_ports((port, port))}]
    if metrics_port(endpoint) != port:
        rules.append(scraper_rule(metrics_port(endpoint)))
    name = naming.object_name(endpoint.name, "server")
    if not gate:
        objects["route"] = route(endpoint)
        objects["network-policy"] = network_policy(name, endpoint, endpoint_pods(endpoint, "server", "canary"), rules)
        return objects
    # Gated: the route goes to the gate (a canary's share still straight to the canary), and the
    # server's port takes only the gate's pods, and the region's Prometheus.
    objects.update(gate_objects(endpoint))
    gate_service = naming.object_name(endpoint.name, "gate")
    objects["route"] = route(endpoint, backend=gate_service, health_path=GATE_HEALTH_PATH)
    gated_rules = server_rules(endpoint, metrics_port(endpoint))
    objects["network-policy"] = network_policy(name, endpoint, endpoint_pods(endpoint, "server"), gated_rules)
    if spec.canary is not None:
        canary_name = naming.object_name(endpoint.name, "canary")
        canary_pods = endpoint_pods(endpoint, "canary")
        objects["canary-network-policy"] = network_policy(canary_name, endpoint, canary_pods, rules)
        if spec.health_check_path != GATE_HEALTH_PATH:
            # The route's health check is the gate's; the canary's target group keeps the server's: the
            # load balancer controller reads a target group's settings from its Service's annotations
            # merged over the Ingress's, the Service's first (aws-load-balancer-controller v3.4.2,
            # pkg/ingress/model_build_target_group.go with pkg/algorithm/maps.go MergeStringMap).
            annotations = {f"{ALB}/healthcheck-path": spec.health_check_path}
            objects["canary-service"]["metadata"]["annotations"] = annotations
    return objects


def namespace(name: str) -> dict[str, Any]:
    """A namespace of the fleet's endpoints, its pods given the load balancer controller's readiness gates."""
    key, value = naming.POD_READINESS_GATE_LABEL
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata(name, None, {**naming.fleet_labels(), key: value}),
    }


def workload_service_account(namespace_name: str) -> dict[str, Any]:
    """The ServiceAccount inference pods run as; EKS Pod Identity binds it to the workload role."""
    return pod_identity_account(naming.WORKLOAD_SERVICE_ACCOUNT, namespace_name, naming.fleet_labels())
