"""The gate of a classic endpoint autoscaled from min_replicas 0 (components/render/gate.py): accepted
for the frameworks whose image runs it, refused naming the framework and why for the others; what it
renders (the proxy's builders with role gate, the route through it, the wake trigger on its series),
its NetworkPolicies evaluated pod by pod, and the schedulability check counting its pods."""

from __future__ import annotations

from typing import Any

import pytest

from components import naming
from components.metric_table import PROXY_IN_FLIGHT, PROXY_LAST_REQUEST
from components.render.autoscaling import COOLDOWN_SECONDS, PAUSED_REPLICAS
from components.render.classic import classic_objects
from components.render.kube import metrics_port
from components.render.proxy import (
    PROGRAM_CHECKSUM_ANNOTATION,
    PROXY_METRICS_PORT,
    PROXY_PORT,
    PROXY_REPLICAS,
    program_checksum,
    program_files,
    program_volume,
    proxy_deployment,
)
from components.render.route import ALB
from components.schedulability.check import region_workloads
from components.spec import Problem, SpecError, parse_stack_config
from front.serve import parse_arguments
from tests import custom_resources
from tests.network_policies import Pod, admitted

from .stack_builders import DELETE, REGION, placed_endpoint, with_classic, with_mooncake

SCALING = {"min_replicas": 0, "max_replicas": 3, "metrics": ["queue:4"]}
CANARY = {"image": "vllm/vllm-openai:v0.34.0", "weight": 10}
SCRAPER = Pod(naming.METRICS_NAMESPACE, {**naming.SCRAPER_LABELS, "app.kubernetes.io/instance": "prometheus"})
BYSTANDER = Pod("default", {"app": "bystander"})
TRITON = {"image": "nvcr.io/nvidia/tritonserver:25.10-py3", "model": DELETE, "model_path": "/models/repository"}


def gated(**fields: Any) -> dict[str, dict[str, Any]]:
    return classic_objects(placed_endpoint(with_classic({"autoscaling": SCALING, **fields})))


def rejected(config: dict[str, Any]) -> tuple[Problem, ...]:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(config)
    return caught.value.problems


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.33.0", "lmsysorg/sglang:v0.5.6"])
def test_a_vllm_or_sglang_endpoint_may_scale_to_zero_and_gets_a_gate(image: str) -> None:
    objects = gated(image=image)
    assert [part for part in objects if part.startswith("gate")] == [
        "gate-program",
        "gate",
        "gate-service",
        "gate-disruption-budget",
        "gate-network-policy",
    ]
    (container,) = objects["gate"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == image  # the endpoint's own image: its python3 and aiohttp


def test_an_endpoint_kept_at_one_or_more_has_no_gate_and_a_route_to_its_server() -> None:
    objects = classic_objects(placed_endpoint(with_classic({"autoscaling": {**SCALING, "min_replicas": 1}})))
    assert not [part for part in objects if part.startswith("gate")]
    assert objects["route"]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] == "chat"


@pytest.mark.parametrize(
    ("fields", "framework", "reason"),
    [
        ({"image": "ghcr.io/huggingface/text-generation-inference:3.3.7"}, "TGI", "under /root"),
        (TRITON, "Triton", "aiohttp"),
    ],
)
def test_a_framework_whose_image_cannot_run_the_gate_is_refused_naming_it_and_why(
    fields: dict[str, Any], framework: str, reason: str
) -> None:
    (problem,) = rejected(with_classic({"autoscaling": SCALING, **fields}))
    assert problem.path == "endpoints.chat.autoscaling.min_replicas"
    assert f"{framework}'s image" in problem.message
    assert reason in problem.message
    assert "needs a gate in front of the server" in problem.message
    assert "keep min_replicas at 1 or more, or serve with vLLM or SGLang" in problem.message


def test_the_gate_is_the_proxys_deployment_with_role_gate_and_forwards_to_the_server_service() -> None:
    objects = gated()
    gate = objects["gate"]
    proxy = proxy_deployment(placed_endpoint(with_mooncake()))
    assert gate["metadata"]["name"] == "chat-gate"
    assert gate["spec"]["replicas"] == PROXY_REPLICAS == 2
    assert gate["spec"]["selector"]["matchLabels"] == naming.selector_labels("chat", "gate")
    template = gate["spec"]["template"]
    assert template["metadata"]["labels"]["app.kubernetes.io/component"] == "gate"
    assert template["metadata"]["annotations"] == {PROGRAM_CHECKSUM_ANNOTATION: program_checksum()}
    affinity = template["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert affinity[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == naming.selector_labels("chat", "gate")
    (container,) = template["spec"]["containers"]
    (proxy_container,) = proxy["spec"]["template"]["spec"]["containers"]
    for field in ("name", "ports", "resources", "readinessProbe", "livenessProbe", "securityContext", "command"):
        assert container[field] == proxy_container[field], field
    assert template["spec"]["volumes"][1] == program_volume("chat-gate")
    assert objects["gate-program"]["data"] == program_files()
    arguments = parse_arguments(container["args"])
    assert arguments.forward == "http://chat.inference.svc:80"
    assert objects["service"]["spec"]["ports"][0]["port"] == 80  # what the forward URL names
    assert (arguments.forward_health, arguments.scale_to_zero) == ("/health", ["server"])
    assert (arguments.port, arguments.metrics_port) == (PROXY_PORT, PROXY_METRICS_PORT)
    assert objects["gate-service"]["spec"]["selector"] == naming.selector_labels("chat", "gate")
    assert objects["gate-disruption-budget"]["spec"]["selector"]["matchLabels"] == naming.selector_labels(
        "chat", "gate"
    )


def test_the_gate_reads_the_servers_own_health_path() -> None:
    (container,) = gated(health_check_path="/ready")["gate"]["spec"]["template"]["spec"]["containers"]
    assert parse_arguments(container["args"]).forward_health == "/ready"


def test_the_route_goes_to_the_gate_health_checked_on_its_health_and_a_canary_share_straight_to_the_canary() -> None:
    objects = gated(canary=CANARY, health_check_path="/ready")
    annotations = objects["route"]["metadata"]["annotations"]
    assert annotations[f"{ALB}/healthcheck-path"] == "/health"
    action = annotations[f"{ALB}/actions.chat-gate"]
    assert '{"serviceName":"chat-gate","servicePort":80,"weight":90}' in action
    assert '{"serviceName":"chat-canary","servicePort":80,"weight":10}' in action
    backend = objects["route"]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == "chat-gate"
    # The canary's target group keeps the server's own health path (the Service's annotation wins).
    assert objects["canary-service"]["metadata"]["annotations"] == {f"{ALB}/healthcheck-path": "/ready"}


def test_a_canary_behind_a_gate_checked_on_health_needs_no_annotation() -> None:
    assert "annotations" not in gated(canary=CANARY)["canary-service"]["metadata"]


def test_the_servers_scaled_object_wakes_on_the_gates_requests() -> None:
    autoscaler = gated()["autoscaler"]
    spec = autoscaler["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"], spec["cooldownPeriod"]) == (0, 3, COOLDOWN_SECONDS)
    assert [t["name"] for t in spec["triggers"]] == ["queue", "wake"]
    query = spec["triggers"][-1]["metadata"]["query"]
    gate = '{namespace="inference",endpoint="chat",role="gate"}'
    assert query == (
        f"clamp_max((time() - max({PROXY_LAST_REQUEST}{gate}) < bool 300) + sum({PROXY_IN_FLIGHT}{gate}), 1)"
    )
    assert custom_resources.problems(autoscaler) == []


def test_a_stopped_gated_endpoint_has_no_gate_pod_and_its_server_paused_at_zero() -> None:
    objects = gated(desired_state="stopped")
    assert objects["gate"]["spec"]["replicas"] == 0
    assert objects["autoscaler"]["metadata"]["annotations"][PAUSED_REPLICAS] == "0"


def pods_and_policies(**fields: Any) -> tuple[list[dict[str, Any]], dict[str, Pod], int]:
    endpoint = placed_endpoint(with_classic({"autoscaling": SCALING, **fields}))
    objects = list(classic_objects(endpoint).values())
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    pods = {
        o["metadata"]["name"]: Pod(o["metadata"]["namespace"], o["spec"]["template"]["metadata"]["labels"])
        for o in objects
        if o["kind"] == "Deployment"
    }
    return policies, pods, metrics_port(endpoint)


def test_the_server_port_admits_only_the_gate_and_the_scraper_while_the_gate_admits_anyone() -> None:
    policies, pods, port = pods_and_policies(canary=CANARY)
    gate, server, canary = pods["chat-gate"], pods["chat"], pods["chat-canary"]
    assert admitted(policies, gate, server, port)
    assert admitted(policies, SCRAPER, server, port)
    for outsider in (BYSTANDER, canary, Pod(naming.METRICS_NAMESPACE, {"app.kubernetes.io/name": "grafana"})):
        assert not admitted(policies, outsider, server, port)
    assert admitted(policies, BYSTANDER, gate, PROXY_PORT)  # the load balancer, from its subnets
    assert admitted(policies, BYSTANDER, canary, port)  # the canary's share comes straight from it
    assert admitted(policies, SCRAPER, gate, PROXY_METRICS_PORT)
    assert not admitted(policies, BYSTANDER, gate, PROXY_METRICS_PORT)
    assert not admitted(policies, gate, gate, PROXY_METRICS_PORT)
    for closed in (PROXY_METRICS_PORT, 9000):
        assert not admitted(policies, gate, server, closed)
    assert not admitted(policies, BYSTANDER, gate, 9000)


def test_an_sglang_server_on_a_port_of_its_choice_admits_the_gate_and_the_scraper_there_only() -> None:
    """SGLang serves its metrics on its server port, here the one the ``port`` field moves it to."""
    policies, pods, port = pods_and_policies(image="lmsysorg/sglang:v0.5.6", port=30000)
    server, gate = pods["chat"], pods["chat-gate"]
    assert port == 30000
    assert admitted(policies, gate, server, 30000)
    assert admitted(policies, SCRAPER, server, 30000)
    assert not admitted(policies, BYSTANDER, server, 30000)


def test_the_schedulability_check_counts_the_gates_two_pods() -> None:
    spec = parse_stack_config(with_classic({"autoscaling": SCALING}))
    workloads = {workload.name: workload for workload in region_workloads(spec, REGION)}
    gate = workloads["chat-gate"]
    assert (gate.replicas, gate.requests["cpu"], gate.requests["memory"]) == (2, 1000, 2**30)
    assert workloads["chat"].replicas == 3  # the server counted at its autoscaler's ceiling, as before
