"""fleetctl verify's "autoscaler active" at zero, on API objects as the controllers write them there:
the HPA controller (kubernetes pkg/controller/podautoscaler/horizontal.go, reconcileAutoscaler)
sets ScalingActive False, reason ScalingDisabled, and computes no metric while its target has 0
replicas; KEDA v2.20.2 (pkg/scaling/executor/scale_scaledobjects.go) sets Active False,
ScalerNotActive, and mirrors the HPA's reason in HPAActive (apis/keda/v1alpha1/condition_types.go).
The ScaledObject is the one the program renders for a split role at ``min_replicas: 0``, its
wake trigger reading the requests the endpoint's proxy counted."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from components.render.mooncake import mooncake_objects
from fleetctl.verify.autoscaler import PROMETHEUS_QUERY, WAKE_TRIGGER, autoscaler_active
from fleetctl.verify.client import CheckError, Client, UnverifiedError
from fleetctl.verify.wake import Zero

from .stack_builders import placed_endpoint, with_mooncake
from .test_verify_autoscaler import answer, hpa, scaled_object

PROXY = '{namespace="inference",endpoint="chat",role="proxy"}'
WAKE_QUERY = (
    f"clamp_max((time() - max(inference_fleet_proxy_last_request_timestamp_seconds{PROXY}) < bool 300) + "
    f"sum(inference_fleet_proxy_requests_in_flight{PROXY}), 1)"
)
ROLE = "chat-prefill"
SCALING = {
    "enabled": True,
    "prefill": {"min_replicas": 0, "max_replicas": 3, "metrics": ["queue:4", "cpu:70", "ttft_p90_ms:800"]},
}


def rendered() -> dict[str, Any]:
    """The prefill ScaledObject the program renders for ``min_replicas: 0``, as applied."""
    endpoint = placed_endpoint(with_mooncake({"mooncake": {"autoscaling": SCALING}}))
    return copy.deepcopy(mooncake_objects(endpoint, None)["prefill-autoscaler"])


def sleeping() -> dict[str, Any]:
    """The ScaledObject of the role at zero, with the status KEDA writes then."""
    document = rendered()
    document["status"] = {
        "scaleTargetKind": "apps/v1.Deployment",
        "originalReplicaCount": 1,
        "externalMetricNames": ["s0-prometheus", "s2-prometheus", "s3-prometheus"],
        "resourceMetricNames": ["cpu"],
        "hpaName": ROLE,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "ScaledObjectReady",
                "message": "ScaledObject is defined correctly and is ready for scaling",
            },
            {
                "type": "Active",
                "status": "False",
                "reason": "ScalerNotActive",
                "message": "Scaling is not performed because triggers are not active",
            },
            {"type": "Fallback", "status": "False", "reason": "NoFallbackFound"},
            {"type": "Paused", "status": "False", "reason": "ScaledObjectUnpaused"},
            {
                "type": "HPAActive",
                "status": "True",
                "reason": "ScalingDisabled",
                "message": "scaling is disabled since the replica count of the target is zero",
            },
        ],
    }
    return document


def hpa_at_zero() -> dict[str, Any]:
    document = hpa()
    document["metadata"]["name"] = ROLE
    document["status"] = {  # currentReplicas is omitempty: absent at 0
        "desiredReplicas": 0,
        "conditions": [
            {
                "type": "AbleToScale",
                "status": "True",
                "reason": "SucceededGetScale",
                "message": "the HPA controller was able to get the target's current scale",
            },
            {
                "type": "ScalingActive",
                "status": "False",
                "reason": "ScalingDisabled",
                "message": "scaling is disabled since the replica count of the target is zero",
            },
        ],
    }
    return document


def test_the_wake_trigger_verify_reads_is_the_one_rendered() -> None:
    (wake,) = [trigger for trigger in rendered()["spec"]["triggers"] if trigger.get("name") == WAKE_TRIGGER]
    assert wake["metadata"]["query"] == WAKE_QUERY


class Scene:
    """The reads the check makes, answered by functions of how many times the ScaledObject was read."""

    def __init__(
        self,
        scaled: Callable[[int], dict[str, Any]],
        hpa_of: Callable[[int], dict[str, Any]],
        prometheus: Callable[[int, str], dict[str, Any]],
    ) -> None:
        self.scaled, self.hpa_of, self.prometheus = scaled, hpa_of, prometheus
        self.reads = 0
        self.asked: list[str] = []
        self.client = Client(deadline=60)

    def get(self, path: str, **query: str | int) -> bytes:
        if path == "/apis/keda.sh/v1alpha1/namespaces/inference/scaledobjects/chat-prefill":
            self.reads += 1
            return json.dumps(self.scaled(self.reads)).encode()
        if path == "/apis/autoscaling/v2/namespaces/inference/horizontalpodautoscalers/chat-prefill":
            return json.dumps(self.hpa_of(self.reads)).encode()
        if path == PROMETHEUS_QUERY:
            self.asked.append(str(query["query"]))
            return json.dumps(self.prometheus(self.reads, str(query["query"]))).encode()
        raise CheckError(f"unexpected GET {path}")


def at_zero(wake: dict[str, Any]) -> Scene:
    return Scene(
        lambda _: sleeping(), lambda _: hpa_at_zero(), lambda _, query: wake if query == WAKE_QUERY else answer()
    )


def active(scene: Scene, zero: Zero | None = None, wait: float = 0.0) -> str:
    return autoscaler_active(scene, "inference", [ROLE], zero, wait)  # type: ignore[arg-type]


def test_at_zero_it_passes_when_the_wake_trigger_finds_the_proxys_series_and_asks_only_that() -> None:
    scene = at_zero(answer("0"))
    assert active(scene) == "chat-prefill: at zero, waiting for its wake trigger (wake=0)"
    assert scene.asked == [WAKE_QUERY]  # the pods' series are gone with them: not required


def test_at_zero_a_wake_query_without_series_fails_naming_the_proxys_scrape() -> None:
    with pytest.raises(CheckError) as failed:
        active(at_zero(answer()))
    assert str(failed.value) == (
        "ScaledObject chat-prefill is at zero and its wake trigger's query returns no series, which KEDA reads as 0 "
        f"and never wakes it (is Prometheus scraping the endpoint's proxy or gate?): {WAKE_QUERY}"
    )


def test_at_zero_without_a_wake_trigger_fails() -> None:
    document = sleeping()
    document["spec"]["triggers"].pop()
    document["status"]["externalMetricNames"].pop()
    scene = Scene(lambda _: document, lambda _: hpa_at_zero(), lambda _, query: answer("1"))
    with pytest.raises(CheckError, match="ScaledObject chat-prefill is at zero without a 'wake' trigger"):
        active(scene)


def test_at_zero_a_scaled_object_that_is_not_ready_still_fails_with_kedas_reason() -> None:
    document = sleeping()
    document["status"]["conditions"][0] = {"type": "Ready", "status": "False", "reason": "ScaledObjectCheckFailed"}
    scene = Scene(lambda _: document, lambda _: hpa_at_zero(), lambda _, query: answer("1"))
    with pytest.raises(CheckError, match=r"not Ready \(ScaledObjectCheckFailed\)"):
        active(scene)


def test_a_workload_at_zero_below_a_minimum_above_zero_is_judged_as_before() -> None:
    """Scaled to 0 by hand with minReplicaCount 1: KEDA raises it again; the HPA reads nothing meanwhile."""
    document = sleeping()
    document["spec"]["minReplicaCount"] = 1
    scene = Scene(lambda _: document, lambda _: hpa_at_zero(), lambda _, query: answer("1"))
    with pytest.raises(CheckError, match="reports no current value for queue, ttft-p90-ms, wake, cpu "):
        active(scene)


def test_still_at_zero_after_this_runs_requests_did_not_wake_it_fails_with_the_wake_value() -> None:
    asleep = Zero("asleep", "scaled to zero and not awake within --wake-wait 900 s")
    with pytest.raises(CheckError) as failed:
        active(at_zero(answer("1")), asleep)
    assert str(failed.value) == (
        "ScaledObject chat-prefill is still at zero though this run's requests should have woken it (scaled to zero "
        "and not awake within --wake-wait 900 s; its wake trigger reads 1)"
    )


def awake(_: int) -> dict[str, Any]:
    document = sleeping()
    document["status"]["conditions"][1] = scaled_object()["status"]["conditions"][1]
    return document


def hpa_awake(_: int) -> dict[str, Any]:
    """KEDA raised the role to one; the HPA reads every metric (a query without series reads 0)."""
    document = hpa_at_zero()
    document["status"] = hpa()["status"]
    wake = copy.deepcopy(document["status"]["currentMetrics"][0])
    wake["external"]["metric"]["name"] = "s3-prometheus"
    document["status"]["currentMetrics"].insert(2, wake)
    return document


def test_waking_and_not_waited_for_what_is_missing_is_unverified_not_failed() -> None:
    """The run's request woke it (--wake-wait 0): KEDA raised it to one, its pods do not serve yet."""
    scene = Scene(awake, hpa_awake, lambda _, query: answer("1") if query == WAKE_QUERY else answer())
    with pytest.raises(UnverifiedError) as unverified:
        active(scene, Zero("not waited", "scaled to zero, not waited for (--wake-wait 0)"))
    assert str(unverified.value).startswith(
        "waking from zero (this run's request woke it): trigger queue: its query returns no series"
    )
    with pytest.raises(CheckError, match="trigger queue: its query returns no series"):
        active(scene)  # not known to be waking: as before


def test_just_woken_its_pods_series_are_asked_again_until_they_appear(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    # The pods' series appear at the third read (a scrape after the wake).
    scene = Scene(awake, hpa_awake, lambda reads, query: answer("1") if reads >= 3 or query == WAKE_QUERY else answer())
    detail = active(scene, Zero("woke", "woke from zero 95 s after the first request"), wait=30)
    assert detail.startswith("chat-prefill: queue=6500m per replica, ttft-p90-ms=612, wake=6500m per replica, cpu=41%")
    assert scene.reads == 3
    assert len(slept) == 2


def test_just_woken_a_hpa_that_still_reports_zero_is_asked_again_then_passes_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The endpoint answered, so KEDA raised the role; the HPA syncs every 15 s."""
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    woke = Zero("woke", "woke from zero 95 s after the first request")
    scene = at_zero(answer("1"))
    assert active(scene, woke, wait=0) == (
        "chat-prefill: at zero, waiting for its wake trigger (wake=1); its HPA has not seen the wake yet"
    )
    synced = Scene(
        lambda _: sleeping(),
        lambda reads: hpa_awake(reads) if reads >= 2 else hpa_at_zero(),
        lambda _, query: answer("1"),
    )
    assert active(synced, woke, wait=30).startswith("chat-prefill: queue=6500m per replica")
    assert synced.reads == 2
