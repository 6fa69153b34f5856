"""EfaNodeGroup and GpuNodeGroup under the recording mocks: what a region's node groups register."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from components import scheduling
from components.catalog import instance_catalog
from components.platform import autoscaler
from components.spec.region import NodeGroup
from fleetctl import mocks
from fleetctl.plan import Plan, ProgramError
from tests.component.programs import by_type, run_snippet
from tests.user_data import mime_parts, node_config

PROVIDER_URN = "urn:pulumi:test::inference-fleet::pulumi:providers:aws::aws-us-east-1"
CLUSTER_SECURITY_GROUP = "sg-offline-c-cluster"
"""What the mocks answer for the cluster ``c``'s EKS-created security group."""
PRIVATE_SUBNETS = ["subnet-a", "subnet-b", "subnet-c"]
ZONE_SUBNET = "subnet-offline-vpc-1-us-east-1a"
"""The mocks' getSubnets answer for vpc-1 filtered to us-east-1a."""
RESERVATION = "cr-0123456789abcdef0"
KUBERNETES_VERSION = "1.33"

EFA = "EfaNodeGroup"
GPU = "GpuNodeGroup"
GROUPS: dict[str, tuple[str, dict[str, Any]]] = {
    "p5": (EFA, {"instance_types": ["p5.48xlarge"], "efa": True, "availability_zone": "us-east-1a"}),
    "p5en": (
        EFA,
        {"instance_types": ["p5en.48xlarge"], "efa": True, "availability_zone": "us-east-1a", "capacity_type": "spot"},
    ),
    "p4d": (
        EFA,
        {
            "instance_types": ["p4d.24xlarge"],
            "efa": True,
            "availability_zone": "us-east-1a",
            "capacity_type": "capacity-block",
            "capacity_reservation_id": RESERVATION,
        },
    ),
    "g6e": (GPU, {"instance_types": ["g6e.12xlarge"]}),
    "g6e-block": (
        GPU,
        {
            "instance_types": ["g6e.12xlarge"],
            "availability_zone": "us-east-1a",
            "capacity_type": "capacity-block",
            "capacity_reservation_id": RESERVATION,
        },
    ),
    "system": (GPU, {"instance_types": ["c6i.xlarge"]}),
}
EFA_GROUPS = [group for group, (component, _) in GROUPS.items() if component == EFA]


def program(component: str, group: str, spec: Mapping[str, Any], live: str | None = None) -> str:
    """A node group of ``spec`` in cluster ``c``; with ``live``, the deployed cluster of that name is read."""
    full_spec = {"min_size": 0, "max_size": 4, "desired_size": 2, **spec}
    live_arg = f"live=LiveCluster({live!r}, cluster)," if live is not None else ""
    return f"""
import json
import pulumi_eks as eks
from components.catalog import instance_catalog
from components.platform.live import LiveCluster
from components.platform.node_groups import {component}, NodeGroupArgs
from components.spec.region import NodeGroup

provider = aws.Provider("aws-us-east-1", region="us-east-1")
role = aws.iam.Role("node-role", assume_role_policy="{{}}", opts=pulumi.ResourceOptions(provider=provider))
cluster = eks.Cluster(
    "c",
    vpc_id="vpc-1",
    private_subnet_ids={PRIVATE_SUBNETS!r},
    skip_default_node_group=True,
    provider_credential_opts=eks.KubeconfigOptionsArgs(),
    opts=pulumi.ResourceOptions(provider=provider),
)
spec = NodeGroup.model_validate(json.loads({json.dumps(full_spec)!r}))
args = NodeGroupArgs(
    stack="test",
    region="us-east-1",
    group_name={group!r},
    spec=spec,
    facts=instance_catalog().instance_types[spec.instance_types[0]],
    cluster=cluster,
    node_role=role,
    vpc_id="vpc-1",
    subnet_ids={PRIVATE_SUBNETS!r},
    cluster_security_group_id=cluster.cluster_security_group_id,
    kubernetes_version={KUBERNETES_VERSION!r},
    {live_arg}
)
group = {component}("us-east-1-{group}", args, opts=pulumi.ResourceOptions(providers={{"aws": provider}}))
pulumi.export("node_group_name", group.node_group_name)
pulumi.export("placement_group_name", getattr(group, "placement_group_name", None))
"""


def run_group(tmp_path: Path, group: str) -> Plan:
    component, spec = GROUPS[group]
    return run_snippet(tmp_path, program(component, group, spec))


@pytest.fixture(scope="module")
def plan_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Plan]:
    plans: dict[str, Plan] = {}

    def get(group: str) -> Plan:
        if group not in plans:
            plans[group] = run_group(tmp_path_factory.mktemp(group), group)
        return plans[group]

    return get


def one(plan: Plan, resource_type: str) -> dict[str, Any]:
    (resource,) = by_type(plan, resource_type)
    return resource


def launch_template(plan: Plan) -> dict[str, Any]:
    inputs: dict[str, Any] = one(plan, "aws:ec2/launchTemplate:LaunchTemplate")["inputs"]
    return inputs


def node_group(plan: Plan) -> dict[str, Any]:
    return one(plan, "eks:index:ManagedNodeGroup")


def mock_id(resource: Mapping[str, Any]) -> str:
    """The id the mocks give a created resource (``FleetMocks.new_resource``)."""
    return f"{resource['name']}-id"


# EFA network interfaces.


@pytest.mark.parametrize(("group", "interfaces"), [("p5", 32), ("p5en", 16), ("p4d", 4)])
def test_efa_launch_template_has_one_interface_per_network_card_efa_first_then_efa_only(
    plan_of: Callable[[str], Plan], group: str, interfaces: int
) -> None:
    listed = launch_template(plan_of(group))["networkInterfaces"]
    assert len(listed) == interfaces
    assert [item["networkCardIndex"] for item in listed] == list(range(interfaces))
    assert [(item["interfaceType"], item["deviceIndex"]) for item in listed] == [("efa", 0)] + [("efa-only", 1)] * (
        interfaces - 1
    )
    assert all(item["deleteOnTermination"] == "true" for item in listed)
    assert all(item["associatePublicIpAddress"] == "false" for item in listed)


@pytest.mark.parametrize("group", EFA_GROUPS)
def test_every_efa_interface_carries_the_efa_and_the_cluster_security_groups(
    plan_of: Callable[[str], Plan], group: str
) -> None:
    plan = plan_of(group)
    efa_group = mock_id(one(plan, "aws:ec2/securityGroup:SecurityGroup"))
    for interface in launch_template(plan)["networkInterfaces"]:
        assert interface["securityGroups"] == [efa_group, CLUSTER_SECURITY_GROUP]
        assert "subnetId" not in interface


@pytest.mark.parametrize("group", EFA_GROUPS)
def test_efa_launch_template_sets_security_groups_only_on_the_interfaces(
    plan_of: Callable[[str], Plan], group: str
) -> None:
    template = launch_template(plan_of(group))
    assert "vpcSecurityGroupIds" not in template
    assert "securityGroupNames" not in template


@pytest.mark.parametrize("group", EFA_GROUPS)
def test_efa_launch_template_records_the_instance_type_check(plan_of: Callable[[str], Plan], group: str) -> None:
    plan = plan_of(group)
    instance_type = GROUPS[group][1]["instance_types"][0]
    count = instance_catalog().instance_types[instance_type].efa_interfaces
    assert (
        launch_template(plan)["description"] == f"{instance_type}: {count} EFA interfaces (catalog checked against EC2)"
    )


# Placement, zone and security group.


@pytest.mark.parametrize("group", EFA_GROUPS)
def test_efa_nodes_launch_into_a_cluster_placement_group(plan_of: Callable[[str], Plan], group: str) -> None:
    plan = plan_of(group)
    placement_group = one(plan, "aws:ec2/placementGroup:PlacementGroup")
    assert placement_group["inputs"]["strategy"] == "cluster"
    assert launch_template(plan)["placement"] == {"groupName": placement_group["name"]}
    assert plan.outputs["placement_group_name"] == placement_group["name"]


@pytest.mark.parametrize("group", [*EFA_GROUPS, "g6e-block"])
def test_a_group_pinned_to_a_zone_gets_only_that_zones_subnet(plan_of: Callable[[str], Plan], group: str) -> None:
    assert node_group(plan_of(group))["inputs"]["subnetIds"] == [ZONE_SUBNET]


def test_the_zone_subnet_lookup_filters_by_vpc_zone_and_the_regions_private_subnets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Mapping[str, Any]] = []
    answer = mocks.INVOKES["aws:ec2/getSubnets:getSubnets"]

    def recording(args: Mapping[str, Any]) -> dict[str, Any]:
        seen.append(args)
        return answer(args)

    monkeypatch.setitem(mocks.INVOKES, "aws:ec2/getSubnets:getSubnets", recording)
    run_group(tmp_path, "p5")
    (args,) = seen
    filters = {item["name"]: list(item["values"]) for item in args["filters"]}
    assert filters == {"vpc-id": ["vpc-1"], "availability-zone": ["us-east-1a"], "subnet-id": PRIVATE_SUBNETS}


def test_a_zone_without_a_private_subnet_fails_the_deployment_naming_group_and_zone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(mocks.INVOKES, "aws:ec2/getSubnets:getSubnets", lambda args: {"ids": [], "id": "none"})
    with pytest.raises(ProgramError, match=r"node group 'p5': the region has no private subnet in .*'us-east-1a'"):
        run_group(tmp_path, "p5")


@pytest.mark.parametrize("group", EFA_GROUPS)
def test_efa_security_group_allows_all_traffic_to_and_from_itself(plan_of: Callable[[str], Plan], group: str) -> None:
    plan = plan_of(group)
    security_group = one(plan, "aws:ec2/securityGroup:SecurityGroup")
    assert security_group["inputs"]["vpcId"] == "vpc-1"
    for rule_type in (
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
        "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
    ):
        rule = one(plan, rule_type)["inputs"]
        assert rule["securityGroupId"] == mock_id(security_group)
        assert rule["referencedSecurityGroupId"] == mock_id(security_group)
        assert rule["ipProtocol"] == "-1"
        assert not {"cidrIpv4", "cidrIpv6", "prefixListId", "fromPort", "toPort"} & set(rule)


@pytest.mark.parametrize("group", EFA_GROUPS)
def test_efa_nodes_launch_only_after_the_self_rules_exist(plan_of: Callable[[str], Plan], group: str) -> None:
    plan = plan_of(group)
    rules = by_type(plan, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule") + by_type(
        plan, "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
    )
    assert sorted(node_group(plan)["options"]["dependsOn"]) == sorted(rule["urn"] for rule in rules)


# The managed node group.


@pytest.mark.parametrize("group", EFA_GROUPS)
def test_efa_nodes_are_tainted_for_gpus_and_efa_and_labelled_as_efa(plan_of: Callable[[str], Plan], group: str) -> None:
    """And they register with the startup taint, whose prefix Cluster Autoscaler 1.34 reads as "not
    started yet" (kubernetes/autoscaler cluster-autoscaler-1.34.5 utils/taints/taints.go
    StartupTaintPrefix), until the node advertises its EFA devices (components/platform/efa_ready.py)."""
    inputs = node_group(plan_of(group))["inputs"]
    assert inputs["taints"] == [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"},
        {"key": "vpc.amazonaws.com/efa", "value": "true", "effect": "NO_SCHEDULE"},
        {
            "key": "startup-taint.cluster-autoscaler.kubernetes.io/efa-not-advertised",
            "value": "true",
            "effect": "NO_SCHEDULE",
        },
    ]
    facts = instance_catalog().instance_types[GROUPS[group][1]["instance_types"][0]]
    assert inputs["labels"] == {**scheduling.node_labels(group, True, facts), autoscaler.GPU_LABEL: "nvidia"}
    assert {
        "inference-fleet/node-group": group,
        "inference-fleet/accelerator": "nvidia",
        "inference-fleet/efa": "true",
        "k8s.amazonaws.com/accelerator": "nvidia",
    }.items() <= inputs["labels"].items()


def test_gpu_nodes_without_efa_are_tainted_for_gpus_only(plan_of: Callable[[str], Plan]) -> None:
    inputs = node_group(plan_of("g6e"))["inputs"]
    assert inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    facts = instance_catalog().instance_types["g6e.12xlarge"]
    assert inputs["labels"] == {**scheduling.node_labels("g6e", False, facts), autoscaler.GPU_LABEL: "nvidia"}
    assert {
        "inference-fleet/node-group": "g6e",
        "inference-fleet/accelerator": "nvidia",
        "k8s.amazonaws.com/accelerator": "nvidia",
    }.items() <= inputs["labels"].items()
    assert "inference-fleet/efa" not in inputs["labels"]


def test_cpu_nodes_carry_no_taints(plan_of: Callable[[str], Plan]) -> None:
    inputs = node_group(plan_of("system"))["inputs"]
    assert inputs.get("taints", []) == []
    assert inputs["labels"]["inference-fleet/accelerator"] == "none"
    assert autoscaler.GPU_LABEL not in inputs["labels"]


@pytest.mark.parametrize("group", list(GROUPS))
def test_ami_type_comes_from_the_catalog(plan_of: Callable[[str], Plan], group: str) -> None:
    instance_type = GROUPS[group][1]["instance_types"][0]
    expected = instance_catalog().instance_types[instance_type].ami_type
    assert node_group(plan_of(group))["inputs"]["amiType"] == expected


def test_ami_types_differ_between_gpu_and_cpu_groups(plan_of: Callable[[str], Plan]) -> None:
    assert node_group(plan_of("g6e"))["inputs"]["amiType"] == "AL2023_x86_64_NVIDIA"
    assert node_group(plan_of("system"))["inputs"]["amiType"] == "AL2023_x86_64_STANDARD"


@pytest.mark.parametrize(
    ("group", "capacity_type"),
    [
        ("p5", "ON_DEMAND"),
        ("p5en", "SPOT"),
        ("p4d", "CAPACITY_BLOCK"),
        ("g6e", "ON_DEMAND"),
        ("g6e-block", "CAPACITY_BLOCK"),
    ],
)
def test_capacity_type_uses_the_eks_spelling(plan_of: Callable[[str], Plan], group: str, capacity_type: str) -> None:
    assert node_group(plan_of(group))["inputs"]["capacityType"] == capacity_type


@pytest.mark.parametrize("group", ["p4d", "g6e-block"])
def test_capacity_block_groups_launch_into_their_reservation(plan_of: Callable[[str], Plan], group: str) -> None:
    template = launch_template(plan_of(group))
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": RESERVATION}
    }


@pytest.mark.parametrize("group", ["p5", "p5en", "g6e", "system"])
def test_other_capacity_types_target_no_reservation(plan_of: Callable[[str], Plan], group: str) -> None:
    template = launch_template(plan_of(group))
    assert "instanceMarketOptions" not in template
    assert "capacityReservationSpecification" not in template


def test_node_group_scaling_name_and_launch_template_version(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of("p5")
    inputs = node_group(plan)["inputs"]
    template = one(plan, "aws:ec2/launchTemplate:LaunchTemplate")
    assert inputs["scalingConfig"] == {"minSize": 0, "maxSize": 4, "desiredSize": 2}
    assert inputs["instanceTypes"] == ["p5.48xlarge"]
    assert inputs["nodeGroupName"] == "inference-fleet-test-us-east-1-p5"
    assert inputs["launchTemplate"] == {"id": mock_id(template), "version": "1"}
    assert inputs["cluster"] == "urn:pulumi:test::inference-fleet::eks:index:Cluster::c"
    assert inputs["nodeRole"] == "urn:pulumi:test::inference-fleet::aws:iam/role:Role::node-role"
    assert plan.outputs["node_group_name"] == "inference-fleet-test-us-east-1-p5"


# Cluster Autoscaler and upgrades.


@pytest.mark.parametrize("group", list(GROUPS))
def test_node_groups_run_the_clusters_version_and_leave_their_size_to_the_autoscaler(
    plan_of: Callable[[str], Plan], group: str
) -> None:
    """pulumi-eks forwards ``version`` with a launch template (pulumi/pulumi-eks nodejs/eks/nodes/nodegroup.ts,
    createManagedNodeGroup, the same at v4.3.0 and at 7bf0c1b, the head of 2026-08-12; we pin 4.4.0). Its
    ``ignoreScalingChanges`` is off: it would make the engine send the state's stale desired size with every
    min/max edit (components/platform/live.py); a group that does not exist yet starts at desired_size."""
    inputs = node_group(plan_of(group))["inputs"]
    assert inputs["version"] == KUBERNETES_VERSION
    assert inputs["ignoreScalingChanges"] is False
    assert inputs["scalingConfig"] == {"minSize": 0, "maxSize": 4, "desiredSize": 2}


LIVE_CLUSTER = "inference-fleet-test-us-east-1"
LIVE_GROUP = "inference-fleet-test-us-east-1-g6e"


def deployed_group(monkeypatch: pytest.MonkeyPatch, desired: int) -> list[str]:
    """Answer the live reads as EKS would for a deployed cluster whose group the autoscaler sized to
    ``desired``; returns the invokes made, in order."""
    calls: list[str] = []

    def answer(token: str, result: dict[str, Any]) -> None:
        def handler(arguments: Mapping[str, Any]) -> dict[str, Any]:
            calls.append(token)
            return result

        monkeypatch.setitem(mocks.INVOKES, token, handler)

    answer("aws:eks/getClusters:getClusters", {"names": ["another-cluster", LIVE_CLUSTER], "id": "us-east-1"})
    answer("aws:eks/getCluster:getCluster", {"name": LIVE_CLUSTER, "version": KUBERNETES_VERSION})
    answer("aws:eks/getNodeGroups:getNodeGroups", {"clusterName": LIVE_CLUSTER, "names": [LIVE_GROUP]})
    answer(
        "aws:eks/getNodeGroup:getNodeGroup",
        {"nodeGroupName": LIVE_GROUP, "scalingConfigs": [{"desiredSize": desired, "minSize": 2, "maxSize": 9}]},
    )
    return calls


@pytest.mark.parametrize(
    ("sizes", "live", "sent"),
    [
        # max_size 9 -> 12 on a group Cluster Autoscaler grew to 9: it stays at 9 (the stale 2 would shrink it).
        ({"min_size": 2, "max_size": 12, "desired_size": 2}, 9, 9),
        # min_size 2 -> 4 over a live size of 2: 4, where the stale 2 fails "Minimum capacity can't be greater
        # than desired size".
        ({"min_size": 4, "max_size": 9, "desired_size": 4}, 2, 4),
        # max_size 9 -> 6 over a live 9: EKS keeps desired within max, so 6.
        ({"min_size": 2, "max_size": 6, "desired_size": 2}, 9, 6),
    ],
)
def test_a_min_or_max_edit_sends_the_groups_live_size_kept_within_the_new_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sizes: dict[str, int], live: int, sent: int
) -> None:
    """terraform-provider-aws resourceNodeGroupUpdate (internal/service/eks/node_group.go, the provider
    pulumi-aws 7.51.1 bundles) sends the whole scaling config, desired size included
    (expandNodegroupScalingConfig), in UpdateNodegroupConfig whenever any of it changes; with
    ignoreChanges on desiredSize the engine would send the state's size at creation."""
    calls = deployed_group(monkeypatch, live)
    plan = run_snippet(tmp_path, program(GPU, "g6e", {**GROUPS["g6e"][1], **sizes}, live=LIVE_CLUSTER))
    inputs = node_group(plan)["inputs"]
    assert inputs["scalingConfig"] == {"minSize": sizes["min_size"], "maxSize": sizes["max_size"], "desiredSize": sent}
    assert inputs["ignoreScalingChanges"] is False
    assert "aws:eks/getNodeGroup:getNodeGroup" in calls


def test_a_group_not_created_yet_in_a_deployed_cluster_starts_at_desired_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = deployed_group(monkeypatch, 7)
    monkeypatch.setitem(
        mocks.INVOKES, "aws:eks/getNodeGroups:getNodeGroups", lambda _: {"clusterName": LIVE_CLUSTER, "names": []}
    )
    plan = run_snippet(tmp_path, program(GPU, "g6e", {**GROUPS["g6e"][1], "desired_size": 1}, live=LIVE_CLUSTER))
    assert node_group(plan)["inputs"]["scalingConfig"]["desiredSize"] == 1
    assert "aws:eks/getNodeGroup:getNodeGroup" not in calls


@pytest.mark.parametrize("group", list(GROUPS))
def test_each_group_tags_its_auto_scaling_group_with_the_node_it_would_add(
    plan_of: Callable[[str], Plan], group: str
) -> None:
    plan = plan_of(group)
    _, spec = GROUPS[group]
    facts = instance_catalog().instance_types[spec["instance_types"][0]]
    full_spec = NodeGroup.model_validate({"min_size": 0, "max_size": 4, "desired_size": 2, **spec})
    tags = by_type(plan, "aws:autoscaling/tag:Tag")
    asg = mocks.offline_asg_name(node_group(plan)["inputs"]["nodeGroupName"])
    assert {tag["inputs"]["autoscalingGroupName"] for tag in tags} == {asg}
    assert {tag["inputs"]["tag"]["key"]: tag["inputs"]["tag"]["value"] for tag in tags} == (
        autoscaler.node_template_tags(group, full_spec, facts)
    )
    assert all(tag["inputs"]["tag"]["propagateAtLaunch"] is False for tag in tags)


def template_tags(plan: Plan) -> dict[str, str]:
    prefix = "k8s.io/cluster-autoscaler/node-template/"
    return {
        tag["inputs"]["tag"]["key"].removeprefix(prefix): tag["inputs"]["tag"]["value"]
        for tag in by_type(plan, "aws:autoscaling/tag:Tag")
    }


def test_an_efa_group_at_zero_offers_its_gpus_efa_devices_huge_pages_labels_and_taints(
    plan_of: Callable[[str], Plan],
) -> None:
    labels = scheduling.node_labels("p5", True, instance_catalog().instance_types["p5.48xlarge"])
    assert {
        "inference-fleet/node-group": "p5",
        "inference-fleet/accelerator": "nvidia",
        "inference-fleet/efa": "true",
    }.items() <= labels.items()
    assert template_tags(plan_of("p5")) == {
        **{f"label/{key}": value for key, value in labels.items()},
        "label/eks.amazonaws.com/capacityType": "ON_DEMAND",
        "label/k8s.amazonaws.com/accelerator": "nvidia",
        "taint/nvidia.com/gpu": "true:NoSchedule",
        "taint/vpc.amazonaws.com/efa": "true:NoSchedule",
        "resources/nvidia.com/gpu": "8",
        "resources/vpc.amazonaws.com/efa": "32",
        "resources/hugepages-2Mi": "5120Mi",
    }


def test_a_gpu_group_without_efa_offers_no_efa_devices_or_huge_pages(plan_of: Callable[[str], Plan]) -> None:
    tags = template_tags(plan_of("g6e"))
    assert tags["resources/nvidia.com/gpu"] == "4"
    assert tags["taint/nvidia.com/gpu"] == "true:NoSchedule"
    assert not {"resources/vpc.amazonaws.com/efa", "resources/hugepages-2Mi", "taint/vpc.amazonaws.com/efa"} & set(tags)


def test_a_capacity_block_group_at_zero_is_labelled_with_its_capacity_type(plan_of: Callable[[str], Plan]) -> None:
    assert template_tags(plan_of("p4d"))["label/eks.amazonaws.com/capacityType"] == "CAPACITY_BLOCK"
    assert template_tags(plan_of("p5en"))["label/eks.amazonaws.com/capacityType"] == "SPOT"


def test_a_cpu_group_at_zero_offers_its_labels_only(plan_of: Callable[[str], Plan]) -> None:
    tags = template_tags(plan_of("system"))
    assert tags == {
        "label/inference-fleet/node-group": "system",
        "label/inference-fleet/accelerator": "none",
        "label/eks.amazonaws.com/capacityType": "ON_DEMAND",
    }


# The node's own configuration (user data).


@pytest.mark.parametrize("group", EFA_GROUPS)
def test_efa_nodes_put_their_state_on_the_instance_store_and_reserve_huge_pages(
    plan_of: Callable[[str], Plan], group: str
) -> None:
    user_data = launch_template(plan_of(group))["userData"]
    assert set(mime_parts(user_data)) == {"application/node.eks.aws", "text/x-shellscript"}
    assert node_config(user_data) == {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"instance": {"localStorage": {"strategy": "RAID0"}}},
    }
    script = mime_parts(user_data)["text/x-shellscript"]
    assert "pages=2560\n" in script
    assert 'sysctl -w vm.nr_hugepages="$pages"' in script


def test_an_efa_group_reserves_advertises_and_tags_its_own_huge_pages(tmp_path: Path) -> None:
    """hugepages_2mi (here an rdma store's 549 GiB) reaches the node's script and the autoscaler."""
    _, spec = GROUPS["p5"]
    plan = run_snippet(tmp_path, program(EFA, "p5", {**spec, "hugepages_2mi": "549GiB"}))
    script = mime_parts(launch_template(plan)["userData"])["text/x-shellscript"]
    assert f"pages={549 * 1024 // 2}\n" in script
    assert template_tags(plan)["resources/hugepages-2Mi"] == "562176Mi"


def test_gpu_nodes_with_instance_store_without_efa_get_the_node_config_only(plan_of: Callable[[str], Plan]) -> None:
    assert instance_catalog().instance_types["g6e.12xlarge"].instance_store_gib > 0
    user_data = launch_template(plan_of("g6e"))["userData"]
    assert set(mime_parts(user_data)) == {"application/node.eks.aws"}
    assert node_config(user_data)["spec"] == {"instance": {"localStorage": {"strategy": "RAID0"}}}


def test_nodes_without_instance_store_or_efa_keep_the_eks_user_data_alone(plan_of: Callable[[str], Plan]) -> None:
    assert instance_catalog().instance_types["c6i.xlarge"].instance_store_gib == 0
    assert "userData" not in launch_template(plan_of("system"))


# The launch template every group shares.


@pytest.mark.parametrize("group", list(GROUPS))
def test_launch_templates_require_imdsv2_kept_from_pods(plan_of: Callable[[str], Plan], group: str) -> None:
    assert launch_template(plan_of(group))["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpTokens": "required",
        "httpPutResponseHopLimit": 1,
    }


@pytest.mark.parametrize(("group", "size"), [("p5", 200), ("g6e", 200), ("system", 150)])
def test_root_volume_is_encrypted_gp3_sized_for_the_nodes_images(
    plan_of: Callable[[str], Plan], group: str, size: int
) -> None:
    assert launch_template(plan_of(group))["blockDeviceMappings"] == [
        {
            "deviceName": "/dev/xvda",
            "ebs": {"volumeSize": size, "volumeType": "gp3", "encrypted": "true", "deleteOnTermination": "true"},
        }
    ]


def test_launched_instances_volumes_and_interfaces_are_tagged(plan_of: Callable[[str], Plan]) -> None:
    specifications = launch_template(plan_of("g6e"))["tagSpecifications"]
    assert [item["resourceType"] for item in specifications] == ["instance", "volume", "network-interface"]
    for item in specifications:
        assert item["tags"] == {
            "Name": "inference-fleet-test-us-east-1-g6e",
            "inference-fleet:node-group": "g6e",
            "inference-fleet:stack": "test",
            "managed-by": "pulumi",
        }


# GPU groups without EFA.


@pytest.mark.parametrize("group", ["g6e", "g6e-block", "system"])
def test_a_group_without_efa_has_no_efa_interfaces_placement_group_or_security_group(
    plan_of: Callable[[str], Plan], group: str
) -> None:
    plan = plan_of(group)
    template = launch_template(plan)
    assert "networkInterfaces" not in template
    assert "placement" not in template
    assert by_type(plan, "aws:ec2/placementGroup:PlacementGroup") == []
    assert by_type(plan, "aws:ec2/securityGroup:SecurityGroup") == []
    assert "vpc.amazonaws.com/efa" not in json.dumps(node_group(plan)["inputs"].get("taints", []))
    assert plan.outputs.get("placement_group_name") is None


def test_a_group_without_a_zone_uses_every_private_subnet(plan_of: Callable[[str], Plan]) -> None:
    assert node_group(plan_of("g6e"))["inputs"]["subnetIds"] == PRIVATE_SUBNETS


# Providers and failures.


@pytest.mark.parametrize("group", ["p5", "g6e"])
def test_every_child_uses_the_regional_provider(plan_of: Callable[[str], Plan], group: str) -> None:
    plan = plan_of(group)
    component_urn = f"urn:pulumi:test::inference-fleet::inference-fleet:platform:{GROUPS[group][0]}::us-east-1-{group}"
    children = [resource for resource in plan.resources if resource["parent"] == component_urn]
    assert {child["type"] for child in children} >= {
        "aws:ec2/launchTemplate:LaunchTemplate",
        "eks:index:ManagedNodeGroup",
    }
    for child in children:
        if child["custom"]:
            assert child["provider"] == PROVIDER_URN, child["urn"]
        else:
            assert child["options"]["providers"] == {"aws": PROVIDER_URN}, child["urn"]


def test_deployment_fails_naming_both_values_when_ec2_disagrees_with_the_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = mocks.INVOKES["aws:ec2/getInstanceType:getInstanceType"]

    def disagreeing(args: Mapping[str, Any]) -> dict[str, Any]:
        return {**answer(args), "efaMaximumInterfaces": 16}

    monkeypatch.setitem(mocks.INVOKES, "aws:ec2/getInstanceType:getInstanceType", disagreeing)
    with pytest.raises(ProgramError, match=r"p5\.48xlarge: .*efa_interfaces 32, .*efa_maximum_interfaces 16"):
        run_group(tmp_path, "p5")


def test_deployment_fails_when_ec2_reports_no_efa(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answer = mocks.INVOKES["aws:ec2/getInstanceType:getInstanceType"]
    monkeypatch.setitem(
        mocks.INVOKES,
        "aws:ec2/getInstanceType:getInstanceType",
        lambda args: {**answer(args), "efaSupported": False, "efaMaximumInterfaces": 0},
    )
    with pytest.raises(ProgramError, match=r"p4d\.24xlarge: EC2 reports .* does not support EFA"):
        run_group(tmp_path, "p4d")


def test_efa_node_group_refuses_a_spec_without_efa(tmp_path: Path) -> None:
    _, spec = GROUPS["g6e"]
    with pytest.raises(ProgramError, match=r"node group 'g6e' has efa: false; build it with GpuNodeGroup"):
        run_snippet(tmp_path, program(EFA, "g6e", spec))


def test_gpu_node_group_refuses_an_efa_spec(tmp_path: Path) -> None:
    _, spec = GROUPS["p5"]
    with pytest.raises(ProgramError, match=r"node group 'p5' has efa: true; build it with EfaNodeGroup"):
        run_snippet(tmp_path, program(GPU, "p5", spec))
