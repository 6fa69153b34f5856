"""Plan-level invariants, as pure functions over a neutral view of a stack's resources.

Standard library only: the same rules run inside the CrossGuard pack (its own virtualenv,
``policy/__main__.py``) and offline over ``plan.json`` (``fleetctl plan --policy``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Resource:
    type: str
    name: str
    urn: str
    props: Mapping[str, Any]
    """Inputs in an offline plan, the resource's state under CrossGuard (camelCase either way)."""
    protect: bool = False
    parent: str | None = None
    provider: str | None = None


@dataclass(frozen=True)
class Violation:
    rule: str
    urn: str
    message: str


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    check: Callable[[Sequence[Resource]], Iterable[tuple[str, str]]] = field(repr=False)
    """Yields (urn, message) for every violation."""

    def run(self, resources: Sequence[Resource]) -> list[Violation]:
        return [Violation(self.name, urn, message) for urn, message in self.check(resources)]


BUCKET = "aws:s3/bucket:Bucket"
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
KMS_KEY = "aws:kms/key:Key"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS_RULE = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
WORKLOADS = ("kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:StatefulSet", "kubernetes:apps/v1:DaemonSet")
IAM_POLICIES = ("aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy")
ACCELERATOR_LISTENER = "aws:globalaccelerator/listener:Listener"
ACCELERATOR_ENDPOINT_GROUP = "aws:globalaccelerator/endpointGroup:EndpointGroup"
HTTPS_PORT = 443
ALB = "alb.ingress.kubernetes.io"


def _of_type(resources: Sequence[Resource], *types: str) -> list[Resource]:
    return [resource for resource in resources if resource.type in types]


def _props(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# Buckets.

BLOCKS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")


def private_encrypted_buckets(resources: Sequence[Resource]) -> Iterable[tuple[str, str]]:
    blocked = {
        block.props.get("bucket")
        for block in _of_type(resources, PUBLIC_ACCESS_BLOCK)
        if all(block.props.get(flag) is True for flag in BLOCKS)
    }
    encrypted = {
        config.props.get("bucket")
        for config in _of_type(resources, ENCRYPTION)
        if any(
            _props(rule.get("applyServerSideEncryptionByDefault")).get("sseAlgorithm") in ("aws:kms", "aws:kms:dsse")
            for rule in config.props.get("rules") or []
            if isinstance(rule, Mapping)
        )
    }
    for bucket in _of_type(resources, BUCKET):
        name = bucket.props.get("bucket")
        if name not in blocked:
            yield bucket.urn, f"bucket {name!r} has no public access block with all four blocks on"
        if name not in encrypted:
            yield bucket.urn, f"bucket {name!r} is not encrypted with KMS by default"


def protected_cold_tier(resources: Sequence[Resource]) -> Iterable[tuple[str, str]]:
    for resource in _of_type(resources, BUCKET, KMS_KEY):
        if not resource.protect:
            kind = "bucket" if resource.type == BUCKET else "its KMS key"
            yield (
                resource.urn,
                f"the cold tier's {kind} {resource.name!r} is not protected (regions.<r>.cold_tier.protect)",
            )


# EFA node groups.


def _interfaces(template: Resource) -> list[Mapping[str, Any]]:
    return [_props(interface) for interface in template.props.get("networkInterfaces") or []]


def efa_node_groups(resources: Sequence[Resource]) -> Iterable[tuple[str, str]]:
    """An EFA launch template: a cluster placement group (which also keeps the group in one
    availability zone) and a self-referencing all-traffic security group on every interface."""
    for template in _of_type(resources, LAUNCH_TEMPLATE):
        interfaces = _interfaces(template)
        if not any(interface.get("interfaceType") == "efa" for interface in interfaces):
            continue
        siblings = [resource for resource in resources if resource.parent == template.parent]
        group = _props(template.props.get("placement")).get("groupName")
        clusters = {
            placement.props.get("name") or placement.name
            for placement in _of_type(siblings, PLACEMENT_GROUP)
            if placement.props.get("strategy") == "cluster"
        }
        if not group or group not in clusters:
            yield template.urn, f"EFA launch template {template.name!r} is not in a cluster placement group"
        self_referencing = [
            {
                rule.props.get("securityGroupId")
                for rule in _of_type(siblings, kind)
                if rule.props.get("ipProtocol") == "-1"
                and rule.props.get("securityGroupId") == rule.props.get("referencedSecurityGroupId")
            }
            for kind in (INGRESS_RULE, EGRESS_RULE)
        ]
        both_ways = self_referencing[0] & self_referencing[1]
        for interface in interfaces:
            if not both_ways & set(interface.get("securityGroups") or []):
                index = interface.get("networkCardIndex")
                yield (
                    template.urn,
                    f"EFA launch template {template.name!r}: interface on card {index} has no security group "
                    "that allows all traffic to and from itself",
                )


# Containers.


def _containers(workload: Resource) -> Iterable[Mapping[str, Any]]:
    pod = _props(_props(_props(workload.props.get("spec")).get("template")).get("spec"))
    for key in ("initContainers", "containers"):
        for container in pod.get(key) or []:
            yield _props(container)


def container_resources(resources: Sequence[Resource]) -> Iterable[tuple[str, str]]:
    for workload in _of_type(resources, *WORKLOADS):
        for container in _containers(workload):
            amounts = _props(container.get("resources"))
            for side in ("requests", "limits"):
                missing = [name for name in ("cpu", "memory") if name not in _props(amounts.get(side))]
                if missing:
                    label = f"container {container.get('name')!r} of {workload.name!r}"
                    yield workload.urn, f"{label} has no {side} for {', '.join(missing)}"


CREDENTIAL_NAME = re.compile(r"(PASSWORD|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL)", re.IGNORECASE)
"""Names of environment variables that hold credentials (the spec refuses them in env too)."""
_SECRET_VALUE = re.compile(
    r"(AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}|hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}|ghp_[A-Za-z0-9]{36}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
)


def no_plain_secrets(resources: Sequence[Resource]) -> Iterable[tuple[str, str]]:
    for workload in _of_type(resources, *WORKLOADS):
        for container in _containers(workload):
            label = f"container {container.get('name')!r} of {workload.name!r}"
            for variable in container.get("env") or []:
                variable = _props(variable)
                value = variable.get("value")
                if not isinstance(value, str):
                    continue  # valueFrom: read from a Secret or the pod itself
                if CREDENTIAL_NAME.search(str(variable.get("name"))) or _SECRET_VALUE.search(value):
                    yield workload.urn, f"{label} has {variable.get('name')!r} in plain env: read it from a Secret"
            for arg in [*(container.get("command") or []), *(container.get("args") or [])]:
                if isinstance(arg, str) and _SECRET_VALUE.search(arg):
                    yield workload.urn, f"{label} has what looks like a credential in its command line"


# Routes.


def _schemes(resources: Sequence[Resource]) -> dict[str | None, str]:
    """Kubernetes provider -> the scheme its load balancer controller gives the ingress group."""
    schemes = {}
    for release in _of_type(resources, HELM_RELEASE):
        values = _props(release.props.get("values"))
        spec = _props(_props(values.get("ingressClassParams")).get("spec"))
        if "scheme" in spec:
            schemes[release.provider] = str(spec["scheme"])
    return schemes


def public_routes_need_tls(resources: Sequence[Resource]) -> Iterable[tuple[str, str]]:
    schemes = _schemes(resources)
    for route in _of_type(resources, INGRESS):
        annotations = _props(_props(route.props.get("metadata")).get("annotations"))
        scheme = annotations.get(f"{ALB}/scheme") or schemes.get(route.provider, "internal")
        if scheme != "internet-facing":
            continue
        if not annotations.get(f"{ALB}/certificate-arn"):
            yield route.urn, f"internet-facing route {route.name!r} has no TLS certificate"
        try:
            ports = json.loads(annotations.get(f"{ALB}/listen-ports") or "[]")
        except ValueError:
            ports = []
        if any("HTTP" in port for port in ports if isinstance(port, Mapping)):
            yield route.urn, f"internet-facing route {route.name!r} listens on plain HTTP"
        cidrs = [cidr.strip() for cidr in str(annotations.get(f"{ALB}/inbound-cidrs") or "").split(",") if cidr.strip()]
        if not cidrs or any(cidr in ("0.0.0.0/0", "::/0") for cidr in cidrs):
            yield route.urn, f"internet-facing route {route.name!r} is open to every address: set allowed_cidrs"


def _listen_ports(route: Resource) -> list[Mapping[str, Any]]:
    annotations = _props(_props(route.props.get("metadata")).get("annotations"))
    try:
        ports = json.loads(annotations.get(f"{ALB}/listen-ports") or "[]")
    except ValueError:
        return []
    return [port for port in ports if isinstance(port, Mapping)] if isinstance(ports, list) else []


def _forwarded_ports(resources: Sequence[Resource]) -> dict[Any, set[Any]]:
    """Listener port -> the endpoint ports the accelerator's endpoint groups forward it to (their
    portOverrides). The listeners of one accelerator never overlap, so a port names its listener."""
    forwarded: dict[Any, set[Any]] = {}
    for group in _of_type(resources, ACCELERATOR_ENDPOINT_GROUP):
        for override in group.props.get("portOverrides") or []:
            props = _props(override)
            forwarded.setdefault(props.get("listenerPort"), set()).add(props.get("endpointPort"))
    return forwarded


def global_listeners_need_tls(resources: Sequence[Resource]) -> Iterable[tuple[str, str]]:
    """A Global Accelerator listener is always internet-facing (an accelerator has public anycast
    addresses and no internal scheme), whatever the scheme of the ALBs behind it. It forwards TCP
    as it comes, so it may open only the port where the ALBs terminate TLS (or an endpoint's own port
    that its endpoint groups forward there: EndpointGroup portOverrides), and every route it can
    reach must listen on HTTPS only."""
    listeners = _of_type(resources, ACCELERATOR_LISTENER)
    forwarded = _forwarded_ports(resources)
    for listener in listeners:
        if listener.props.get("protocol") != "TCP":
            yield listener.urn, f"accelerator listener {listener.name!r} is not TCP to the ALBs' HTTPS listeners"
        for port_range in listener.props.get("portRanges") or []:
            ports = (_props(port_range).get("fromPort"), _props(port_range).get("toPort"))
            own = ports[0] == ports[1] and forwarded.get(ports[0]) == {HTTPS_PORT}
            if ports != (HTTPS_PORT, HTTPS_PORT) and not own:
                yield (
                    listener.urn,
                    (
                        f"accelerator listener {listener.name!r} opens ports {ports[0]}-{ports[1]} to the internet "
                        f"without TLS: only {HTTPS_PORT}, where the ALBs terminate it, or one port every endpoint "
                        f"group overrides to {HTTPS_PORT}"
                    ),
                )
    if not listeners:
        return
    for route in _of_type(resources, INGRESS):
        if any("HTTP" in port for port in _listen_ports(route)):
            yield route.urn, f"route {route.name!r} listens on plain HTTP behind an internet-facing accelerator"


# IAM.

_S3_OBJECT_ACTION = re.compile(r"^s3:(\*|.*Object.*|.*MultipartUpload.*)$")
_BUCKET_WILDCARD = re.compile(r"^arn:[^:]+:s3:::[^/]*\*")


def _statements(document: Any) -> list[Mapping[str, Any]]:
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError:
            return []
    statements = _props(document).get("Statement") or []
    return [_props(statement) for statement in (statements if isinstance(statements, list) else [statements])]


def _listed(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else [str(value)]


def no_wildcard_s3_objects(resources: Sequence[Resource]) -> Iterable[tuple[str, str]]:
    for policy in _of_type(resources, *IAM_POLICIES):
        for statement in _statements(policy.props.get("policy")):
            if statement.get("Effect") != "Allow":
                continue
            if not any(_S3_OBJECT_ACTION.match(action) or action == "*" for action in _listed(statement.get("Action"))):
                continue
            for target in _listed(statement.get("Resource")):
                if target == "*" or _BUCKET_WILDCARD.match(target):
                    yield policy.urn, f"policy {policy.name!r} grants S3 object actions on {target!r}"


# Kubernetes versions.

EKS_CLUSTER = "eks:index:Cluster"
MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"


def _minor(version: Any) -> tuple[int, int] | None:
    major, _, minor = str(version).partition(".")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None


def _reference(value: Any) -> str | None:
    """A resource reference as a plan records it (the URN) or as CrossGuard hands it (a mapping with ``urn``)."""
    if isinstance(value, Mapping):
        value = value.get("urn")
    return value if isinstance(value, str) else None


def node_groups_follow_their_cluster(resources: Sequence[Resource]) -> Iterable[tuple[str, str]]:
    """A managed node group's kubelets may lag the control plane but never lead it (Kubernetes version
    skew policy: the kubelet must not be newer than kube-apiserver); EKS refuses such a node group
    version ("Update a managed node group for your cluster": nodes up to the cluster's version)."""
    clusters = {resource.urn: resource for resource in _of_type(resources, EKS_CLUSTER)}
    for group in _of_type(resources, MANAGED_NODE_GROUP):
        cluster = clusters.get(_reference(group.props.get("cluster")) or "")
        if cluster is None:
            continue
        ours, theirs = _minor(group.props.get("version")), _minor(cluster.props.get("version"))
        if ours is not None and theirs is not None and ours > theirs:
            yield (
                group.urn,
                f"node group {group.name} runs Kubernetes {group.props.get('version')}, ahead of its cluster's "
                f"{cluster.props.get('version')}: upgrade the control plane first",
            )


RULES: tuple[Rule, ...] = (
    Rule(
        "private-encrypted-buckets",
        "Every bucket blocks public access and is KMS-encrypted.",
        private_encrypted_buckets,
    ),
    Rule("protected-cold-tier", "Cold-tier buckets and their keys are protected.", protected_cold_tier),
    Rule(
        "efa-node-groups",
        "EFA node groups: a cluster placement group and a self-referencing security group on every interface.",
        efa_node_groups,
    ),
    Rule("container-resources", "Every container requests and limits CPU and memory.", container_resources),
    Rule("no-plain-secrets", "No credential in plain environment values or command lines.", no_plain_secrets),
    Rule(
        "public-routes-need-tls",
        "Internet-facing routes listen only on HTTPS, with a certificate and allowed CIDRs.",
        public_routes_need_tls,
    ),
    Rule(
        "global-listeners-need-tls",
        "Global Accelerator listeners (always internet-facing) open only 443, to routes that listen only on HTTPS.",
        global_listeners_need_tls,
    ),
    Rule(
        "no-wildcard-s3-objects", "IAM policies grant S3 object actions only on named buckets.", no_wildcard_s3_objects
    ),
    Rule(
        "node-groups-follow-their-cluster",
        "No managed node group runs a Kubernetes version ahead of its cluster's control plane.",
        node_groups_follow_their_cluster,
    ),
)


def check(resources: Sequence[Resource]) -> list[Violation]:
    return [violation for rule in RULES for violation in rule.run(resources)]
