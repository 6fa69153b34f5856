"""Cluster Autoscaler: the per-minor image pins, the chart values, the IAM policy and the node template tags."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from components import scheduling
from components.catalog import instance_catalog, pins
from components.platform import autoscaler
from components.spec.region import NodeGroup

CLUSTER = "inference-fleet-prod-us-east-1"
REGION = "us-east-1"

CHART_VALUE_PATHS = {
    "cloudProvider",
    "awsRegion",
    "autoDiscovery.clusterName",
    "image.tag",
    "rbac.serviceAccount.create",
    "rbac.serviceAccount.name",
    "extraArgs",
    "nodeSelector",
    "tolerations",
    "resources",
    "securityContext",
    "containerSecurityContext",
}
"""Keys of the chart's values.yaml at kubernetes/autoscaler cluster-autoscaler-chart-9.59.0
(cluster-autoscaler/charts/cluster-autoscaler/values.yaml) we set; maps and lists below them are
rendered as given (extraArgs as ``--key=value``). A key outside this set needs a fresh look at the chart."""


def spec(**fields: Any) -> NodeGroup:
    return NodeGroup.model_validate(
        {"instance_types": ["p5.48xlarge"], "min_size": 0, "max_size": 2, "desired_size": 0, **fields}
    )


def leaf_paths(values: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and f"{path}." in {p[: len(path) + 1] for p in CHART_VALUE_PATHS}:
            yield from leaf_paths(value, f"{path}.")
        else:
            yield path


# Pins.


def test_every_supported_kubernetes_version_has_an_autoscaler_image_of_its_own_minor() -> None:
    images = pins().charts.cluster_autoscaler.images
    assert set(images) == set(pins().kubernetes.supported_versions)
    for minor, tag in images.items():
        assert re.fullmatch(rf"v{re.escape(minor)}\.\d+", tag), (minor, tag)


def test_the_chart_comes_from_the_autoscaler_repository() -> None:
    chart = pins().charts.cluster_autoscaler
    assert (chart.repo, chart.chart, chart.version) == (
        "https://kubernetes.github.io/autoscaler",
        "cluster-autoscaler",
        "9.59.0",
    )


def test_a_version_without_an_image_is_refused_naming_the_pins() -> None:
    with pytest.raises(ValueError, match=r"no Cluster Autoscaler image pinned for Kubernetes 1\.29 .*pins\.yaml"):
        autoscaler.image_for("1.29")


# Chart values.


@pytest.mark.parametrize("version", ["1.30", "1.34", "1.36"])
def test_values_discover_the_clusters_groups_in_its_region_with_the_image_of_its_minor(version: str) -> None:
    values = autoscaler.autoscaler_values(CLUSTER, REGION, version)
    assert values["cloudProvider"] == "aws"
    assert values["autoDiscovery"] == {"clusterName": CLUSTER}
    assert values["awsRegion"] == REGION
    assert values["image"] == {"tag": pins().charts.cluster_autoscaler.images[version]}
    assert values["image"]["tag"].startswith(f"v{version}.")
    assert values["rbac"]["serviceAccount"] == {"create": True, "name": autoscaler.SERVICE_ACCOUNT}


def test_values_set_only_keys_read_in_the_pinned_charts_values() -> None:
    assert set(leaf_paths(autoscaler.autoscaler_values(CLUSTER, REGION, "1.34"))) <= CHART_VALUE_PATHS


def test_the_autoscaler_balances_similar_groups_may_drain_system_pods_and_wastes_least() -> None:
    assert autoscaler.autoscaler_values(CLUSTER, REGION, "1.34")["extraArgs"] == {
        "balance-similar-node-groups": True,
        "skip-nodes-with-system-pods": False,
        "expander": "least-waste",
    }


def test_the_autoscaler_runs_on_system_nodes_with_bounded_resources_as_nobody() -> None:
    values = autoscaler.autoscaler_values(CLUSTER, REGION, "1.34")
    assert values["nodeSelector"] == {scheduling.ACCELERATOR_LABEL: "none"}
    assert values["resources"]["requests"] == values["resources"]["limits"]
    assert values["securityContext"]["runAsNonRoot"] is True
    assert values["containerSecurityContext"]["allowPrivilegeEscalation"] is False


# IAM.


def statements(document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {statement["Sid"]: statement for statement in document["Statement"]}


def test_scaling_is_allowed_only_on_groups_tagged_for_this_cluster() -> None:
    scale = statements(autoscaler.autoscaler_policy(CLUSTER, REGION))["ScaleOwnGroups"]
    assert sorted(scale["Action"]) == [
        "autoscaling:SetDesiredCapacity",
        "autoscaling:TerminateInstanceInAutoScalingGroup",
    ]
    assert scale["Condition"] == {
        "StringEquals": {
            "aws:ResourceTag/k8s.io/cluster-autoscaler/enabled": "true",
            f"aws:ResourceTag/k8s.io/cluster-autoscaler/{CLUSTER}": "owned",
        }
    }


def test_only_the_scaling_statement_mutates_anything() -> None:
    for sid, statement in statements(autoscaler.autoscaler_policy(CLUSTER, REGION)).items():
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if sid != "ScaleOwnGroups":
            assert all(action.split(":")[1].startswith(("Describe", "Get")) for action in actions), sid


def test_describe_nodegroup_is_limited_to_this_clusters_node_groups() -> None:
    describe = statements(autoscaler.autoscaler_policy(CLUSTER, "cn-north-1"))["DescribeOwnNodeGroups"]
    assert describe["Action"] == "eks:DescribeNodegroup"
    assert describe["Resource"] == f"arn:aws-cn:eks:cn-north-1:*:nodegroup/{CLUSTER}/*/*"


def test_the_policy_has_the_readmes_discovery_actions() -> None:
    """cloudprovider/aws/README.md at cluster-autoscaler-1.34.5, "Full Cluster Autoscaler Features Policy"."""
    discover = statements(autoscaler.autoscaler_policy(CLUSTER, REGION))["DiscoverGroupsAndInstanceTypes"]
    assert set(discover["Action"]) == {
        "autoscaling:DescribeAutoScalingGroups",
        "autoscaling:DescribeAutoScalingInstances",
        "autoscaling:DescribeLaunchConfigurations",
        "autoscaling:DescribeScalingActivities",
        "ec2:DescribeImages",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeLaunchTemplateVersions",
        "ec2:GetInstanceTypesFromInstanceRequirements",
    }


# Node template tags.


PREFIX = "k8s.io/cluster-autoscaler/node-template/"


def test_template_tags_of_an_efa_group_carry_every_device_the_pods_request() -> None:
    facts = instance_catalog().instance_types["p5.48xlarge"]
    tags = autoscaler.node_template_tags("p5", spec(efa=True, availability_zone="us-east-1a"), facts)
    assert tags[f"{PREFIX}resources/nvidia.com/gpu"] == str(facts.accelerators)
    assert tags[f"{PREFIX}resources/vpc.amazonaws.com/efa"] == str(facts.efa_interfaces)
    assert tags[f"{PREFIX}resources/hugepages-2Mi"] == "5120Mi"
    assert tags[f"{PREFIX}taint/vpc.amazonaws.com/efa"] == "true:NoSchedule"
    assert tags[f"{PREFIX}taint/nvidia.com/gpu"] == "true:NoSchedule"
    for key, value in scheduling.node_labels("p5", True, facts).items():
        assert tags[f"{PREFIX}label/{key}"] == value


def test_the_huge_page_tag_is_what_the_group_reserves() -> None:
    facts = instance_catalog().instance_types["p5.48xlarge"]
    group = spec(efa=True, availability_zone="us-east-1a", hugepages_2mi="549GiB")
    tags = autoscaler.node_template_tags("p5", group, facts)
    assert tags[f"{PREFIX}resources/hugepages-2Mi"] == "562176Mi"
    assert scheduling.LIBFABRIC_HUGEPAGES_2MI_BYTES == 5120 * 2**20


def test_an_efa_capable_type_without_efa_offers_no_efa_devices() -> None:
    facts = instance_catalog().instance_types["p5.48xlarge"]
    tags = autoscaler.node_template_tags("p5-plain", spec(), facts)
    assert not [key for key in tags if "efa" in key or "hugepages" in key]


def test_neuron_devices_are_tagged_because_ca_knows_only_nvidia_gpus_from_ec2() -> None:
    facts = instance_catalog().instance_types["trn1.32xlarge"]
    tags = autoscaler.node_template_tags("trn", spec(instance_types=["trn1.32xlarge"]), facts)
    assert tags[f"{PREFIX}resources/aws.amazon.com/neuron"] == str(facts.accelerators)
    assert tags[f"{PREFIX}taint/aws.amazon.com/neuron"] == "true:NoSchedule"
    assert f"{PREFIX}label/{autoscaler.GPU_LABEL}" not in tags


def test_template_tags_fit_an_auto_scaling_group() -> None:
    """ASG tag keys are at most 128 characters and a group holds 50 tags; EKS uses about ten."""
    facts = instance_catalog().instance_types["p5.48xlarge"]
    tags = autoscaler.node_template_tags("a" * 63, spec(efa=True, availability_zone="us-east-1a"), facts)
    assert all(len(key) <= 128 and len(value) <= 256 for key, value in tags.items())
    assert len(tags) <= 20


def test_the_auto_scaling_group_name_is_the_node_groups_one_group() -> None:
    class Group:
        def __init__(self, name: str | None) -> None:
            self.name = name

    class Resource:
        def __init__(self, *names: str | None) -> None:
            self.autoscaling_groups = [Group(name) for name in names]

    assert autoscaler.autoscaling_group_name([Resource("eks-ng-1234")]) == "eks-ng-1234"
    for resources in ([], [Resource()], [Resource("a", "b")], [Resource(None)], None):
        with pytest.raises(ValueError, match="one Auto Scaling group"):
            autoscaler.autoscaling_group_name(resources)
