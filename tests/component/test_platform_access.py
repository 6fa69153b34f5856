"""Who can reach a region's platform, as the offline plan records it: the cluster's admins
(EKS access entries and their policy associations, ours rather than pulumi-eks's), where its
API endpoint answers, and whom the Pod Identity roles trust."""

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
CI_KEY = "123456789012-role-inference-fleet-ci"
TEAMMATE_KEY = "210987654321-user-alice"
CLUSTER = "inference-fleet-access-us-east-2"
ENTRY = "aws:eks/accessEntry:AccessEntry"
ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
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


RUNNER_NETWORK = "10.8.0.0/16"
"""The network `pulumi up` runs from, connected to the stack's existing VPC (a VPN, a peered VPC)."""
SG_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def access_plan(directory: Path, access: str = "") -> Plan:
    """A one-region stack (us-east-2, protected by default, in an existing VPC) whose region has
    ``access`` (YAML) as its cluster_access, plus RUNNER_NETWORK as its private_access_cidrs when
    ``access`` names no CIDRs: validation asks for a path from the runner to the API."""
    directory.mkdir(parents=True, exist_ok=True)
    stack = directory / "Pulumi.access.yaml"
    if "access_cidrs" not in access:
        access += f"private_access_cidrs: [{RUNNER_NETWORK}]\n"
    block = textwrap.indent(f"cluster_access:\n{textwrap.indent(access, '  ')}", " " * 6)
    stack.write_text(STACK.format(access=block))
    return run_program(read_stack_file(stack))


def cluster_inputs(plan: Plan, region: str = "us-east-2") -> dict[str, Any]:
    return dict(one(plan, "eks:index:Cluster", region)["inputs"])


def admin_access(plan: Plan, region: str = "us-east-2") -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Each admin's access entry and its one policy association, by the entry's Pulumi name."""
    by_urn = {resource["urn"]: resource for resource in plan.resources}
    entries = [entry for entry in by_type(plan, ENTRY) if region_of(entry, by_urn) == region]
    associations = [
        association for association in by_type(plan, ASSOCIATION) if region_of(association, by_urn) == region
    ]
    assert len(associations) == len(entries)
    access = {}
    for entry in entries:
        (association,) = (
            association for association in associations if association["options"].get("dependsOn") == [entry["urn"]]
        )
        access[entry["name"]] = (entry, association)
    return access


def expected_access(region: str, cluster: str, arn: str, key: str, partition: str = "aws") -> dict[str, Any]:
    """What the plan records of an admin's entry and association (name and inputs)."""
    return {
        "entry": {
            "name": f"{region}-access-{key}",
            "inputs": {"clusterName": cluster, "principalArn": arn, "type": "STANDARD"},
        },
        "association": {
            "name": f"{region}-access-{key}-cluster-admin",
            "inputs": {
                "clusterName": cluster,
                "principalArn": arn,
                "policyArn": f"arn:{partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
                "accessScope": {"type": "cluster"},
            },
        },
    }


def recorded(entry: dict[str, Any], association: dict[str, Any]) -> dict[str, Any]:
    return {
        "entry": {"name": entry["name"], "inputs": entry["inputs"]},
        "association": {"name": association["name"], "inputs": association["inputs"]},
    }


# Cluster access.


def test_each_admin_gets_an_access_entry_and_a_cluster_admin_association_of_its_own(tmp_path: Path) -> None:
    plan = access_plan(
        tmp_path,
        f"admins: [{TEAMMATE}, {CI_ROLE}]\npublic_access_cidrs: [203.0.113.0/24, 198.51.100.7]\n",
    )
    access = admin_access(plan)
    assert {name: recorded(*resources) for name, resources in access.items()} == {
        f"us-east-2-access-{CI_KEY}": expected_access("us-east-2", CLUSTER, CI_ROLE, CI_KEY),
        f"us-east-2-access-{TEAMMATE_KEY}": expected_access("us-east-2", CLUSTER, TEAMMATE, TEAMMATE_KEY),
    }
    inputs = cluster_inputs(plan)
    assert inputs["authenticationMode"] == "API"
    assert "accessEntries" not in inputs
    assert inputs["endpointPrivateAccess"] is True
    assert inputs["endpointPublicAccess"] is True
    assert inputs["publicAccessCidrs"] == ["203.0.113.0/24", "198.51.100.7/32"]


def test_without_admins_or_public_cidrs_the_endpoint_is_private_and_only_the_creator_is_admin(tmp_path: Path) -> None:
    plan = access_plan(tmp_path)
    assert by_type(plan, ENTRY) == []
    assert by_type(plan, ASSOCIATION) == []
    inputs = cluster_inputs(plan)
    assert inputs["authenticationMode"] == "API"
    assert "accessEntries" not in inputs
    assert inputs["endpointPrivateAccess"] is True
    assert inputs["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in inputs


def api_rules(plan: Plan, region: str = "us-east-2") -> dict[str, dict[str, Any]]:
    by_urn = {resource["urn"]: resource for resource in plan.resources}
    return {
        rule["name"]: rule["inputs"]
        for rule in by_type(plan, SG_RULE)
        if region_of(rule, by_urn) == region and "-api-from-" in rule["name"]
    }


def test_each_private_access_cidr_opens_https_on_the_cluster_security_group(tmp_path: Path) -> None:
    """The endpoint's interfaces carry only the security group EKS creates when pulumi-eks skips its
    own (clusterSecurityGroupId = cluster.vpcConfig.clusterSecurityGroupId, nodejs/eks/cluster/cluster.ts
    v4.3.0 and main at 7bf0c1b), and that group admits only its members: a runner on a connected
    network gets in through one 443 rule per listed CIDR, named by the CIDR."""
    plan = access_plan(tmp_path, f"private_access_cidrs: [{RUNNER_NETWORK}, 192.168.40.0/22]\n")
    assert api_rules(plan) == {
        f"us-east-2-api-from-{cidr.replace('.', '-').replace('/', '-')}": {
            "securityGroupId": f"sg-offline-{CLUSTER}-cluster",
            "cidrIpv4": cidr,
            "ipProtocol": "tcp",
            "fromPort": 443,
            "toPort": 443,
            "description": f"Kubernetes API (private endpoint) from {cidr}",
        }
        for cidr in (RUNNER_NETWORK, "192.168.40.0/22")
    }
    assert cluster_inputs(plan)["endpointPublicAccess"] is False


def test_access_entries_are_children_of_the_eks_cluster_component_and_wait_for_the_cluster(tmp_path: Path) -> None:
    plan = access_plan(tmp_path, f"admins: [{CI_ROLE}]\n")
    component = one(plan, "inference-fleet:platform:EksCluster", "us-east-2")
    cluster = one(plan, "eks:index:Cluster", "us-east-2")
    (entry, association) = admin_access(plan)[f"us-east-2-access-{CI_KEY}"]
    assert cluster["options"]["protect"] is True
    for resource in (entry, association):
        assert resource["parent"] == component["urn"]
        assert resource["custom"] is True
        assert resource["inputs"]["clusterName"] == CLUSTER
    assert association["options"]["dependsOn"] == [entry["urn"]]


def test_an_admins_entry_and_association_stay_the_same_when_others_come_and_go(tmp_path: Path) -> None:
    alone = admin_access(access_plan(tmp_path / "alone", f"admins: [{CI_ROLE}]\n"))
    joined = admin_access(access_plan(tmp_path / "joined", f"admins: [{TEAMMATE}, {CI_ROLE}]\n"))
    reordered = admin_access(access_plan(tmp_path / "reordered", f"admins: [{CI_ROLE}, {TEAMMATE}]\n"))
    name = f"us-east-2-access-{CI_KEY}"
    assert list(alone) == [name]
    assert sorted(joined) == sorted(reordered) == [name, f"us-east-2-access-{TEAMMATE_KEY}"]
    for plan in (joined, reordered):
        for before, after in zip(alone[name], plan[name], strict=True):
            assert {key: after[key] for key in ("urn", "inputs", "options")} == {
                key: before[key] for key in ("urn", "inputs", "options")
            }


def test_the_cluster_admin_policy_carries_the_regions_partition(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.cn.yaml"
    china_admin = "arn:aws-cn:iam::123456789012:role/inference-fleet-ci"
    text = STACK.format(
        access=f"      cluster_access: {{admins: [{china_admin}], private_access_cidrs: [{RUNNER_NETWORK}]}}\n"
    ).replace("us-east-2", "cn-north-1")
    stack.write_text(text)
    plan = run_program(read_stack_file(stack))
    ((entry, association),) = admin_access(plan, "cn-north-1").values()
    assert recorded(entry, association) == expected_access(
        "cn-north-1", "inference-fleet-cn-cn-north-1", china_admin, CI_KEY, partition="aws-cn"
    )


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_prod_clusters_admit_the_ci_role_and_answer_the_ci_runners_and_the_connected_networks(region: str) -> None:
    """Prod's VPCs are created by the stack, so the first `pulumi up` reaches each API through the
    public endpoint, open to the CI runners' egress only. The 443 rule for 10.0.0.0/8 serves only clients
    that resolve the name to the private endpoint: with the public one on, that is inside the VPC, or a
    network forwarding DNS to a Route 53 Resolver inbound endpoint there (docs/cluster-access.md)."""
    plan = example_plan("prod")
    access = admin_access(plan, region)
    assert {name: recorded(*resources) for name, resources in access.items()} == {
        f"{region}-access-{CI_KEY}": expected_access(region, f"inference-fleet-prod-{region}", CI_ROLE, CI_KEY)
    }
    inputs = cluster_inputs(plan, region)
    assert "accessEntries" not in inputs
    assert (inputs["endpointPrivateAccess"], inputs["endpointPublicAccess"]) == (True, True)
    assert inputs["publicAccessCidrs"] == ["192.0.2.0/28"]
    assert [rule["cidrIpv4"] for rule in api_rules(plan, region).values()] == ["10.0.0.0/8"]


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_prod_access_entries_are_not_protected_though_the_cluster_is(region: str) -> None:
    """Removing an admin from a protected region must need no `pulumi state unprotect`."""
    plan = example_plan("prod")
    assert one(plan, "eks:index:Cluster", region)["options"]["protect"] is True
    ((entry, association),) = admin_access(plan, region).values()
    for resource in (entry, association):
        assert "protect" not in resource["options"], resource["name"]
        assert "retainOnDelete" not in resource["options"], resource["name"]


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_prod_access_entries_adopt_those_pulumi_eks_created(region: str) -> None:
    """A stack deployed when pulumi-eks made the entries (its `accessEntries`, children of its cluster
    component, named `<component>-<key>`, associations children of their entry) keeps them in place."""
    plan = example_plan("prod")
    cluster = one(plan, "eks:index:Cluster", region)
    ((entry, association),) = admin_access(plan, region).values()
    legacy = f"{region}-eks-{CI_KEY}"
    qualified_type, _, _ = cluster["urn"].rpartition("::")
    assert entry["options"]["aliases"] == [{"spec": {"name": legacy, "parentUrn": cluster["urn"]}}]
    assert association["options"]["aliases"] == [
        {
            "spec": {
                "name": f"{legacy}-cluster-admin",
                "parentUrn": f"{qualified_type}${ENTRY}::{legacy}",
            }
        }
    ]


def test_the_dev_endpoint_is_open_to_its_listed_cidr_only() -> None:
    plan = example_plan("dev")
    assert sorted(admin_access(plan, "us-west-2")) == [
        "us-west-2-access-123456789012-role-inference-fleet-ci",
        "us-west-2-access-123456789012-role-inference-fleet-developers",
    ]
    inputs = cluster_inputs(plan, "us-west-2")
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
    expected = {f"{region}-lb-controller", f"{region}-cluster-autoscaler", f"{region}-workload"} | (
        {f"{region}-kv-chat"} if stack == "prod" else set()
    )
    assert set(trusts) == expected
    for name, trust in trusts.items():
        (statement,) = trust["Statement"]
        assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}, name
        assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"], name
        assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": OFFLINE_ACCOUNT_ID}}, name


# The stack file's aws:* keys reach every provider the program builds (components/aws_config.py).

DEPLOYER = "arn:aws:iam::123456789012:role/inference-fleet-deployer"


def test_profile_assumed_role_and_allowed_accounts_reach_every_provider_and_kubeconfig(tmp_path: Path) -> None:
    """An explicit provider ignores the stack's aws:* config, which configures only the default
    provider; pulumi_aws 7.51.1 Provider takes profile, assume_roles and allowed_account_ids."""
    stack = tmp_path / "Pulumi.access.yaml"
    stack.write_text(
        "config:\n"
        "  aws:profile: fleet-deployer\n"
        f"  aws:assumeRoles: [{{roleArn: {DEPLOYER}, sessionName: pulumi}}]\n"
        "  aws:allowedAccountIds: ['123456789012']\n"
        + STACK.format(access=f"      cluster_access: {{private_access_cidrs: [{RUNNER_NETWORK}]}}\n").removeprefix(
            "config:\n"
        )
    )
    plan = run_program(read_stack_file(stack))
    providers = by_type(plan, "pulumi:providers:aws")
    assert providers
    for provider in providers:
        inputs = provider["inputs"]
        assert inputs["profile"] == "fleet-deployer", provider["name"]
        assert json.loads(inputs["assumeRoles"]) == [{"roleArn": DEPLOYER, "sessionName": "pulumi"}]
        assert json.loads(inputs["allowedAccountIds"]) == ["123456789012"]
    assert cluster_inputs(plan)["providerCredentialOpts"] == {"profileName": "fleet-deployer", "roleArn": DEPLOYER}


def test_a_control_plane_more_than_one_minor_behind_is_refused_before_anything_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EKS moves a control plane one minor version per update ("Update existing cluster to new
    Kubernetes version"): the program reads the deployed version and refuses 1.32 -> 1.34 itself."""
    from fleetctl import mocks
    from fleetctl.plan import ProgramError

    monkeypatch.setitem(mocks.INVOKES, "aws:eks/getClusters:getClusters", lambda _: {"names": [CLUSTER]})
    monkeypatch.setitem(mocks.INVOKES, "aws:eks/getCluster:getCluster", lambda _: {"name": CLUSTER, "version": "1.32"})
    monkeypatch.setitem(mocks.INVOKES, "aws:eks/getNodeGroups:getNodeGroups", lambda _: {"names": []})
    stack = tmp_path / "Pulumi.access.yaml"
    stack.write_text(
        STACK.format(access=f"      cluster_access: {{private_access_cidrs: [{RUNNER_NETWORK}]}}\n").replace(
            "      vpc:\n", '      kubernetes_version: "1.34"\n      vpc:\n', 1
        )
    )
    with pytest.raises(ProgramError) as refused:
        run_program(read_stack_file(stack))
    assert f"cluster {CLUSTER}: kubernetes_version 1.32 -> 1.34 skips 1.33" in str(refused.value)
