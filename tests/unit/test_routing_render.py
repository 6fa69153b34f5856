"""What ``routing`` renders (components/render/routing.py): a split endpoint's proxy gets ``--routing MODE
--decode-pods URL`` and the headless Service ``<name>-decode-pods`` (its canary set its own); a classic
endpoint gets the gate with ``--routing MODE --forward-pods URL`` and the headless Service ``<name>-pods``,
``--scale-to-zero server`` and the wake trigger only at min_replicas 0. Each URL is read back by the front's
own parser, each Service's selector matched against the rendered pods, each pod reached through the
NetworkPolicies; and without ``routing`` nothing of it is rendered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from components.render.classic import classic_objects
from components.render.endpoint import endpoint_objects
from components.render.gate import has_gate
from components.render.mooncake_groups import WORKER_INDEX_LABEL
from components.render.route import ALB
from components.schedulability.check import region_workloads
from components.spec import parse_stack_config
from front.serve import parse_arguments
from tests.network_policies import Pod, admitted, matches

from .stack_builders import (
    REGION,
    mooncake_endpoint,
    placed_endpoint,
    region,
    stack_config,
    with_classic,
    with_mooncake,
)

CANARY = {"image": "vllm/vllm-openai:v0.34.0", "weight": 10}
BYSTANDER = Pod("default", {"app": "bystander"})


def objects_of(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return endpoint_objects(placed_endpoint(config))


def args_of(objects: Mapping[str, dict[str, Any]], part: str) -> list[str]:
    (container,) = objects[part]["spec"]["template"]["spec"]["containers"]
    args: list[str] = container["args"]
    return args


def pods(objects: Mapping[str, dict[str, Any]]) -> dict[str, Pod]:
    """Each workload's pods (a LeaderWorkerSet's leader, worker index 0, and a worker, index 1)."""
    found = {}
    for manifest in objects.values():
        name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
        if manifest["kind"] == "Deployment":
            found[name] = Pod(namespace, manifest["spec"]["template"]["metadata"]["labels"])
        elif manifest["kind"] == "LeaderWorkerSet":
            group = manifest["spec"]["leaderWorkerTemplate"]
            leader = group.get("leaderTemplate", group["workerTemplate"])["metadata"]["labels"]
            found[name] = Pod(namespace, {**leader, WORKER_INDEX_LABEL: "0"})
            worker = group["workerTemplate"]["metadata"]["labels"]
            found[f"{name}/worker"] = Pod(namespace, {**worker, WORKER_INDEX_LABEL: "1"})
    return found


def selected(objects: Mapping[str, dict[str, Any]], service: str) -> list[str]:
    """The pods a Service of ``objects`` selects, by workload name."""
    selector = {"matchLabels": objects[service]["spec"]["selector"]}
    return [name for name, pod in pods(objects).items() if matches(selector, pod.labels)]


def policies(objects: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [manifest for manifest in objects.values() if manifest["kind"] == "NetworkPolicy"]


def headless(service: dict[str, Any], name: str, port: int) -> None:
    assert service["metadata"]["name"] == name
    spec = service["spec"]
    assert spec["clusterIP"] == "None"
    # Ready pods only: a terminating one leaves the name, so the front stops choosing it while it drains.
    assert "publishNotReadyAddresses" not in spec
    assert spec["ports"] == [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}]


# Split endpoints: the proxy.


@pytest.mark.parametrize("mode", ["prefix", "least-load", "random"])
def test_a_routed_split_endpoints_proxy_chooses_the_decode_pod_through_its_headless_service(mode: str) -> None:
    objects = objects_of(with_mooncake({"routing": mode}))
    arguments = parse_arguments(args_of(objects, "proxy"))
    assert (arguments.routing, arguments.decode_pods) == (mode, "http://chat-decode-pods.inference.svc:8000")
    assert arguments.decode == "http://chat-decode.inference.svc:8000"  # the Service, for the other routes
    assert arguments.prefill_service == "chat-prefill.inference.svc"
    headless(objects["decode-pods-service"], "chat-decode-pods", 8000)
    assert objects["decode-pods-service"]["metadata"]["labels"] == objects["decode-service"]["metadata"]["labels"]
    assert selected(objects, "decode-pods-service") == ["chat-decode"]


def test_the_decode_pods_service_takes_only_the_leaders_of_a_decode_spanning_nodes() -> None:
    config = stack_config(
        regions={REGION: region({"node_groups": {"p5": {"max_size": 8}}})},
        endpoints={
            "chat": mooncake_endpoint(
                {
                    "gpu_count": 8,
                    "routing": "prefix",
                    "mooncake": {"topology": {"prefill": 1, "decode": 1}, "roles": {"decode": {"nodes": 2}}},
                }
            )
        },
    )
    objects = objects_of(config)
    assert objects["decode-pods-service"]["spec"]["selector"][WORKER_INDEX_LABEL] == "0"
    assert selected(objects, "decode-pods-service") == ["chat-decode"]  # the leader, not chat-decode/worker
    assert selected(objects, "decode-pods-service") == selected(objects, "decode-service")


def test_the_proxy_reaches_each_decode_pod_on_the_port_its_url_names() -> None:
    objects = objects_of(with_mooncake({"routing": "prefix"}))
    found = pods(objects)
    port = int(parse_arguments(args_of(objects, "proxy")).decode_pods.rsplit(":", 1)[1])
    assert admitted(policies(objects), found["chat-proxy"], found["chat-decode"], port)
    assert not admitted(policies(objects), BYSTANDER, found["chat-decode"], port)


def test_each_canary_set_routes_among_its_own_decode_pods() -> None:
    config = with_mooncake(
        {"routing": "least-load", "mooncake": {"topology": {"decode": 2}}, "canary": {**CANARY, "weight": 30}}
    )
    objects = objects_of(config)
    for prefix, part in (("chat", ""), ("chat-canary", "canary-")):
        arguments = parse_arguments(args_of(objects, f"{part}proxy"))
        assert arguments.routing == "least-load"
        assert arguments.decode_pods == f"http://{prefix}-decode-pods.inference.svc:8000"
        headless(objects[f"{part}decode-pods-service"], f"{prefix}-decode-pods", 8000)
        assert selected(objects, f"{part}decode-pods-service") == [f"{prefix}-decode"]


def test_a_split_endpoint_without_routing_renders_no_routing() -> None:
    objects = objects_of(with_mooncake({"canary": CANARY}))
    assert not [part for part in objects if "pods-service" in part]
    for part in ("proxy", "canary-proxy"):
        arguments = parse_arguments(args_of(objects, part))
        assert (arguments.routing, arguments.decode_pods) == (None, None)


# Classic endpoints: the gate.


def gate_of(fields: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], Any]:
    objects = classic_objects(placed_endpoint(with_classic(fields)))
    return objects, parse_arguments(args_of(objects, "gate"))


def test_routing_gives_a_classic_endpoint_a_gate_that_chooses_the_server_pod() -> None:
    objects, arguments = gate_of({"routing": "prefix", "replicas": 3})
    assert [part for part in objects if part.startswith("gate") or part == "pods-service"] == [
        "gate-program",
        "gate",
        "gate-service",
        "gate-disruption-budget",
        "gate-network-policy",
        "pods-service",
    ]
    assert list(objects)[-2:] == ["route", "network-policy"]  # the route after the gate (it waits for its pods)
    assert arguments.forward == "http://chat.inference.svc:80"
    assert (arguments.forward_health, arguments.routing) == ("/health", "prefix")
    assert arguments.forward_pods == "http://chat-pods.inference.svc:8000"
    assert arguments.scale_to_zero == []  # the server keeps its pods: no pretending it is at zero
    headless(objects["pods-service"], "chat-pods", 8000)
    assert objects["pods-service"]["metadata"]["labels"] == objects["service"]["metadata"]["labels"]
    assert selected(objects, "pods-service") == ["chat"]
    backend = objects["route"]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == "chat-gate"
    assert objects["route"]["metadata"]["annotations"][f"{ALB}/healthcheck-path"] == "/health"


def test_the_gate_of_a_routed_endpoint_wakes_its_server_only_at_min_replicas_0() -> None:
    scaling = {"max_replicas": 3, "metrics": ["queue:4"]}
    objects, arguments = gate_of({"routing": "random", "autoscaling": {**scaling, "min_replicas": 1}})
    assert arguments.scale_to_zero == []
    assert [t["name"] for t in objects["autoscaler"]["spec"]["triggers"]] == ["queue"]
    objects, arguments = gate_of({"routing": "random", "autoscaling": {**scaling, "min_replicas": 0}})
    assert (arguments.scale_to_zero, arguments.forward_pods) == (["server"], "http://chat-pods.inference.svc:8000")
    assert [t["name"] for t in objects["autoscaler"]["spec"]["triggers"]] == ["queue", "wake"]


def test_the_gate_chooses_among_the_primarys_pods_and_the_canarys_share_goes_straight_to_the_canary() -> None:
    objects, _ = gate_of({"routing": "prefix", "replicas": 2, "canary": CANARY, "health_check_path": "/ready"})
    assert selected(objects, "pods-service") == ["chat"]
    action = objects["route"]["metadata"]["annotations"][f"{ALB}/actions.chat-gate"]
    assert '{"serviceName":"chat-gate","servicePort":80,"weight":90}' in action
    assert '{"serviceName":"chat-canary","servicePort":80,"weight":10}' in action
    assert objects["canary-service"]["metadata"]["annotations"] == {f"{ALB}/healthcheck-path": "/ready"}


@pytest.mark.parametrize(("fields", "port"), [({}, 8000), ({"image": "lmsysorg/sglang:v0.5.6", "port": 30000}, 30000)])
def test_the_gate_reaches_each_server_pod_on_the_port_its_url_names_and_no_one_else_does(
    fields: dict[str, Any], port: int
) -> None:
    objects, arguments = gate_of({"routing": "prefix", "replicas": 2, "canary": CANARY, **fields})
    assert arguments.forward_pods == f"http://chat-pods.inference.svc:{port}"
    assert objects["pods-service"]["spec"]["ports"][0]["port"] == port
    found = pods(objects)
    assert admitted(policies(objects), found["chat-gate"], found["chat"], port)
    assert not admitted(policies(objects), BYSTANDER, found["chat"], port)
    assert admitted(policies(objects), BYSTANDER, found["chat-canary"], port)  # its share, from the load balancer


def test_the_schedulability_check_places_a_routed_endpoints_gate() -> None:
    spec = parse_stack_config(with_classic({"routing": "least-load", "replicas": 2}))
    workloads = {workload.name: workload for workload in region_workloads(spec, REGION)}
    gate = workloads["chat-gate"]
    assert (gate.replicas, gate.requests["cpu"], gate.requests["memory"]) == (2, 1000, 2**30)
    assert workloads["chat"].replicas == 2


def test_a_classic_endpoint_without_routing_above_zero_has_no_gate() -> None:
    config = with_classic({"replicas": 2, "canary": CANARY})
    assert not has_gate(parse_stack_config(config).endpoints["chat"])
    objects = classic_objects(placed_endpoint(config))
    assert not [part for part in objects if part.startswith("gate") or part == "pods-service"]
    assert objects["route"]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] == "chat"


def test_a_gate_at_zero_without_routing_is_the_gate_it_was() -> None:
    objects, arguments = gate_of({"autoscaling": {"min_replicas": 0, "max_replicas": 3, "metrics": ["queue:4"]}})
    assert "pods-service" not in objects
    assert (arguments.routing, arguments.forward_pods, arguments.scale_to_zero) == (None, None, ["server"])
