"""Cluster Autoscaler (Helm, pinned per Kubernetes minor) with its IAM role through EKS Pod Identity,
and the Auto Scaling group tags that describe a node group scaled to zero (docs/autoscaling.md).

It discovers the managed node groups' Auto Scaling groups by the tags EKS puts on them
(``k8s.io/cluster-autoscaler/enabled`` and ``k8s.io/cluster-autoscaler/<cluster>``; awsdocs/
amazon-eks-user-guide latest/ug/nodes/managed-node-groups.adoc) and moves only their desired
capacity, within each group's min and max. Facts are from kubernetes/autoscaler at the tags in
config/pins.yaml (cluster-autoscaler-1.34.5 for the stacks' 1.34; the same in 1.30.7-1.36.1).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import naming, scheduling
from components.catalog import InstanceType, pins
from components.platform.addons import helm_release
from components.platform.identity import controller_identity
from components.spec.region import NodeGroup

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler"

DISCOVERY_TAG = "k8s.io/cluster-autoscaler/enabled"
"""The chart's default ``autoDiscovery.tags`` are this and ``k8s.io/cluster-autoscaler/<clusterName>``."""

TEMPLATE_PREFIX = "k8s.io/cluster-autoscaler/node-template/"
"""ASG tags CA reads to build a node of a group that has none (cloudprovider/aws/aws_manager.go
buildNodeFromTemplate: extractLabelsFromAsg, extractTaintsFromAsg, extractAllocatableResourcesFromAsg)."""

GPU_LABEL = "k8s.amazonaws.com/accelerator"
"""CA's AWS GPU label (cloudprovider/aws/aws_cloud_provider.go GPULabel). A node carrying it with no
``nvidia.com/gpu`` allocatable yet counts as unready, not as a node the pending pods failed to fit
(processors/customresources/gpu_processor.go FilterOutNodesWithUnreadyResources); without it CA
may add more GPU nodes while the device plugin starts. Its value is only CA's GPU type for
``--gpu-total``, which we do not set."""

EXTRA_ARGS: dict[str, object] = {
    # Groups that differ only in zone (and their ASG names) grow together (README "Common Notes").
    "balance-similar-node-groups": True,
    # The EKS guide's setting (awsdocs/amazon-eks-user-guide doc_source/autoscaling.md before
    # d4c2035, "ensures that there are no problems with scaling to zero"): kube-system pods with a
    # PodDisruptionBudget do not pin a system node for ever. DaemonSets never pin one.
    "skip-nodes-with-system-pods": False,
    # Of the groups that fit a pending pod, the one left with the least idle CPU and memory.
    "expander": "least-waste",
}
"""Rendered by the chart as ``--<key>=<value>``. ``skip-nodes-with-local-storage`` keeps its default
(true): a GPU node whose model server holds its weights in an emptyDir is never drained to pack
pods tighter; it goes when its last such pod does."""

RESOURCES = {"cpu": "100m", "memory": "600Mi"}
"""Requests and limits of the AWS example deployment
(cloudprovider/aws/examples/cluster-autoscaler-autodiscover.yaml)."""


def image_for(kubernetes_version: str) -> str:
    return pins().charts.cluster_autoscaler.image_for(kubernetes_version)


def autoscaler_policy(cluster_name: str, region: str) -> dict[str, Any]:
    """The README's auto-discovery policy (cloudprovider/aws/README.md "Full Cluster Autoscaler Features
    Policy (Recommended)"; its "Minimal" policy rules out auto-discovery), restricted as the README and
    the EKS best-practices guide advise: the two scaling actions only on Auto Scaling groups tagged for
    this cluster (aws/aws-eks-best-practices latest/bpg/autoscaling/cluster-autoscaler.adoc at 24e725c,
    "Employ least privileged access"), and ``eks:DescribeNodegroup``, which CA calls for the labels,
    taints and tags of a managed node group at zero (aws_wrapper.go getManagedNodegroupInfo), only on
    this cluster's node groups."""
    partition = naming.aws_partition(region)
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DiscoverGroupsAndInstanceTypes",
                "Effect": "Allow",
                "Action": [
                    "autoscaling:DescribeAutoScalingGroups",
                    "autoscaling:DescribeAutoScalingInstances",
                    "autoscaling:DescribeLaunchConfigurations",
                    "autoscaling:DescribeScalingActivities",
                    "ec2:DescribeImages",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplateVersions",
                    "ec2:GetInstanceTypesFromInstanceRequirements",
                ],
                "Resource": "*",
            },
            {
                "Sid": "DescribeOwnNodeGroups",
                "Effect": "Allow",
                "Action": "eks:DescribeNodegroup",
                "Resource": f"arn:{partition}:eks:{region}:*:nodegroup/{cluster_name}/*/*",
            },
            {
                "Sid": "ScaleOwnGroups",
                "Effect": "Allow",
                "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                "Resource": "*",
                "Condition": {
                    "StringEquals": {
                        f"aws:ResourceTag/{DISCOVERY_TAG}": "true",
                        f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned",
                    }
                },
            },
        ],
    }


def autoscaler_values(cluster_name: str, region: str, kubernetes_version: str) -> dict[str, Any]:
    """Values of the pinned chart (kubernetes/autoscaler cluster-autoscaler-chart-9.59.0
    cluster-autoscaler/charts/cluster-autoscaler/values.yaml)."""
    return {
        "cloudProvider": "aws",
        # Also keeps CA off the instance metadata service, which pods cannot reach (hop limit 1):
        # aws_util.go and aws_sdk_provider.go read AWS_REGION before asking IMDS.
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name},
        "image": {"tag": image_for(kubernetes_version)},
        "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
        "extraArgs": dict(EXTRA_ARGS),
        "nodeSelector": {scheduling.ACCELERATOR_LABEL: "none"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "resources": {"requests": dict(RESOURCES), "limits": dict(RESOURCES)},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "fsGroup": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containerSecurityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        },
    }


def autoscaler_node_labels(facts: InstanceType) -> dict[str, str]:
    """Labels CA needs on the nodes themselves, beyond the scheduling vocabulary."""
    return {GPU_LABEL: "nvidia"} if facts.accelerator == "nvidia" else {}


def node_template_tags(group_name: str, spec: NodeGroup, facts: InstanceType) -> dict[str, str]:
    """What a node of the group offers, as the ASG tags CA reads when the group has no node (pure).

    CA builds such a node from the instance type (CPU, memory and, for NVIDIA types,
    ``nvidia.com/gpu`` from EC2's GPU count), these tags, and, for a managed node group,
    ``eks:DescribeNodegroup`` (labels and taints; resources only from the node group's own
    ``node-template/resources`` tags). We tag every label, taint and extended resource anyway: the
    ASG tags need no API call that can fail, and EFA devices and huge pages come from nowhere else.
    EKS copies neither node group tags nor labels to the ASG (awsdocs/amazon-eks-user-guide
    latest/ug/nodes/create-managed-node-group.adoc), so these go on the ASG itself.
    """
    labels = {
        **scheduling.node_labels(group_name, spec.efa, facts),
        **autoscaler_node_labels(facts),
        scheduling.CAPACITY_TYPE_LABEL: scheduling.eks_capacity_type(spec.capacity_type),
    }
    tags = {f"{TEMPLATE_PREFIX}label/{key}": value for key, value in labels.items()}
    for taint in scheduling.node_taints(spec.efa, facts):
        tags[f"{TEMPLATE_PREFIX}taint/{taint.key}"] = f"{taint.value}:{taint.effect}"
    resources: dict[str, str] = {}
    if facts.accelerator in scheduling.DEVICE_RESOURCES and facts.accelerators > 0:
        resources[scheduling.DEVICE_RESOURCES[facts.accelerator]] = str(facts.accelerators)
    if spec.efa:
        resources[scheduling.EFA_RESOURCE] = str(facts.efa_interfaces)
        resources[scheduling.HUGEPAGES_2MI_RESOURCE] = scheduling.hugepages_quantity(spec.hugepages_bytes)
    tags.update({f"{TEMPLATE_PREFIX}resources/{name}": amount for name, amount in resources.items()})
    return dict(sorted(tags.items()))


def autoscaling_group_name(resources: Any) -> str:
    """The one Auto Scaling group of a managed node group, from ``aws.eks.NodeGroup.resources``."""
    groups = [group for resource in resources or () for group in resource.autoscaling_groups or ()]
    if len(groups) != 1 or not groups[0].name:
        raise ValueError(f"expected the managed node group to report one Auto Scaling group, got {groups!r}")
    return str(groups[0].name)


@dataclass(frozen=True)
class ClusterAutoscalerArgs:
    region: str
    cluster_name: pulumi.Output[str]
    """Resolves once the cluster exists: the pod identity association needs the cluster."""
    kubernetes_version: str
    kubernetes: k8s.Provider
    addons: pulumi.Resource
    """Pod Identity must be running before CA starts, and system nodes must exist for it to run on."""


class ClusterAutoscaler(pulumi.ComponentResource):
    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:ClusterAutoscaler", name, None, opts)
        region = args.region
        role, association = controller_identity(
            self,
            naming.platform_name(region, "cluster-autoscaler"),
            f"Cluster Autoscaler of the {region} cluster",
            args.cluster_name.apply(lambda cluster: json.dumps(autoscaler_policy(cluster, region))),
            args.cluster_name,
            NAMESPACE,
            SERVICE_ACCOUNT,
        )
        values: pulumi.Output[Mapping[str, Any]] = args.cluster_name.apply(
            lambda cluster: autoscaler_values(cluster, region, args.kubernetes_version)
        )
        helm_release(
            naming.platform_name(region, "cluster-autoscaler"),
            pins().charts.cluster_autoscaler,
            values,
            NAMESPACE,
            pulumi.ResourceOptions(parent=self, provider=args.kubernetes, depends_on=[association, args.addons]),
        )
        self.role_arn = role.arn
        self.register_outputs({"role_arn": self.role_arn})
