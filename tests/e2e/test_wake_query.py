"""The wake trigger as a composition of real parts: the proxy program as the proxy Deployment runs it
(prefill and decode at ``min_replicas: 0``, neither running), Debian's Prometheus with the scrape
configuration the chart renders from our values, given the targets Kubernetes pod discovery would
give for the rendered proxy pod (one per container port), and the queries of both rendered
ScaledObjects' ``wake`` triggers (tests/e2e/wake_scrape_driver.py). Before any request they read 0
(KEDA: not active, the roles stay at zero); one request, answered 503, makes them read 1 (active:
KEDA scales each role from 0 to 1), also when it reached the proxy before Prometheus first scraped it
(a new proxy pod, a restarted Prometheus). The same for a classic endpoint's gate (the program with
``--forward``, its server Service not resolving) and its server's ScaledObject."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from components import naming
from components.metric_table import PROXY_LAST_REQUEST
from components.platform.prometheus import prometheus_values
from components.render.autoscaling import wake_query
from components.render.classic import classic_objects
from components.render.mooncake import mooncake_objects
from components.spec.metrics import Metrics
from tests.e2e.namespace import run_driver
from tests.e2e.test_gate import SCALING, rendered_gate
from tests.e2e.test_mooncake_proxy import ADMIN_KEY, PORT, rendered_proxy
from tests.e2e.test_proxy_scale_to_zero import at_zero
from tests.prometheus_config import rendered_config
from tests.prometheus_tools import binary
from tests.unit.stack_builders import placed_endpoint, with_classic

POD = "chat-proxy-6f8d"
GATE_POD = "chat-gate-7c4d9"


def discovered(namespace: str, template: dict[str, Any], pod: str = POD) -> list[dict[str, Any]]:
    """What Kubernetes pod discovery gives for a running pod of ``template``: a target per container
    port, with the pod's labels as ``__meta_kubernetes_pod_label_*`` (characters outside
    [a-zA-Z0-9_] become '_', as Prometheus's discovery writes them)."""
    labels = {
        "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in key): value
        for key, value in template["metadata"]["labels"].items()
    }
    targets = []
    for container in template["spec"]["containers"]:
        for port in container.get("ports", []):
            meta = {
                "__meta_kubernetes_namespace": namespace,
                "__meta_kubernetes_pod_name": pod,
                "__meta_kubernetes_pod_node_name": "ip-10-0-0-1",
                "__meta_kubernetes_pod_ip": "127.0.0.1",
                "__meta_kubernetes_pod_phase": "Running",
                "__meta_kubernetes_pod_container_name": container["name"],
                "__meta_kubernetes_pod_container_port_name": port["name"],
                **labels,
            }
            targets.append({"port": port["containerPort"], "labels": meta})
    return targets


def run_scene(
    namespace: str, template: dict[str, Any], pod: str, front: dict[str, Any], queries: list[str], request_first: bool
) -> dict[str, Any]:
    """The wake scene (tests/e2e/wake_scrape_driver.py): the front program (``front``: argv and env)
    started as rendered, its pod's targets as discovery would list them from ``template``, the
    rendered Prometheus configuration, and ``queries`` asked."""
    config = rendered_config(prometheus_values(Metrics()))
    targets: dict[str, list[dict[str, Any]]] = {job["job_name"]: [] for job in config["scrape_configs"]}
    targets["proxy"] = discovered(namespace, template, pod)
    targets["inference"] = list(targets["proxy"])  # what the inference job would list too: it keeps none
    spec = {
        "prometheus": binary("prometheus"),
        "config": config,
        "targets": targets,
        "proxy": front,
        "path": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "queries": queries,
        "gauge": PROXY_LAST_REQUEST,
        "request_first": request_first,
        "proxy_port": 8000,
        # The Scene's names: no prefill pod, no decode listening, and a gate's server Service
        # (chat.inference.svc) not among them: every backend at zero.
        "prefill_service": f"chat-prefill.{namespace}.svc",
        "decode_host": f"chat-decode.{namespace}.svc",
        "port": PORT,
        "bootstrap_port": 8998,
        "api_key": ADMIN_KEY,
    }
    return run_driver("tests.e2e.wake_scrape_driver", json.dumps(spec), mount=True, timeout=180)


def scene(program_dir: Path, *, request_first: bool = False) -> dict[str, Any]:
    endpoint = at_zero(("prefill", "decode"))
    objects = mooncake_objects(endpoint, None)
    queries = [
        trigger["metadata"]["query"]
        for part in ("prefill-autoscaler", "decode-autoscaler")
        for trigger in objects[part]["spec"]["triggers"]
        if trigger.get("name") == "wake"
    ]
    assert queries == [wake_query(endpoint.namespace, endpoint.name)] * 2
    template = objects["proxy"]["spec"]["template"]
    proxy = rendered_proxy(endpoint, program_dir)
    return run_scene(endpoint.namespace, template, POD, proxy, queries, request_first)


def gate_scene(program_dir: Path) -> dict[str, Any]:
    endpoint = placed_endpoint(with_classic({"autoscaling": SCALING}))
    objects = classic_objects(endpoint)
    queries = [t["metadata"]["query"] for t in objects["autoscaler"]["spec"]["triggers"] if t.get("name") == "wake"]
    assert queries == [wake_query(endpoint.namespace, endpoint.name, "gate")]
    template = objects["gate"]["spec"]["template"]
    gate = {"argv": rendered_gate(program_dir)["argv"], "env": {}}
    return run_scene(endpoint.namespace, template, GATE_POD, gate, queries, request_first=False)


@pytest.fixture(scope="module")
def woken(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return scene(tmp_path_factory.mktemp("proxy-program"))


@pytest.fixture(scope="module")
def gate_woken(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return gate_scene(tmp_path_factory.mktemp("gate-program"))


@pytest.fixture(scope="module")
def woken_before_any_scrape(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return scene(tmp_path_factory.mktemp("proxy-program"), request_first=True)


pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


def test_the_idle_proxy_is_scraped_and_the_wake_queries_read_zero(woken: dict[str, Any]) -> None:
    assert woken["before"] == [[0.0], [0.0]]
    assert sorted((up["job"], up["pod"]) for up in woken["targets"]) == [("proxy", POD)]


def test_one_request_answered_503_makes_both_wake_queries_read_one(woken: dict[str, Any]) -> None:
    assert woken["request"]["status"] == 503
    assert woken["request"]["body"]["error"]["type"] == "scaled_to_zero"
    assert woken["after"] == [[1.0], [1.0]]
    assert woken["woken_seconds"] < 30


def test_a_request_before_the_proxys_first_scrape_wakes_both_roles(woken_before_any_scrape: dict[str, Any]) -> None:
    """The gauge's first sample already holds the request's time: no earlier sample is needed, as
    an ``increase`` of the request counter would need one."""
    assert woken_before_any_scrape["request"]["status"] == 503
    assert woken_before_any_scrape["after"] == [[1.0], [1.0]]


def test_the_gauge_is_stored_with_the_labels_the_query_selects(woken: dict[str, Any]) -> None:
    (series,) = woken["series"]
    selected = (series["namespace"], series[naming.SERIES_ENDPOINT_LABEL], series[naming.SERIES_ROLE_LABEL])
    assert selected == ("inference", "chat", "proxy")
    assert series["pod"] == POD


def test_a_gated_servers_wake_query_reads_zero_then_one_once_the_gate_answered_a_request_503(
    gate_woken: dict[str, Any],
) -> None:
    assert gate_woken["before"] == [[0.0]]
    assert sorted((up["job"], up["pod"]) for up in gate_woken["targets"]) == [("proxy", GATE_POD)]
    assert gate_woken["request"]["status"] == 503
    assert gate_woken["request"]["body"]["error"]["type"] == "scaled_to_zero"
    assert gate_woken["after"] == [[1.0]]
    (series,) = gate_woken["series"]
    selected = (series["namespace"], series[naming.SERIES_ENDPOINT_LABEL], series[naming.SERIES_ROLE_LABEL])
    assert selected == ("inference", "chat", "gate")
