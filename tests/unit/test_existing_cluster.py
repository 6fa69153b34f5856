"""Regions on an existing cluster (``regions.<r>.existing_cluster``, docs/existing-cluster.md): what
validation accepts and refuses, and what the rendering and the placement check make of node groups
that describe the cluster's nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.catalog import instance_catalog
from components.render.endpoint import endpoint_objects
from components.render.placement import placed
from components.schedulability import check_schedulable
from components.schedulability.check import region_placement
from components.schedulability.platform_pods import daemon_sets, platform_workloads
from components.spec import Problem, SpecError, StackSpec, parse_stack_config
from components.spec.existing import KubeconfigError, read_kubeconfig
from tests.unit.stack_builders import DELETE, REGION, classic_endpoint, existing_region, region

AMP_WORKSPACE = "arn:aws:aps:us-east-1:123456789012:workspace/ws-12345678-abcd-1234-abcd-123456789012"
ACCELERATOR_LABELS = {
    group: {"labels": labels}
    for group, labels in {
        "system": {"inference-fleet/accelerator": "none"},
        "gpu": {"inference-fleet/accelerator": "nvidia", "nvidia.com/gpu.present": "true"},
        "p5": {
            "inference-fleet/accelerator": "nvidia",
            "nvidia.com/gpu.present": "true",
            "inference-fleet/efa": "true",
        },
    }.items()
}
"""The program's own labels on every described group, as the add-ons it installs select them."""
KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\n"


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    return str(path)


def stack(region_config: dict[str, Any], endpoints: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "regions": {REGION: region_config},
        "endpoints": {"chat": classic_endpoint()} if endpoints is None else endpoints,
    }


def problems(config: dict[str, Any]) -> list[Problem]:
    with pytest.raises(SpecError) as error:
        parse_stack_config(config)
    return list(error.value.problems)


def problem_at(config: dict[str, Any], path: str) -> Problem:
    found = [problem for problem in problems(config) if problem.path == path]
    assert found, [(problem.path, problem.message) for problem in problems(config)]
    return found[0]


def test_a_region_on_a_cluster_given_by_kubeconfig_validates_with_described_groups(kubeconfig: str) -> None:
    spec = parse_stack_config(stack(existing_region({"kubeconfig": kubeconfig})))
    target = spec.regions[REGION]
    assert target.existing
    assert target.vpc is None
    assert target.node_groups["gpu"].labels == {"role": "gpu"}
    assert target.node_groups["gpu"].min_size is None


def test_exactly_one_of_name_and_kubeconfig(kubeconfig: str) -> None:
    both = existing_region({"kubeconfig": kubeconfig, "name": "team-a"})
    assert "exactly one" in problem_at(stack(both), f"regions.{REGION}.existing_cluster").message
    neither = existing_region({}, {"existing_cluster": {"kubeconfig": DELETE}})
    assert "exactly one" in problem_at(stack(neither), f"regions.{REGION}.existing_cluster").message


def test_a_missing_kubeconfig_file_is_a_validation_error_naming_the_field(tmp_path: Path) -> None:
    config = stack(existing_region({"kubeconfig": str(tmp_path / "nowhere")}))
    problem = problem_at(config, f"regions.{REGION}.existing_cluster.kubeconfig")
    assert "does not exist" in problem.message
    assert "env:VAR" in problem.message


def test_an_unset_kubeconfig_variable_is_a_validation_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLEET_TEST_KUBECONFIG", raising=False)
    config = stack(existing_region({"kubeconfig": "env:FLEET_TEST_KUBECONFIG"}))
    problem = problem_at(config, f"regions.{REGION}.existing_cluster.kubeconfig")
    assert "FLEET_TEST_KUBECONFIG" in problem.message
    assert "not set" in problem.message


def test_a_kubeconfig_is_read_from_a_file_relative_to_the_project_or_from_a_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kube.yaml").write_text(KUBECONFIG)
    assert read_kubeconfig("kube.yaml", base=tmp_path) == KUBECONFIG
    monkeypatch.setenv("FLEET_TEST_KUBECONFIG", "from the variable")
    assert read_kubeconfig("env:FLEET_TEST_KUBECONFIG") == "from the variable"
    with pytest.raises(KubeconfigError, match="does not exist"):
        read_kubeconfig("kube.yaml", base=tmp_path / "elsewhere")


def test_a_vpc_or_cluster_access_is_refused_on_an_existing_cluster(kubeconfig: str) -> None:
    config = stack(
        existing_region(
            {"kubeconfig": kubeconfig},
            {
                "vpc": {"cidr": "10.20.0.0/16", "availability_zones": ["us-east-1a", "us-east-1b"]},
                "cluster_access": {"public_access_cidrs": ["10.0.0.0/8"]},
            },
        )
    )
    assert "remove it" in problem_at(config, f"regions.{REGION}.vpc").message
    assert "access entries" in problem_at(config, f"regions.{REGION}.cluster_access").message


def test_a_created_region_needs_a_vpc_and_sizes_and_takes_no_described_labels() -> None:
    config = stack(region({"vpc": DELETE, "node_groups": {"gpu": {"desired_size": DELETE, "labels": {"a": "b"}}}}))
    assert "existing_cluster" in problem_at(config, f"regions.{REGION}.vpc").message
    assert problem_at(config, f"regions.{REGION}.node_groups.gpu.desired_size").message == "is required"
    assert "remove it" in problem_at(config, f"regions.{REGION}.node_groups.gpu.labels").message


def test_a_described_group_needs_labels_and_takes_no_sizes(kubeconfig: str) -> None:
    config = stack(
        existing_region({"kubeconfig": kubeconfig}, {"node_groups": {"gpu": {"labels": DELETE, "min_size": 0}}})
    )
    assert "select this group's nodes" in problem_at(config, f"regions.{REGION}.node_groups.gpu.labels").message
    assert "max_size" in problem_at(config, f"regions.{REGION}.node_groups.gpu.min_size").message


@pytest.mark.parametrize(
    "addon", ["coredns", "eks_pod_identity_agent", "cluster_autoscaler", "aws_load_balancer_controller"]
)
def test_what_only_eks_installs_must_be_present_on_a_cluster_given_by_kubeconfig(kubeconfig: str, addon: str) -> None:
    config = stack(existing_region({"kubeconfig": kubeconfig, "addons": {addon: "install"}}))
    problem = problem_at(config, f"regions.{REGION}.existing_cluster.addons.{addon}")
    assert "present" in problem.message
    assert "name" in problem.message


def test_a_cluster_given_by_kubeconfig_takes_no_cold_tier_or_remote_write(kubeconfig: str) -> None:
    overrides = {"cold_tier": {"enabled": True}, "metrics": {"amp_workspace_arn": AMP_WORKSPACE}}
    paths = {problem.path for problem in problems(stack(existing_region({"kubeconfig": kubeconfig}, overrides)))}
    assert {f"regions.{REGION}.cold_tier.enabled", f"regions.{REGION}.metrics.amp_workspace_arn"} <= paths


def test_a_cluster_given_by_kubeconfig_takes_no_s3_weights_or_global_front(kubeconfig: str) -> None:
    synced = classic_endpoint({"model": DELETE, "model_source": "s3://weights/qwen3-8b/"})
    config = stack(existing_region({"kubeconfig": kubeconfig}), {"chat": synced})
    config["global"] = {"enabled": True}
    paths = {problem.path for problem in problems(config)}
    assert {"endpoints.chat.model_source", "global.enabled"} <= paths
    by_name = stack(existing_region({"name": "team-a"}, {"node_groups": ACCELERATOR_LABELS}), {"chat": synced})
    parse_stack_config(by_name)  # an EKS cluster gives its pods an AWS identity


def test_installed_device_plugins_need_the_programs_labels_on_the_described_nodes(kubeconfig: str) -> None:
    plugins = {"nvidia_device_plugin": "install", "efa_device_plugin": "install"}
    config = stack(existing_region({"kubeconfig": kubeconfig, "addons": plugins}))
    message = problem_at(config, f"regions.{REGION}.node_groups.gpu.labels").message
    assert "inference-fleet/accelerator=nvidia" in message
    assert "present" in message
    labelled = existing_region(
        {"kubeconfig": kubeconfig, "addons": plugins},
        {
            "node_groups": {
                "gpu": {"labels": ACCELERATOR_LABELS["gpu"]["labels"]},
                "p5": {"labels": ACCELERATOR_LABELS["p5"]["labels"]},
            }
        },
    )
    parse_stack_config(stack(labelled))


def test_an_eks_cluster_by_name_may_install_every_add_on_on_labelled_nodes() -> None:
    everything = existing_region(
        {"name": "team-a", "addons": {"nvidia_device_plugin": "install", "efa_device_plugin": "install"}},
        {"node_groups": ACCELERATOR_LABELS},
    )
    spec = parse_stack_config(stack(everything))
    assert spec.regions[REGION].installs("cluster_autoscaler")
    unlabelled = existing_region({"name": "team-a"}, {"node_groups": {"system": {"labels": {"role": "system"}}}})
    message = problem_at(stack(unlabelled), f"regions.{REGION}.node_groups.system.labels").message
    assert "cluster_autoscaler" in message
    assert "inference-fleet/accelerator=none" in message


# Rendering and placement on described nodes.


def existing_spec(kubeconfig: str, overrides: dict[str, Any] | None = None) -> StackSpec:
    return parse_stack_config(stack(existing_region({"kubeconfig": kubeconfig}, overrides)))


def test_pods_select_and_tolerate_the_described_groups_nodes(kubeconfig: str) -> None:
    taint = {"key": "team/gpu", "value": "yes", "effect": "NoSchedule"}
    spec = existing_spec(kubeconfig, {"node_groups": {"gpu": {"labels": {"pool": "gpu-a"}, "taints": [taint]}}})
    objects = endpoint_objects(placed(spec, spec.placements[0]))
    pod = next(obj for obj in objects.values() if obj["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "gpu-a", "role": "gpu"}
    assert pod["tolerations"] == [{"key": "team/gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]


def test_the_check_places_pods_on_described_nodes_and_trusts_present_plugins(kubeconfig: str) -> None:
    spec = existing_spec(kubeconfig)
    assert check_schedulable(spec) == []
    target = spec.regions[REGION]
    placement = region_placement(spec, REGION, instance_catalog())
    gpu_nodes = [node for node in placement.nodes if node.group == "gpu"]
    assert all(node.allocatable.get("nvidia.com/gpu") == 4 for node in gpu_nodes)  # the present plugin, trusted
    names = {workload.name for workload in platform_workloads(REGION, target)}
    assert names.isdisjoint({"coredns", "cluster-autoscaler", "aws-load-balancer-controller"})
    plugins = {daemon_set.name: daemon_set for daemon_set in daemon_sets(target, placement.nodes)}
    assert plugins["nvidia-device-plugin"].requests == {}
    assert "aws-node" not in plugins  # the cluster's own, not the program's


KMS_KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def test_an_eks_cluster_by_name_names_an_existing_bucket_and_its_key_for_the_cold_tier() -> None:
    named = {"cold_tier": {"enabled": True, "bucket": "team-kv", "kms_key_arn": KMS_KEY}}
    spec = parse_stack_config(stack(existing_region({"name": "team-a"}, {**named, "node_groups": ACCELERATOR_LABELS})))
    assert spec.regions[REGION].cold_tier.bucket == "team-kv"
    unnamed = existing_region({"name": "team-a"}, {"cold_tier": {"enabled": True}, "node_groups": ACCELERATOR_LABELS})
    assert "kms_key_arn" in problem_at(stack(unnamed), f"regions.{REGION}.cold_tier.bucket").message
    keyless = existing_region(
        {"name": "team-a"}, {"cold_tier": {"enabled": True, "bucket": "team-kv"}, "node_groups": ACCELERATOR_LABELS}
    )
    problem_at(stack(keyless), f"regions.{REGION}.cold_tier.kms_key_arn")


def test_a_created_region_names_no_bucket_of_its_own() -> None:
    config = stack(region({"cold_tier": {"enabled": True, "bucket": "team-kv"}}))
    assert "creates this region's bucket" in problem_at(config, f"regions.{REGION}.cold_tier.bucket").message
