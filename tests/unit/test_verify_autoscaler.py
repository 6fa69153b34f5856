"""fleetctl verify's "autoscaler active" judgement on API objects shaped as KEDA v2.20.2 and the
HPA controller write them: the ScaledObject is the one the program renders, with the status KEDA
sets (apis/keda/v1alpha1/scaledobject_types.go), and its HPA the one KEDA makes
(controllers/keda/hpa.go: External metrics first, named s<trigger index>-prometheus, with the
scaledobject.keda.sh/name selector; Resource metrics after) with an autoscaling/v2 status."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.render.classic import classic_objects
from fleetctl.verify.autoscaler import autoscaled_workloads, judge
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
