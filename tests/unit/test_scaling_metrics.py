"""Scaling metrics: the grammar users write, what each renders as a KEDA trigger per framework, and
the metrics validation refuses because nothing would serve them."""

from __future__ import annotations

from typing import Any

import pytest

from components import naming
from components.metric_table import TABLE, Signal
from components.render.autoscaling import TRANSFER_HPA_OWNERSHIP
from components.render.classic import classic_objects
from components.render.mooncake import mooncake_objects
from components.spec import Problem, SpecError, parse_stack_config
from components.spec.images import Framework

from .stack_builders import DELETE, classic_endpoint, placed_endpoint, stack_config, with_classic, with_mooncake

IMAGES = {
    "vllm": "vllm/vllm-openai:v0.33.0",
    "sglang": "lmsysorg/sglang:v0.5.6",
    "tgi": "ghcr.io/huggingface/text-generation-inference:3.3.6",
    "triton": "nvcr.io/nvidia/tritonserver:25.10-py3",
}
SERVER = '{namespace="inference",endpoint="chat",role="server"}'
SIGNALS: dict[str, Signal] = {"queue": "queue", "running": "running", "kv_cache": "kv_cache", "ttft_p90_ms": "ttft"}


def rejected(config: dict[str, Any]) -> tuple[Problem, ...]:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(config)
    return caught.value.problems


def autoscaled(metrics: list[str], framework: str = "vllm", **fields: Any) -> dict[str, Any]:
    overrides: dict[str, Any] = {"autoscaling": {"min_replicas": 1, "max_replicas": 3, "metrics": metrics}, **fields}
    overrides["image"] = IMAGES[framework]
    if framework == "triton":  # serves a model repository
        overrides.update({"model_source": "s3://models/repository", "model": DELETE})
    return with_classic(overrides)


def triggers(config: dict[str, Any]) -> list[dict[str, Any]]:
    scaled = classic_objects(placed_endpoint(config))["autoscaler"]
    assert scaled["kind"] == "ScaledObject"
    result: list[dict[str, Any]] = scaled["spec"]["triggers"]
    return result


# The grammar.


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        (" cpu:70 ", "cpu:70"),
        ("gpu:007", "gpu:7"),
        ("kv_cache:0.80", "kv_cache:0.8"),
        ("kv_cache:0.90", "kv_cache:0.9"),
        ("gpu:90", "gpu:90"),
        ("kv_cache:.5", "kv_cache:0.5"),
        ("ttft_p90_ms:500", "ttft_p90_ms:500"),
        ("query:2.50:sum(up{job='x'})", "query:2.5:sum(up{job='x'})"),
    ],
)
def test_metrics_are_kept_normalised(written: str, kept: str) -> None:
    spec = parse_stack_config(autoscaled([written]))
    autoscaling = spec.endpoints["chat"].autoscaling
    assert autoscaling is not None
    assert autoscaling.metrics == (kept,)


@pytest.mark.parametrize(
    "written",
    [
        "cpu:0",
        "cpu:101",
        "gpu:95",  # 100% busy is within the HPA's 10% tolerance of it: it would never scale
        "queue:0",
        "kv_cache:0",
        "kv_cache:0.95",  # likewise: a full cache is 1
        "kv_cache:1.5",
        "kv_cache:80",
        "query:5:",
        "query:0:up",
        "latency:5",
    ],
)
def test_a_malformed_metric_names_the_grammar(written: str) -> None:
    (problem,) = rejected(autoscaled([written]))
    assert problem.path == "endpoints.chat.autoscaling.metrics[0]"
    assert "'queue:<n>'" in problem.message
    assert "'query:<target>:<PromQL>'" in problem.message


def test_a_pods_metric_is_refused_with_the_query_that_replaces_it() -> None:
    """Nothing serves the custom metrics API; the same series through the pipeline's Prometheus does."""
    (problem,) = rejected(autoscaled(["pods/vllm:num_requests_waiting:5"]))
    assert "custom-metrics adapter" in problem.message
    assert 'query:5:sum(vllm:num_requests_waiting{namespace="<namespace>",endpoint="<endpoint>"})' in problem.message


def test_a_metric_named_twice_is_refused() -> None:
    (problem,) = rejected(autoscaled(["queue:5", "queue:8"]))
    assert problem.path == "endpoints.chat.autoscaling.metrics[1]"


# Triggers.


def test_each_named_metric_becomes_its_trigger_on_vllm() -> None:
    found = triggers(
        autoscaled(["cpu:70", "memory:80", "queue:5", "running:32", "kv_cache:0.8", "ttft_p90_ms:500", "gpu:60"])
    )
    url = naming.prometheus_query_url()
    assert found == [
        {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "70"}},
        {"type": "memory", "metricType": "Utilization", "metadata": {"value": "80"}},
        {
            "type": "prometheus",
            "name": "queue",
            "metricType": "AverageValue",
            "metadata": {"serverAddress": url, "query": f"sum(vllm:num_requests_waiting{SERVER})", "threshold": "5"},
        },
        {
            "type": "prometheus",
            "name": "running",
            "metricType": "AverageValue",
            "metadata": {"serverAddress": url, "query": f"sum(vllm:num_requests_running{SERVER})", "threshold": "32"},
        },
        {
            "type": "prometheus",
            "name": "kv-cache",
            "metricType": "Value",
            "metadata": {"serverAddress": url, "query": f"avg(vllm:kv_cache_usage_perc{SERVER})", "threshold": "0.8"},
        },
        {
            "type": "prometheus",
            "name": "ttft-p90-ms",
            "metricType": "Value",
            "metadata": {
                "serverAddress": url,
                "query": "histogram_quantile(0.9, sum by (le) "
                f"(rate(vllm:time_to_first_token_seconds_bucket{SERVER}[2m]))) * 1000",
                "threshold": "500",
            },
        },
        {
            "type": "prometheus",
            "name": "gpu",
            "metricType": "Value",
            "metadata": {"serverAddress": url, "query": f"avg(DCGM_FI_DEV_GPU_UTIL{SERVER})", "threshold": "60"},
        },
    ]


@pytest.mark.parametrize("framework", ["sglang", "tgi", "triton"])
def test_other_frameworks_read_their_own_series(framework: Framework) -> None:
    row = TABLE[framework]
    served = [m for m in ("queue:5", "running:8", "kv_cache:0.9", "ttft_p90_ms:700") if SIGNALS[m.split(":")[0]] in row]
    found = triggers(autoscaled(served, framework))
    for trigger, metric in zip(found, served, strict=True):
        assert f"{row[SIGNALS[metric.split(':')[0]]].sample}{SERVER}" in trigger["metadata"]["query"]
        if trigger["name"] == "ttft-p90-ms":  # Triton's histogram is in milliseconds already
            assert trigger["metadata"]["query"].endswith("* 1000") == (framework != "triton")


def test_a_query_is_taken_as_written_and_held_per_replica() -> None:
    (trigger,) = triggers(autoscaled(["query:3:sum(rate(http_requests_total{job='chat'}[1m]))"]))
    assert trigger["metricType"] == "AverageValue"
    assert trigger["metadata"]["query"] == "sum(rate(http_requests_total{job='chat'}[1m]))"
    assert trigger["metadata"]["threshold"] == "3"


def test_two_queries_get_distinct_trigger_names() -> None:
    found = triggers(autoscaled(["query:3:sum(a)", "query:4:sum(b)"]))
    assert [t["name"] for t in found] == ["query-0", "query-1"]


def test_every_scaled_object_takes_over_the_hpa_of_its_workload() -> None:
    """KEDA's webhook admits a ScaledObject beside the HPA rendered before only with both of these
    (apis/keda/v1alpha1/scaledobject_webhook.go, verifyHpas, v2.20.2)."""
    scaled = classic_objects(placed_endpoint(autoscaled(["cpu:70"])))["autoscaler"]
    assert scaled["metadata"]["annotations"][TRANSFER_HPA_OWNERSHIP] == "true"
    assert scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["name"] == "chat"
    assert scaled["spec"]["scaleTargetRef"]["name"] == "chat"


def test_mooncake_roles_scale_on_their_own_series() -> None:
    config = with_mooncake(
        {
            "mooncake": {
                "autoscaling": {
                    "enabled": True,
                    "prefill": {"max_replicas": 3, "metrics": ["queue:4", "ttft_p90_ms:800"]},
                    "decode": {"max_replicas": 4, "metrics": ["running:48", "kv_cache:0.85"]},
                }
            }
        }
    )
    objects = mooncake_objects(placed_endpoint(config), None)
    prefill, decode = objects["prefill-autoscaler"], objects["decode-autoscaler"]
    assert prefill["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat-prefill"}
    assert decode["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat-decode"}
    for scaled, role in ((prefill, "prefill"), (decode, "decode")):
        for trigger in scaled["spec"]["triggers"]:
            assert f'endpoint="chat",role="{role}"' in trigger["metadata"]["query"]
    assert [t["name"] for t in decode["spec"]["triggers"]] == ["running", "kv-cache"]


# What nothing would serve.


@pytest.mark.parametrize(
    ("framework", "metric", "meaning"),
    [
        ("tgi", "kv_cache:0.8", "KV-cache usage"),
        ("tgi", "ttft_p90_ms:500", "time to first token"),
        ("triton", "running:8", "sequences running"),
        ("triton", "kv_cache:0.8", "KV-cache usage"),
    ],
)
def test_a_metric_the_framework_lacks_is_refused_naming_both(framework: str, metric: str, meaning: str) -> None:
    (problem,) = rejected(autoscaled([metric], framework))
    assert problem.path == "endpoints.chat.autoscaling.metrics[0]"
    assert f"'{metric.split(':')[0]}' ({meaning}) is not exposed by {framework}" in problem.message


def test_gpu_metrics_are_refused_on_neuron() -> None:
    config = stack_config(
        endpoints={
            "chat": classic_endpoint(
                {"accelerator": "neuron", "autoscaling": {"max_replicas": 2, "metrics": ["gpu_memory:80", "queue:4"]}}
            )
        }
    )
    problems = [p for p in rejected(config) if p.path.startswith("endpoints.chat.autoscaling")]
    assert [p.path for p in problems] == ["endpoints.chat.autoscaling.metrics[0]"]
    assert "DCGM" in problems[0].message
    assert "neuron" in problems[0].message


def test_scaling_a_classic_triton_endpoint_to_zero_is_refused_saying_its_image_cannot_run_the_gate() -> None:
    triton = {"image": "nvcr.io/nvidia/tritonserver:25.10-py3", "model": DELETE, "model_path": "/models/repository"}
    (problem,) = rejected(with_classic({"autoscaling": {"min_replicas": 0, "max_replicas": 2}, **triton}))
    assert problem.path == "endpoints.chat.autoscaling.min_replicas"
    assert "Triton's image" in problem.message
    assert "aiohttp" in problem.message
