"""The offline schedulability check: its layers on hand-built nodes and pods, then whole stacks
(both examples place fully; crafted stacks fail for each reason, naming what and why)."""

from __future__ import annotations

from typing import Any

import pytest

from components.catalog import instance_catalog
from components.platform.autoscaler import RESOURCES as AUTOSCALER_RESOURCES
from components.schedulability import check as check_module
from components.schedulability import check_schedulable
from components.schedulability.matching import tolerates, why_not
from components.schedulability.nodes import (
    MIB,
    Node,
    allocatable,
    group_labels,
    max_pods,
    reserved_memory,
    reserved_millicores,
)
from components.schedulability.packing import place, run_daemon_sets
from components.schedulability.platform_pods import (
    DaemonSet,
    efa_device_plugin,
    helm_merge,
    nvidia_device_plugin,
    platform_workloads,
)
from components.schedulability.quantities import amount, amounts
from components.schedulability.workloads import Workload, pod_requests, workloads_of
from components.scheduling import EFA_TAINT, GPU_PRESENT_LABEL, GPU_TAINT, Taint
from components.spec import Problem, SpecError, parse_stack_config
from components.spec.region import NodeGroup
from fleetctl.stackfile import load_stack, stack_path

from .stack_builders import REGION, classic_endpoint, mooncake_endpoint, stack_config, with_classic, with_mooncake

CATALOG = instance_catalog()
P5 = CATALOG.instance_types["p5.48xlarge"]
M7I = CATALOG.instance_types["m7i.xlarge"]


def schedule(config: dict[str, Any]) -> list[Problem]:
    return check_schedulable(parse_stack_config(config))


# Quantities.


@pytest.mark.parametrize(
    ("resource", "text", "value"),
    [
        ("cpu", "500m", 500),
        ("cpu", "2", 2000),
        ("cpu", "0.25", 250),
        ("memory", "12Gi", 12 * 2**30),
        ("memory", "1.5Gi", 3 * 2**29),
        ("memory", "70Mi", 70 * MIB),
        ("memory", "1G", 10**9),
        ("nvidia.com/gpu", "8", 8),
        ("hugepages-2Mi", "5120Mi", 5120 * MIB),
    ],
)
def test_quantities_read_as_the_api_server_counts_them(resource: str, text: str, value: int) -> None:
    assert amount(resource, text) == value


def test_a_quantity_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        amount("memory", "12 GB")


# Matching.


def test_tolerations_follow_the_kubernetes_rule() -> None:
    assert tolerates({"operator": "Exists"}, GPU_TAINT)
    assert tolerates({"key": "nvidia.com/gpu", "operator": "Exists"}, GPU_TAINT)
    assert tolerates({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}, GPU_TAINT)
    assert not tolerates({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}, GPU_TAINT)
    assert not tolerates({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, GPU_TAINT)
    assert not tolerates({"key": "CriticalAddonsOnly", "operator": "Exists"}, GPU_TAINT)


def test_why_not_names_the_selector_the_affinity_or_the_taint() -> None:
    labels = {"inference-fleet/node-group": "gpu", "kubernetes.io/os": "linux"}
    assert "nodeSelector inference-fleet/node-group=p5" in str(
        why_not({"nodeSelector": {"inference-fleet/node-group": "p5"}}, labels, ())
    )
    affinity = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "x", "operator": "Exists"}]}]
                }
            }
        }
    }
    assert "required node affinity (x Exists)" in str(why_not(affinity, labels, ()))
    assert why_not(affinity, {**labels, "x": ""}, ()) is None
    assert "taint nvidia.com/gpu=true:NoSchedule is not tolerated" in str(why_not({}, labels, (GPU_TAINT,)))
    assert why_not({}, labels, (Taint("soft", "1", "PreferNoSchedule"),)) is None


@pytest.mark.parametrize(
    ("operator", "values", "labels", "holds"),
    [
        ("In", ["a", "b"], {"k": "b"}, True),
        ("In", ["a"], {}, False),
        ("NotIn", ["a"], {}, True),
        ("NotIn", ["a"], {"k": "a"}, False),
        ("DoesNotExist", [], {"k": "a"}, False),
        ("Gt", ["3"], {"k": "4"}, True),
        ("Lt", ["3"], {"k": "4"}, False),
    ],
)
def test_node_affinity_operators(operator: str, values: list[str], labels: dict[str, str], holds: bool) -> None:
    term = {"matchExpressions": [{"key": "k", "operator": operator, "values": values}]}
    pod = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    }
    assert (why_not(pod, labels, ()) is None) is holds


# Nodes.


def test_kubelet_reserves_cpu_as_nodeadm_does() -> None:
    # 6% of the first core, 1% of the second, 0.5% of the third and fourth, 0.25% of the rest.
    assert reserved_millicores(1000) == 60
    assert reserved_millicores(4000) == 60 + 10 + 10
    assert reserved_millicores(192_000) == 60 + 10 + 10 + 188_000 * 25 // 10_000


def test_managed_node_groups_cap_max_pods_at_110_up_to_30_vcpus_and_250_above() -> None:
    assert max_pods(M7I) == min(M7I.max_pods, 110)
    assert max_pods(P5) == min(P5.max_pods, 250)
    g6e = CATALOG.instance_types["g6e.12xlarge"]  # 48 vCPUs, 292 by its interfaces
    assert max_pods(g6e) == 250
    thirty_two = CATALOG.instance_types["c7i.8xlarge"]  # 32 vCPUs
    assert max_pods(thirty_two) == min(thirty_two.max_pods, 250)


def test_allocatable_is_capacity_less_reservations_and_efa_huge_pages() -> None:
    plain = allocatable(P5, hugepages=0)
    with_efa = allocatable(P5, hugepages=549 * 2**30)
    pods = max_pods(P5)
    assert plain["pods"] == pods
    assert plain["cpu"] == 192_000 - reserved_millicores(192_000)
    assert plain["memory"] == int(P5.memory_mib * MIB * 0.925) - reserved_memory(P5.max_pods) - 100 * MIB
    assert with_efa["hugepages-2Mi"] == 549 * 2**30
    assert with_efa["memory"] + with_efa["hugepages-2Mi"] == plain["memory"]
    assert "hugepages-2Mi" not in plain
    assert "nvidia.com/gpu" not in plain, "GPUs are advertised by the device plugin, not kubelet"


def test_nvidia_groups_carry_the_label_the_device_plugin_chart_requires_on_every_version() -> None:
    group = NodeGroup.model_validate(
        {"instance_types": ["p5.48xlarge"], "min_size": 0, "max_size": 1, "desired_size": 0}
    )
    for version in ("1.33", "1.34", "1.35"):
        assert group_labels("p5", group, P5, version)[GPU_PRESENT_LABEL] == "true"
    system = NodeGroup.model_validate(
        {"instance_types": ["m7i.xlarge"], "min_size": 1, "max_size": 1, "desired_size": 1}
    )
    assert GPU_PRESENT_LABEL not in group_labels("system", system, M7I, "1.35")


# Workloads.


def _deployment(name: str, replicas: int | None, strategy: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    if strategy is not None:
        spec["strategy"] = strategy
    return {"kind": "Deployment", "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def test_replicas_come_from_the_object_or_its_autoscaler_and_rollouts_surge() -> None:
    hpa = {
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "b"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "b"}, "maxReplicas": 7},
    }
    scaled_object = {
        "kind": "ScaledObject",
        "metadata": {"name": "e"},
        "spec": {"scaleTargetRef": {"kind": "StatefulSet", "name": "e"}, "minReplicaCount": 0, "maxReplicaCount": 5},
    }
    statefulset = {**_deployment("c", 3), "kind": "StatefulSet"}
    scaled_statefulset = {**_deployment("e", None), "kind": "StatefulSet"}
    stopped = _deployment("d", 0, {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}})
    manifests = [_deployment("a", 8), _deployment("b", None), hpa, statefulset, stopped, scaled_statefulset]
    found = {w.name: (w.replicas, w.surge) for w in workloads_of([*manifests, scaled_object])}
    # The default maxSurge is 25%, rounded up; StatefulSets and stopped Deployments add none. A
    # ScaledObject's workload counts at its maximum, whatever its minimum.
    assert found == {"a": (8, 2), "b": (7, 2), "c": (3, 0), "d": (0, 0), "e": (5, 0)}


def test_a_pod_requests_its_containers_sum_or_its_largest_init_container() -> None:
    pod = {
        "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}],
        "containers": [
            {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1", "memory": "1Gi"}}},
            {"resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}},
        ],
    }
    assert pod_requests(pod) == {"cpu": 2000, "memory": 4 * 2**30}


def test_helm_merges_maps_replaces_lists_and_deletes_on_null() -> None:
    defaults = {"a": {"b": 1, "c": 2}, "l": [1, 2], "gone": {"x": 1}}
    assert helm_merge(defaults, {"a": {"c": 3}, "l": [9], "gone": None}) == {"a": {"b": 1, "c": 3}, "l": [9]}


# Placement on hand-built nodes.


def _node(name: str, group: str, labels: dict[str, str], taints: tuple[Taint, ...] = ()) -> Node:
    return Node(
        name=name,
        group=group,
        facts=P5,
        efa=bool(taints),
        labels={"inference-fleet/node-group": group, **labels},
        taints=taints,
        allocatable={"cpu": 8000, "memory": 32 * 2**30, "pods": 20},
    )


def _workload(name: str, pod: dict[str, Any], requests: dict[str, int], replicas: int = 1, surge: int = 0) -> Workload:
    return Workload("Deployment", name, "ns", "chat", pod, requests, replicas, surge)


def test_a_device_plugin_that_does_not_land_leaves_its_nodes_without_the_resource() -> None:
    plugin = DaemonSet(
        "plugin", {"nodeSelector": {"present": "true"}}, {}, resource="nvidia.com/gpu", supply=lambda node: 4
    )
    nodes = [_node("a-1", "a", {"present": "true"}), _node("b-1", "b", {})]
    (gap,) = run_daemon_sets(nodes, [plugin])
    assert (gap.daemon_set, gap.group, gap.resource) == ("plugin", "b", "nvidia.com/gpu")
    assert "nodeSelector present=true does not match" in gap.reason
    assert nodes[0].free["nvidia.com/gpu"] == 4
    assert "nvidia.com/gpu" not in nodes[1].free


def test_pods_fill_nodes_and_the_shortage_names_the_group_and_the_count_needed() -> None:
    nodes = [_node("g-1", "g", {}), _node("g-2", "g", {})]
    big = _workload("big", {"nodeSelector": {"inference-fleet/node-group": "g"}}, {"cpu": 5000}, replicas=2, surge=1)

    def grow(group: str, count: int) -> list[Node]:
        return [_node(f"{group}-{i}", group, {}) for i in range(count)]

    result = place(nodes, [], [big], grow)
    (shortage,) = result.shortages
    assert (shortage.group, shortage.nodes, shortage.needed) == ("g", 2, 3)
    assert shortage.contributors == ((big, 3),)
    assert place(grow("g", 3), [], [big], grow).complete


def test_a_pod_no_node_admits_is_reported_with_each_groups_reason() -> None:
    tainted = _node("gpu-1", "gpu", {}, (GPU_TAINT,))
    plain = _node("system-1", "system", {})
    picky = _workload("picky", {"nodeSelector": {"missing": "label"}}, {"cpu": 100})
    greedy = _workload("greedy", {}, {"cpu": 9000})
    shy = _workload("shy", {"nodeSelector": {"inference-fleet/node-group": "gpu"}}, {"cpu": 100})
    result = place([tainted, plain], [], [picky, greedy, shy], lambda group, count: [])
    reasons = {misfit.workload.name: dict(misfit.reasons) for misfit in result.misfits}
    assert "nodeSelector missing=label does not match (the node has no missing label)" in reasons["picky"]["system"]
    assert reasons["greedy"] == {"system": "it requests 9 CPUs but a node has 8 CPUs free"}
    # No group admits it: every group's reason is given.
    assert reasons["shy"]["gpu"] == "taint nvidia.com/gpu=true:NoSchedule is not tolerated"
    assert "nodeSelector inference-fleet/node-group=gpu does not match" in reasons["shy"]["system"]


# The device plugins as the pinned charts render them with our values.


def test_nvidia_plugin_lands_on_our_gpu_nodes_and_would_not_without_the_label() -> None:
    plugin = nvidia_device_plugin()
    group = NodeGroup.model_validate(
        {"instance_types": ["p5.48xlarge"], "min_size": 0, "max_size": 1, "desired_size": 0}
    )
    labels = group_labels("p5", group, P5, "1.34")
    assert why_not(plugin.pod, labels, (GPU_TAINT, EFA_TAINT)) is None
    without = {key: value for key, value in labels.items() if key != GPU_PRESENT_LABEL}
    assert "required node affinity" in str(why_not(plugin.pod, without, (GPU_TAINT,)))


def test_efa_plugin_lands_only_on_supported_instance_types() -> None:
    plugin = efa_device_plugin()
    labels = {"inference-fleet/efa": "true", "node.kubernetes.io/instance-type": "p5.48xlarge"}
    assert why_not(plugin.pod, labels, (GPU_TAINT, EFA_TAINT)) is None
    unsupported = {**labels, "node.kubernetes.io/instance-type": "m7i.xlarge"}
    assert "node.kubernetes.io/instance-type In" in str(why_not(plugin.pod, unsupported, ()))


def test_every_efa_capable_catalog_type_is_one_the_efa_plugin_supports() -> None:
    plugin = efa_device_plugin()
    for name, facts in CATALOG.instance_types.items():
        if facts.efa_supported:
            labels = {"inference-fleet/efa": "true", "node.kubernetes.io/instance-type": name}
            assert why_not(plugin.pod, labels, ()) is None, name


# Whole stacks.


@pytest.mark.parametrize("stack", ["dev", "prod", "existing"])
def test_every_pod_of_the_example_stacks_can_be_placed(stack: str) -> None:
    _, spec = load_stack(stack_path(stack))
    assert check_schedulable(spec) == []


def test_the_device_plugin_gap_is_the_one_error_not_every_gpu_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the fix our NVIDIA nodes lacked nvidia.com/gpu.present: the chart's affinity kept
    the plugin off them, and every GPU pod would have waited Pending."""
    real = group_labels

    def unlabelled(*args: Any) -> dict[str, str]:
        return {key: value for key, value in real(*args).items() if key != GPU_PRESENT_LABEL}

    monkeypatch.setattr("components.schedulability.nodes.group_labels", unlabelled)
    problems = schedule(with_classic())
    assert [problem.path for problem in problems] == [
        f"regions.{REGION}.node_groups.p5",
        f"regions.{REGION}.node_groups.gpu",
    ]
    assert all("nvidia-device-plugin DaemonSet would not run" in problem.message for problem in problems)


CAPACITY = [
    pytest.param(with_classic({"replicas": 8}), "gpu", "raise max_size to 3", id="replicas_and_their_surge"),
    pytest.param(
        with_classic({"replicas": 6, "canary": {"image": "x:2", "replicas": 2}}),
        "gpu",
        "raise max_size to 3",
        id="replicas_plus_canary_and_surge",
    ),
    pytest.param(
        with_classic({"autoscaling": {"max_replicas": 8}}), "gpu", "raise max_size to 3", id="autoscaling_maximum"
    ),
    pytest.param(
        with_mooncake({"gpu_count": 8, "mooncake": {"topology": {"prefill": 2, "decode": 2}}}),
        "p5",
        "raise max_size to 5",
        id="topology_and_the_decode_surge",
    ),
    pytest.param(
        with_mooncake({"mooncake": {"topology": {"prefill": 3, "decode": 1}}}),
        "p5",
        "raise max_size to 5",
        id="rdma_pods_take_a_node_each",
    ),
    pytest.param(
        with_mooncake({"canary": {"image": "x:2"}}),
        "p5",
        "raise max_size to 6",
        id="a_mooncake_canary_set_and_its_decode_surge",
    ),
]


def test_a_mooncake_canary_sets_pods_are_counted_with_their_own_topology() -> None:
    """Primary 1P1D (3 nodes with the decode surge) fits the 4 p5 nodes alone; its canary's
    2P1D set adds 4 more, named in the shortage."""
    (problem,) = schedule(with_mooncake({"canary": {"image": "x:2", "topology": {"prefill": 2, "decode": 1}}}))
    assert "they need 7 nodes" in problem.message
    assert "StatefulSet inference/chat-canary-prefill 2 pod(s)" in problem.message
    assert "Deployment inference/chat-canary-decode 1 pod(s) + 1 rollout surge" in problem.message
    assert schedule(with_mooncake()) == []


@pytest.mark.parametrize(("config", "group", "fix"), CAPACITY)
def test_a_group_too_small_for_the_sum_of_its_pods_is_refused(config: dict[str, Any], group: str, fix: str) -> None:
    (problem,) = schedule(config)
    assert problem.path == f"regions.{REGION}.node_groups.{group}"
    assert fix in problem.message
    assert "endpoints.chat:" in problem.message


def test_the_shortage_sums_every_endpoint_on_the_group_and_names_each() -> None:
    two = stack_config(endpoints={"a": classic_endpoint({"replicas": 4}), "b": classic_endpoint({"replicas": 4})})
    (problem,) = schedule(two)
    assert problem.path == f"regions.{REGION}.node_groups.gpu"
    message = problem.message
    assert (
        "cannot hold the 10 pods that can only run on it (max_size 2 x g6e.12xlarge; they need 3 nodes; "
        "demand 10 nvidia.com/gpu, supply 8 nvidia.com/gpu)" in message
    )
    for part in (
        "endpoints.a: Deployment inference/a 4 pod(s) + 1 rollout surge",
        "endpoints.b: Deployment inference/b",
    ):
        assert part in message
    assert "raise max_size to 3, or lower the replicas" in message


def test_without_a_node_autoscaler_the_desired_size_is_the_supply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_module, "node_autoscaled", lambda region: False)
    (problem,) = schedule(with_classic({"replicas": 4}))
    assert problem.path == f"regions.{REGION}.node_groups.gpu"
    assert "desired_size 1 x g6e.12xlarge" in problem.message
    assert "raise desired_size to 2" in problem.message


def test_a_pod_larger_than_any_node_is_refused_naming_the_resource() -> None:
    (problem,) = schedule(with_classic({"resources": {"memory": "1000GiB"}}))
    assert problem.path == "endpoints.chat"
    assert "Deployment inference/chat can run on no node of us-east-1" in problem.message
    assert "node group gpu: it requests 1000.0 GiB memory but a node has" in problem.message


def test_a_node_selector_no_node_has_is_refused_naming_the_label() -> None:
    (problem,) = schedule(with_classic({"node_selector": {"team": "search"}}))
    assert problem.path == "endpoints.chat"
    assert "nodeSelector team=search does not match (the node has no team label)" in problem.message


def test_mooncake_proxies_and_masters_need_room_on_the_system_group() -> None:
    """They tolerate no accelerator taint: a two-node system group holds the platform's pods and
    one endpoint's two proxies (three while they roll) and master, not two endpoints'."""
    endpoints = {f"pd{i}": mooncake_endpoint({"mooncake": {"mode": "both"}}) for i in range(2)}
    groups = {"system": {"max_size": 2, "min_size": 1, "desired_size": 1}, "p5": {"max_size": 6}}
    problems = schedule(stack_config(region_overrides={"node_groups": groups}, endpoints=endpoints))
    assert [problem.path for problem in problems] == [f"regions.{REGION}.node_groups.system"], problems
    message = problems[0].message
    assert "(max_size 2 x m7i.xlarge; they need 3 nodes)" in message
    for part in ("Deployment kube-system/coredns", "StatefulSet inference/pd1-store", "Deployment inference/pd0-proxy"):
        assert part in message
    one = {"pd0": endpoints["pd0"]}
    assert schedule(stack_config(region_overrides={"node_groups": groups}, endpoints=one)) == []


def test_the_platforms_deployments_are_the_charts_merged_with_our_values() -> None:
    region_spec = parse_stack_config(with_classic()).regions[REGION]
    found = {workload.name: workload for workload in platform_workloads(REGION, region_spec)}
    assert sorted(found) == ["aws-load-balancer-controller", "cluster-autoscaler", "coredns"]
    assert (found["aws-load-balancer-controller"].replicas, found["coredns"].replicas) == (2, 2)
    autoscaler = found["cluster-autoscaler"]
    assert autoscaler.replicas == 1
    assert autoscaler.requests == amounts(AUTOSCALER_RESOURCES)
    assert autoscaler.pod["nodeSelector"] == {"inference-fleet/accelerator": "none"}


# Huge pages: an rdma store's ranks take their segments and buffers from them (docs/efa.md).


def rdma_store(group: dict[str, Any] | None = None, **store: Any) -> dict[str, Any]:
    endpoint = mooncake_endpoint({"gpu_count": 8, "mooncake": {"mode": "both", "store": store}})
    return stack_config(region_overrides={"node_groups": {"p5": group or {}}}, endpoints={"chat": endpoint})


def test_an_rdma_store_needs_a_group_that_reserves_its_huge_pages_and_says_which_field() -> None:
    default = {"hugepages_2mi": "5120MiB"}
    problems = schedule(rdma_store(default, global_segment_size="64GiB", local_buffer_size="4GiB"))
    assert {problem.path for problem in problems} == {"endpoints.chat"}
    # libfabric's 5120 MiB and 8 ranks x (64 GiB + 4 GiB), against the default 5120 MiB.
    for problem in problems:
        assert "it requests 549.0 GiB hugepages-2Mi but a node has 5.0 GiB hugepages-2Mi free" in problem.message
        assert f"raise regions.{REGION}.node_groups.p5.hugepages_2mi to at least 562176MiB" in problem.message
    enough = rdma_store({"hugepages_2mi": "562176MiB"}, global_segment_size="64GiB", local_buffer_size="4GiB")
    assert schedule(enough) == []


def test_the_reservation_leaves_the_nodes_memory_so_the_pods_memory_must_still_fit() -> None:
    """Kubelet offers memory less the huge pages: a pod whose memory fit before may not now."""
    config = rdma_store({"hugepages_2mi": "1800GiB"}, global_segment_size="64GiB", local_buffer_size="4GiB")
    problems = schedule(config)
    assert problems
    assert all("memory but a node has" in problem.message for problem in problems), problems


def test_a_reservation_past_the_nodes_memory_is_refused_at_the_field() -> None:
    (problem,) = schedule(rdma_store({"hugepages_2mi": "2048GiB"}))
    assert problem.path == f"regions.{REGION}.node_groups.p5.hugepages_2mi"
    assert "reserves 2048.0 GiB hugepages-2Mi on each p5.48xlarge, whose kubelet has" in problem.message
    assert "lower it" in problem.message


def test_a_count_far_beyond_any_group_is_refused_naming_a_bound_not_searched_for_ever() -> None:
    (problem,) = schedule(with_classic({"replicas": 10**23}))
    assert problem.path == f"regions.{REGION}.node_groups.gpu"
    assert "(max_size 2 x g6e.12xlarge; they need more than 1002 nodes;" in problem.message


def test_a_node_group_larger_than_any_real_one_is_refused_at_its_field() -> None:
    config = stack_config(region_overrides={"node_groups": {"gpu": {"max_size": 10_001}}})
    with pytest.raises(SpecError) as refused:
        parse_stack_config(config)
    assert [problem.path for problem in refused.value.problems] == [f"regions.{REGION}.node_groups.gpu.max_size"]
