"""KEDA ScaledObjects (keda.sh/v1alpha1) from the spec's metrics, for classic endpoints and Mooncake roles.

Why KEDA rather than prometheus-adapter: a ScaledObject carries its own PromQL per workload
(no adapter rules to keep in step with every endpoint), and it can scale a workload to zero,
which an HPA cannot on EKS (HPAScaleToZero is an alpha feature gate EKS does not enable).

Moving from the HorizontalPodAutoscaler this program rendered before (named like its workload)
is one update: KEDA's admission webhook refuses a ScaledObject whose workload another HPA
already scales, unless the ScaledObject carries ``scaledobject.keda.sh/transfer-hpa-ownership:
"true"`` and names that HPA in ``advanced.horizontalPodAutoscalerConfig.name``
(apis/keda/v1alpha1/scaledobject_webhook.go, verifyHpas, KEDA v2.20.2). Pulumi creates the
ScaledObject before it deletes the old HPA resource, so every ScaledObject carries both: KEDA
adopts the HPA (controllers/keda/hpa.go, updateHPAIfNeeded sets its owner), Pulumi's delete
then removes it, and KEDA, which watches the HPAs it owns (scaledobject_controller.go,
Owns), makes it again on its next reconcile. The workload's replica count is untouched
throughout: nothing here owns it (docs/design.md, decision 9).

A workload that may scale to zero (``min_replicas: 0``: a split Mooncake endpoint's roles, a classic
endpoint's server) has one more trigger, ``wake``: the requests received by its endpoint's front (the
proxy, or the classic endpoint's gate; :func:`wake_trigger`), the one signal that exists while the
workload has no pod.
"""

from __future__ import annotations

from typing import Any

from components import naming
from components.metric_table import DCGM, PROXY_IN_FLIGHT, PROXY_LAST_REQUEST, SIGNAL_OF_METRIC, series
from components.render.kube import metadata
from components.spec.autoscaling import ScalingMetric
from components.spec.images import Framework

API_VERSION = "keda.sh/v1alpha1"
TRANSFER_HPA_OWNERSHIP = "scaledobject.keda.sh/transfer-hpa-ownership"
PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"
TTFT_WINDOW = "2m"
"""The window a TTFT percentile is computed over: four scrapes at 30 s, smoothing single slow requests."""
WAKE_SECONDS = 300
"""A role stays up while its proxy received a request in the last this many seconds (the wake trigger)."""
COOLDOWN_SECONDS = 300
"""How long a ScaledObject stays up once no trigger is active before it scales to zero: KEDA's default
(pkg/scaling/executor/scale_executor.go, defaultCooldownPeriod, v2.20.2), rendered on those that may
reach zero so the ten minutes docs/metrics.md promises are the object's own."""


def selector(namespace: str, endpoint: str, role: naming.Role) -> str:
    """The series of one role of one endpoint, whichever exporter wrote them (components/naming.py)."""
    return (
        f'{{namespace="{namespace}",{naming.SERIES_ENDPOINT_LABEL}="{endpoint}",{naming.SERIES_ROLE_LABEL}="{role}"}}'
    )


def query(metric: ScalingMetric, framework: Framework, labels: str) -> tuple[str, str]:
    """PromQL of a pipeline metric and the KEDA metricType it is compared as.

    Every query returns one sample (KEDA's prometheus scaler refuses several, and reads none or
    NaN as 0: pkg/scalers/prometheus_scaler.go). AverageValue: the total over the replicas, held
    at ``target`` per replica (queue, running, query). Value: a mean or a percentile over the
    replicas, held at ``target`` itself (kv_cache, ttft, gpu)."""
    if metric.query is not None:
        return metric.query, "AverageValue"
    if metric.name in DCGM:
        return f"avg({DCGM[metric.name].name}{labels})", "Value"
    found = series(framework, SIGNAL_OF_METRIC[metric.name])
    assert found is not None, f"validation refuses {metric.name} on {framework}"
    if metric.name in ("queue", "running"):
        return f"sum({found.sample}{labels})", "AverageValue"
    if metric.name == "kv_cache":
        return f"avg({found.sample}{labels})", "Value"
    assert found.to_ms is not None
    scale = "" if found.to_ms == 1.0 else f" * {found.to_ms:g}"
    rate = f"sum by (le) (rate({found.sample}{labels}[{TTFT_WINDOW}]))"
    return f"histogram_quantile(0.9, {rate}){scale}", "Value"


def trigger(metric: ScalingMetric, framework: Framework, labels: str) -> dict[str, Any]:
    if not metric.pipeline:
        return {"type": metric.name, "metricType": "Utilization", "metadata": {"value": metric.target}}
    promql, metric_type = query(metric, framework, labels)
    return {
        "type": "prometheus",
        "name": metric.name.replace("_", "-"),
        "metricType": metric_type,
        "metadata": {
            "serverAddress": naming.prometheus_query_url(),
            "query": promql,
            "threshold": metric.target,
        },
    }


def wake_query(namespace: str, endpoint: str, front: naming.Role = "proxy") -> str:
    """1 while the endpoint's ``front`` (its proxy or its gate) received a request in the last
    :data:`WAKE_SECONDS` or is still answering one, else 0; no sample before the front was ever
    scraped (KEDA reads that as 0 too).

    KEDA (v2.20.2, pkg/scaling/scale_handler.go getScaledObjectState) holds a ScaledObject active
    while any trigger but cpu and memory reads above its activationThreshold, scales it from zero to
    one when it is, and to zero once it has not been for the cooldown period. The time of the last
    request (served or answered 503) keeps the workload up while its endpoint has traffic at all,
    even when its own queue reads 0 at a poll, and wakes it on the first request at zero; the
    requests in flight keep it up under a stream longer than the window. Both are gauges, so a
    request that reached a front pod before its first scrape counts too (an ``increase`` of a
    counter would need a sample before it, which a new pod's series lacks). Clamped to 1 with
    threshold 1 (AverageValue), the HPA KEDA feeds wants exactly one replica from it: the user's
    metrics alone decide anything above one."""
    labels = selector(namespace, endpoint, front)
    recent = f"(time() - max({PROXY_LAST_REQUEST}{labels}) < bool {WAKE_SECONDS})"
    return f"clamp_max({recent} + sum({PROXY_IN_FLIGHT}{labels}), 1)"


def wake_trigger(namespace: str, endpoint: str, front: naming.Role = "proxy") -> dict[str, Any]:
    return {
        "type": "prometheus",
        "name": "wake",
        "metricType": "AverageValue",
        "metadata": {
            "serverAddress": naming.prometheus_query_url(),
            "query": wake_query(namespace, endpoint, front),
            "threshold": "1",
            "activationThreshold": "0",
        },
    }


def scaled_object(
    name: str,
    namespace: str,
    labels: dict[str, str],
    *,
    endpoint: str,
    role: naming.Role,
    framework: Framework,
    min_replicas: int,
    max_replicas: int,
    metrics: tuple[ScalingMetric, ...],
    stopped: bool = False,
    target_kind: str = "Deployment",
    wake: naming.Role | None = None,
) -> dict[str, Any]:
    """The ScaledObject of one workload, its HPA named like the workload (see the module's note).

    ``stopped`` pauses it at zero replicas (``autoscaling.keda.sh/paused-replicas``): KEDA would
    otherwise raise a workload below minReplicaCount back to it. ``wake``: the front (``proxy`` or
    ``gate``) that counts the endpoint's requests, on which the workload (at ``min_replicas`` 0) wakes
    (:func:`wake_query`)."""
    meta = metadata(name, namespace, labels)
    meta["annotations"] = {TRANSFER_HPA_OWNERSHIP: "true", **({PAUSED_REPLICAS: "0"} if stopped else {})}
    labels_selector = selector(namespace, endpoint, role)
    triggers = [trigger(metric, framework, labels_selector) for metric in metrics]
    names = [t["name"] for t in triggers if "name" in t]
    for index, entry in enumerate(triggers):  # two query: triggers need distinct names
        if "name" in entry and names.count(entry["name"]) > 1:
            entry["name"] = f"{entry['name']}-{index}"
    bounds: dict[str, Any] = {"minReplicaCount": min_replicas, "maxReplicaCount": max_replicas}
    if wake is not None:
        triggers.append(wake_trigger(namespace, endpoint, wake))
        bounds["cooldownPeriod"] = COOLDOWN_SECONDS
    return {
        "apiVersion": API_VERSION,
        "kind": "ScaledObject",
        "metadata": meta,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": target_kind, "name": name},
            **bounds,
            "advanced": {"horizontalPodAutoscalerConfig": {"name": name}},
            "triggers": triggers,
        },
    }
