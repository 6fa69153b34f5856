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
"""

from __future__ import annotations

from typing import Any

from components import naming
from components.metric_table import DCGM, SIGNAL_OF_METRIC, series
from components.render.kube import metadata
from components.spec.autoscaling import ScalingMetric
from components.spec.images import Framework

API_VERSION = "keda.sh/v1alpha1"
TRANSFER_HPA_OWNERSHIP = "scaledobject.keda.sh/transfer-hpa-ownership"
PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"
TTFT_WINDOW = "2m"
"""The window a TTFT percentile is computed over: four scrapes at 30 s, smoothing single slow requests."""


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
) -> dict[str, Any]:
    """The ScaledObject of one workload, its HPA named like the workload (see the module's note).

    ``stopped`` pauses it at zero replicas (``autoscaling.keda.sh/paused-replicas``): KEDA would
    otherwise raise a workload below minReplicaCount back to it."""
    meta = metadata(name, namespace, labels)
    meta["annotations"] = {TRANSFER_HPA_OWNERSHIP: "true", **({PAUSED_REPLICAS: "0"} if stopped else {})}
    labels_selector = selector(namespace, endpoint, role)
    triggers = [trigger(metric, framework, labels_selector) for metric in metrics]
    names = [t["name"] for t in triggers if "name" in t]
    for index, entry in enumerate(triggers):  # two query: triggers need distinct names
        if "name" in entry and names.count(entry["name"]) > 1:
            entry["name"] = f"{entry['name']}-{index}"
    return {
        "apiVersion": API_VERSION,
        "kind": "ScaledObject",
        "metadata": meta,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": target_kind, "name": name},
            "minReplicaCount": min_replicas,
            "maxReplicaCount": max_replicas,
            "advanced": {"horizontalPodAutoscalerConfig": {"name": name}},
            "triggers": triggers,
        },
    }
