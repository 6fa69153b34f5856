"""A Mooncake role spanning nodes (mooncake.roles.<role>.nodes > 1): a LeaderWorkerSet of groups,
vLLM's native multi-node launch, Services and the proxy reaching leaders only, the group's own
NetworkPolicy, the schedulability check counting every pod of every group, and LeaderWorkerSet's
controller counted where it runs."""

from __future__ import annotations

from typing import Any

import pytest

from components.catalog import chart_crds, pins
from components.render.mooncake_groups import WORKER_INDEX_LABEL
from components.schedulability import check_schedulable
from components.schedulability.platform_pods import platform_workloads
from components.schedulability.workloads import workloads_of
from components.spec import parse_stack_config
from tests.crd_schema import schema_problems

from .stack_builders import REGION, merged, mooncake_endpoint, stack_config
from .test_mooncake_roles import objects, only_problem, problems

# p5 may have up to 4 nodes: 1 prefill pod and one decode group of 2 fit, not with their rolling surges
# (a prefill pod, a decode group); the tests that count pods set max_size themselves.
TWO_NODE_DECODE = {"node_group": "p5", "gpu_count": 8, "mooncake": {"roles": {"decode": {"nodes": 2}}}}


def config(endpoint: dict[str, Any], groups: dict[str, Any] | None = None) -> dict[str, Any]:
    return stack_config(
        region_overrides=groups, endpoints={"chat": mooncake_endpoint(merged(TWO_NODE_DECODE, endpoint))}
    )


def lws_crd() -> dict[str, Any]:
    (crd,) = [crd for crd in chart_crds(pins().charts.lws) if crd["spec"]["names"]["kind"] == "LeaderWorkerSet"]
    return crd


def after(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_a_two_node_decode_is_a_leader_worker_set_of_groups_of_two() -> None:
    rendered = objects(config({"mooncake": {"topology": {"prefill": 1, "decode": 2}}}))
    decode = rendered["decode"]
    assert (decode["apiVersion"], decode["kind"]) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    assert decode["metadata"]["name"] == "chat-decode"
    assert decode["spec"]["replicas"] == 2
    assert decode["spec"]["networkConfig"] == {"subdomainPolicy": "UniquePerReplica"}
    group = decode["spec"]["leaderWorkerTemplate"]
    assert (group["size"], group["restartPolicy"]) == (2, "RecreateGroupOnPodRestart")
    assert rendered["prefill"]["kind"] == "Deployment"  # prefill keeps one pod per instance
    assert schema_problems(lws_crd(), decode) == []


def test_the_leader_serves_and_the_workers_run_their_ranks_headless() -> None:
    group = objects(config({}))["decode"]["spec"]["leaderWorkerTemplate"]
    leader = group["leaderTemplate"]["spec"]["containers"][0]
    worker = group["workerTemplate"]["spec"]["containers"][0]
    for container, rank in ((leader, "0"), (worker, "$(LWS_WORKER_INDEX)")):
        args = container["args"]
        assert after(args, "--tensor-parallel-size") == "8"  # within the node
        assert after(args, "--pipeline-parallel-size") == "2"  # across the nodes
        assert after(args, "--nnodes") == "2"
        assert after(args, "--node-rank") == rank
        assert after(args, "--master-addr") == "$(LWS_LEADER_ADDRESS)"
        assert "--kv-transfer-config" in args
        # Every pod of the group takes a whole node's GPUs and EFA devices.
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
    assert "--headless" in worker["args"]
    assert "--headless" not in leader["args"]
    assert "readinessProbe" in leader
    assert not {"startupProbe", "readinessProbe", "livenessProbe"} & set(worker)
    assert [port["name"] for port in leader["ports"]] == ["http"]
    assert [port["name"] for port in worker["ports"]] == []


def test_services_reach_a_groups_leader_only_and_single_pod_roles_are_unchanged() -> None:
    rendered = objects(config({"mooncake": {"roles": {"prefill": {"nodes": 2}}}}))
    for part in ("prefill-service", "decode-service"):
        assert rendered[part]["spec"]["selector"][WORKER_INDEX_LABEL] == "0", part
    single = objects(config({"mooncake": {"roles": {"decode": {"nodes": 1}}}}))
    assert WORKER_INDEX_LABEL not in single["decode-service"]["spec"]["selector"]
    assert WORKER_INDEX_LABEL not in single["prefill-service"]["spec"]["selector"]


def test_a_groups_pods_may_reach_each_other_on_every_port_and_nobody_else_gains() -> None:
    rendered = objects(config({}))
    policy = rendered["policy-decode-group"]["spec"]
    selector = {
        "matchLabels": {"app.kubernetes.io/name": "chat"},
        "matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In", "values": ["decode"]}],
    }
    assert policy["podSelector"] == selector
    assert policy["ingress"] == [
        {"from": [{"podSelector": selector}], "ports": [{"protocol": "TCP", "port": 1, "endPort": 65535}]}
    ]
    assert "policy-prefill-group" not in rendered


def test_the_schedulability_check_counts_every_pod_of_every_group() -> None:
    stack = config({"mooncake": {"topology": {"prefill": 1, "decode": 2}}})
    workloads = {workload.name: workload for workload in workloads_of(objects(stack).values())}
    assert workloads["chat-decode (leaders)"].replicas == 2
    assert workloads["chat-decode (workers)"].replicas == 2
    # A roll starts one more group before it stops an old one (mooncake_groups.py rolloutStrategy).
    assert workloads["chat-decode (leaders)"].surge == 1
    assert workloads["chat-decode (workers)"].surge == 1
    # 1 prefill pod and its rolling surge + 2 groups of 2 decode pods + the rolling group, each pod a whole
    # p5: 8 nodes.
    found = check_schedulable(parse_stack_config(stack))
    assert any("LeaderWorkerSet inference/chat-decode" in problem.message for problem in found), found
    tight = config({"mooncake": {"topology": {"prefill": 1, "decode": 2}}}, {"node_groups": {"p5": {"max_size": 7}}})
    assert check_schedulable(parse_stack_config(tight)) != []
    roomy = config({"mooncake": {"topology": {"prefill": 1, "decode": 2}}}, {"node_groups": {"p5": {"max_size": 8}}})
    assert check_schedulable(parse_stack_config(roomy)) == []


def test_the_controller_is_counted_only_where_a_role_spans_nodes() -> None:
    parsed = parse_stack_config(stack_config(endpoints={}))
    with_groups = {w.name: w for w in platform_workloads(REGION, parsed.regions[REGION], leader_worker_sets=True)}
    controller = with_groups["lws-controller-manager"]
    assert (controller.namespace, controller.replicas) == ("lws-system", 1)
    assert controller.requests == {"cpu": 1000, "memory": 2**30}
    without = {w.name for w in platform_workloads(REGION, parsed.regions[REGION])}
    assert "lws-controller-manager" not in without


@pytest.mark.parametrize(
    ("endpoint", "path", "fragment"),
    [
        (
            {"mooncake": {"transfer": {"protocol": "tcp"}}, "node_group": "gpu", "gpu_count": 4},
            "endpoints.chat.mooncake.roles.decode.nodes",
            "2 spans nodes of an EFA group",
        ),
        (
            {"mooncake": {"autoscaling": {"enabled": True, "decode": {"min_replicas": 1, "max_replicas": 2}}}},
            "endpoints.chat.mooncake.autoscaling.decode",
            "decode spans 2 nodes and is a LeaderWorkerSet",
        ),
        (
            {"mooncake": {"mode": "both"}},
            "endpoints.chat.mooncake.roles.decode.nodes",
            "prefill spans 1 nodes and decode 2",
        ),
        (
            {"mooncake": {"roles": {"decode": {"args": ["--pipeline-parallel-size=4"]}}}},
            "endpoints.chat.mooncake.roles.decode.args[0]",
            "'--pipeline-parallel-size' is rendered for decode, which spans 2 nodes",
        ),
        (
            {"args": ["--headless"]},
            "endpoints.chat.args[0]",
            "'--headless' is rendered for decode",
        ),
        (
            {"mooncake": {"roles": {"decode": {"nodes": 0}}}},
            "endpoints.chat.mooncake.roles.decode.nodes",
            "must be an integer >= 1",
        ),
    ],
)
def test_a_bad_group_is_refused_at_its_field(endpoint: dict[str, Any], path: str, fragment: str) -> None:
    problem = only_problem(config(endpoint))
    assert problem.path == path
    assert fragment in problem.message


def test_a_group_name_past_a_statefulset_name_is_refused() -> None:
    # Ten groups, and the roll's surge group 10 (LWS v0.10.0 bursts to replicas + maxSurge groups:
    # leaderworkerset_controller.go rollingUpdateParameters), whose workers are '<name>-decode-10', 52
    # characters at most: a name of 44 (the longest an endpoint may have) is two too many, 43 one.
    name = "a" * 44
    stack = stack_config(
        endpoints={name: mooncake_endpoint(merged(TWO_NODE_DECODE, {"mooncake": {"topology": {"decode": 10}}}))}
    )
    found = [problem for problem in problems(stack) if problem.path.endswith("roles.decode.nodes")]
    assert len(found) == 1, found
    assert f"'{name}-decode-10' is 54 characters" in found[0].message
    fits = stack_config(
        endpoints={"a" * 42: mooncake_endpoint(merged(TWO_NODE_DECODE, {"mooncake": {"topology": {"decode": 10}}}))},
        region_overrides={"node_groups": {"p5": {"max_size": 30}}},
    )
    parse_stack_config(fits)


def test_a_canary_set_of_a_group_role_is_groups_too() -> None:
    stack = config(
        {"canary": {"image": "vllm/vllm-openai:v0.34.0", "weight": 10}}, {"node_groups": {"p5": {"max_size": 8}}}
    )
    rendered = objects(stack)
    assert rendered["canary-decode"]["kind"] == "LeaderWorkerSet"
    assert rendered["canary-decode"]["metadata"]["name"] == "chat-canary-decode"
    assert schema_problems(lws_crd(), rendered["canary-decode"]) == []
