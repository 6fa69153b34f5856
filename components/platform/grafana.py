"""Grafana (Helm, pinned) in a region that runs the metrics pipeline: the region's Prometheus as its
data source and every ConfigMap of the metrics namespace labelled ``grafana_dashboard: "1"`` as a
dashboard (naming.DASHBOARD_LABEL), reachable only inside the cluster (docs/metrics.md).

Facts from grafana-community/helm-charts at tag grafana-12.11.1 (config/pins.yaml charts.grafana;
the chart moved there from grafana/helm-charts in 2026): charts/grafana/values.yaml and templates.
``sidecar.dashboards`` runs kiwigrid/k8s-sidecar beside Grafana, watching ConfigMaps with the label
in the pod's own namespace (``searchNamespace`` unset). The admin password: with neither
``adminPassword`` nor ``admin.existingSecret``, templates/secret.yaml writes a Secret whose
password is the one already in the cluster (Helm ``lookup``, which a Release runs against the
cluster) or 40 random characters, so it is never in config, values or Pulumi state.
"""

from __future__ import annotations

from typing import Any

from components import naming, scheduling

NAMESPACE = naming.METRICS_NAMESPACE
RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
SIDECAR_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}


def grafana_values() -> dict[str, Any]:
    label, value = naming.DASHBOARD_LABEL
    return {
        "datasources": {
            "datasources.yaml": {
                "apiVersion": 1,
                "datasources": [
                    {
                        "name": "Prometheus",
                        "type": "prometheus",
                        "uid": naming.DASHBOARD_DATASOURCE_UID,
                        "url": naming.prometheus_query_url(),
                        "access": "proxy",
                        "isDefault": True,
                        "editable": False,
                    }
                ],
            }
        },
        "sidecar": {
            "dashboards": {"enabled": True, "label": label, "labelValue": value},
            "resources": SIDECAR_RESOURCES,
        },
        # The chart's test pod is a Helm hook that pulls another image; nothing of ours runs it.
        "testFramework": {"enabled": False},
        "nodeSelector": {scheduling.ACCELERATOR_LABEL: "none"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "resources": RESOURCES,
    }
