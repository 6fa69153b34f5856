"""The NetworkPolicies of every kind of endpoint, composed with the region's Prometheus: the scraper
reaches each framework server's metrics port and each split endpoint's proxy's (8090, what wakes
roles at zero), and beyond that exactly what any other pod reaches;
no other pod, in the metrics namespace or wearing the scraper's labels elsewhere, gains anything.
Evaluated pod by pod and port by port by the API's rules (tests/network_policies.py)."""

from __future__ import annotations

from typing import Any

import pytest

from components import naming
from components.platform.prometheus import FRONT_COMPONENTS, PROXY_CONTAINER, proxy_job
from components.render.endpoint import endpoint_objects
from components.render.kube import metrics_port
from components.render.mooncake_store import MASTER_RPC_PORT, METADATA_PORT, REAL_CLIENT_PORT
from components.render.network_policy import SIDE_CHANNEL_PORTS, TRANSFER_ENGINE_PORTS
from components.render.pods import METRICS_PORT_NAME, PORT_NAME
from components.render.proxy import PROXY_METRICS_PORT, PROXY_PORT
from components.spec import SpecError
from tests.network_policies import Pod, admitted

from .stack_builders import DELETE, MODEL, classic_endpoint, mooncake_endpoint, placed_endpoint, stack_config

TCP_GPU = {"model": MODEL, "node_group": "gpu", "gpu_count": 2}
TRITON = {
    "image": "nvcr.io/nvidia/tritonserver:25.01-py3",
    "model_path": "/models/repository",
    "node_group": "gpu",
    "gpu_count": 1,
}


ZERO = {"min_replicas": 0, "max_replicas": 2, "metrics": ["queue:4"]}


def mooncake(mode: str, **extra: Any) -> dict[str, Any]:
    topology = {"topology": {"prefill": 2, "decode": 1}} if mode != "store" else {}
    return {**TCP_GPU, "mooncake": {"mode": mode, "transfer": {"protocol": "tcp"}, **topology}, **extra}


ENDPOINTS = {
    "vllm": classic_endpoint(),
    "vllm-canary": classic_endpoint({"canary": {"image": "vllm/vllm-openai:v0.34.0", "weight": 10}}),
    "sglang": classic_endpoint({"image": "lmsysorg/sglang:v0.5.6"}),
    "triton": classic_endpoint({**TRITON, "model": DELETE}),
    "disaggregated": mooncake("disaggregated"),
    "both": mooncake("both", canary={"image": "vllm/vllm-openai:v0.34.0", "weight": 10}),
    "store": mooncake("store"),
    "two-node-decode": mooncake_endpoint(
        {"node_group": "p5", "gpu_count": 8, "mooncake": {"roles": {"decode": {"nodes": 2}}}}
    ),
    # Classic endpoints that may scale to zero: a gate in front of the server.
    "vllm-gated": classic_endpoint(
        {"autoscaling": ZERO, "canary": {"image": "vllm/vllm-openai:v0.34.0", "weight": 10}}
    ),
    "sglang-gated": classic_endpoint({"image": "lmsysorg/sglang:v0.5.6", "autoscaling": ZERO}),
}
FRONTS = ["disaggregated", "both", "vllm-gated", "sglang-gated"]
"""The cases with pods running the proxy program: a proxy, or a gate."""
SCRAPER = Pod(naming.METRICS_NAMESPACE, {**naming.SCRAPER_LABELS, "app.kubernetes.io/instance": "prometheus"})
OTHERS = {
    "grafana in the metrics namespace": Pod(naming.METRICS_NAMESPACE, {"app.kubernetes.io/name": "grafana"}),
    "keda in the metrics namespace": Pod(naming.METRICS_NAMESPACE, {"app.kubernetes.io/name": "keda-operator"}),
    "the scraper's labels in another namespace": Pod("default", dict(naming.SCRAPER_LABELS)),
}
SERVER_ROLES = {"server", "canary", "prefill", "decode"}


def rendered(case: str) -> tuple[list[dict[str, Any]], dict[str, tuple[Pod, dict[str, Any]]], int]:
    endpoint = placed_endpoint(stack_config(endpoints={"chat": ENDPOINTS[case]}))
    objects = list(endpoint_objects(endpoint).values())
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    pods = {
        o["metadata"]["name"]: (Pod(o["metadata"]["namespace"], o["spec"]["template"]["metadata"]["labels"]), o)
        for o in objects
        if o["kind"] in ("Deployment", "StatefulSet")
    }
    for group in (o for o in objects if o["kind"] == "LeaderWorkerSet"):
        # A role across nodes: its leaders serve the API and metrics; its workers run headless.
        for part in ("leaderTemplate", "workerTemplate"):
            template = group["spec"]["leaderWorkerTemplate"][part]
            name = f"{group['metadata']['name']}-{part}"
            pods[name] = (
                Pod(group["metadata"]["namespace"], template["metadata"]["labels"]),
                {"spec": {"template": template}},
            )
    return policies, pods, metrics_port(endpoint)


def probe_ports(workload: dict[str, Any]) -> set[int]:
    """Every port the pod declares, and every port of the KV paths the policies guard."""
    declared = {
        port["containerPort"]
        for container in workload["spec"]["template"]["spec"]["containers"]
        for port in container.get("ports", [])
    }
    ranges = [port for low, high in (TRANSFER_ENGINE_PORTS, SIDE_CHANNEL_PORTS) for port in (low, high)]
    return (
        declared
        | set(ranges)
        | {8998, MASTER_RPC_PORT, METADATA_PORT, REAL_CLIENT_PORT, PROXY_PORT, PROXY_METRICS_PORT}
    )


def scraped_port(pod: Pod, port: int) -> int | None:
    """The port the scraper is meant to reach on ``pod``: a server's metrics port, a proxy's (a gate's) 8090."""
    component = pod.labels["app.kubernetes.io/component"]
    if component in SERVER_ROLES:
        return port
    return PROXY_METRICS_PORT if component in FRONT_COMPONENTS else None


@pytest.mark.parametrize("case", list(ENDPOINTS))
def test_the_scraper_reaches_every_servers_metrics_port_and_nothing_more_than_anyone(case: str) -> None:
    policies, pods, port = rendered(case)
    servers = {
        name: pod for name, (pod, _) in pods.items() if pod.labels["app.kubernetes.io/component"] in SERVER_ROLES
    }
    assert servers
    bystander = Pod("default", {"app": "bystander"})
    for name, (target, workload) in pods.items():
        for probe in probe_ports(workload):
            scraper = admitted(policies, SCRAPER, target, probe)
            anyone = admitted(policies, bystander, target, probe)
            if probe == scraped_port(target, port):
                assert scraper, f"the scraper cannot reach {name}:{probe}"
            else:
                assert scraper == anyone, f"the scraper reaches {name}:{probe}, which others do not"


@pytest.mark.parametrize("case", list(ENDPOINTS))
@pytest.mark.parametrize("other", list(OTHERS))
def test_no_other_pod_gains_the_metrics_port(case: str, other: str) -> None:
    policies, pods, port = rendered(case)
    bystander = Pod("default", {"app": "bystander"})
    for name, (target, _) in pods.items():
        for probe in (port, PROXY_METRICS_PORT):
            found = admitted(policies, OTHERS[other], target, probe)
            assert found == admitted(policies, bystander, target, probe), f"{name}:{probe}"


@pytest.mark.parametrize("case", FRONTS)
def test_a_proxy_admits_its_metrics_port_from_the_scraper_only_and_its_serving_port_from_anyone(case: str) -> None:
    """The composition can fail: no one else reaches 8090, while the load balancer still reaches 8000."""
    policies, pods, _ = rendered(case)
    proxies = [pod for pod, _ in pods.values() if pod.labels["app.kubernetes.io/component"] in FRONT_COMPONENTS]
    assert len(proxies) == (2 if case == "both" else 1)  # "both" has a canary set, with its own proxy
    bystander = Pod("default", {"app": "bystander"})
    for target in proxies:
        assert admitted(policies, SCRAPER, target, PROXY_METRICS_PORT)
        assert not admitted(policies, bystander, target, PROXY_METRICS_PORT)
        assert admitted(policies, bystander, target, PROXY_PORT)


@pytest.mark.parametrize("case", FRONTS)
def test_prometheus_scrapes_the_proxy_at_the_port_the_policies_open(case: str) -> None:
    """The proxy job keeps the container and the port name the proxy's pods declare (the e2e test,
    tests/e2e/test_metrics_scrape.py, holds what it keeps)."""
    _, pods, _ = rendered(case)
    job = proxy_job()
    kept = {
        tuple(rule["source_labels"]): rule["regex"] for rule in job["relabel_configs"] if rule.get("action") == "keep"
    }
    assert kept[("__meta_kubernetes_pod_container_name",)] == PROXY_CONTAINER
    assert kept[("__meta_kubernetes_pod_container_port_name",)] == METRICS_PORT_NAME
    for pod, workload in pods.values():
        if pod.labels["app.kubernetes.io/component"] not in FRONT_COMPONENTS:
            continue
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        assert container["name"] == PROXY_CONTAINER
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports[METRICS_PORT_NAME] == PROXY_METRICS_PORT
        args = container["args"]
        assert args[args.index("--metrics-port") + 1] == str(PROXY_METRICS_PORT)


@pytest.mark.parametrize("case", ["disaggregated", "both"])
def test_split_roles_admit_their_server_port_only_from_the_proxy_and_the_scraper(case: str) -> None:
    """The composition can fail: split roles are the pods whose server port no one else reaches."""
    policies, pods, port = rendered(case)
    roles = [pod for pod, _ in pods.values() if pod.labels["app.kubernetes.io/component"] in ("prefill", "decode")]
    assert roles
    for target in roles:
        assert admitted(policies, SCRAPER, target, port)
        assert not admitted(policies, Pod("default", {"app": "bystander"}), target, port)
        assert not admitted(policies, OTHERS["grafana in the metrics namespace"], target, port)


@pytest.mark.parametrize("case", list(ENDPOINTS))
def test_prometheus_scrapes_the_port_the_policies_open(case: str) -> None:
    """The inference job keeps each pod's ``http`` port and moves to the port its metrics annotation
    names (components/platform/prometheus.py): that is the port opened to the scraper."""
    _, pods, port = rendered(case)
    for _, workload in pods.values():
        template = workload["spec"]["template"]
        if template["metadata"]["labels"]["app.kubernetes.io/component"] not in SERVER_ROLES:
            continue
        annotation = template["metadata"].get("annotations", {}).get(naming.METRICS_PORT_ANNOTATION)
        (server,) = [c for c in template["spec"]["containers"] if c["name"] == "server"]
        http = [p["containerPort"] for p in server["ports"] if p["name"] == PORT_NAME]
        if not http:
            continue  # a headless worker of a group: no http port, so no target (only leaders are scraped)
        assert (int(annotation) if annotation else http[0]) == port


def test_a_triton_server_on_its_metrics_port_is_refused_naming_the_field() -> None:
    with pytest.raises(SpecError) as error:
        placed_endpoint(stack_config(endpoints={"chat": classic_endpoint({**TRITON, "model": DELETE, "port": 8002})}))
    (problem,) = error.value.problems
    assert problem.path == "endpoints.chat.port"
    assert "8002 is where triton serves its metrics; give the server another port" in problem.message


def test_a_role_across_nodes_is_scraped_at_its_leaders_only() -> None:
    """Workers run headless (no http port, so the inference job keeps none of their targets);
    the policies still admit the scraper to every pod of the role, leader or worker."""
    policies, pods, port = rendered("two-node-decode")
    leader, _ = pods["chat-decode-leaderTemplate"]
    worker, workload = pods["chat-decode-workerTemplate"]
    (server,) = workload["spec"]["template"]["spec"]["containers"]
    assert PORT_NAME not in {p["name"] for p in server["ports"]}
    for target in (leader, worker):
        assert admitted(policies, SCRAPER, target, port)
        assert not admitted(policies, Pod("default", {"app": "bystander"}), target, port)
