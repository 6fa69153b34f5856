"""What a cluster needs before workloads can land: EKS add-ons that need nodes, and the
NVIDIA and EFA device plugins (Helm, versions pinned in config/pins.yaml)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import naming, scheduling
from components.catalog import Chart, applied_crds, pins

# Add-ons pulumi-eks does not create (coredns is disabled there until nodes exist).
NODE_ADDONS = ("coredns", "eks-pod-identity-agent")
EKS_ADDON_FIELDS = {"coredns": "coredns", "eks-pod-identity-agent": "eks_pod_identity_agent"}
"""Each EKS add-on and its field of ``existing_cluster.addons`` (components/spec/existing.py)."""
DEVICE_PLUGIN_NAMESPACE = "kube-system"
# Helm waits for the DaemonSets; GPU nodes can take long to join.
HELM_TIMEOUT_SECONDS = 900


def vendored_crds(
    region: str, part: str, chart: Chart, parent: pulumi.Resource, provider: k8s.Provider
) -> list[k8s.apiextensions.v1.CustomResourceDefinition]:
    """``chart``'s vendored CustomResourceDefinitions, applied by us (components/catalog.py applied_crds).
    Deleting a CRD deletes every object of its kind, so a CRD that leaves the stack stays in the
    cluster, as Helm leaves its CRDs."""
    opts = pulumi.ResourceOptions(parent=parent, provider=provider, retain_on_delete=True)
    return [
        k8s.apiextensions.v1.CustomResourceDefinition(
            naming.platform_name(region, part, crd["metadata"]["name"]),
            metadata=crd["metadata"],
            spec=crd["spec"],
            opts=opts,
        )
        for crd in applied_crds(chart)
    ]


@dataclass(frozen=True)
class ClusterAddonsArgs:
    region: str
    cluster_name: pulumi.Input[str] | None
    """None on a cluster given by kubeconfig, where no EKS add-on is installed."""
    kubernetes: k8s.Provider
    nodes: Sequence[pulumi.Resource]
    """Node groups that must exist first (add-ons schedule pods)."""
    gpu_nodes: bool
    """The NVIDIA device plugin is installed."""
    efa_nodes: bool
    """The EFA device plugin is installed."""
    eks_addons: tuple[str, ...] = NODE_ADDONS
    """The EKS add-ons installed (an existing cluster may run them already)."""


def nvidia_plugin_values() -> dict[str, Any]:
    """Runs on every NVIDIA node, EFA or not; never claims the EFA devices."""
    return {
        "tolerations": scheduling.tolerations((scheduling.GPU_TAINT, scheduling.EFA_TAINT)),
        "nodeSelector": {scheduling.ACCELERATOR_LABEL: "nvidia"},
        # Mounting /dev/infiniband into GPU pods would take what the EFA plugin hands out.
        "mofedEnabled": False,
        "gfd": {"enabled": False},
        "priorityClassName": "system-node-critical",
    }


def efa_plugin_values() -> dict[str, Any]:
    return {
        "tolerations": scheduling.tolerations((scheduling.GPU_TAINT, scheduling.EFA_TAINT)),
        "nodeSelector": {scheduling.EFA_LABEL: "true"},
    }


def helm_release(
    name: str,
    chart: Chart,
    values: pulumi.Input[Mapping[str, Any]],
    namespace: str,
    opts: pulumi.ResourceOptions,
    *,
    skip_crds: bool = False,
) -> k8s.helm.v3.Release:
    """A pinned chart as a Helm release named after the chart (stable object names in the cluster).
    ``skip_crds`` leaves the chart's crds/ out, for a chart whose CRDs the program applies itself."""
    # An OCI registry is no chart repository: Helm takes the chart's full reference instead.
    oci = chart.repo.startswith("oci://")
    return k8s.helm.v3.Release(
        name,
        name=chart.chart,
        chart=f"{chart.repo}/{chart.chart}" if oci else chart.chart,
        version=chart.version,
        repository_opts=None if oci else k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo),
        namespace=namespace,
        values=values,
        atomic=True,
        cleanup_on_fail=True,
        timeout=HELM_TIMEOUT_SECONDS,
        skip_crds=skip_crds or None,  # unset otherwise: the other releases' inputs stay as they were
        opts=opts,
    )


class ClusterAddons(pulumi.ComponentResource):
    def __init__(self, name: str, args: ClusterAddonsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:ClusterAddons", name, None, opts)
        after_nodes = pulumi.ResourceOptions(parent=self, depends_on=list(args.nodes))
        self.addons = [
            aws.eks.Addon(
                naming.platform_name(args.region, addon),
                cluster_name=args.cluster_name,
                addon_name=addon,
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
                opts=after_nodes,
            )
            for addon in NODE_ADDONS
            if addon in args.eks_addons
        ]
        charts = pins().charts
        in_cluster = pulumi.ResourceOptions(parent=self, provider=args.kubernetes, depends_on=list(args.nodes))
        plugins = (
            ("nvidia-device-plugin", args.gpu_nodes, charts.nvidia_device_plugin, nvidia_plugin_values()),
            ("efa-device-plugin", args.efa_nodes, charts.efa_device_plugin, efa_plugin_values()),
        )
        self.releases = [
            helm_release(naming.platform_name(args.region, name), chart, values, DEVICE_PLUGIN_NAMESPACE, in_cluster)
            for name, wanted, chart, values in plugins
            if wanted
        ]
        self.register_outputs({})
