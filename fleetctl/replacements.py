"""Which input changes replace a resource instead of updating it, per resource type we use.

The offline plan knows inputs, not provider schemas, so ``fleetctl diff`` reads the
answer from this table. Each entry names its source: the Terraform AWS provider's
schema (``ForceNew`` / ``RequiresReplace``, which pulumi-aws bridges unchanged), the
``forceNew`` table of pulumi-kubernetes (``provider/pkg/provider/diff.go``), or the
AWS API reference. A type missing here is updated in place unless the resource's own
``replaceOnChanges`` option names the path.
"""

from __future__ import annotations

from dataclasses import dataclass

PROVIDER_PREFIX = "pulumi:providers:"


@dataclass(frozen=True)
class Forces:
    """A change of the input at ``path`` (dotted, plain keys) replaces the resource."""

    path: str
    source: str
    unless_provider_flag: str | None = None
    """A provider input that, when true, makes this path updatable in place."""


def _bucket_child(*extra: str) -> tuple[Forces, ...]:
    """The S3 bucket configuration resources are bound to one bucket for life."""
    return (
        Forces("bucket", "terraform-provider-aws: bucket is ForceNew (the configuration belongs to one bucket)"),
        *(Forces(path, "terraform-provider-aws: ForceNew") for path in extra),
    )


_KUBERNETES_SOURCE = "pulumi-kubernetes provider/pkg/provider/diff.go forceNew"

AWS_ANY = (Forces("region", "terraform-provider-aws v6 per-resource region: moving a resource is ForceNew"),)
"""Applies to every ``aws:`` type."""

KUBERNETES_ANY = (
    Forces("metadata.name", f"{_KUBERNETES_SOURCE}: .metadata.name"),
    Forces("metadata.namespace", f"{_KUBERNETES_SOURCE}: .metadata.namespace"),
)
"""Applies to every Kubernetes object type (``kubernetes:<group>/<version>:<Kind>``)."""

REPLACED_BY: dict[str, tuple[Forces, ...]] = {
    # Providers: a provider replaced replaces every resource it manages.
    "pulumi:providers:aws": (
        Forces("region", "pulumi-aws: a provider moved to another region manages other resources (replaced)"),
    ),
    "pulumi:providers:kubernetes": (
        Forces("clusterIdentifier", "pulumi-kubernetes DiffConfig: a new cluster identity replaces the provider"),
    ),
    # Global Accelerator (internal/service/globalaccelerator of terraform-provider-aws).
    "aws:globalaccelerator/endpointGroup:EndpointGroup": (
        Forces("listenerArn", "terraform-provider-aws aws_globalaccelerator_endpoint_group: listener_arn is ForceNew"),
        Forces(
            "endpointGroupRegion",
            "terraform-provider-aws aws_globalaccelerator_endpoint_group: endpoint_group_region is ForceNew",
        ),
    ),
    # IAM.
    "aws:iam/role:Role": (
        Forces("name", "terraform-provider-aws aws_iam_role: name is ForceNew"),
        Forces("namePrefix", "terraform-provider-aws aws_iam_role: name_prefix is ForceNew"),
        Forces("path", "terraform-provider-aws aws_iam_role: path is ForceNew"),
    ),
    "aws:iam/rolePolicy:RolePolicy": (
        Forces("name", "terraform-provider-aws aws_iam_role_policy: name is ForceNew"),
        Forces("namePrefix", "terraform-provider-aws aws_iam_role_policy: name_prefix is ForceNew"),
        Forces("role", "terraform-provider-aws aws_iam_role_policy: role is ForceNew"),
    ),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": (
        Forces("role", "terraform-provider-aws aws_iam_role_policy_attachment: role is ForceNew"),
        Forces("policyArn", "terraform-provider-aws aws_iam_role_policy_attachment: policy_arn is ForceNew"),
    ),
    # KMS.
    "aws:kms/key:Key": (
        Forces("customerMasterKeySpec", "terraform-provider-aws aws_kms_key: customer_master_key_spec is ForceNew"),
        Forces("keyUsage", "terraform-provider-aws aws_kms_key: key_usage is ForceNew"),
        Forces("multiRegion", "terraform-provider-aws aws_kms_key: multi_region is ForceNew"),
        Forces("customKeyStoreId", "terraform-provider-aws aws_kms_key: custom_key_store_id is ForceNew"),
        Forces("xksKeyId", "terraform-provider-aws aws_kms_key: xks_key_id is ForceNew"),
    ),
    "aws:kms/alias:Alias": (
        Forces("name", "terraform-provider-aws aws_kms_alias: name is ForceNew (target_key_id updates in place)"),
        Forces("namePrefix", "terraform-provider-aws aws_kms_alias: name_prefix is ForceNew"),
    ),
    # S3.
    "aws:s3/bucket:Bucket": (
        Forces("bucket", "terraform-provider-aws aws_s3_bucket: bucket is ForceNew (S3 never renames a bucket)"),
        Forces("bucketPrefix", "terraform-provider-aws aws_s3_bucket: bucket_prefix is ForceNew"),
        Forces("objectLockEnabled", "terraform-provider-aws aws_s3_bucket: object_lock_enabled is ForceNew"),
    ),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": _bucket_child("expectedBucketOwner"),
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": _bucket_child(),
    "aws:s3/bucketPolicy:BucketPolicy": _bucket_child(),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": _bucket_child(),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": _bucket_child(
        "expectedBucketOwner"
    ),
    "aws:s3/bucketVersioning:BucketVersioning": _bucket_child("expectedBucketOwner"),
    # EC2 and VPC. A launch template's other fields make a new version, not a new template.
    "aws:ec2/launchTemplate:LaunchTemplate": (
        Forces("name", "terraform-provider-aws aws_launch_template: name is ForceNew (other changes: new version)"),
        Forces("namePrefix", "terraform-provider-aws aws_launch_template: name_prefix is ForceNew"),
    ),
    "aws:ec2/placementGroup:PlacementGroup": (
        Forces("name", "terraform-provider-aws aws_placement_group: name is ForceNew"),
        Forces("strategy", "terraform-provider-aws aws_placement_group: strategy is ForceNew"),
        Forces("partitionCount", "terraform-provider-aws aws_placement_group: partition_count is ForceNew"),
        Forces("spreadLevel", "terraform-provider-aws aws_placement_group: spread_level is ForceNew"),
    ),
    "aws:ec2/securityGroup:SecurityGroup": (
        Forces("name", "terraform-provider-aws aws_security_group: name is ForceNew"),
        Forces("namePrefix", "terraform-provider-aws aws_security_group: name_prefix is ForceNew"),
        Forces("description", "EC2 CreateSecurityGroup: a group's description cannot be changed (ForceNew)"),
        Forces("vpcId", "EC2: a security group belongs to one VPC for life (vpc_id is ForceNew)"),
    ),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": (
        Forces("securityGroupId", "terraform-provider-aws aws_vpc_security_group_ingress_rule: RequiresReplace"),
    ),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": (
        Forces("securityGroupId", "terraform-provider-aws aws_vpc_security_group_egress_rule: RequiresReplace"),
    ),
    # New zones or subnet specs add (and may re-lay) subnets inside the component, which an
    # offline plan cannot see; the cluster's subnet change is what flags them.
    "awsx:ec2:Vpc": (Forces("cidrBlock", "terraform-provider-aws aws_vpc: cidr_block is ForceNew"),),
    # EKS.
    "eks:index:Cluster": (
        Forces("name", "terraform-provider-aws aws_eks_cluster: name is ForceNew"),
        Forces("vpcId", "EKS: a cluster stays in the VPC it was created in"),
        # UpdateClusterConfig moves the control plane only within the zones it was created
        # in (aws/containers-roadmap#2330); our subnets change when the zones change.
        Forces("subnetIds", "EKS: control-plane subnets in new zones need a new cluster (containers-roadmap#2330)"),
        Forces("privateSubnetIds", "EKS: control-plane subnets in new zones need a new cluster"),
        Forces("publicSubnetIds", "EKS: control-plane subnets in new zones need a new cluster"),
        Forces("serviceRole", "terraform-provider-aws aws_eks_cluster: role_arn is ForceNew"),
        Forces("kubernetesServiceIpAddressRange", "terraform-provider-aws aws_eks_cluster: service_ipv4_cidr ForceNew"),
        Forces("ipFamily", "terraform-provider-aws aws_eks_cluster: ip_family is ForceNew"),
        Forces("bootstrapSelfManagedAddons", "terraform-provider-aws aws_eks_cluster: ForceNew"),
    ),
    "eks:index:ManagedNodeGroup": (
        Forces("nodeGroupName", "terraform-provider-aws aws_eks_node_group: node_group_name is ForceNew"),
        Forces("nodeGroupNamePrefix", "terraform-provider-aws aws_eks_node_group: node_group_name_prefix ForceNew"),
        Forces("cluster", "terraform-provider-aws aws_eks_node_group: cluster_name is ForceNew"),
        Forces("clusterName", "terraform-provider-aws aws_eks_node_group: cluster_name is ForceNew"),
        Forces("subnetIds", "terraform-provider-aws aws_eks_node_group: subnet_ids is ForceNew"),
        Forces("amiType", "terraform-provider-aws aws_eks_node_group: ami_type is ForceNew"),
        Forces("capacityType", "terraform-provider-aws aws_eks_node_group: capacity_type is ForceNew"),
        Forces("instanceTypes", "terraform-provider-aws aws_eks_node_group: instance_types is ForceNew"),
        Forces("diskSize", "terraform-provider-aws aws_eks_node_group: disk_size is ForceNew"),
        Forces("nodeRole", "terraform-provider-aws aws_eks_node_group: node_role_arn is ForceNew"),
        Forces("nodeRoleArn", "terraform-provider-aws aws_eks_node_group: node_role_arn is ForceNew"),
        Forces("remoteAccess", "terraform-provider-aws aws_eks_node_group: remote_access is ForceNew"),
        Forces("launchTemplate.id", "terraform-provider-aws aws_eks_node_group: launch_template.id is ForceNew"),
        Forces("launchTemplate.name", "terraform-provider-aws aws_eks_node_group: launch_template.name ForceNew"),
    ),
    "aws:eks/addon:Addon": (
        Forces("clusterName", "terraform-provider-aws aws_eks_addon: cluster_name is ForceNew"),
        Forces("addonName", "terraform-provider-aws aws_eks_addon: addon_name is ForceNew"),
    ),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": (
        Forces("clusterName", "terraform-provider-aws aws_eks_pod_identity_association: RequiresReplace"),
        Forces("namespace", "terraform-provider-aws aws_eks_pod_identity_association: RequiresReplace"),
        Forces("serviceAccount", "terraform-provider-aws aws_eks_pod_identity_association: RequiresReplace"),
    ),
    # Helm and Kubernetes (besides metadata.name and metadata.namespace, above).
    "kubernetes:helm.sh/v3:Release": (
        Forces("name", "pulumi-kubernetes helm_release.go: forceNewFields .name"),
        Forces("namespace", "pulumi-kubernetes helm_release.go: forceNewFields .namespace"),
    ),
    "kubernetes:apps/v1:Deployment": (Forces("spec.selector", f"{_KUBERNETES_SOURCE}: apps/v1 Deployment"),),
    "kubernetes:apps/v1:StatefulSet": (
        Forces("spec.selector", f"{_KUBERNETES_SOURCE}: apps/v1 StatefulSet"),
        Forces("spec.serviceName", f"{_KUBERNETES_SOURCE}: apps/v1 StatefulSet"),
        Forces("spec.volumeClaimTemplates", f"{_KUBERNETES_SOURCE}: apps/v1 StatefulSet"),
        Forces("spec.podManagementPolicy", f"{_KUBERNETES_SOURCE}: apps/v1 StatefulSet"),
        Forces("spec.revisionHistoryLimit", f"{_KUBERNETES_SOURCE}: apps/v1 StatefulSet"),
    ),
    "kubernetes:core/v1:Service": (Forces("spec.clusterIP", f"{_KUBERNETES_SOURCE}: core/v1 Service"),),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": (
        Forces("roleRef", f"{_KUBERNETES_SOURCE}: rbac/v1 RoleBinding"),
    ),
    "kubernetes:core/v1:ConfigMap": (
        Forces("data", f"{_KUBERNETES_SOURCE}: core/v1 ConfigMap", unless_provider_flag="enableConfigMapMutable"),
        Forces("binaryData", f"{_KUBERNETES_SOURCE}: core/v1 ConfigMap", unless_provider_flag="enableConfigMapMutable"),
    ),
    "kubernetes:core/v1:Secret": (
        Forces("type", f"{_KUBERNETES_SOURCE}: core/v1 Secret"),
        Forces("data", f"{_KUBERNETES_SOURCE}: core/v1 Secret"),
        Forces("stringData", f"{_KUBERNETES_SOURCE}: core/v1 Secret"),
    ),
    # policy/v1 PodDisruptionBudget, keda.sh/v1alpha1 ScaledObject (a custom resource), networking.k8s.io/v1
    # Ingress, core/v1 Namespace and ServiceAccount: only metadata.name and metadata.namespace.
}


def is_kubernetes_object(resource_type: str) -> bool:
    return resource_type.startswith("kubernetes:") and not resource_type.startswith("kubernetes:helm.sh/")


def replacement_rules(resource_type: str) -> tuple[Forces, ...]:
    """Every table entry that applies to ``resource_type``."""
    shared: tuple[Forces, ...] = ()
    if resource_type.startswith("aws:"):
        shared = AWS_ANY
    elif is_kubernetes_object(resource_type):
        shared = KUBERNETES_ANY
    return shared + REPLACED_BY.get(resource_type, ())


# What an in-place update does, for the verdict.

STATEFUL_TYPES = frozenset(
    {
        "aws:s3/bucket:Bucket",  # the data
        "aws:kms/key:Key",  # a new key cannot read what the old one encrypted
        "aws:kms/alias:Alias",  # what the bucket's encryption and its readers name
        "eks:index:Cluster",  # every workload of the region runs on it
        "aws:eks/cluster:Cluster",
        "awsx:ec2:Vpc",  # everything of the region sits in it
        "kubernetes:core/v1:PersistentVolumeClaim",
    }
)
"""Replaced, these lose data or take a region down, protected or not."""

NEW_GENERATION: dict[str, tuple[str, ...]] = {
    # EKS UpdateNodegroupVersion (launch template version, release or Kubernetes version)
    # replaces every node of the group, draining it; scaling, labels and taints do not.
    "eks:index:ManagedNodeGroup": (
        "launchTemplate",
        "version",
        "releaseVersion",
        "amiId",
        "userData",
        "kubeletExtraArgs",
        "bootstrapExtraArgs",
        "nodeadmExtraOptions",
        "bottlerocketSettings",
    ),
    # Every change of a launch template but its tags is a new template version, which the
    # node groups that follow it roll out node by node.
    "aws:ec2/launchTemplate:LaunchTemplate": ("*",),
}
NEW_GENERATION_EXEMPT: dict[str, tuple[str, ...]] = {
    "aws:ec2/launchTemplate:LaunchTemplate": ("tags", "tagsAll", "defaultVersion", "updateDefaultVersion"),
}

ROLLING_RESTART: dict[str, tuple[str, ...]] = {
    # A changed pod template rolls the workload's pods (Deployment and StatefulSet controllers).
    "kubernetes:apps/v1:Deployment": ("spec.template",),
    "kubernetes:apps/v1:StatefulSet": ("spec.template",),
    "kubernetes:apps/v1:DaemonSet": ("spec.template",),
    # A changed group template rolls the groups (LeaderWorkerSet v0.10.0 rolloutStrategy RollingUpdate).
    "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet": ("spec.leaderWorkerTemplate",),
}

NO_SURGE: frozenset[str] = frozenset({"kubernetes:apps/v1:StatefulSet"})
"""Workloads whose roll stops a pod before it starts its replacement: the StatefulSet controller's
RollingUpdate has no maxSurge (Kubernetes apps/v1 RollingUpdateStatefulSetStrategy: partition and
maxUnavailable only), so with one replica the roll leaves none serving until the new pod is ready."""

TRAFFIC_ONLY: dict[str, tuple[str, ...]] = {
    # The load balancer controller reads a route's target groups and weights from its
    # forward action annotation (components/render/route.py).
    "kubernetes:networking.k8s.io/v1:Ingress": ('metadata.annotations["alb.ingress.kubernetes.io/actions.*"]',),
    # A region's share of the global address (components/platform/global_front.py): the endpoint
    # group's traffic dial and its ALB's weight, updated in place (UpdateEndpointGroup).
    "aws:globalaccelerator/endpointGroup:EndpointGroup": (
        "trafficDialPercentage",
        "endpointConfigurations[*].weight",
    ),
}
"""An update touching only these paths moves traffic and nothing else."""
