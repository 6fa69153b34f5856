"""KEDA (Helm, pinned), the metrics pipeline's scaling layer: its operator turns ScaledObjects into
HorizontalPodAutoscalers it feeds through its external metrics API server, and scales a workload
between zero and one replica itself (docs/metrics.md). Installed with its CRDs applied by the program.

Facts are from kedacore/charts at tag v2.20.2 (config/pins.yaml charts.keda): keda/values.yaml and
keda/templates/{manager,metrics-server,webhooks}/deployment.yaml, which give each of the three
Deployments ``kubernetes.io/os: linux`` plus ``<component>.nodeSelector`` (else the top-level
``nodeSelector``), and ``<component>.tolerations`` (else the top-level ``tolerations``).
"""

from __future__ import annotations

from typing import Any

from components import naming, scheduling

NAMESPACE = naming.METRICS_NAMESPACE
METRICS_PORT = 8080
"""``prometheus.{operator,metricServer,webhooks}.port``: each component's /metrics, as a port named ``metrics``."""

COMPONENTS = {
    # Deployment name -> (the values key of its replicas, selector and tolerations; of its resources).
    "keda-operator": ("operator", "operator"),
    "keda-operator-metrics-apiserver": ("metricsServer", "metricServer"),
    "keda-admission-webhooks": ("webhooks", "webhooks"),
}


def keda_values() -> dict[str, Any]:
    """Values of the pinned chart: its CRDs left to us, its three Deployments on system nodes, and
    each component's own metrics served for the region's Prometheus to scrape."""
    return {
        "crds": {"install": False},
        "nodeSelector": {scheduling.ACCELERATOR_LABEL: "none"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "prometheus": {
            "operator": {"enabled": True},
            "metricServer": {"enabled": True},
            "webhooks": {"enabled": True},
        },
    }
