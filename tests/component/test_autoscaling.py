"""Cluster Autoscaler, scale from zero, the nodes' own configuration and version upgrades, as the
offline plans of both example stacks record them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components import scheduling
from components.catalog import instance_catalog, pins
from components.platform.autoscaler import autoscaler_policy
from fleetctl import mocks
from fleetctl.plan import Plan, region_of
from tests.component.programs import by_type, example_plan
from tests.user_data import mime_parts, node_config

PROD_REGIONS = ("us-east-1", "eu-west-1")
STACK_REGIONS = [("dev", "us-west-2"), *(("prod", region) for region in PROD_REGIONS)]
STACK_VERSION = "1.34"
"""Both example stacks' ``kubernetes_version``."""

RELEASE = "kubernetes:helm.sh/v3:Release"
MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
ASG_TAG = "aws:autoscaling/tag:Tag"
TEMPLATE_PREFIX = "k8s.io/cluster-autoscaler/node-template/"


def in_region(plan: Plan, resource_type: str, region: str) -> list[dict[str, Any]]:
    by_urn = {resource["urn"]: resource for resource in plan.resources}
    return [resource for resource in by_type(plan, resource_type) if region_of(resource, by_urn) == region]


def one(plan: Plan, resource_type: str, region: str, name: str) -> dict[str, Any]:
    (found,) = [resource for resource in in_region(plan, resource_type, region) if resource["name"] == name]
    return found


# The release, its identity and its permissions.


@pytest.mark.parametrize(("stack", "region"), STACK_REGIONS)
def test_the_autoscaler_discovers_the_clusters_groups_with_the_chart_and_the_image_of_its_version(
    stack: str, region: str
) -> None:
    release = one(example_plan(stack), RELEASE, region, f"{region}-cluster-autoscaler")["inputs"]
    chart = pins().charts.cluster_autoscaler
    assert (release["chart"], release["version"], release["repositoryOpts"]["repo"]) == (
        "cluster-autoscaler",
        chart.version,
        "https://kubernetes.github.io/autoscaler",
    )
    assert release["namespace"] == "kube-system"
    values = release["values"]
    assert values["autoDiscovery"] == {"clusterName": f"inference-fleet-{stack}-{region}"}
    assert values["awsRegion"] == region
    assert values["image"] == {"tag": chart.images[STACK_VERSION]}
    assert values["image"]["tag"].startswith(f"v{STACK_VERSION}.")
    assert values["rbac"]["serviceAccount"] == {"create": True, "name": "cluster-autoscaler"}
    assert values["extraArgs"] == {
        "balance-similar-node-groups": True,
        "skip-nodes-with-system-pods": False,
        "expander": "least-waste",
    }
    assert values["nodeSelector"] == {scheduling.ACCELERATOR_LABEL: "none"}


@pytest.mark.parametrize(("stack", "region"), STACK_REGIONS)
def test_the_autoscaler_scales_only_its_clusters_groups_under_pod_identity(stack: str, region: str) -> None:
    plan = example_plan(stack)
    name = f"{region}-cluster-autoscaler"
    cluster = f"inference-fleet-{stack}-{region}"
    role = one(plan, "aws:iam/role:Role", region, name)
    trust = json.loads(role["inputs"]["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    policy = json.loads(one(plan, "aws:iam/rolePolicy:RolePolicy", region, name)["inputs"]["policy"])
    # The planned policy is the pure one for this cluster and region; tests/unit/test_autoscaler.py holds
    # that one to the autoscaler's README (scaling only groups tagged for this cluster).
    assert policy == autoscaler_policy(cluster, region)
    association = one(plan, "aws:eks/podIdentityAssociation:PodIdentityAssociation", region, name)["inputs"]
    assert (association["namespace"], association["serviceAccount"]) == ("kube-system", "cluster-autoscaler")
    assert association["clusterName"] == cluster


@pytest.mark.parametrize(("stack", "region"), STACK_REGIONS)
def test_the_autoscaler_starts_after_its_association_and_pod_identity_and_before_any_workload(
    stack: str, region: str
) -> None:
    plan = example_plan(stack)
    release = one(plan, RELEASE, region, f"{region}-cluster-autoscaler")
    association = one(plan, "aws:eks/podIdentityAssociation:PodIdentityAssociation", region, release["name"])
    agent = one(plan, "aws:eks/addon:Addon", region, f"{region}-eks-pod-identity-agent")
    assert {association["urn"], agent["urn"]} <= set(release["options"]["dependsOn"])
    deployments = in_region(plan, "kubernetes:apps/v1:Deployment", region)
    assert deployments
    for deployment in deployments:
        assert release["urn"] in deployment["options"]["dependsOn"], deployment["name"]


# Node groups: version, size and the Auto Scaling group's template tags.


@pytest.mark.parametrize(("stack", "region"), STACK_REGIONS)
def test_every_node_group_runs_the_clusters_version_and_leaves_its_size_to_the_autoscaler(
    stack: str, region: str
) -> None:
    groups = in_region(example_plan(stack), MANAGED_NODE_GROUP, region)
    assert len(groups) >= 2
    for group in groups:
        assert group["inputs"]["version"] == STACK_VERSION, group["name"]
        # Off: it made min/max edits send the stale size at creation; the program sends the live
        # size instead, which offline (no cluster exists) is the stack file's desired_size.
        assert group["inputs"]["ignoreScalingChanges"] is False, group["name"]


def template_tags(plan: Plan, region: str, group: str) -> dict[str, str]:
    node_group = one(plan, MANAGED_NODE_GROUP, region, f"{region}-{group}")
    asg = mocks.offline_asg_name(node_group["inputs"]["nodeGroupName"])
    tags = [tag for tag in in_region(plan, ASG_TAG, region) if tag["inputs"]["autoscalingGroupName"] == asg]
    assert tags
    assert all(tag["inputs"]["tag"]["propagateAtLaunch"] is False for tag in tags)
    return {tag["inputs"]["tag"]["key"].removeprefix(TEMPLATE_PREFIX): tag["inputs"]["tag"]["value"] for tag in tags}


@pytest.mark.parametrize("region", PROD_REGIONS)
@pytest.mark.parametrize(
    ("group", "instance_type", "hugepages"),
    # p5-store reserves its hugepages_2mi (chat's rdma store), p5 and g6e the default: libfabric's 5120 MiB.
    [("p5-store", "p5.48xlarge", "562176Mi"), ("p5", "p5.48xlarge", "5120Mi"), ("g6e", "g6e.48xlarge", "5120Mi")],
)
def test_each_efa_group_tells_the_autoscaler_what_a_node_offers_while_it_has_none(
    region: str, group: str, instance_type: str, hugepages: str
) -> None:
    facts = instance_catalog().instance_types[instance_type]
    tags = template_tags(example_plan("prod"), region, group)
    assert tags["resources/nvidia.com/gpu"] == str(facts.accelerators)
    assert tags["resources/vpc.amazonaws.com/efa"] == str(facts.efa_interfaces)
    assert tags["resources/hugepages-2Mi"] == hugepages
    assert tags["taint/nvidia.com/gpu"] == "true:NoSchedule"
    assert tags["taint/vpc.amazonaws.com/efa"] == "true:NoSchedule"
    assert tags["label/eks.amazonaws.com/capacityType"] == "ON_DEMAND"
    assert tags["label/k8s.amazonaws.com/accelerator"] == "nvidia"
    for key, value in scheduling.node_labels(group, True, facts).items():
        assert tags[f"label/{key}"] == value


def test_the_dev_gpu_group_tells_the_autoscaler_of_its_gpus_and_no_efa() -> None:
    tags = template_tags(example_plan("dev"), "us-west-2", "gpu")
    assert tags["resources/nvidia.com/gpu"] == "4"
    assert tags["taint/nvidia.com/gpu"] == "true:NoSchedule"
    assert tags["label/inference-fleet/node-group"] == "gpu"
    assert not [key for key in tags if "efa" in key or "hugepages" in key]


@pytest.mark.parametrize(("stack", "region"), STACK_REGIONS)
def test_system_groups_tag_their_labels_only(stack: str, region: str) -> None:
    tags = template_tags(example_plan(stack), region, "system")
    assert {key.split("/", 1)[0] for key in tags} == {"label"}
    assert tags["label/inference-fleet/accelerator"] == "none"


# The nodes' own configuration.


@pytest.mark.parametrize("region", PROD_REGIONS)
@pytest.mark.parametrize(("group", "pages"), [("p5-store", 549 * 512), ("p5", 2560), ("g6e", 2560)])
def test_efa_nodes_use_their_instance_store_and_reserve_huge_pages_through_their_user_data(
    region: str, group: str, pages: int
) -> None:
    template = one(example_plan("prod"), LAUNCH_TEMPLATE, region, f"{region}-{group}-lt")["inputs"]
    parts = mime_parts(template["userData"])
    assert list(parts) == ["application/node.eks.aws", "text/x-shellscript"]
    assert node_config(template["userData"]) == {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"instance": {"localStorage": {"strategy": "RAID0"}}},
    }
    assert f"pages={pages}\n" in parts["text/x-shellscript"]


def test_dev_gpu_nodes_use_their_instance_store_and_reserve_no_huge_pages() -> None:
    template = one(example_plan("dev"), LAUNCH_TEMPLATE, "us-west-2", "us-west-2-gpu-lt")["inputs"]
    assert list(mime_parts(template["userData"])) == ["application/node.eks.aws"]


@pytest.mark.parametrize(("stack", "region"), STACK_REGIONS)
def test_system_nodes_keep_the_eks_user_data_alone_and_have_room_for_vllm_images(stack: str, region: str) -> None:
    template = one(example_plan(stack), LAUNCH_TEMPLATE, region, f"{region}-system-lt")["inputs"]
    assert "userData" not in template
    assert template["blockDeviceMappings"][0]["ebs"]["volumeSize"] == 150
