"""The endpoint's route on the region's shared ALB: an Ingress in the load balancer
controller's ingress group, with a weighted forward action (primary, and canary while one runs).

Each endpoint has its own Ingress; the controller merges every Ingress of the group into
one ALB per region. The route is always a forward action, so moving a canary's weight,
adding or removing a canary changes only this Ingress's annotations.
"""

from __future__ import annotations

import json
from typing import Any

from components import naming
from components.render.drain import DEREGISTRATION_DELAY_SECONDS
from components.render.kube import metadata
from components.render.placement import PlacedEndpoint

ALB = "alb.ingress.kubernetes.io"
SERVICE_PORT = 80
TLS_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"
IDLE_TIMEOUT_SECONDS = 600
"""A non-streamed long generation can take minutes; the ALB's default closes idle connections after 60 s."""


def weights(endpoint: PlacedEndpoint, backend: str, canary_backend: str | None = None) -> list[tuple[str, int]]:
    """(Service, weight) pairs of the route; they always sum to 100. The canary's Service is
    ``canary_backend`` (a Mooncake canary set's entry), else the classic canary's."""
    canary = endpoint.spec.canary
    if canary is None:
        return [(backend, 100)]
    canary_service = canary_backend or naming.object_name(endpoint.name, "canary")
    return [(backend, 100 - canary.weight), (canary_service, canary.weight)]


def forward_action(endpoint: PlacedEndpoint, backend: str, canary_backend: str | None = None) -> dict[str, Any]:
    return {
        "type": "forward",
        "forwardConfig": {
            "targetGroups": [
                {"serviceName": service, "servicePort": SERVICE_PORT, "weight": weight}
                for service, weight in weights(endpoint, backend, canary_backend)
            ]
        },
    }


def strip_prefix(endpoint: PlacedEndpoint) -> list[dict[str, Any]]:
    """An ALB URL rewrite: servers see /v1/completions, not /inference/<name>/v1/completions."""
    path = naming.route_path(endpoint.name)
    return [
        {
            "type": "url-rewrite",
            "urlRewriteConfig": {"rewrites": [{"regex": f"^{path}/?(.*)$", "replace": "/$1"}]},
        }
    ]


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def route(
    endpoint: PlacedEndpoint,
    backend: str | None = None,
    health_path: str | None = None,
    canary_backend: str | None = None,
) -> dict[str, Any]:
    """The route to ``backend`` (the endpoint's own Service unless named), and to ``canary_backend``
    (the classic canary's Service unless named) at the canary's weight, health-checked on
    ``health_path`` (the server's unless named) for 200."""
    ingress = endpoint.ingress
    # The action is named after the primary Service: the controller looks the action up by
    # the backend's name, and Pulumi's Ingress await finds that Service's endpoints.
    action = backend or naming.object_name(endpoint.name, "server")
    # Every route of a region renders the group-wide settings (listen ports, certificate,
    # TLS policy, allowed CIDRs, idle timeout) from the same region config, as the
    # controller requires of one ingress group.
    annotations = {
        f"{ALB}/target-type": "ip",
        f"{ALB}/healthcheck-path": health_path or endpoint.spec.health_check_path,
        f"{ALB}/success-codes": "200",
        f"{ALB}/load-balancer-attributes": f"idle_timeout.timeout_seconds={IDLE_TIMEOUT_SECONDS}",
        # Every target group of the route (primary and canary) holds a deregistered pod's in-flight
        # requests as long as the pod serves them (components/render/drain.py); the controller reads it
        # from the Service's and the Ingress's annotations (v3.4.2 pkg/ingress/model_build_target_group.go
        # buildTargetGroupAttributes) and sets no delay of its own, leaving ELBv2's 300 s.
        f"{ALB}/target-group-attributes": f"deregistration_delay.timeout_seconds={DEREGISTRATION_DELAY_SECONDS}",
        f"{ALB}/actions.{action}": _compact(forward_action(endpoint, action, canary_backend)),
        f"{ALB}/transforms.{action}": _compact(strip_prefix(endpoint)),
    }
    if ingress.certificate_arn is not None:
        annotations[f"{ALB}/listen-ports"] = _compact([{"HTTPS": 443}])
        annotations[f"{ALB}/certificate-arn"] = ingress.certificate_arn
        annotations[f"{ALB}/ssl-policy"] = TLS_POLICY
    else:
        annotations[f"{ALB}/listen-ports"] = _compact([{"HTTP": 80}])
    if ingress.allowed_cidrs:
        annotations[f"{ALB}/inbound-cidrs"] = ",".join(ingress.allowed_cidrs)
    meta = metadata(endpoint.name, endpoint.namespace, endpoint.labels("route"))
    meta["annotations"] = dict(sorted(annotations.items()))
    target = {"service": {"name": action, "port": {"name": "use-annotation"}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": meta,
        "spec": {
            "ingressClassName": naming.INGRESS_CLASS,
            "rules": [
                {
                    "http": {
                        "paths": [{"path": naming.route_path(endpoint.name), "pathType": "Prefix", "backend": target}]
                    }
                }
            ],
        },
    }


def address(endpoint: PlacedEndpoint, hostname: str) -> str:
    """The routed address clients call, given the ALB's DNS name."""
    scheme = "https" if endpoint.ingress.certificate_arn is not None else "http"
    return f"{scheme}://{hostname}{naming.route_path(endpoint.name)}"
