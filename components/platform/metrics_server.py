"""metrics-server (Helm, pinned) in a region that runs the metrics pipeline: the Kubernetes resource
metrics API (metrics.k8s.io), which KEDA's ``cpu`` and ``memory`` triggers and an HPA's Resource
metrics read. EKS does not install it (it is an opt-in community add-on), so without it a
``cpu:`` or ``memory:`` autoscaler never gets a value and stays at its minimum.

Facts from kubernetes-sigs/metrics-server at tag metrics-server-helm-chart-3.13.1 (config/pins.yaml
charts.metrics_server): charts/metrics-server/values.yaml (one replica requesting 100m CPU and
200Mi; the APIService v1beta1.metrics.k8s.io registered by the chart) and
templates/deployment.yaml, which renders nodeSelector, affinity and tolerations from the values.
"""

from __future__ import annotations

from typing import Any

from components import scheduling

NAMESPACE = "kube-system"
"""Where metrics-server conventionally runs (its own manifests install it there)."""


def metrics_server_values() -> dict[str, Any]:
    return {
        "nodeSelector": {scheduling.ACCELERATOR_LABEL: "none"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
    }
