"""The region's Prometheus, for real: Debian's Prometheus runs the scrape configuration the pinned
chart renders from our values against stand-ins of a vLLM decode pod, a Triton pod, the DCGM
exporter, a split endpoint's proxy and a classic endpoint's gate, given the targets Kubernetes pod
discovery would (tests/e2e/scrape_driver.py). Every stored series of an inference pod, a proxy or a
gate carries namespace, pod, endpoint and role; the GPU a pod holds carries the same; nothing but the
server containers' metrics ports and the proxy containers' ``metrics`` port is scraped."""

from __future__ import annotations

import json
import time
from functools import cache
from typing import Any

from components import naming
from components.metric_table import PROXY_ANSWERED, PROXY_IN_FLIGHT, PROXY_REQUESTS, PROXY_UNSERVED
from components.platform.prometheus import prometheus_values
from components.render.autoscaling import selector, wake_query
from components.render.dashboard import proxy_panels
from components.spec.metrics import Metrics
from front.metrics import Counts, exposition
from tests.e2e.namespace import run_driver
from tests.prometheus_config import rendered_config
from tests.prometheus_tools import binary

VLLM = """\
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 3.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{endpoint="not-mine",engine="0",model_name="Qwen/Qwen3-8B"} 1.0
"""
TRITON = """\
# TYPE nv_inference_count counter
nv_inference_count{model="resnet",version="1"} 5
"""
GPU = 'UUID="GPU-{id}",device="nvidia{n}",modelName="NVIDIA H100 80GB HBM3",Hostname="ip-10-0-0-1"'
HOLDER = 'container="server",namespace="inference",pod="chat-decode-7d9f"'
COPIED = 'app_kubernetes_io_name="chat",app_kubernetes_io_component="decode"'
DCGM = (
    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",{GPU.format(id="aaaa", n=0)},{HOLDER},{COPIED}}} 87\n'
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="1",{GPU.format(id="bbbb", n=1)}}} 0\n'
)
"""The exporter's own labels on a GPU held by a pod (with the pod labels it copies) and on an idle one."""
PROXY = (
    f"# TYPE {PROXY_REQUESTS} counter\n{PROXY_REQUESTS} 4\n"
    f"# TYPE {PROXY_UNSERVED} counter\n"
    f'{PROXY_UNSERVED}{{backend="prefill"}} 1\n{PROXY_UNSERVED}{{backend="decode"}} 0\n'
    f"# TYPE {PROXY_ANSWERED} counter\n{PROXY_ANSWERED} 3\n"
    f"# TYPE {PROXY_IN_FLIGHT} gauge\n{PROXY_IN_FLIGHT} 0\n"
)
"""The series the proxy program serves on its metrics port (its own e2e tests hold the program to them)."""


def gate_exposition() -> str:
    """The same program's exposition as a classic endpoint's gate (``--forward``): one backend, the
    server; its last request now (when the scene is made, not when this module was imported)."""
    return exposition(Counts(requests=2, unserved={"server": 2}, last_request=time.time()))


ANNOTATION = "__meta_kubernetes_pod_annotation_inference_fleet_metrics_port"


def pod(name: str, endpoint: str, role: str, container: str, port_name: str, **extra: str) -> dict[str, str]:
    """The labels Kubernetes pod discovery gives one container port of a fleet pod."""
    return {
        "__meta_kubernetes_namespace": "inference",
        "__meta_kubernetes_pod_name": name,
        "__meta_kubernetes_pod_node_name": "ip-10-0-0-1",
        "__meta_kubernetes_pod_ip": "127.0.0.1",
        "__meta_kubernetes_pod_phase": "Running",
        "__meta_kubernetes_pod_container_name": container,
        "__meta_kubernetes_pod_container_port_name": port_name,
        "__meta_kubernetes_pod_label_app_kubernetes_io_name": endpoint,
        "__meta_kubernetes_pod_label_app_kubernetes_io_component": role,
        "__meta_kubernetes_pod_label_app_kubernetes_io_part_of": naming.PROJECT,
        **extra,
    }


TARGETS = {
    "inference": [
        {"stand_in": "vllm", "labels": pod("chat-decode-7d9f", "chat", "decode", "server", "http")},
        # Not scraped: another port of the same container, an init container, a pod not running.
        {"labels": pod("chat-prefill-0", "chat", "prefill", "server", "bootstrap")},
        {"labels": pod("chat-decode-7d9f", "chat", "decode", "model-sync", "http")},
        {
            "labels": pod(
                "chat-decode-pending", "chat", "decode", "server", "http", __meta_kubernetes_pod_phase="Pending"
            )
        },
        # Triton: its http port, moved to the port its annotation names; its metrics port itself is not a target.
        {"labels": pod("resnet-5c6b", "resnet", "server", "server", "http", **{ANNOTATION: "{port:triton}"})},
        {
            "stand_in": "triton",
            "labels": pod("resnet-5c6b", "resnet", "server", "server", "metrics", **{ANNOTATION: "{port:triton}"}),
        },
        # A proxy's (a gate's) metrics port is the proxy job's, not this one's.
        {"labels": pod("chat-proxy-6f8d", "chat", "proxy", "proxy", "metrics")},
        {"labels": pod("assistant-gate-7c4d9", "assistant", "gate", "proxy", "metrics")},
    ],
    "proxy": [
        {"stand_in": "proxy", "labels": pod("chat-proxy-6f8d", "chat", "proxy", "proxy", "metrics")},
        {"stand_in": "proxy", "labels": pod("chat-canary-proxy-5b7c", "chat-canary", "proxy", "proxy", "metrics")},
        # A classic endpoint's gate: the same program and container; not its serving port.
        {"stand_in": "gate", "labels": pod("assistant-gate-7c4d9", "assistant", "gate", "proxy", "metrics")},
        {"labels": pod("assistant-gate-7c4d9", "assistant", "gate", "proxy", "http")},
        # Not scraped: its serving port, a proxy not running, a server's metrics port (Triton's), a pod
        # of something else called proxy.
        {"labels": pod("chat-proxy-6f8d", "chat", "proxy", "proxy", "http")},
        {
            "labels": pod(
                "chat-proxy-pending", "chat", "proxy", "proxy", "metrics", __meta_kubernetes_pod_phase="Pending"
            )
        },
        {"labels": pod("resnet-5c6b", "resnet", "server", "server", "metrics")},
        {
            "labels": pod(
                "other-proxy-1",
                "other",
                "proxy",
                "proxy",
                "metrics",
                __meta_kubernetes_pod_label_app_kubernetes_io_part_of="other",
            )
        },
    ],
    "dcgm-exporter": [
        {
            "stand_in": "dcgm",
            "labels": {
                "__meta_kubernetes_namespace": naming.METRICS_NAMESPACE,
                "__meta_kubernetes_pod_name": "dcgm-exporter-x1",
                "__meta_kubernetes_pod_node_name": "ip-10-0-0-1",
                "__meta_kubernetes_pod_container_port_name": "metrics",
                "__meta_kubernetes_pod_label_app_kubernetes_io_name": "dcgm-exporter",
            },
        }
    ],
    "keda": [],
}


def dashboard_pod_counts() -> list[str]:
    """The dashboard's count of a split endpoint's prefill and decode pods (its proxy row), for chat."""
    panels = proxy_panels("inference", "chat")
    (pods,) = [panel for panel in panels if panel["title"].startswith("Prefill and decode pods up")]
    return [target["expr"] for target in pods["targets"]]


POD_COUNTS = dashboard_pod_counts()
GATE_REQUESTS = f"sum({PROXY_REQUESTS}{selector('inference', 'assistant', 'gate')})"
"""The gate's requests, summed over its pods."""
GATE_WAKE = wake_query("inference", "assistant", "gate")
"""The wake trigger of the gated server, over the gate's gauges (its last request: the time the scene was made)."""


@cache
def scraped() -> dict[str, Any]:
    scene = {
        "prometheus": binary("prometheus"),
        "config": rendered_config(prometheus_values(Metrics())),
        "expositions": {"vllm": VLLM, "triton": TRITON, "dcgm": DCGM, "proxy": PROXY, "gate": gate_exposition()},
        "targets": TARGETS,
        "queries": [*POD_COUNTS, GATE_REQUESTS, GATE_WAKE],
    }
    return run_driver("tests.e2e.scrape_driver", json.dumps(scene))


def series(name: str) -> list[dict[str, str]]:
    return [metric for metric in scraped()["series"] if metric["__name__"] == name]


def test_a_vllm_series_names_its_namespace_pod_endpoint_and_role() -> None:
    (waiting,) = series("vllm:num_requests_waiting")
    assert {key: waiting[key] for key in ("namespace", "pod", "endpoint", "role", "job", "model_name")} == {
        "namespace": "inference",
        "pod": "chat-decode-7d9f",
        naming.SERIES_ENDPOINT_LABEL: "chat",
        naming.SERIES_ROLE_LABEL: "decode",
        "job": "inference",
        "model_name": "Qwen/Qwen3-8B",
    }


def test_a_frameworks_own_label_of_the_same_name_never_wins() -> None:
    (running,) = series("vllm:num_requests_running")
    assert (running["endpoint"], running["exported_endpoint"]) == ("chat", "not-mine")


def test_triton_is_scraped_at_the_port_its_annotation_names_once() -> None:
    (count,) = series("nv_inference_count")
    assert (count["endpoint"], count["role"], count["pod"]) == ("resnet", "server", "resnet-5c6b")


def test_only_the_server_containers_and_the_proxies_metrics_ports_are_targets() -> None:
    targets = sorted((up["job"], up.get("pod", "")) for up in scraped()["up"])
    assert targets == [
        ("dcgm-exporter", ""),
        ("inference", "chat-decode-7d9f"),
        ("inference", "resnet-5c6b"),
        ("proxy", "assistant-gate-7c4d9"),
        ("proxy", "chat-canary-proxy-5b7c"),
        ("proxy", "chat-proxy-6f8d"),
    ]


def test_a_proxy_series_names_its_namespace_pod_endpoint_and_role_proxy() -> None:
    """What the wake query selects (components/render/autoscaling.py, wake_query): a canary set's
    proxy is its own endpoint, so its requests never wake the primary's roles."""
    found = {metric["pod"]: metric for metric in series(PROXY_REQUESTS) if metric["role"] == "proxy"}
    assert set(found) == {"chat-proxy-6f8d", "chat-canary-proxy-5b7c"}
    keys = ("namespace", "endpoint", "role", "job", "node")
    assert {key: found["chat-proxy-6f8d"][key] for key in keys} == {
        "namespace": "inference",
        naming.SERIES_ENDPOINT_LABEL: "chat",
        naming.SERIES_ROLE_LABEL: "proxy",
        "job": "proxy",
        "node": "ip-10-0-0-1",
    }
    assert found["chat-canary-proxy-5b7c"][naming.SERIES_ENDPOINT_LABEL] == "chat-canary"
    backends = sorted(metric["backend"] for metric in series(PROXY_UNSERVED) if metric["pod"] == "chat-proxy-6f8d")
    assert backends == ["decode", "prefill"]
    assert series(PROXY_ANSWERED)
    assert series(PROXY_IN_FLIGHT)


def test_a_gate_series_names_its_endpoint_and_role_gate_which_the_servers_wake_query_reads() -> None:
    """The gate's requests, as the ScaledObject of its endpoint's server reads them (wake_query with
    front gate), found in the real Prometheus with the value the gate served."""
    (found,) = [metric for metric in series(PROXY_REQUESTS) if metric["role"] == "gate"]
    keys = ("namespace", "pod", "endpoint", "role", "job")
    assert {key: found[key] for key in keys} == {
        "namespace": "inference",
        "pod": "assistant-gate-7c4d9",
        naming.SERIES_ENDPOINT_LABEL: "assistant",
        naming.SERIES_ROLE_LABEL: "gate",
        "job": "proxy",
    }
    (unserved,) = [metric for metric in series(PROXY_UNSERVED) if metric["pod"] == "assistant-gate-7c4d9"]
    assert unserved["backend"] == "server"
    assert scraped()["queries"][GATE_REQUESTS] == ["2"]
    assert scraped()["queries"][GATE_WAKE] == ["1"]  # a request just now


def test_a_gpu_series_names_the_pod_that_holds_the_gpu_and_its_endpoint_and_role() -> None:
    held, idle = sorted(series("DCGM_FI_DEV_GPU_UTIL"), key=lambda metric: metric["gpu"])
    assert {key: held.get(key) for key in ("namespace", "pod", "endpoint", "role", "node")} == {
        "namespace": "inference",
        "pod": "chat-decode-7d9f",
        "endpoint": "chat",
        "role": "decode",
        "node": "ip-10-0-0-1",
    }
    assert not any(key.startswith("app_kubernetes_io") for key in held)
    assert "pod" not in idle
    assert "endpoint" not in idle


def test_the_dashboard_counts_a_roles_scraped_pods_and_reads_0_for_a_role_without_any() -> None:
    """One decode pod scraped (the pending one is not a target, prefill's bootstrap port is not
    either): decode counts 1, prefill, with no target of its own, 0 rather than no data."""
    prefill, decode = POD_COUNTS
    answers = scraped()["queries"]
    assert {prefill: answers[prefill], decode: answers[decode]} == {prefill: ["0"], decode: ["1"]}
