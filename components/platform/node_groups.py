"""Managed node groups of a region: ``GpuNodeGroup`` (also fit for CPU groups) and ``EfaNodeGroup``.

Both build their own launch template (IMDSv2, encrypted root volume, tags on what
it launches, Capacity Block targeting, the node's own configuration in its user
data) under a ``pulumi_eks.ManagedNodeGroup`` on the cluster's Kubernetes version,
whose size Cluster Autoscaler owns after creation, and tag its Auto Scaling group
with what a node offers while the group has none; the EFA group adds its network
interfaces, a cluster placement group, a self-referencing security group and one
availability zone (docs/design.md, decision 7). The AWS provider is inherited from the
parent (``RegionalPlatform``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from components import naming, scheduling
from components.catalog import InstanceType
from components.platform.autoscaler import (
    TEMPLATE_PREFIX,
    autoscaler_node_labels,
    autoscaling_group_name,
    node_template_tags,
)
from components.platform.efa import check_instance_facts, efa_network_interfaces
from components.platform.user_data import node_user_data
from components.scheduling import eks_capacity_type
from components.spec.region import NodeGroup

# Root volume sizes. Accelerator nodes pull inference images of 10-20 GB (CUDA,
# NCCL, vLLM) and containerd keeps the packed and the unpacked layers, so the
# 20 GiB EKS default fills up on the first pull. CPU nodes run the Mooncake proxy of
# every split Mooncake endpoint, from the endpoint's full vLLM image (10+ GB compressed,
# about 35 GB on disk packed plus unpacked; the store masters run Mooncake's own slim
# image): 150 GiB holds three such images (two endpoints' images, or one image and its
# successor during a rollout) with the system images, and stays under the kubelet's
# 85 % image GC threshold. Types with instance store keep images on the local NVMe instead
# (user_data.py); the root volume is sized for types without.
ACCELERATOR_ROOT_VOLUME_GIB = 200
CPU_ROOT_VOLUME_GIB = 150
ROOT_DEVICE_NAME = "/dev/xvda"
"""The root device of the AL2023 EKS AMIs (standard, NVIDIA and Neuron)."""

# Pods on the pod network are one hop further from IMDS than the node, so a limit of 1
# keeps IMDSv2 tokens, and with them the node role's credentials, away from every pod
# (EKS best practices guide, "Restrict access to the instance profile assigned to the
# worker node"; the EKS default for AL2023 managed node groups). Nothing of ours needs
# IMDS from the pod network: the load balancer controller is given its region and VPC
# id, the VPC CNI, the Pod Identity agent and the EFA device plugin run with
# hostNetwork, the NVIDIA device plugin only talks to the kubelet, and inference pods
# take AWS credentials from Pod Identity and AWS_REGION from their spec.
IMDS_HOP_LIMIT = 1

NODE_GROUP_TAG = "inference-fleet:node-group"
LAUNCHED_RESOURCE_TYPES = ("instance", "volume", "network-interface")
"""What the launch template tags: provider default_tags do not reach resources EC2 launches."""


@dataclass(frozen=True)
class NodeGroupArgs:
    stack: str
    region: str
    group_name: str
    """The node group's key in the region's spec."""
    spec: NodeGroup
    facts: InstanceType
    """Catalog facts of ``spec.instance_types[0]`` (the spec requires all types of a group to agree)."""
    cluster: eks.Cluster
    node_role: aws.iam.Role
    vpc_id: pulumi.Input[str]
    subnet_ids: pulumi.Input[Sequence[str]]
    """The region's private subnets."""
    cluster_security_group_id: pulumi.Input[str]
    """The EKS-created cluster security group; EFA interfaces must carry it themselves."""
    kubernetes_version: str
    """The cluster's version: nodes follow the control plane when it changes (docs/upgrades.md)."""


# Pure helpers.


def root_volume_gib(facts: InstanceType) -> int:
    return ACCELERATOR_ROOT_VOLUME_GIB if facts.accelerators > 0 else CPU_ROOT_VOLUME_GIB


def launched_resource_tags(stack: str, aws_name: str, group_name: str) -> dict[str, str]:
    return {**naming.aws_tags(stack), "Name": aws_name, NODE_GROUP_TAG: group_name}


def subnet_filters(vpc_id: str, zone: str, subnet_ids: Sequence[str]) -> list[aws.ec2.GetSubnetsFilterArgsDict]:
    """The region's private subnets that lie in ``zone``."""
    return [
        {"name": "vpc-id", "values": [vpc_id]},
        {"name": "availability-zone", "values": [zone]},
        {"name": "subnet-id", "values": list(subnet_ids)},
    ]


def zone_subnet_ids(group_name: str, zone: str, found: Sequence[str]) -> list[str]:
    if not found:
        raise ValueError(
            f"node group {group_name!r}: the region has no private subnet in availability zone {zone!r}; "
            "pick a zone of the VPC or add a private subnet there"
        )
    return sorted(found)


def efa_description(instance_type: str, interfaces: int) -> str:
    return f"{instance_type}: {interfaces} EFA interfaces (catalog checked against EC2)"


def node_labels(group_name: str, spec: NodeGroup, facts: InstanceType) -> dict[str, str]:
    """The scheduling vocabulary's labels, plus the GPU label Cluster Autoscaler reads."""
    return {**scheduling.node_labels(group_name, spec.efa, facts), **autoscaler_node_labels(facts)}


# Children both components share.


def _group_subnet_ids(parent: pulumi.Resource, args: NodeGroupArgs) -> pulumi.Input[Sequence[str]]:
    """All private subnets, or only the pinned zone's (EFA and Capacity Blocks live in one zone)."""
    zone = args.spec.availability_zone
    if zone is None:
        return args.subnet_ids
    filters = pulumi.Output.all(vpc_id=args.vpc_id, subnet_ids=args.subnet_ids).apply(
        lambda values: subnet_filters(values["vpc_id"], zone, values["subnet_ids"])
    )
    found = aws.ec2.get_subnets_output(filters=filters, opts=pulumi.InvokeOutputOptions(parent=parent))
    return found.ids.apply(lambda ids: zone_subnet_ids(args.group_name, zone, ids))


def _launch_template(
    parent: pulumi.Resource,
    args: NodeGroupArgs,
    *,
    description: pulumi.Input[str] | None = None,
    network_interfaces: Sequence[aws.ec2.LaunchTemplateNetworkInterfaceArgsDict] | None = None,
    placement: aws.ec2.LaunchTemplatePlacementArgs | None = None,
) -> aws.ec2.LaunchTemplate:
    aws_name = naming.node_group_name(args.stack, args.region, args.group_name)
    tags = launched_resource_tags(args.stack, aws_name, args.group_name)
    market: aws.ec2.LaunchTemplateInstanceMarketOptionsArgs | None = None
    reservation: aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs | None = None
    if args.spec.capacity_type == "capacity-block":
        # https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html
        market = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
        reservation = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=args.spec.capacity_reservation_id
            )
        )
    return aws.ec2.LaunchTemplate(
        naming.platform_name(args.region, args.group_name, "lt"),
        description=description,
        user_data=node_user_data(args.facts.instance_store_gib, args.spec.hugepages_bytes),
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=IMDS_HOP_LIMIT
        ),
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=ROOT_DEVICE_NAME,
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=root_volume_gib(args.facts),
                    volume_type="gp3",
                    encrypted="true",
                    delete_on_termination="true",
                ),
            )
        ],
        network_interfaces=network_interfaces,
        placement=placement,
        instance_market_options=market,
        capacity_reservation_specification=reservation,
        tag_specifications=[
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags)
            for kind in LAUNCHED_RESOURCE_TYPES
        ],
        opts=pulumi.ResourceOptions(parent=parent),
    )


def _managed_node_group(
    parent: pulumi.Resource,
    args: NodeGroupArgs,
    launch_template: aws.ec2.LaunchTemplate,
    depends_on: Sequence[pulumi.Resource] = (),
) -> pulumi.Output[str]:
    """Create the EKS managed node group and its Auto Scaling group's tags; return its AWS name."""
    aws_name = naming.node_group_name(args.stack, args.region, args.group_name)
    spec = args.spec
    group = eks.ManagedNodeGroup(
        naming.platform_name(args.region, args.group_name),
        cluster=args.cluster,
        node_role=args.node_role,
        node_group_name=aws_name,
        instance_types=list(spec.instance_types),
        ami_type=args.facts.ami_type,
        # pulumi-eks defaults version to the cluster's only without a launch template and forwards
        # ours otherwise (pulumi/pulumi-eks v4.3.0 nodejs/eks/nodes/nodegroup.ts createManagedNodeGroup,
        # unchanged on main at 7bf0c1b; the mirror has no v4.4.0 tag). EKS takes a version with a
        # launch template that names no AMI, as ours (awsdocs/amazon-eks-user-guide
        # latest/ug/nodes/launch-templates.adoc, "Limits and conditions when specifying an AMI ID"),
        # and rolls the nodes to that version's AMI.
        version=args.kubernetes_version,
        capacity_type=eks_capacity_type(spec.capacity_type),
        scaling_config=aws.eks.NodeGroupScalingConfigArgs(
            min_size=spec.created_size("min_size"),
            max_size=spec.max_size,
            desired_size=spec.created_size("desired_size"),
        ),
        # Cluster Autoscaler owns the desired size once the group exists: pulumi-eks then creates
        # its aws.eks.NodeGroup with ignoreChanges ["scalingConfig.desiredSize"] (same file and
        # tags), so desired_size is the size at creation and min/max stay Pulumi's.
        ignore_scaling_changes=True,
        labels=node_labels(args.group_name, spec, args.facts),
        taints=[
            aws.eks.NodeGroupTaintArgs(key=taint.key, value=taint.value, effect=taint.eks_effect)
            for taint in scheduling.node_taints(spec.efa, args.facts)
        ],
        launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
            id=launch_template.id, version=launch_template.latest_version.apply(str)
        ),
        subnet_ids=_group_subnet_ids(parent, args),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)),
    )
    _scale_from_zero_tags(parent, args, group)
    # The AWS name is the one we set; deriving it from the group's URN makes
    # whoever uses it (add-ons that need nodes) wait for the node group.
    return group.urn.apply(lambda _: aws_name)


def _scale_from_zero_tags(parent: pulumi.Resource, args: NodeGroupArgs, group: eks.ManagedNodeGroup) -> None:
    """One ``aws.autoscaling.Tag`` per node template tag, on the Auto Scaling group EKS made for the
    group. Not propagated: they describe nodes to Cluster Autoscaler, instances need none of them."""
    resources: pulumi.Output[Sequence[aws.eks.outputs.NodeGroupResource]] = group.node_group.apply(
        lambda node_group: node_group.resources
    )
    asg_name = resources.apply(autoscaling_group_name)
    for key, value in node_template_tags(args.group_name, args.spec, args.facts).items():
        aws.autoscaling.Tag(
            naming.platform_name(args.region, args.group_name, "ca", key.removeprefix(TEMPLATE_PREFIX)),
            autoscaling_group_name=asg_name,
            tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
            opts=pulumi.ResourceOptions(parent=parent),
        )


class GpuNodeGroup(pulumi.ComponentResource):
    """A managed node group without EFA: GPU, Neuron or CPU nodes from our launch template."""

    node_group_name: pulumi.Output[str]
    """The managed node group's AWS name."""

    def __init__(self, name: str, args: NodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:GpuNodeGroup", name, None, opts)
        if args.spec.efa:
            raise ValueError(f"node group {args.group_name!r} has efa: true; build it with EfaNodeGroup")
        launch_template = _launch_template(self, args)
        self.node_group_name = _managed_node_group(self, args, launch_template)
        self.register_outputs({"node_group_name": self.node_group_name})


class EfaNodeGroup(pulumi.ComponentResource):
    """A managed node group whose nodes talk EFA to each other: every network card, one zone, one placement group."""

    node_group_name: pulumi.Output[str]
    """The managed node group's AWS name."""
    placement_group_name: pulumi.Output[str]
    """The cluster placement group every node launches into."""

    def __init__(self, name: str, args: NodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:EfaNodeGroup", name, None, opts)
        if not args.spec.efa:
            raise ValueError(f"node group {args.group_name!r} has efa: false; build it with GpuNodeGroup")
        child = pulumi.ResourceOptions(parent=self)
        aws_name = naming.node_group_name(args.stack, args.region, args.group_name)
        instance_type = args.spec.instance_types[0]

        # The catalog sized the interface list; EC2 must agree before any node launches.
        reported = aws.ec2.get_instance_type_output(
            instance_type=instance_type, opts=pulumi.InvokeOutputOptions(parent=self)
        )
        checked = reported.apply(
            lambda facts: check_instance_facts(
                instance_type, args.facts, facts.efa_supported, facts.efa_maximum_interfaces
            )
        )

        placement_group = aws.ec2.PlacementGroup(
            naming.platform_name(args.region, args.group_name, "pg"),
            strategy="cluster",
            tags={"Name": aws_name},
            opts=child,
        )
        security_group = aws.ec2.SecurityGroup(
            naming.platform_name(args.region, args.group_name, "efa"),
            vpc_id=args.vpc_id,
            description="EFA: all traffic between the nodes of one node group",
            tags={"Name": f"{aws_name}-efa"},
            opts=child,
        )
        # EFA requires the interfaces' security group to allow all traffic to and from itself.
        # https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html
        ingress = aws.vpc.SecurityGroupIngressRule(
            naming.platform_name(args.region, args.group_name, "efa-from-self"),
            security_group_id=security_group.id,
            referenced_security_group_id=security_group.id,
            ip_protocol="-1",
            description="EFA: all traffic from the node group itself",
            opts=child,
        )
        egress = aws.vpc.SecurityGroupEgressRule(
            naming.platform_name(args.region, args.group_name, "efa-to-self"),
            security_group_id=security_group.id,
            referenced_security_group_id=security_group.id,
            ip_protocol="-1",
            description="EFA: all traffic to the node group itself",
            opts=child,
        )

        launch_template = _launch_template(
            self,
            args,
            description=checked.apply(lambda interfaces: efa_description(instance_type, interfaces)),
            network_interfaces=efa_network_interfaces(
                args.facts.efa_interfaces, [security_group.id, args.cluster_security_group_id]
            ),
            placement=aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group.name),
        )
        # Nodes launch only once their EFA traffic is allowed.
        self.node_group_name = _managed_node_group(self, args, launch_template, depends_on=[ingress, egress])
        self.placement_group_name = placement_group.name
        self.register_outputs(
            {"node_group_name": self.node_group_name, "placement_group_name": self.placement_group_name}
        )
