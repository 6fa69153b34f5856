"""Everything the endpoints of one region run on its cluster: per namespace the Namespace
and the workload ServiceAccount, per endpoint an InferenceEndpoint, and with the metrics
pipeline the region's Grafana dashboard."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import naming
from components.render.classic import namespace, workload_service_account
from components.render.dashboard import dashboard_config_map, dashboard_inputs
from components.render.placement import PlacedEndpoint
from components.workloads.endpoint import InferenceEndpoint, InferenceEndpointArgs
from components.workloads.kube import register
from components.workloads.secrets import SecretValues, create_secrets, namespace_secrets


@dataclass(frozen=True)
class RegionalWorkloadsArgs:
    region: str
    namespaces: Sequence[str]
    """Every namespace the region's endpoints run in (each gets its Namespace and ServiceAccount)."""
    endpoints: Sequence[PlacedEndpoint]
    kubernetes: k8s.Provider
    platform: Sequence[pulumi.Resource]
    """What pods need before they are created (node groups, device plugins, load balancer controller)."""
    cold_tier_bucket: pulumi.Output[str] | None
    """The region's cold-tier bucket, when it has one."""
    dashboard: bool = False
    """The region runs the metrics pipeline: its Grafana dashboard goes into the pipeline's namespace."""
    secrets: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    """The Secrets of ``inference-fleet:secrets`` and their keys (``StackSpec.secrets``)."""
    secret_values: SecretValues | None = None
    """``inference-fleet:secrets`` (secret): each namespace gets the Secrets its endpoints read."""


class RegionalWorkloads(pulumi.ComponentResource):
    records: dict[str, pulumi.Output[dict[str, Any]]]
    """endpoint -> its engine record in this region."""

    def __init__(self, name: str, args: RegionalWorkloadsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:workloads:RegionalWorkloads", name, None, opts)
        region = args.region
        namespace_objects: dict[str, list[pulumi.Resource]] = {}
        for namespace_name in args.namespaces:
            pulumi_name = naming.workload_resource_name(region, namespace_name)
            # Kept on delete: the namespace may hold objects that are not ours ("created if missing").
            created = register(
                pulumi_name,
                namespace(namespace_name),
                pulumi.ResourceOptions(parent=self, provider=args.kubernetes, retain_on_delete=True),
            )
            account = register(
                pulumi_name,
                workload_service_account(namespace_name),
                pulumi.ResourceOptions(parent=self, provider=args.kubernetes, depends_on=[created]),
            )
            # The pods read them at start: created before any workload of the namespace.
            secrets = create_secrets(
                region,
                namespace_name,
                {name: args.secrets[name] for name in namespace_secrets(args.endpoints, namespace_name)},
                args.secret_values,
                pulumi.ResourceOptions(parent=self, provider=args.kubernetes, depends_on=[created]),
            )
            namespace_objects[namespace_name] = [created, account, *secrets]
        self.records = {}
        for endpoint in args.endpoints:
            component = InferenceEndpoint(
                naming.workload_resource_name(region, endpoint.name),
                InferenceEndpointArgs(
                    endpoint=endpoint,
                    kubernetes=args.kubernetes,
                    depends_on=[*namespace_objects[endpoint.namespace], *args.platform],
                    cold_tier_bucket=args.cold_tier_bucket,
                ),
                pulumi.ResourceOptions(parent=self),
            )
            self.records[endpoint.name] = component.record
        if args.dashboard:
            register(
                naming.platform_name(region, "dashboard"),
                dashboard_config_map(region, *dashboard_inputs(args.endpoints)),
                pulumi.ResourceOptions(parent=self, provider=args.kubernetes, depends_on=list(args.platform)),
            )
        self.register_outputs({"records": self.records})
