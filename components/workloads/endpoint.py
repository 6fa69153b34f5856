"""An endpoint in one region: its rendered objects registered with the region's cluster."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import naming
from components.platform.leader_worker_set import webhook_retry
from components.platform.retries import retrying
from components.render.endpoint import endpoint_objects
from components.render.placement import PlacedEndpoint
from components.render.route import address
from components.render.startup import rollout_timeout
from components.spec.engine import EndpointRecord, EngineCapabilities
from components.workloads.kube import register

ROUTE_TIMEOUT = "20m"
"""The load balancer controller provisions the ALB (first route of a region) in a few minutes."""


@dataclass(frozen=True)
class InferenceEndpointArgs:
    endpoint: PlacedEndpoint
    kubernetes: k8s.Provider
    depends_on: Sequence[pulumi.Resource]
    """The namespace objects and the platform parts pods need (node groups, device plugins,
    the load balancer controller whose webhooks see every Service)."""
    cold_tier_bucket: pulumi.Output[str] | None = None
    """The region's cold-tier bucket, for endpoints that opt into it."""


ROLLING_KINDS = ("Deployment", "StatefulSet")
LEADER_WORKER_SET = "LeaderWorkerSet"
GATE_PART = "gate"
"""The part of a classic endpoint's gate Deployment (components/render/gate.py), rendered before its route."""
STATIC_FIELDS = ("apiVersion", "kind", "metadata")


def rendered(endpoint: PlacedEndpoint, bucket: pulumi.Output[str] | None) -> dict[str, dict[str, Any]]:
    """The endpoint's manifests. The cold tier's bucket is known only once the region's
    bucket exists: the objects are rendered once more inside that one Output, and every
    field but the identity ones takes its value from there."""
    shapes = endpoint_objects(endpoint)
    if endpoint.spec.mooncake is None or not endpoint.spec.mooncake.store.cold_tier_enabled:
        return shapes
    assert bucket is not None, "a cold-tier endpoint is placed only where the region has a cold tier"
    resolved = bucket.apply(lambda name: endpoint_objects(endpoint, name))

    def field_of(part: str, field: str) -> pulumi.Output[Any]:
        return resolved.apply(lambda objects: objects[part][field])

    return {
        part: {field: value if field in STATIC_FIELDS else field_of(part, field) for field, value in manifest.items()}
        for part, manifest in shapes.items()
    }


class InferenceEndpoint(pulumi.ComponentResource):
    record: pulumi.Output[dict[str, Any]]
    """The framework-neutral engine record (docs/design.md, "The engine record") with the routed address."""

    def __init__(self, name: str, args: InferenceEndpointArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:workloads:InferenceEndpoint", name, None, opts)
        endpoint = args.endpoint
        route: k8s.networking.v1.Ingress | None = None
        registered: dict[str, pulumi.Resource] = {}
        for part, manifest in rendered(endpoint, args.cold_tier_bucket).items():
            kind = manifest["kind"]
            timeouts = None
            depends_on = list(args.depends_on)
            if kind in ROLLING_KINDS:
                # Until the Deployment reports it stuck, never less: a slow load must not fail `pulumi up`.
                rollout = rollout_timeout(endpoint.spec.startup_seconds)
                timeouts = pulumi.CustomTimeouts(create=rollout, update=rollout)
            elif kind == "Ingress":
                timeouts = pulumi.CustomTimeouts(create=ROUTE_TIMEOUT, update=ROUTE_TIMEOUT)
                if GATE_PART in registered:
                    # The route moves to a gate only once its pods are ready (Pulumi awaits the
                    # Deployment's rollout): the load balancer never sends requests to an empty gate.
                    depends_on.append(registered[GATE_PART])
            resource_name = naming.workload_resource_name(endpoint.region, manifest["metadata"]["name"])
            opts = pulumi.ResourceOptions(
                parent=self, provider=args.kubernetes, depends_on=depends_on, custom_timeouts=timeouts
            )
            if kind == LEADER_WORKER_SET:
                # Its region's LWS release is ready before the webhooks answer (platform/leader_worker_set.py).
                opts = pulumi.ResourceOptions.merge(
                    opts, retrying(f"{resource_name}-webhook", webhook_retry(endpoint.region))
                )
            resource = register(resource_name, manifest, opts)
            registered[part] = resource
            if kind == "Ingress":
                assert isinstance(resource, k8s.networking.v1.Ingress)
                route = resource
        assert route is not None
        capabilities = endpoint.spec.engine or EngineCapabilities()
        served_model_name = endpoint.spec.served_model_name
        self.record = route.status.apply(
            lambda status: EndpointRecord(
                endpoint=endpoint.name,
                region=endpoint.region,
                address=address(endpoint, _hostname(status)),
                served_model_name=served_model_name,
                capabilities=capabilities,
            ).to_dict()
        )
        self.register_outputs({"record": self.record})


def _hostname(status: Any) -> str:
    """The ALB's DNS name from the Ingress status (set by the load balancer controller)."""
    ingresses = status.load_balancer.ingress if status and status.load_balancer else None
    if not ingresses or not ingresses[0].hostname:
        return "<pending>"
    return str(ingresses[0].hostname)
