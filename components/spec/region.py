"""Section 0: a region of the stack (VPC, node groups, cold tier, ingress)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from components import naming
from components.catalog import pins
from components.scheduling import HUGEPAGE_2MI_BYTES, LIBFABRIC_HUGEPAGES_2MI_BYTES, Taint
from components.spec.base import DnsLabel, SpecModel, fail, items, looks_like
from components.spec.existing import (
    BucketName,
    ExistingCluster,
    KmsKeyArn,
    NodeLabels,
    NodeTaint,
    existing_region_rules,
)
from components.spec.metrics import Metrics
from components.spec.sizes import ByteSize

CapacityType = Literal["on-demand", "spot", "capacity-block"]

_VPC_ID = re.compile(r"^vpc-[0-9a-f]{8}([0-9a-f]{9})?$")
_SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8}([0-9a-f]{9})?$")
_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{17}$")
_ACM_ARN = re.compile(r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[A-Za-z0-9-]+$")
# An IAM role or user: its name (at most 64 characters) after an optional path, each made of the
# characters IAM allows in names. Names are unique in an account whatever their path.
_IAM_NAME = r"[A-Za-z0-9+=,.@_-]"
_IAM_PRINCIPAL = re.compile(
    rf"arn:aws[a-z-]*:iam::[0-9]{{12}}:(role|user)/(?P<path>({_IAM_NAME}+/)*){_IAM_NAME}{{1,64}}"
)
_ASSUMED_ROLE = re.compile(r"^arn:(?P<partition>aws[a-z-]*):sts::(?P<account>[0-9]{12}):assumed-role/(?P<role>[^/]+)/")
_SERVICE_LINKED_PATH = "aws-service-role/"


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.IPv4Network(value, strict=True))
    except ValueError:
        raise fail(
            "cidr", "must be an IPv4 CIDR block with no host bits set (e.g. 10.20.0.0/16), got {value!r}", value=value
        ) from None


def _iam_principal(value: str) -> str:
    session = _ASSUMED_ROLE.match(value)
    if session is not None:
        raise fail(
            "iam_principal",
            "is the ARN of an assumed-role session, which EKS cannot grant: give the role's own ARN, "
            "arn:{partition}:iam::{account}:role/{role} (with the role's path before its name, if it has one), "
            "got {value!r}",
            partition=session["partition"],
            account=session["account"],
            role=session["role"],
            value=value,
        )
    principal = _IAM_PRINCIPAL.fullmatch(value)
    if principal is None:
        raise fail(
            "iam_principal",
            "must be the ARN of an IAM role or user (arn:aws:iam::<12-digit account>:role/<name> or "
            "arn:aws:iam::<12-digit account>:user/<name>), got {value!r}",
            value=value,
        )
    if principal["path"].startswith(_SERVICE_LINKED_PATH):
        raise fail(
            "iam_principal",
            "is a service-linked role, which EKS access entries do not accept: give a role or user of your own, "
            "got {value!r}",
            value=value,
        )
    return value


Cidr = Annotated[str, AfterValidator(_cidr)]
IamPrincipalArn = Annotated[str, AfterValidator(_iam_principal)]
VpcId = Annotated[str, looks_like(_VPC_ID, "vpc-0123456789abcdef0")]
SubnetId = Annotated[str, looks_like(_SUBNET_ID, "subnet-0123456789abcdef0")]
ReservationId = Annotated[str, looks_like(_RESERVATION_ID, "cr-0123456789abcdef0")]
CertificateArn = Annotated[str, looks_like(_ACM_ARN, "arn:aws:acm:<region>:<account>:certificate/<id>")]


# A created VPC gives each zone a private /N+3 (pods take VPC addresses) and a public /N+6,
# at most /27 so that it holds a load balancer (components/platform/network.py subnet_masks);
# a /22's private subnets are /25: a few nodes' pods.
MIN_VPC_PREFIX = 16
MAX_VPC_PREFIX = 22


class Vpc(SpecModel):
    """Either the VPC to create (cidr + availability_zones) or an existing one (id + subnets)."""

    cidr: Cidr | None = Field(
        None, description="Create a VPC with this IPv4 CIDR (e.g. 10.20.0.0/16); subnets are carved from it."
    )
    availability_zones: tuple[str, ...] | None = items(
        "Zones of the created VPC (two to four; EKS needs two); one private and one public subnet each.",
        default=None,
        min_length=2,
        max_length=4,
    )
    id: VpcId | None = Field(None, description="Use this existing VPC instead of creating one.")
    private_subnet_ids: tuple[SubnetId, ...] | None = items(
        "Private subnets of the existing VPC, in at least two zones; nodes run here.", default=None, min_length=2
    )
    public_subnet_ids: tuple[SubnetId, ...] = items(
        "Public subnets of the existing VPC, for internet-facing load balancers; empty for internal-only.", default=()
    )

    def _rules(self) -> Iterator[PydanticCustomError]:
        creates = self.cidr is not None or self.availability_zones is not None
        adopts = self.id is not None or self.private_subnet_ids is not None or bool(self.public_subnet_ids)
        if creates and adopts:
            yield fail(
                "vpc_shape",
                "give either {{cidr, availability_zones}} to create a VPC or {{id, private_subnet_ids, "
                "public_subnet_ids}} to use an existing one, not both",
            )
        elif creates and (self.cidr is None or self.availability_zones is None):
            yield fail("vpc_shape", "a created VPC needs both cidr and availability_zones")
        elif adopts and (self.id is None or self.private_subnet_ids is None):
            yield fail("vpc_shape", "an existing VPC needs both id and private_subnet_ids")
        elif not creates and not adopts:
            yield fail(
                "vpc_shape",
                "is empty: give {{cidr, availability_zones}} to create a VPC or {{id, private_subnet_ids}} to use one",
            )
        if self.cidr is not None and not MIN_VPC_PREFIX <= int(self.cidr.split("/")[1]) <= MAX_VPC_PREFIX:
            yield fail(
                "vpc_size",
                "must be a /{low} to /{high} block (each zone gets a private /N+3 and a public /N+6 or /27 subnet), "
                "got {cidr!r}",
                at="cidr",
                low=MIN_VPC_PREFIX,
                high=MAX_VPC_PREFIX,
                cidr=self.cidr,
            )

    @property
    def creates(self) -> bool:
        return self.cidr is not None


MAX_GROUP_NODES = 10_000
"""Far above EKS's default quota of 450 nodes per managed node group, so only a typo reaches it; it keeps
the offline checks, which consider every node a group may have, bounded."""


class NodeGroup(SpecModel):
    instance_types: tuple[str, ...] = items(
        "EC2 instance types of the group (from config/instances.yaml); all must share GPUs, EFA and architecture.",
        min_length=1,
    )
    min_size: int | None = Field(
        None,
        ge=0,
        description="Fewest nodes (required where the program creates the group; not with existing_cluster).",
    )
    max_size: int = Field(
        ge=1,
        le=MAX_GROUP_NODES,
        description=(
            "Most nodes; the cluster autoscaler grows the group up to here, and the schedulability check places "
            "the stack's pods on this many. EKS's default quota is 450 nodes per managed node group (adjustable)."
        ),
    )
    desired_size: int | None = Field(
        None,
        ge=0,
        description="Nodes at creation; must lie within [min_size, max_size] (required where the program creates "
        "the group; not with existing_cluster).",
    )
    efa: bool = Field(
        False,
        description="EFA interfaces on every network card, a cluster placement group and one availability zone.",
    )
    availability_zone: str | None = Field(
        None, description="The one zone of the group; required when efa is true or capacity_type is capacity-block."
    )
    capacity_type: CapacityType = Field("on-demand", description="on-demand, spot or capacity-block.")
    capacity_reservation_id: ReservationId | None = Field(
        None, description="The Capacity Block reservation; required with, and only with, capacity-block."
    )
    hugepages_2mi: ByteSize | None = Field(
        None,
        description="2 MiB huge pages each node reserves at boot (byte size, whole pages; only with efa). "
        "Default 5120MiB, libfabric's share of one rdma pod; an rdma endpoint whose Mooncake store runs over "
        "rdma needs 5120MiB plus its ranks' store segments and buffers (the error names the amount). The "
        "reservation leaves the nodes' memory; changing it replaces the group's nodes (docs/efa.md).",
    )
    labels: NodeLabels = Field(
        default_factory=dict,
        description="Only with existing_cluster, and required there: labels every node of the existing group "
        "carries and no other group's nodes carry all of (e.g. eks.amazonaws.com/nodegroup: gpu); the pods "
        "placed on the group select them.",
    )
    taints: tuple[NodeTaint, ...] = items(
        "Only with existing_cluster: the taints the existing group's nodes carry, which its pods tolerate "
        "(a created group gets the program's own GPU and EFA taints).",
        default=(),
    )

    def _defaults(self) -> Self:
        if self.efa and self.hugepages_2mi is None:
            return self.model_copy(update={"hugepages_2mi": str(LIBFABRIC_HUGEPAGES_2MI_BYTES)})
        return self

    def _rules(self) -> Iterator[PydanticCustomError]:
        if (
            self.min_size is not None
            and self.desired_size is not None
            and not self.min_size <= self.desired_size <= self.max_size
        ):
            yield fail(
                "node_group_sizes",
                "min_size <= desired_size <= max_size must hold, got {min} <= {desired} <= {max}",
                min=self.min_size,
                desired=self.desired_size,
                max=self.max_size,
            )
        if self.capacity_type == "capacity-block" and self.capacity_reservation_id is None:
            yield fail(
                "capacity_block", "is required with capacity_type 'capacity-block'", at="capacity_reservation_id"
            )
        if self.capacity_type != "capacity-block" and self.capacity_reservation_id is not None:
            yield fail(
                "capacity_block",
                "is only used with capacity_type 'capacity-block', got capacity_type {kind!r}",
                at="capacity_reservation_id",
                kind=self.capacity_type,
            )
        if self.availability_zone is None and (self.efa or self.capacity_type == "capacity-block"):
            reason = "efa is true" if self.efa else "the capacity block lives in one zone"
            yield fail("node_group_zone", "is required because {reason}", at="availability_zone", reason=reason)
        if not self.efa and self.hugepages_2mi is not None:
            yield fail(
                "hugepages_without_efa",
                "is only used by efa groups (their rdma pods take huge pages); remove it or set efa to true",
                at="hugepages_2mi",
            )
        size = int(self.hugepages_2mi or 0)
        if self.efa and (size == 0 or size % HUGEPAGE_2MI_BYTES):
            yield fail(
                "hugepages_size",
                "must be a positive whole number of 2 MiB pages (e.g. 5120MiB), got {size} bytes",
                at="hugepages_2mi",
                size=size,
            )

    def created_size(self, size: Literal["min_size", "desired_size"]) -> int:
        """``min_size`` or ``desired_size`` of a group the program creates (validation requires both there)."""
        value: int | None = getattr(self, size)
        assert value is not None, f"a created node group has {size}"
        return value

    @property
    def described_taints(self) -> tuple[Taint, ...]:
        """The taints an existing group's nodes carry, as its description lists them."""
        return tuple(Taint(taint.key, taint.value, taint.effect) for taint in self.taints)

    @property
    def hugepages_bytes(self) -> int:
        """The 2 MiB huge pages each node reserves, in bytes: none without efa."""
        if self.hugepages_2mi is not None:
            return int(self.hugepages_2mi)
        return LIBFABRIC_HUGEPAGES_2MI_BYTES if self.efa else 0


class ColdTier(SpecModel):
    enabled: bool = Field(False, description="Provision the region's KV cold-tier bucket (endpoints opt in).")
    expiration_days: int = Field(
        30, ge=1, le=3650, description="KV objects are disposable: they expire after this many days."
    )
    protect: bool = Field(True, description="Protect the bucket from deletion by Pulumi.")
    retain_on_delete: bool = Field(True, description="Keep the bucket in AWS when it leaves the stack.")
    bucket: BucketName | None = Field(
        None,
        description="Only with existing_cluster (an EKS name), and required there: the existing bucket to use; "
        "the program creates none, so expiration_days, protect and retain_on_delete are the bucket owner's.",
    )
    kms_key_arn: KmsKeyArn | None = Field(
        None,
        description="Only with bucket, and required with it: the KMS key the bucket encrypts its objects with "
        "(SSE-KMS), which the pods that write the tier may use through S3 only.",
    )


class Ingress(SpecModel):
    scheme: Literal["internal", "internet-facing"] = Field(
        "internal", description="internal, or internet-facing (needs certificate_arn and allowed_cidrs)."
    )
    certificate_arn: CertificateArn | None = Field(None, description="ACM certificate for HTTPS on the shared ALB.")
    allowed_cidrs: tuple[Cidr, ...] = items("Client CIDRs allowed through an internet-facing ALB.", default=())

    def _rules(self) -> Iterator[PydanticCustomError]:
        if self.scheme == "internet-facing" and (self.certificate_arn is None or not self.allowed_cidrs):
            yield fail(
                "ingress_public",
                "scheme 'internet-facing' needs certificate_arn and a non-empty allowed_cidrs",
            )


class ClusterAccess(SpecModel):
    """Who may use the cluster's Kubernetes API, and from where its API endpoint answers."""

    admins: tuple[IamPrincipalArn, ...] = items(
        "IAM role or user ARNs given cluster-admin (AmazonEKSClusterAdminPolicy, whole cluster) through EKS "
        "access entries. Empty (the default): only the IAM principal that created the cluster is an admin.",
        default=(),
    )
    public_access_cidrs: tuple[Cidr, ...] = items(
        "IPv4 CIDRs that may reach the public API endpoint. Set, the endpoint's name resolves to the public "
        "addresses everywhere outside the VPC (a VPN or peered network too, unless it forwards DNS to the VPC's "
        "resolver), so a client outside the VPC gets in only from these. Empty (the default): no public endpoint, "
        "the name resolves to the private addresses and the API answers only inside the VPC and networks "
        "connected to it.",
        default=(),
    )
    private_access_cidrs: tuple[Cidr, ...] = items(
        "IPv4 CIDRs of networks connected to the VPC (a VPN, a peered or transit-gateway VPC, Direct Connect, "
        "or the VPC's own subnets where a runner runs) that may reach the private API endpoint: each becomes an "
        "HTTPS (443) ingress rule on the EKS cluster security group, which otherwise admits only the cluster's "
        "own nodes. With public_access_cidrs set, only clients that resolve the name to the private addresses use "
        "them: inside the VPC, or a network forwarding DNS to a Route 53 Resolver inbound endpoint in the VPC. A "
        "region without public_access_cidrs needs them and an existing vpc.id (docs/cluster-access.md).",
        default=(),
    )

    @property
    def private_only(self) -> bool:
        """No public endpoint: the API answers only to the VPC and the networks connected to it."""
        return not self.public_access_cidrs

    def _rules(self) -> Iterator[PydanticCustomError]:
        # IAM names are unique in an account whatever their case or path: one entry per principal.
        seen: set[str] = set()
        for index, arn in enumerate(self.admins):
            key = naming.access_entry_key(arn).lower()
            if key in seen:
                yield fail(
                    "cluster_access_repeat",
                    "names a principal already listed ({value!r}): list each role or user once",
                    at=f"admins[{index}]",
                    value=arn,
                )
            seen.add(key)
        for key in ("public_access_cidrs", "private_access_cidrs"):
            cidrs: tuple[str, ...] = getattr(self, key)
            for index, cidr in enumerate(cidrs):
                if cidr in cidrs[:index]:
                    yield fail(
                        "cluster_access_repeat",
                        "repeats {value!r}: list each CIDR once",
                        at=f"{key}[{index}]",
                        value=cidr,
                    )


def _kubernetes_version(value: str) -> str:
    supported = pins().kubernetes.supported_versions
    if value not in supported:
        raise fail(
            "kubernetes_version",
            "must be one of {supported} (a quoted string), got {value!r}",
            supported=", ".join(supported),
            value=value,
        )
    return value


class Region(SpecModel):
    protect: bool = Field(True, description="Protect the EKS cluster: Pulumi protect plus EKS deletion protection.")
    kubernetes_version: Annotated[str, AfterValidator(_kubernetes_version)] = Field(
        default_factory=lambda: pins().kubernetes.default_version,
        description="EKS Kubernetes version as a quoted string; defaults to the pinned version in config/pins.yaml.",
    )
    cluster_access: ClusterAccess = Field(
        default_factory=ClusterAccess,
        description="Admins of the cluster's Kubernetes API and who may reach its endpoint; by default only "
        "the cluster's creator, from inside the VPC.",
    )
    vpc: Vpc | None = Field(
        None, description="The VPC to create, or an existing one to use; required unless existing_cluster is given."
    )
    node_groups: dict[DnsLabel, NodeGroup] = Field(
        min_length=1,
        description="Managed node groups by name (with existing_cluster: the cluster's groups, described); at "
        "least one without GPUs for system pods.",
    )
    cold_tier: ColdTier = Field(default_factory=ColdTier, description="The region's KV cold-tier bucket.")
    ingress: Ingress = Field(default_factory=Ingress, description="The shared ALB every endpoint route uses.")
    metrics: Metrics = Field(
        default_factory=Metrics, description="The region's metrics pipeline, which autoscalers and dashboards read."
    )
    existing_cluster: ExistingCluster | None = Field(
        None,
        description="Run the region's endpoints on a cluster that exists already (docs/existing-cluster.md): "
        "no VPC, cluster, node groups or cold-tier bucket are created, node_groups describe the cluster's nodes.",
    )

    def _rules(self) -> Iterator[PydanticCustomError]:
        if self.existing_cluster is None:
            yield from self._created_rules()
        else:
            yield from existing_region_rules(self, self.existing_cluster)

    def _created_rules(self) -> Iterator[PydanticCustomError]:
        if self.vpc is None:
            yield fail(
                "vpc_required",
                "is required: give {{cidr, availability_zones}} to create a VPC or {{id, private_subnet_ids}} to "
                "use one, or existing_cluster to run on a cluster that exists",
                at="vpc",
            )
        else:
            yield from api_path_problems(self.cluster_access, self.vpc)
        for name, group in self.node_groups.items():
            for size in ("min_size", "desired_size"):
                if getattr(group, size) is None:
                    yield fail("node_group_size_required", "is required", at=f"node_groups.{name}.{size}")
            for described in ("labels", "taints"):
                if getattr(group, described):
                    yield fail(
                        "node_group_described",
                        "only describes the nodes of an existing_cluster; the program labels and taints the nodes "
                        "of the groups it creates itself: remove it",
                        at=f"node_groups.{name}.{described}",
                    )
        for named in ("bucket", "kms_key_arn"):
            if getattr(self.cold_tier, named) is not None:
                yield fail(
                    "cold_tier_named",
                    "names an existing bucket, only used with existing_cluster: the program creates this region's "
                    "bucket itself; remove it",
                    at=f"cold_tier.{named}",
                )

    @property
    def existing(self) -> bool:
        """The region's cluster exists already: the program registers only the Kubernetes half there."""
        return self.existing_cluster is not None

    @property
    def created_vpc(self) -> Vpc:
        """The VPC of a region whose cluster the program creates (validation requires it there)."""
        assert self.vpc is not None, "a region the program creates has a vpc"
        return self.vpc

    def applies_crds(self, addon: str) -> bool:
        """Whether the program applies ``addon``'s CRDs (installed, or ``crds`` on an existing cluster)."""
        return self.existing_cluster is None or self.existing_cluster.addons.applies_crds(addon)

    def installs(self, addon: str) -> bool:
        """Whether the program installs ``addon`` (a field of Addons): everywhere it creates the
        cluster, and with existing_cluster where the add-on is not present."""
        return self.existing_cluster is None or self.existing_cluster.addons.installs(addon)


def api_path_problems(access: ClusterAccess, vpc: Vpc) -> Iterator[PydanticCustomError]:
    """Whether the machine that runs `pulumi up` can reach the cluster's API on the first run.

    The same run that creates the cluster creates its Kubernetes objects, through the API endpoint
    (the kubeconfig's server). pulumi-eks waits for ``/healthz`` only when the endpoint is public
    (pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts createCore, ``!isDryRun() &&
    args.endpointPublicAccess``, v4.3.0 and main at 7bf0c1b), and with ``skipDefaultSecurityGroups``
    the only security group on the endpoint's interfaces is the one EKS creates, which admits only
    itself (clusterSecurityGroupId falls back to ``cluster.vpcConfig.clusterSecurityGroupId``, same
    file). So a private-only endpoint answers the runner only from a network already connected to
    the VPC and listed in ``private_access_cidrs``; a VPC this stack creates is connected to nothing
    when its cluster comes up.
    """
    if not access.private_only:
        return
    if vpc.creates:
        yield fail(
            "cluster_api_unreachable",
            "is empty while the VPC is created by this stack: no network reaches a new VPC on the first "
            "`pulumi up`, so its private-only API endpoint would answer no runner and every Kubernetes resource "
            "would time out after the clusters and node groups exist. Set cluster_access.public_access_cidrs to "
            "the runner's egress CIDRs, or use an existing VPC the runner's network reaches (vpc.id and "
            "vpc.private_subnet_ids) and list that network in cluster_access.private_access_cidrs "
            "(docs/cluster-access.md)",
            at="cluster_access.public_access_cidrs",
        )
    elif not access.private_access_cidrs:
        yield fail(
            "cluster_api_unreachable",
            "is empty and so is cluster_access.public_access_cidrs: the EKS cluster security group admits only the "
            "cluster's own nodes, so no runner could reach the API. List the network `pulumi up` runs from "
            "(the VPC's CIDR for a runner inside it, or the VPN or peered network's) in "
            "cluster_access.private_access_cidrs, or set cluster_access.public_access_cidrs (docs/cluster-access.md)",
            at="cluster_access.private_access_cidrs",
        )
