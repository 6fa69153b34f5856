"""The region's EKS cluster (pulumi-eks), its node IAM role and the Kubernetes provider workloads use."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components import naming
from components.spec.region import ClusterAccess

# Every control-plane log stream, to CloudWatch.
CONTROL_PLANE_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]

# Managed policies every EKS worker node needs (EKS user guide, "Amazon EKS node IAM role").
NODE_POLICIES = ["AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly"]

# The EKS access policy of a Kubernetes cluster-admin (EKS user guide, "Review access policy permissions").
CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
CLUSTER_ADMIN_ASSOCIATION = "cluster-admin"

# Where pulumi-eks kept the admins' entries when they were its `accessEntries` (until this
# program created them itself): children of its cluster component named `<component>-<key>`, each
# association a child of its entry named `<component>-<key>-<association>` (createAccessEntries,
# nodejs/eks/cluster/authenticationMode.ts of pulumi/pulumi-eks). Aliases to those URNs let a
# deployed stack adopt its entries in place instead of creating a second entry for a principal.
ACCESS_ENTRY_TYPE = "aws:eks/accessEntry:AccessEntry"


@dataclass(frozen=True)
class EksClusterArgs:
    stack: str
    region: str
    kubernetes_version: str
    vpc_id: pulumi.Input[str]
    private_subnet_ids: pulumi.Input[Sequence[str]]
    public_subnet_ids: pulumi.Input[Sequence[str]]
    protect: bool
    access: ClusterAccess


def ec2_trust_policy() -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }


def cluster_admin_policy_arn(region: str) -> str:
    return f"arn:{naming.aws_partition(region)}:eks::aws:cluster-access-policy/{CLUSTER_ADMIN_POLICY}"


def kubernetes_provider(
    region: str, kubeconfig: pulumi.Input[str], parent: pulumi.Resource, context: str | None = None
) -> k8s.Provider:
    """The provider of every Kubernetes object of ``region``, a child of ``parent``: server-side apply,
    and ConfigMaps edited in place (mooncake.json is; the checksum on the pod templates rolls its readers)."""
    return k8s.Provider(
        naming.platform_name(region, "kubernetes"),
        kubeconfig=kubeconfig,
        context=context,
        enable_server_side_apply=True,
        enable_config_map_mutable=True,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def server_of(kubeconfig: Any) -> str:
    """The API server URL written in a kubeconfig object."""
    return str(kubeconfig["clusters"][0]["cluster"]["server"])


class EksCluster(pulumi.ComponentResource):
    name: str
    """The cluster's AWS name, known before deployment."""
    cluster_name: pulumi.Output[str]
    """The same name as an output that resolves once the cluster exists: use it as an input of
    resources that need the cluster (pod identity associations, add-ons)."""
    cluster: eks.Cluster
    node_role: aws.iam.Role
    kubeconfig: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    kubernetes: k8s.Provider
    """The provider every Kubernetes object of the region is registered with."""

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:EksCluster", name, None, opts)
        region = args.region
        child = pulumi.ResourceOptions(parent=self)
        self.name = naming.cluster_name(args.stack, region)

        self.node_role = aws.iam.Role(
            naming.platform_name(region, "node-role"),
            assume_role_policy=json.dumps(ec2_trust_policy()),
            description=f"EKS nodes of {self.name}",
            opts=child,
        )
        partition = naming.aws_partition(region)
        for policy in NODE_POLICIES:
            aws.iam.RolePolicyAttachment(
                naming.platform_name(region, "node-role", policy),
                role=self.node_role.name,
                policy_arn=f"arn:{partition}:iam::aws:policy/{policy}",
                opts=child,
            )

        eks_name = naming.platform_name(region, "eks")
        self.cluster = eks.Cluster(
            eks_name,
            name=self.name,
            version=args.kubernetes_version,
            vpc_id=args.vpc_id,
            private_subnet_ids=args.private_subnet_ids,
            public_subnet_ids=args.public_subnet_ids,
            # Access entries only. pulumi-eks also sets bootstrapClusterCreatorAdminPermissions, so whoever
            # creates the cluster gets an access entry with cluster-admin from EKS, outside Pulumi's state.
            # The admins' entries are not given here (pulumi-eks would make them children of this
            # protected component, and so protected): see _admin_access.
            authentication_mode=eks.AuthenticationMode.API,
            # Nodes and pods always reach the API inside the VPC; from outside only the listed CIDRs do,
            # and with none listed there is no public endpoint at all.
            endpoint_private_access=True,
            endpoint_public_access=bool(args.access.public_access_cidrs),
            public_access_cidrs=list(args.access.public_access_cidrs) or None,
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type="STANDARD"),
            enabled_cluster_log_types=CONTROL_PLANE_LOGS,
            skip_default_node_group=True,
            # Managed node groups only: the EKS-created cluster security group is all we need.
            skip_default_security_groups=True,
            # CoreDNS is added by the platform once a node group exists (it never becomes
            # healthy without nodes: pulumi-eks issues #1819, #1525).
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            # The VPC CNI's network policy agent enforces the NetworkPolicies of Mooncake endpoints.
            vpc_cni_options=eks.VpcCniOptionsArgs(enable_network_policy=True),
            deletion_protection=args.protect,
            # The kubeconfig runs `aws eks get-token` with the deployer's default credentials.
            provider_credential_opts=eks.KubeconfigOptionsArgs(),
            opts=pulumi.ResourceOptions(parent=self, protect=args.protect),
        )
        self.cluster_name = self.cluster.urn.apply(lambda _: self.name)
        for arn in args.access.admins:
            self._admin_access(region, arn, eks_name)
        self.kubeconfig = pulumi.Output.secret(self.cluster.kubeconfig_json)
        self.endpoint = self.cluster.kubeconfig.apply(server_of)
        self.cluster_security_group_id = self.cluster.cluster_security_group_id
        self.kubernetes = kubernetes_provider(region, self.kubeconfig, self)
        self.register_outputs({"name": self.name, "endpoint": self.endpoint, "kubeconfig": self.kubeconfig})

    def _admin_access(self, region: str, principal_arn: str, eks_name: str) -> None:
        """A STANDARD access entry for ``principal_arn`` with cluster-admin over the whole cluster.

        Children of this component, not of the pulumi-eks cluster: an entry holds no data, so it is
        never protected, and removing an admin from a protected region deletes its entry and
        association. Named by ``naming.access_entry_key``, so other admins coming and going never
        rename them.
        """
        legacy = f"{eks_name}-{naming.access_entry_key(principal_arn)}"
        entry = aws.eks.AccessEntry(
            naming.access_entry_name(region, principal_arn),
            cluster_name=self.cluster_name,
            principal_arn=principal_arn,
            type="STANDARD",
            opts=pulumi.ResourceOptions(
                parent=self, protect=False, aliases=[pulumi.Alias(name=legacy, parent=self.cluster)]
            ),
        )
        aws.eks.AccessPolicyAssociation(
            naming.access_policy_association_name(region, principal_arn, CLUSTER_ADMIN_ASSOCIATION),
            cluster_name=self.cluster_name,
            principal_arn=principal_arn,
            policy_arn=cluster_admin_policy_arn(region),
            access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=False,
                # EKS associates policies with an existing entry only, and deletes them first.
                depends_on=[entry],
                aliases=[
                    pulumi.Alias(
                        name=f"{legacy}-{CLUSTER_ADMIN_ASSOCIATION}",
                        parent=pulumi.create_urn(legacy, ACCESS_ENTRY_TYPE, parent=self.cluster),
                    )
                ],
            ),
        )
