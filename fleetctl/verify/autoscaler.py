"""The "autoscaler active" check: each ScaledObject of an endpoint is Ready, and the
HorizontalPodAutoscaler KEDA made for it reports a current value for every metric it uses.

What KEDA writes (kedacore/keda v2.20.2): apis/keda/v1alpha1/scaledobject_types.go (status
hpaName, externalMetricNames, resourceMetricNames, conditions Ready/Active/Fallback/Paused) and
controllers/keda/hpa.go (one HPA metric per trigger: External ``s<trigger index>-<scaler
metric>`` for a prometheus trigger, Resource for cpu and memory). What the HPA controller writes:
autoscaling/v2 HorizontalPodAutoscalerStatus.currentMetrics, one entry per metric it could read,
and the condition ScalingActive, False with the reason when it could read none. Since KEDA reads a
query that finds no series as 0, each prometheus trigger's query is also asked of the region's
Prometheus (through the API server's service proxy) and must find its series.

At zero (a role of a split endpoint, or a classic endpoint's server, with ``min_replicas: 0``, KEDA
scaled it to 0 replicas) the
HPA computes nothing: the HPA controller (kubernetes pkg/controller/podautoscaler/horizontal.go,
reconcileAutoscaler, v1.30 to v1.36) sets ScalingActive False with the reason ``ScalingDisabled``
("scaling is disabled since the replica count of the target is zero") and no currentMetrics, and
KEDA (v2.20.2 pkg/scaling/executor/scale_scaledobjects.go) sets Active False, ScalerNotActive. The
pods' series are gone with the pods. What must hold then is what wakes the role: its ``wake``
trigger, whose query reads when the endpoint's proxy (a classic endpoint's gate) last had a
request, must find its series (it is scraped); the other triggers' series are not required."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from components import naming
from components.spec import Endpoint
from fleetctl.verify.client import CheckError, UnverifiedError
from fleetctl.verify.incluster import POLL_SECONDS
from fleetctl.verify.kube import Cluster
from fleetctl.verify.wake import Zero

_EXTERNAL = re.compile(r"^s(\d+)-")
WAKE_TRIGGER = "wake"
"""The name of the trigger that wakes a role at zero (components/render/autoscaling.py renders it)."""
SCALING_DISABLED = "ScalingDisabled"
"""The HPA's ScalingActive reason while its target has 0 replicas (kubernetes horizontal.go)."""


class MissingError(CheckError):
    """A metric the HPA could not read or a query that found no series: what a role waking from
    zero shows until its pods serve and are scraped."""


class LaggingError(MissingError):
    """Reported at zero by an HPA that has not synced since the role woke: a pass once waited out."""


def autoscaled_workloads(name: str, endpoint: Endpoint) -> list[str]:
    """The names of the endpoint's ScaledObjects (each named like the workload it scales)."""
    if endpoint.desired_state != "running":
        return []
    if endpoint.mooncake is None:
        enabled = endpoint.autoscaling is not None and endpoint.autoscaling.enabled
        return [naming.object_name(name, "server")] if enabled else []
    scaling = endpoint.mooncake.autoscaling
    if not scaling.enabled:
        return []
    roles: list[naming.Role] = ["prefill", "decode"]
    return [
        naming.object_name(name, role)
        for role, block in zip(roles, (scaling.prefill, scaling.decode), strict=True)
        if block
    ]


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def _current(entry: Mapping[str, Any]) -> str | None:
    current = (entry.get(entry.get("type", "").lower()) or {}).get("current") or {}
    for key in ("averageUtilization", "averageValue", "value"):
        if key in current:
            suffix = "%" if key == "averageUtilization" else (" per replica" if key == "averageValue" else "")
            return f"{current[key]}{suffix}"
    return None


def judge(scaled_object: Mapping[str, Any], hpa: Mapping[str, Any]) -> str:
    """What a healthy pair reports, for the check's detail; CheckError naming what is missing."""
    name = scaled_object["metadata"]["name"]
    triggers = scaled_object["spec"]["triggers"]
    status = scaled_object.get("status") or {}
    ready = _condition(status, "Ready")
    if ready is None or ready.get("status") != "True":
        reason = f"{ready.get('reason', '')}: {ready.get('message', '')}" if ready else "no Ready condition yet"
        raise CheckError(f"ScaledObject {name} is not Ready ({reason.strip(': ')})")
    external = list(status.get("externalMetricNames") or [])
    resource = list(status.get("resourceMetricNames") or [])
    if len(external) + len(resource) != len(triggers):
        raise CheckError(
            f"ScaledObject {name} has {len(triggers)} trigger(s) but KEDA serves {len(external) + len(resource)} "
            f"metric(s) for them ({', '.join(external + resource) or 'none'})"
        )
    currents: dict[tuple[str, str], str | None] = {}
    for entry in (hpa.get("status") or {}).get("currentMetrics") or []:
        kind = entry.get("type", "")
        body = entry.get(kind.lower()) or {}
        metric = (body.get("metric") or {}).get("name") if kind == "External" else body.get("name")
        currents[(kind, str(metric))] = _current(entry)
    reported: list[str] = []
    missing: list[str] = []
    for metric in external:
        match = _EXTERNAL.match(metric)
        index = int(match.group(1)) if match else -1
        label = triggers[index].get("name", metric) if 0 <= index < len(triggers) else metric
        value = currents.get(("External", metric))
        (reported if value is not None else missing).append(f"{label}={value}" if value is not None else label)
    for metric in resource:
        value = currents.get(("Resource", metric))
        (reported if value is not None else missing).append(f"{metric}={value}" if value is not None else metric)
    if missing:
        active = _condition(hpa.get("status") or {}, "ScalingActive")
        why = (
            f" (ScalingActive {active.get('status')}: {active.get('reason', '')} {active.get('message', '')})"
            if active
            else ""
        )
        raise MissingError(
            f"HPA {hpa['metadata']['name']} reports no current value for {', '.join(missing)}{why.rstrip()}"
        )
    return f"{name}: " + ", ".join(reported)


PROMETHEUS_QUERY = (
    f"/api/v1/namespaces/{naming.METRICS_NAMESPACE}/services/{naming.PROMETHEUS_SERVICE}:{naming.PROMETHEUS_PORT}"
    "/proxy/api/v1/query"
)
"""The region's Prometheus query API through the API server's service proxy."""


def judge_query(trigger: Mapping[str, Any], answer: Mapping[str, Any]) -> str | None:
    """A prometheus trigger's query as Prometheus answers it now. KEDA reads an empty result as 0
    (pkg/scalers/prometheus_scaler.go, ignoreNullValues), so a query whose series are missing
    would look like an idle workload in the HPA's status: that fails here. NaN (a percentile over
    a window without requests) is an idle workload indeed. Returns a note for NaN, else None."""
    label = trigger.get("name", "prometheus")
    result = (answer.get("data") or {}).get("result")
    if answer.get("status") != "success" or result is None:
        raise CheckError(f"trigger {label}: Prometheus refused its query ({answer.get('error', 'no data')})")
    if not result:
        raise MissingError(
            f"trigger {label}: its query returns no series, which KEDA reads as 0 (is the pipeline scraping "
            f"these pods?): {trigger['metadata']['query']}"
        )
    value = str(result[0].get("value", [None, ""])[1])
    return f"{label}: no requests in the window" if value.lower() == "nan" else None


def at_zero(scaled_object: Mapping[str, Any], hpa: Mapping[str, Any]) -> bool:
    """KEDA scaled the workload to zero as its minReplicaCount allows (the HPA says its target has
    0 replicas). A workload at 0 below a minReplicaCount above 0 is not: KEDA raises it again."""
    active = _condition(hpa.get("status") or {}, "ScalingActive")
    return (
        scaled_object["spec"].get("minReplicaCount") == 0
        and active is not None
        and active.get("status") == "False"
        and active.get("reason") == SCALING_DISABLED
    )


def judge_at_zero(scaled_object: Mapping[str, Any], ask: Callable[[str], Mapping[str, Any]]) -> tuple[str, str]:
    """(detail, the wake trigger's value) of a Ready ScaledObject at zero; CheckError naming what
    is missing for it to wake."""
    name = scaled_object["metadata"]["name"]
    wake = next(
        (t for t in scaled_object["spec"]["triggers"] if t.get("name") == WAKE_TRIGGER and t["type"] == "prometheus"),
        None,
    )
    if wake is None:
        raise CheckError(
            f"ScaledObject {name} is at zero without a '{WAKE_TRIGGER}' trigger: its pods' series are gone "
            "with them and nothing will wake it"
        )
    query = wake["metadata"]["query"]
    answer = ask(query)
    result = (answer.get("data") or {}).get("result")
    if answer.get("status") != "success" or result is None:
        raise CheckError(
            f"ScaledObject {name} is at zero and Prometheus refused its wake trigger's query "
            f"({answer.get('error', 'no data')})"
        )
    if not result:
        raise CheckError(
            f"ScaledObject {name} is at zero and its wake trigger's query returns no series, which KEDA reads as 0 "
            f"and never wakes it (is Prometheus scraping the endpoint's proxy or gate?): {query}"
        )
    value = str(result[0].get("value", [None, ""])[1])
    return f"{name}: at zero, waiting for its wake trigger ({WAKE_TRIGGER}={value})", value


def workload_active(cluster: Cluster, namespace: str, workload: str, zero: Zero | None = None) -> str:
    """One ScaledObject and its HPA judged: at zero, or reading every metric and query."""
    scaled_object = json.loads(cluster.get(f"/apis/keda.sh/v1alpha1/namespaces/{namespace}/scaledobjects/{workload}"))
    hpa_name = (scaled_object.get("status") or {}).get("hpaName") or workload
    hpa = json.loads(cluster.get(f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers/{hpa_name}"))

    def ask(query: str) -> Mapping[str, Any]:
        answer: Mapping[str, Any] = json.loads(cluster.get(PROMETHEUS_QUERY, query=query))
        return answer

    if at_zero(scaled_object, hpa):
        ready = _condition(scaled_object.get("status") or {}, "Ready")
        if ready is None or ready.get("status") != "True":
            judge(scaled_object, hpa)  # fails, naming why it is not Ready
        detail, value = judge_at_zero(scaled_object, ask)
        if zero is not None and zero.state == "asleep":
            raise CheckError(
                f"ScaledObject {workload} is still at zero though this run's requests should have woken it "
                f"({zero.detail}; its {WAKE_TRIGGER} trigger reads {value})"
            )
        if zero is not None and zero.state == "woke":
            # The endpoint answered, so KEDA raised the role: its HPA has not synced since (every 15 s).
            raise LaggingError(f"{detail}; its HPA has not seen the wake yet")
        return detail
    detail = judge(scaled_object, hpa)
    for trigger in scaled_object["spec"]["triggers"]:
        if trigger["type"] == "prometheus":
            note = judge_query(trigger, ask(trigger["metadata"]["query"]))
            detail += f" ({note})" if note else ""
    return detail


def autoscaler_active(
    cluster: Cluster, namespace: str, workloads: list[str], zero: Zero | None = None, wait: float = 0.0
) -> str:
    """Every workload's judgement. Of an endpoint the request check found at zero: just woken, the
    new pods' series may take a scrape to appear and the HPA a sync to see the replica, so what is
    missing is asked again for up to ``wait`` seconds; woken by this run and not waited for, what
    is missing is unverified (the role is waking), not failed."""
    waited_until = time.monotonic() + (wait if zero is not None and zero.state == "woke" else 0.0)
    return "; ".join(_settled(cluster, namespace, workload, zero, waited_until) for workload in workloads)


def _settled(cluster: Cluster, namespace: str, workload: str, zero: Zero | None, waited_until: float) -> str:
    while True:
        try:
            return workload_active(cluster, namespace, workload, zero)
        except LaggingError as lagging:
            if time.monotonic() >= waited_until:
                return str(lagging)
        except MissingError as error:
            if zero is not None and zero.state == "not waited":
                raise UnverifiedError(f"waking from zero (this run's request woke it): {error}") from None
            if time.monotonic() >= waited_until:
                raise
        time.sleep(min(POLL_SECONDS, cluster.client.left(), max(0.0, waited_until - time.monotonic())))
