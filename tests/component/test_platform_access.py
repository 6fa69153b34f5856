"""Who can reach a region's platform, as the offline plan records it: the cluster's admins
(EKS access entries), where its API endpoint answers, and whom the Pod Identity roles trust."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from fleetctl.mocks import OFFLINE_ACCOUNT_ID
from fleetctl.plan import Plan, region_of, run_program
from fleetctl.stackfile import read_stack_file
from tests.component.programs import by_type, example_plan

PROD_REGIONS = ("us-east-1", "eu-west-1")
CI_ROLE = "arn:aws:iam::123456789012:role/inference-fleet-ci"
TEAMMATE = "arn:aws:iam::210987654321:user/ops/alice"
CLUSTER_ADMIN = {
    "cluster-admin": {
        "accessScope": {"type": "cluster"},
        "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
    }
}
STACK = """\
config:
  inference-fleet:regions:
    us-east-2:
{access}      vpc:
        id: vpc-0123456789abcdef0
        private_subnet_ids: [subnet-0123456789abcdef0, subnet-0123456789abcdef1]
      node_groups:
        system: {{instance_types: [m7i.xlarge], min_size: 1, max_size: 2, desired_size: 1}}
"""


def one(plan: Plan, resource_type: str, region: str, name: str | None = None) -> dict[str, Any]:
    by_urn = {resource["urn"]: resource for resource in plan.resources}
    found = [
        resource
        for resource in by_type(plan, resource_type)
        if region_of(resource, by_urn) == region and (name is None or resource["name"] == name)
    ]
    assert len(found) == 1, [resource["name"] for resource in found]
    return found[0]


def cluster_inputs(directory: Path, access: str = "") -> dict[str, Any]:
    """The EKS cluster's inputs for a one-region stack whose region has ``access`` (YAML) as its cluster_access."""
    directory.mkdir(parents=True, exist_ok=True)
    stack = directory / "Pulumi.access.yaml"
    block = textwrap.indent(f"cluster_access:\n{textwrap.indent(access, '  ')}", " " * 6) if access else ""
    stack.write_text(STACK.format(access=block))
    return dict(one(run_program(read_stack_file(stack)), "eks:index:Cluster", "us-east-2")["inputs"])


# Cluster access.


def test_admins_and_public_cidrs_give_access_entries_and_an_endpoint_open_only_to_those_cidrs(
    tmp_path: Path,
) -> None:
    inputs = cluster_inputs(
        tmp_path,
        f"admins: [{TEAMMATE}, {CI_ROLE}]\npublic_access_cidrs: [203.0.113.0/24, 198.51.100.7]\n",
    )
    assert inputs["authenticationMode"] == "API"
    assert inputs["accessEntries"] == {
        "123456789012-role-inference-fleet-ci": {
            "principalArn": CI_ROLE,
            "type": "STANDARD",
            "accessPolicies": CLUSTER_ADMIN,
        },
        "210987654321-user-alice": {"principalArn": TEAMMATE, "type": "STANDARD", "accessPolicies": CLUSTER_ADMIN},
    }
    assert inputs["endpointPrivateAccess"] is True
    assert inputs["endpointPublicAccess"] is True
    assert inputs["publicAccessCidrs"] == ["203.0.113.0/24", "198.51.100.7/32"]


def test_without_admins_or_cidrs_the_endpoint_is_private_and_only_the_creator_is_admin(tmp_path: Path) -> None:
    inputs = cluster_inputs(tmp_path)
    assert inputs["authenticationMode"] == "API"
    assert inputs["accessEntries"] == {}
    assert inputs["endpointPrivateAccess"] is True
    assert inputs["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in inputs


def test_an_admins_access_entry_keeps_its_key_when_others_come_and_go(tmp_path: Path) -> None:
    alone = cluster_inputs(tmp_path / "alone", f"admins: [{CI_ROLE}]\n")
    joined = cluster_inputs(tmp_path / "joined", f"admins: [{TEAMMATE}, {CI_ROLE}]\n")
    key = "123456789012-role-inference-fleet-ci"
    assert list(alone["accessEntries"]) == [key]
    assert sorted(joined["accessEntries"]) == ["123456789012-role-inference-fleet-ci", "210987654321-user-alice"]
    assert joined["accessEntries"][key] == alone["accessEntries"][key]


def test_the_cluster_admin_policy_carries_the_regions_partition(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.cn.yaml"
    china_admin = "arn:aws-cn:iam::123456789012:role/inference-fleet-ci"
    text = STACK.format(access=f"      cluster_access: {{admins: [{china_admin}]}}\n").replace(
        "us-east-2", "cn-north-1"
    )
    stack.write_text(text)
    inputs = one(run_program(read_stack_file(stack)), "eks:index:Cluster", "cn-north-1")["inputs"]
    (entry,) = inputs["accessEntries"].values()
    assert entry["accessPolicies"]["cluster-admin"]["policyArn"] == (
        "arn:aws-cn:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    )


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_prod_clusters_admit_the_ci_role_and_answer_only_inside_the_vpc(region: str) -> None:
    inputs = one(example_plan("prod"), "eks:index:Cluster", region)["inputs"]
    assert inputs["accessEntries"] == {
        "123456789012-role-inference-fleet-ci": {
            "principalArn": CI_ROLE,
            "type": "STANDARD",
            "accessPolicies": CLUSTER_ADMIN,
        }
    }
    assert (inputs["endpointPrivateAccess"], inputs["endpointPublicAccess"]) == (True, False)
    assert "publicAccessCidrs" not in inputs


def test_the_dev_endpoint_is_open_to_its_listed_cidr_only() -> None:
    inputs = one(example_plan("dev"), "eks:index:Cluster", "us-west-2")["inputs"]
    assert sorted(inputs["accessEntries"]) == [
        "123456789012-role-inference-fleet-ci",
        "123456789012-role-inference-fleet-developers",
    ]
    assert (inputs["endpointPrivateAccess"], inputs["endpointPublicAccess"]) == (True, True)
    assert inputs["publicAccessCidrs"] == ["203.0.113.0/24"]


# Protection: dev can be destroyed, prod cannot by accident.


def test_the_dev_cluster_has_neither_pulumi_protect_nor_eks_deletion_protection() -> None:
    cluster = one(example_plan("dev"), "eks:index:Cluster", "us-west-2")
    assert cluster["inputs"]["deletionProtection"] is False
    assert not cluster["options"].get("protect")


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_prod_clusters_keep_both_protections(region: str) -> None:
    cluster = one(example_plan("prod"), "eks:index:Cluster", region)
    assert cluster["inputs"]["deletionProtection"] is True
    assert cluster["options"]["protect"] is True


# Pod Identity trust.


@pytest.mark.parametrize(("stack", "region"), [("dev", "us-west-2"), *(("prod", region) for region in PROD_REGIONS)])
def test_every_pod_identity_role_is_trusted_only_for_the_account_of_the_regions_provider(
    stack: str, region: str
) -> None:
    plan = example_plan(stack)
    trusts = {
        role["name"]: json.loads(role["inputs"]["assumeRolePolicy"])
        for role in by_type(plan, "aws:iam/role:Role")
        if region_of(role, {resource["urn"]: resource for resource in plan.resources}) == region
        and "pods.eks.amazonaws.com" in role["inputs"]["assumeRolePolicy"]
    }
    expected = {f"{region}-lb-controller", f"{region}-workload"} | ({f"{region}-kv-chat"} if stack == "prod" else set())
    assert set(trusts) == expected
    for name, trust in trusts.items():
        (statement,) = trust["Statement"]
        assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}, name
        assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"], name
        assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": OFFLINE_ACCOUNT_ID}}, name
