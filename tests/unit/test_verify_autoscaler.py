"""fleetctl verify's "autoscaler active" judgement on API objects shaped as KEDA v2.20.2 and the
HPA controller write them: the ScaledObject is the one the program renders, with the status KEDA
sets (apis/keda/v1alpha1/scaledobject_types.go), and its HPA the one KEDA makes
(controllers/keda/hpa.go: External metrics first, named s<trigger index>-prometheus, with the
scaledobject.keda.sh/name selector; Resource metrics after) with an autoscaling/v2 status."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from components.render.classic import classic_objects
from fleetctl.verify.autoscaler import PROMETHEUS_QUERY, autoscaled_workloads, autoscaler_active, judge, judge_query
from fleetctl.verify.client import CheckError

from .stack_builders import placed_endpoint, with_classic, with_mooncake

METRICS = ["queue:5", "cpu:70", "ttft_p90_ms:800"]


def scaled_object() -> dict[str, Any]:
    endpoint = placed_endpoint(
        with_classic({"autoscaling": {"min_replicas": 1, "max_replicas": 4, "metrics": METRICS}})
    )
    document = copy.deepcopy(classic_objects(endpoint)["autoscaler"])
    document["status"] = {
        "scaleTargetKind": "apps/v1.Deployment",
        "originalReplicaCount": 1,
        "externalMetricNames": ["s0-prometheus", "s2-prometheus"],
        "resourceMetricNames": ["cpu"],
        "hpaName": "chat",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "ScaledObjectReady",
                "message": "ScaledObject is defined correctly and is ready for scaling",
            },
            {
                "type": "Active",
                "status": "True",
                "reason": "ScalerActive",
                "message": "Scaling is performed because triggers are active",
            },
            {
                "type": "Fallback",
                "status": "False",
                "reason": "NoFallbackFound",
                "message": "No fallbacks are active on this scaled object",
            },
            {"type": "Paused", "status": "False", "reason": "ScaledObjectUnpaused"},
        ],
    }
    return document


def external(index: int, current: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "External",
        "external": {
            "metric": {
                "name": f"s{index}-prometheus",
                "selector": {"matchLabels": {"scaledobject.keda.sh/name": "chat"}},
            },
            "current": current,
        },
    }


def hpa() -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": "chat",
            "namespace": "inference",
            "ownerReferences": [{"kind": "ScaledObject", "name": "chat"}],
        },
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat"}},
        "status": {
            "currentReplicas": 2,
            "desiredReplicas": 3,
            "currentMetrics": [
                external(0, {"averageValue": "6500m"}),
                external(2, {"value": "612"}),
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "current": {"averageUtilization": 41, "averageValue": "2460m"}},
                },
            ],
            "conditions": [
                {"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"},
                {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound"},
            ],
        },
    }


def test_a_ready_scaled_object_whose_hpa_reads_every_metric_is_active() -> None:
    assert judge(scaled_object(), hpa()) == "chat: queue=6500m per replica, ttft-p90-ms=612, cpu=41%"


def test_a_metric_the_hpa_could_not_read_fails_naming_it_and_the_reason() -> None:
    broken = hpa()
    broken["status"]["currentMetrics"] = broken["status"]["currentMetrics"][1:]
    broken["status"]["conditions"][1] = {
        "type": "ScalingActive",
        "status": "False",
        "reason": "FailedGetExternalMetric",
        "message": "the HPA was unable to compute the replica count: unable to get external metric",
    }
    with pytest.raises(CheckError, match=r"no current value for queue \(ScalingActive False: FailedGetExternalMetric"):
        judge(scaled_object(), broken)


def test_a_hpa_without_status_yet_fails() -> None:
    fresh = hpa()
    del fresh["status"]
    with pytest.raises(CheckError, match="no current value for queue, ttft-p90-ms, cpu"):
        judge(scaled_object(), fresh)


def test_a_scaled_object_that_is_not_ready_fails_with_kedas_message() -> None:
    broken = scaled_object()
    broken["status"]["conditions"][0] = {
        "type": "Ready",
        "status": "False",
        "reason": "ScaledObjectCheckFailed",
        "message": "error parsing prometheus metadata",
    }
    with pytest.raises(CheckError, match="not Ready \\(ScaledObjectCheckFailed: error parsing prometheus metadata\\)"):
        judge(broken, hpa())


def test_a_trigger_keda_serves_no_metric_for_fails() -> None:
    broken = scaled_object()
    broken["status"]["externalMetricNames"] = ["s0-prometheus"]
    with pytest.raises(CheckError, match="3 trigger\\(s\\) but KEDA serves 2 metric\\(s\\)"):
        judge(broken, hpa())


def test_the_check_covers_each_autoscaled_workload_of_a_running_endpoint() -> None:
    classic = placed_endpoint(with_classic({"autoscaling": {"max_replicas": 2}})).spec
    assert autoscaled_workloads("chat", classic) == ["chat"]
    stopped = placed_endpoint(with_classic({"autoscaling": {"max_replicas": 2}, "desired_state": "stopped"})).spec
    assert autoscaled_workloads("chat", stopped) == []  # paused at zero: nothing to report
    roles = {"enabled": True, "decode": {"max_replicas": 2, "metrics": ["running:32"]}}
    split = placed_endpoint(with_mooncake({"mooncake": {"autoscaling": roles}})).spec
    assert autoscaled_workloads("chat", split) == ["chat-decode"]
    assert autoscaled_workloads("chat", placed_endpoint(with_classic()).spec) == []


# Each prometheus trigger's query, asked of the region's Prometheus (its /api/v1/query answers).


def answer(*values: str) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1764590400.0, v]} for v in values]},
    }


def trigger(name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [t for t in scaled_object()["spec"]["triggers"] if t.get("name") == name]
    assert len(found) == 1
    return found[0]


def test_a_query_whose_series_exist_passes_and_nan_reads_as_no_requests() -> None:
    assert judge_query(trigger("queue"), answer("13")) is None
    assert judge_query(trigger("ttft-p90-ms"), answer("NaN")) == "ttft-p90-ms: no requests in the window"


def test_a_query_without_series_fails_since_keda_would_read_it_as_zero() -> None:
    with pytest.raises(CheckError, match="trigger queue: its query returns no series, which KEDA reads as 0"):
        judge_query(trigger("queue"), answer())


def test_a_query_prometheus_refuses_fails_with_its_error() -> None:
    refused = {"status": "error", "errorType": "bad_data", "error": "parse error"}
    with pytest.raises(CheckError, match="Prometheus refused its query \\(parse error\\)"):
        judge_query(trigger("queue"), refused)


class RecordedCluster:
    """The three reads the check makes, answered from recorded objects; every other path fails."""

    def __init__(self, prometheus: dict[str, dict[str, Any]]) -> None:
        self.prometheus = prometheus
        self.asked: list[str] = []

    def get(self, path: str, **query: str | int) -> bytes:
        if path == "/apis/keda.sh/v1alpha1/namespaces/inference/scaledobjects/chat":
            return json.dumps(scaled_object()).encode()
        if path == "/apis/autoscaling/v2/namespaces/inference/horizontalpodautoscalers/chat":
            return json.dumps(hpa()).encode()
        if path == PROMETHEUS_QUERY:
            self.asked.append(str(query["query"]))
            return json.dumps(self.prometheus[str(query["query"])]).encode()
        raise CheckError(f"unexpected GET {path}")


def test_the_check_asks_prometheus_every_trigger_query_through_the_api_server() -> None:
    queries = [t["metadata"]["query"] for t in scaled_object()["spec"]["triggers"] if t["type"] == "prometheus"]
    cluster = RecordedCluster({queries[0]: answer("13"), queries[1]: answer("NaN")})
    detail = autoscaler_active(cluster, "inference", ["chat"])  # type: ignore[arg-type]
    assert cluster.asked == queries
    assert PROMETHEUS_QUERY == "/api/v1/namespaces/inference-fleet-metrics/services/prometheus:9090/proxy/api/v1/query"
    assert detail == "chat: queue=6500m per replica, ttft-p90-ms=612, cpu=41% (ttft-p90-ms: no requests in the window)"
    cluster = RecordedCluster({queries[0]: answer(), queries[1]: answer("NaN")})
    with pytest.raises(CheckError, match="trigger queue: its query returns no series"):
        autoscaler_active(cluster, "inference", ["chat"])  # type: ignore[arg-type]
