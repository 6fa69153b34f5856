"""The region's metrics pipeline (docs/metrics.md): its namespace, KEDA and its CRDs, Prometheus,
metrics-server, the DCGM exporter on NVIDIA nodes, Grafana. Created only where ``regions.<r>.metrics.enabled``
(resolved by components/spec/stack.py) is true."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components import naming
from components.catalog import pins
from components.platform.addons import helm_release, vendored_crds
from components.platform.dcgm import dcgm_values
from components.platform.grafana import grafana_values
from components.platform.identity import controller_identity
from components.platform.keda import NAMESPACE, keda_values
from components.platform.metrics_server import NAMESPACE as METRICS_SERVER_NAMESPACE
from components.platform.metrics_server import metrics_server_values
from components.platform.prometheus import SERVICE_ACCOUNT, prometheus_values, remote_write_policy
from components.spec.metrics import Metrics

PIPELINE_PARTS = ("keda", "prometheus", "metrics_server", "dcgm_exporter", "grafana")
"""The pipeline's add-ons, each a field of ``existing_cluster.addons`` (components/spec/existing.py)."""


@dataclass(frozen=True)
class MetricsPipelineArgs:
    region: str
    settings: Metrics
    kubernetes: k8s.Provider
    addons: pulumi.Resource
    """The node add-ons (CoreDNS) and device plugins: the pipeline's pods need nodes first."""
    gpu_nodes: bool
    """The region has NVIDIA nodes: the DCGM exporter runs on them."""
    cluster_name: pulumi.Input[str] | None
    """For the Pod Identity association of Prometheus's remote write to AMP, when configured."""
    installs: frozenset[str] = frozenset(PIPELINE_PARTS)
    """The parts installed; an existing cluster may run the others already (``existing_cluster.addons``)."""


class MetricsPipeline(pulumi.ComponentResource):
    """Everything the region's autoscalers and dashboards read, in ``METRICS_NAMESPACE``."""

    crds: list[k8s.apiextensions.v1.CustomResourceDefinition]

    def __init__(self, name: str, args: MetricsPipelineArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:MetricsPipeline", name, None, opts)
        region, installs = args.region, args.installs
        in_cluster = pulumi.ResourceOptions(parent=self, provider=args.kubernetes)
        in_namespace: list[pulumi.Resource] = []
        if installs & {"keda", "prometheus", "dcgm_exporter", "grafana"}:
            # Where the cluster runs every part of the pipeline already, it has the namespace too.
            in_namespace.append(
                k8s.core.v1.Namespace(
                    naming.platform_name(region, "metrics"),
                    metadata={"name": NAMESPACE, "labels": naming.fleet_labels()},
                    opts=in_cluster,
                )
            )
        self.crds = []
        self.keda = None
        if "keda" in installs:
            # Deleting a CRD would delete every endpoint's ScaledObjects: they stay (vendored_crds).
            self.crds = vendored_crds(region, "keda", pins().charts.keda, self, args.kubernetes)
            self.keda = helm_release(
                naming.platform_name(region, "keda"),
                pins().charts.keda,
                keda_values(),
                NAMESPACE,
                pulumi.ResourceOptions(
                    parent=self, provider=args.kubernetes, depends_on=[*in_namespace, args.addons, *self.crds]
                ),
            )
        self.prometheus = None
        if "prometheus" in installs:
            prometheus_needs: list[pulumi.Resource] = [*in_namespace, args.addons]
            if args.settings.amp_workspace_arn is not None:
                assert args.cluster_name is not None  # validation: remote write needs Pod Identity, so EKS
                _, association = controller_identity(
                    self,
                    naming.platform_name(region, "prometheus"),
                    f"Prometheus of the {region} cluster writing to Amazon Managed Service for Prometheus",
                    json.dumps(remote_write_policy(args.settings.amp_workspace_arn)),
                    args.cluster_name,
                    NAMESPACE,
                    SERVICE_ACCOUNT,
                )
                prometheus_needs.append(association)
            self.prometheus = helm_release(
                naming.platform_name(region, "prometheus"),
                pins().charts.prometheus,
                prometheus_values(args.settings),
                NAMESPACE,
                pulumi.ResourceOptions(parent=self, provider=args.kubernetes, depends_on=prometheus_needs),
            )
        self.metrics_server = None
        if "metrics_server" in installs:
            self.metrics_server = helm_release(
                naming.platform_name(region, "metrics-server"),
                pins().charts.metrics_server,
                metrics_server_values(),
                METRICS_SERVER_NAMESPACE,
                pulumi.ResourceOptions(parent=self, provider=args.kubernetes, depends_on=[args.addons]),
            )
        self.dcgm_exporter = None
        if args.gpu_nodes and "dcgm_exporter" in installs:
            self.dcgm_exporter = helm_release(
                naming.platform_name(region, "dcgm-exporter"),
                pins().charts.dcgm_exporter,
                dcgm_values(),
                NAMESPACE,
                pulumi.ResourceOptions(parent=self, provider=args.kubernetes, depends_on=[*in_namespace, args.addons]),
            )
        self.grafana = None
        if args.settings.grafana and "grafana" in installs:
            self.grafana = helm_release(
                naming.platform_name(region, "grafana"),
                pins().charts.grafana,
                grafana_values(),
                NAMESPACE,
                pulumi.ResourceOptions(parent=self, provider=args.kubernetes, depends_on=[*in_namespace, args.addons]),
            )
        self.register_outputs({})
