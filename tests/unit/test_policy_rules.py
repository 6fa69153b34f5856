"""Each rule of the policy pack on crafted resources: what passes, what fails and why."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policy.rules import RULES, Resource, check

PARENT = "urn:parent"


def resource(kind: str, name: str, props: dict[str, Any], **fields: Any) -> Resource:
    return Resource(type=kind, name=name, urn=f"urn:{kind}::{name}", props=props, **fields)


def violations(rule: str, resources: list[Resource]) -> list[str]:
    return [violation.message for violation in check(resources) if violation.rule == rule]


# Buckets.

BLOCK = {"blockPublicAcls": True, "blockPublicPolicy": True, "ignorePublicAcls": True, "restrictPublicBuckets": True}
KMS = {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}}]}


def bucket_with(block: dict[str, Any] | None = None, encryption: dict[str, Any] | None = None) -> list[Resource]:
    resources = [resource("aws:s3/bucket:Bucket", "kv", {"bucket": "kv-bucket"}, protect=True)]
    if block is not None:
        resources.append(
            resource("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "b", {"bucket": "kv-bucket", **block})
        )
    if encryption is not None:
        resources.append(
            resource(
                "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
                "e",
                {"bucket": "kv-bucket", **encryption},
            )
        )
    return resources


def test_a_private_kms_encrypted_bucket_passes() -> None:
    assert violations("private-encrypted-buckets", bucket_with(BLOCK, KMS)) == []


@pytest.mark.parametrize(
    ("block", "encryption", "message"),
    [
        (None, KMS, "has no public access block"),
        ({**BLOCK, "blockPublicPolicy": False}, KMS, "has no public access block with all four blocks on"),
        (BLOCK, None, "is not encrypted with KMS"),
        (BLOCK, {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]}, "is not encrypted"),
    ],
)
def test_a_public_or_unencrypted_bucket_fails(block: Any, encryption: Any, message: str) -> None:
    (found,) = violations("private-encrypted-buckets", bucket_with(block, encryption))
    assert message in found


def test_an_unprotected_cold_tier_fails() -> None:
    resources = [
        resource("aws:s3/bucket:Bucket", "kv", {"bucket": "kv"}),
        resource("aws:kms/key:Key", "k", {}, protect=True),
    ]
    assert violations("protected-cold-tier", resources) == [
        "the cold tier's bucket 'kv' is not protected (regions.<r>.cold_tier.protect)"
    ]


# EFA node groups.


def efa_group(*, placement: bool = True, self_rules: tuple[str, ...] = ("ingress", "egress")) -> list[Resource]:
    interfaces = [
        {"interfaceType": "efa", "networkCardIndex": 0, "securityGroups": ["sg-efa", "sg-cluster"]},
        {"interfaceType": "efa-only", "networkCardIndex": 1, "securityGroups": ["sg-efa", "sg-cluster"]},
    ]
    template = {"networkInterfaces": interfaces, **({"placement": {"groupName": "pg"}} if placement else {})}
    resources = [
        resource("aws:ec2/launchTemplate:LaunchTemplate", "lt", template, parent=PARENT),
        resource("aws:ec2/placementGroup:PlacementGroup", "pg", {"strategy": "cluster"}, parent=PARENT),
    ]
    kinds = {
        "ingress": "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
        "egress": "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
    }
    for direction in self_rules:
        props = {"ipProtocol": "-1", "securityGroupId": "sg-efa", "referencedSecurityGroupId": "sg-efa"}
        resources.append(resource(kinds[direction], direction, props, parent=PARENT))
    return resources


def test_an_efa_group_in_a_cluster_placement_group_with_a_self_referencing_group_passes() -> None:
    assert violations("efa-node-groups", efa_group()) == []


def test_an_efa_group_without_its_placement_group_fails() -> None:
    assert violations("efa-node-groups", efa_group(placement=False)) == [
        "EFA launch template 'lt' is not in a cluster placement group"
    ]


def test_an_efa_group_whose_security_group_only_lets_itself_in_fails() -> None:
    found = violations("efa-node-groups", efa_group(self_rules=("ingress",)))
    assert len(found) == 2
    assert "interface on card 0 has no security group that allows all traffic to and from itself" in found[0]


# Containers.


def workload(container: dict[str, Any]) -> Resource:
    return resource(
        "kubernetes:apps/v1:Deployment", "chat", {"spec": {"template": {"spec": {"containers": [container]}}}}
    )


FULL = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}


def test_a_container_with_requests_and_limits_passes() -> None:
    assert violations("container-resources", [workload({"name": "server", "resources": FULL})]) == []


def test_a_container_without_a_memory_limit_fails() -> None:
    resources = {"requests": FULL["requests"], "limits": {"cpu": "1"}}
    assert violations("container-resources", [workload({"name": "server", "resources": resources})]) == [
        "container 'server' of 'chat' has no limits for memory"
    ]


@pytest.mark.parametrize(
    ("container", "fragment"),
    [
        ({"env": [{"name": "HF_TOKEN", "value": "abc"}]}, "has 'HF_TOKEN' in plain env"),
        ({"env": [{"name": "NOTE", "value": "AKIAABCDEFGHIJKLMNOP"}]}, "has 'NOTE' in plain env"),
        ({"args": ["--api-key", "sk-" + "x" * 40]}, "looks like a credential in its command line"),
    ],
)
def test_credentials_in_plain_env_or_args_fail(container: dict[str, Any], fragment: str) -> None:
    (found,) = violations("no-plain-secrets", [workload({"name": "server", **container})])
    assert fragment in found


def test_env_read_from_a_secret_passes() -> None:
    env = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]
    assert violations("no-plain-secrets", [workload({"name": "server", "env": env})]) == []


# Routes.


def region_with(scheme: str, annotations: dict[str, str]) -> list[Resource]:
    values = {"ingressClassParams": {"spec": {"scheme": scheme}}}
    return [
        resource("kubernetes:helm.sh/v3:Release", "lbc", {"values": values}, provider="urn:k8s"),
        resource(
            "kubernetes:networking.k8s.io/v1:Ingress",
            "chat",
            {"metadata": {"annotations": annotations}},
            provider="urn:k8s",
        ),
    ]


SECURE = {
    "alb.ingress.kubernetes.io/certificate-arn": "arn:aws:acm:us-east-1:123456789012:certificate/x",
    "alb.ingress.kubernetes.io/listen-ports": '[{"HTTPS":443}]',
    "alb.ingress.kubernetes.io/inbound-cidrs": "203.0.113.0/24",
}


def test_an_internet_facing_route_with_tls_and_cidrs_passes_and_an_internal_one_needs_neither() -> None:
    assert violations("public-routes-need-tls", region_with("internet-facing", SECURE)) == []
    assert violations("public-routes-need-tls", region_with("internal", {})) == []


def test_an_internet_facing_route_on_http_open_to_all_fails() -> None:
    annotations = {"alb.ingress.kubernetes.io/listen-ports": '[{"HTTP":80}]'}
    assert violations("public-routes-need-tls", region_with("internet-facing", annotations)) == [
        "internet-facing route 'chat' has no TLS certificate",
        "internet-facing route 'chat' listens on plain HTTP",
        "internet-facing route 'chat' is open to every address: set allowed_cidrs",
    ]


# IAM.


def role_policy(*statements: dict[str, Any]) -> Resource:
    document = {"Version": "2012-10-17", "Statement": list(statements)}
    return resource("aws:iam/rolePolicy:RolePolicy", "workload", {"policy": json.dumps(document)})


def test_s3_object_grants_on_named_prefixes_and_non_s3_wildcards_pass() -> None:
    named = {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::kv/mooncake-kv/chat/*"}
    elb = {"Effect": "Allow", "Action": "elasticloadbalancing:Describe*", "Resource": "*"}
    assert violations("no-wildcard-s3-objects", [role_policy(named, elb)]) == []


@pytest.mark.parametrize("target", ["*", "arn:aws:s3:::*", "arn:aws:s3:::*/models/*", "arn:aws:s3:::kv-*/x"])
def test_s3_object_grants_on_wildcard_buckets_fail(target: str) -> None:
    statement = {"Effect": "Allow", "Action": ["s3:PutObject"], "Resource": target}
    assert violations("no-wildcard-s3-objects", [role_policy(statement)]) == [
        f"policy 'workload' grants S3 object actions on {target!r}"
    ]


# Kubernetes versions.

CLUSTER_URN = "urn:eks:index:Cluster::us-east-1-eks"


def versions(cluster: str, group: str, reference: Any = CLUSTER_URN) -> list[Resource]:
    return [
        Resource(type="eks:index:Cluster", name="us-east-1-eks", urn=CLUSTER_URN, props={"version": cluster}),
        resource("eks:index:ManagedNodeGroup", "us-east-1-gpu", {"version": group, "cluster": reference}),
    ]


@pytest.mark.parametrize(("cluster", "group"), [("1.35", "1.35"), ("1.35", "1.34"), ("1.36", "1.33")])
def test_node_groups_at_or_behind_their_cluster_pass(cluster: str, group: str) -> None:
    assert violations("node-groups-follow-their-cluster", versions(cluster, group)) == []


@pytest.mark.parametrize("reference", [CLUSTER_URN, {"urn": CLUSTER_URN}])
def test_a_node_group_ahead_of_its_control_plane_fails(reference: Any) -> None:
    """The kubelet may never be newer than kube-apiserver (Kubernetes version skew policy)."""
    assert violations("node-groups-follow-their-cluster", versions("1.34", "1.35", reference)) == [
        "node group us-east-1-gpu runs Kubernetes 1.35, ahead of its cluster's 1.34: upgrade the control plane first"
    ]


def test_every_rule_has_a_unique_name_and_a_description() -> None:
    names = [rule.name for rule in RULES]
    assert len(set(names)) == len(names) == 9
    assert all(rule.description.endswith(".") for rule in RULES)
