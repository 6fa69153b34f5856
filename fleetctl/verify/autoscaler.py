"""The "autoscaler active" check: each ScaledObject of an endpoint is Ready, and the
HorizontalPodAutoscaler KEDA made for it reports a current value for every metric it uses.

What KEDA writes (kedacore/keda v2.20.2): apis/keda/v1alpha1/scaledobject_types.go (status
hpaName, externalMetricNames, resourceMetricNames, conditions Ready/Active/Fallback/Paused) and
controllers/keda/hpa.go (one HPA metric per trigger: External ``s<trigger index>-<scaler
metric>`` for a prometheus trigger, Resource for cpu and memory). What the HPA controller writes:
autoscaling/v2 HorizontalPodAutoscalerStatus.currentMetrics, one entry per metric it could read,
and the condition ScalingActive, False with the reason when it could read none. Since KEDA reads a
query that finds no series as 0, each prometheus trigger's query is also asked of the region's
Prometheus (through the API server's service proxy) and must find its series."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from components import naming
from components.spec import Endpoint
from fleetctl.verify.client import CheckError
from fleetctl.verify.kube import Cluster

_EXTERNAL = re.compile(r"^s(\d+)-")


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
        raise CheckError(
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
        raise CheckError(
            f"trigger {label}: its query returns no series, which KEDA reads as 0 (is the pipeline scraping "
            f"these pods?): {trigger['metadata']['query']}"
        )
    value = str(result[0].get("value", [None, ""])[1])
    return f"{label}: no requests in the window" if value.lower() == "nan" else None


def autoscaler_active(cluster: Cluster, namespace: str, workloads: list[str]) -> str:
    details = []
    for workload in workloads:
        scaled_object = json.loads(
            cluster.get(f"/apis/keda.sh/v1alpha1/namespaces/{namespace}/scaledobjects/{workload}")
        )
        hpa_name = (scaled_object.get("status") or {}).get("hpaName") or workload
        hpa = json.loads(
            cluster.get(f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers/{hpa_name}")
        )
        detail = judge(scaled_object, hpa)
        for trigger in scaled_object["spec"]["triggers"]:
            if trigger["type"] == "prometheus":
                answer = json.loads(cluster.get(PROMETHEUS_QUERY, query=trigger["metadata"]["query"]))
                note = judge_query(trigger, answer)
                detail += f" ({note})" if note else ""
        details.append(detail)
    return "; ".join(details)
