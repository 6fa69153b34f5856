"""The region's Prometheus (Helm, pinned): what it scrapes and how series get their labels.

Chart prometheus-community/prometheus at prometheus-29.27.0 (config/pins.yaml charts.prometheus):
a single server with the scrape configuration we write, rather than kube-prometheus-stack, whose
operator, CRDs, node exporter, kube-state-metrics and Alertmanager the pipeline would not use
(docs/metrics.md). Facts from charts/prometheus/values.yaml and templates/{cm,deploy}.yaml there:
``scrapeConfigs`` is a map of job name to scrape config, each on unless ``enabled: false``;
``server.fullnameOverride`` names the server's Deployment, Service and ConfigMap; the data volume
is an emptyDir unless ``server.persistentVolume.enabled``.

Every series scraped from an inference pod or a proxy carries ``namespace``, ``pod``, ``endpoint`` (the
pod's ``app.kubernetes.io/name``) and ``role`` (its ``app.kubernetes.io/component``), from the target's
labels (``honor_labels`` off, so a framework's own label of those names cannot win). The DCGM
exporter's series carry the GPU's pod as exported labels (its Kubernetes mapping), so its job
honours them and turns the pod labels it copies into ``endpoint`` and ``role``.
"""

from __future__ import annotations

from typing import Any

from components import naming, scheduling
from components.render.kube import quantity
from components.render.pods import METRICS_PORT_NAME, PORT_NAME, SERVER_CONTAINER
from components.spec.metrics import Metrics

NAMESPACE = naming.METRICS_NAMESPACE
SCRAPE_INTERVAL = "15s"
"""The chart's default is 1m: too slow for a scaler that reads a rate over the last minute."""
SERVER_ROLES = ("server", "canary", "prefill", "decode")
"""Components of the pods that run a framework's server (the store master serves no metrics)."""
FRONT_COMPONENTS = ("proxy", "gate")
"""The pods that run the proxy program: a split endpoint's proxy (components/render/proxy.py) and a
classic endpoint's gate (components/render/gate.py)."""
PROXY_CONTAINER = "proxy"
"""Their one container."""
CHART_SCRAPE_JOBS = (
    "kubernetes-api-servers",
    "kubernetes-nodes",
    "kubernetes-nodes-cadvisor",
    "kubernetes-service-endpoints",
    "kubernetes-service-endpoints-slow",
    "prometheus-pushgateway",
    "kubernetes-services",
    "kubernetes-pods",
    "kubernetes-pods-slow",
)
"""The chart's default jobs other than ``prometheus`` (itself), all turned off: the pipeline keeps
what the scalers and dashboards read, and ``kubernetes-pods`` would scrape any annotated pod."""
SUBCHARTS = ("alertmanager", "kube-state-metrics", "prometheus-node-exporter", "prometheus-pushgateway")
RESOURCES = {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "4Gi"}}
"""A few thousand series of a handful of endpoints at 15 s fit well within this; memory is bounded
so a runaway cardinality restarts Prometheus instead of starving the system node."""

DCGM_POD_LABELS = {"app_kubernetes_io_name": naming.SERIES_ENDPOINT_LABEL, "app_kubernetes_io_component": "role"}
"""Pod labels the DCGM exporter copies onto a GPU's series, sanitised (internal/pkg/utils/utils.go
SanitizeLabelName: every character outside [a-zA-Z0-9_] becomes '_'), and the series label each becomes."""


def _pod_target_labels() -> list[dict[str, Any]]:
    return [
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"},
    ]


def _endpoint_labels() -> list[dict[str, Any]]:
    """``endpoint`` and ``role`` from the pod's name and component labels."""
    return [
        {
            "source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name"],
            "target_label": naming.SERIES_ENDPOINT_LABEL,
        },
        {
            "source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_component"],
            "target_label": naming.SERIES_ROLE_LABEL,
        },
    ]


def inference_job() -> dict[str, Any]:
    """Every framework server of the fleet, in every namespace, at its metrics port: the server
    port, or the port its pod's ``inference-fleet/metrics-port`` annotation names (Triton's)."""
    selector = f"app.kubernetes.io/part-of={naming.PROJECT},app.kubernetes.io/component in ({','.join(SERVER_ROLES)})"
    annotation = "__meta_kubernetes_pod_annotation_" + naming.METRICS_PORT_ANNOTATION.replace("/", "_").replace(
        "-", "_"
    )
    return {
        "kubernetes_sd_configs": [{"role": "pod", "selectors": [{"role": "pod", "label": selector}]}],
        "relabel_configs": [
            # One target per pod: its server container's serving port.
            {"source_labels": ["__meta_kubernetes_pod_container_name"], "regex": SERVER_CONTAINER, "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": PORT_NAME, "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "Running", "action": "keep"},
            {
                "source_labels": [annotation, "__meta_kubernetes_pod_ip"],
                "regex": r"(\d+);(.+)",
                "replacement": "$2:$1",
                "target_label": "__address__",
            },
            *_pod_target_labels(),
            *_endpoint_labels(),
        ],
    }


def proxy_job() -> dict[str, Any]:
    """The proxy of every split Mooncake endpoint (and of its canary set) and the gate of every classic
    endpoint that may scale to zero, at its ``metrics`` port: the requests it counts wake the workloads
    at zero (components/render/autoscaling.py, wake_query); ``role`` says which (proxy or gate). The
    selector (set-based, as the API's label selectors allow) narrows what discovery lists; the keep
    rules are what decides (and what a test without Kubernetes discovery can hold)."""
    components = ",".join(FRONT_COMPONENTS)
    selector = f"app.kubernetes.io/part-of={naming.PROJECT},app.kubernetes.io/component in ({components})"
    return {
        "kubernetes_sd_configs": [{"role": "pod", "selectors": [{"role": "pod", "label": selector}]}],
        "relabel_configs": [
            {
                "source_labels": [
                    "__meta_kubernetes_pod_label_app_kubernetes_io_part_of",
                    "__meta_kubernetes_pod_label_app_kubernetes_io_component",
                ],
                "regex": f"{naming.PROJECT};({'|'.join(FRONT_COMPONENTS)})",
                "action": "keep",
            },
            {"source_labels": ["__meta_kubernetes_pod_container_name"], "regex": PROXY_CONTAINER, "action": "keep"},
            {
                "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                "regex": METRICS_PORT_NAME,
                "action": "keep",
            },
            {"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "Running", "action": "keep"},
            *_pod_target_labels(),
            *_endpoint_labels(),
        ],
    }


def dcgm_job() -> dict[str, Any]:
    """The DCGM exporter on each NVIDIA node. Its series name the pod holding the GPU (``namespace``,
    ``pod``, ``container``) and carry that pod's name and component labels, which become ``endpoint``
    and ``role``; honoured, so the exporter's own pod never stands in for the GPU's."""
    return {
        "honor_labels": True,
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [NAMESPACE]}}],
        "relabel_configs": [
            {
                "source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name"],
                "regex": "dcgm-exporter",
                "action": "keep",
            },
            {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": "metrics", "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"},
        ],
        "metric_relabel_configs": [
            *(
                {"source_labels": [copied], "regex": "(.+)", "target_label": label}
                for copied, label in DCGM_POD_LABELS.items()
            ),
            {"regex": "|".join(DCGM_POD_LABELS), "action": "labeldrop"},
        ],
    }


def keda_job() -> dict[str, Any]:
    """KEDA's operator, metrics API server and webhooks: their scaler errors and latencies."""
    return {
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [NAMESPACE]}}],
        "relabel_configs": [
            {
                "source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_part_of"],
                "regex": "keda-operator",
                "action": "keep",
            },
            {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": "metrics", "action": "keep"},
            *_pod_target_labels(),
        ],
    }


def scrape_configs() -> dict[str, dict[str, Any]]:
    """The chart's ``scrapeConfigs``: ours on, its defaults but ``prometheus`` (itself) off."""
    return {
        **{job: {"enabled": False} for job in CHART_SCRAPE_JOBS},
        "inference": inference_job(),
        "proxy": proxy_job(),
        "dcgm-exporter": dcgm_job(),
        "keda": keda_job(),
    }


SERVICE_ACCOUNT = naming.PROMETHEUS_SERVICE
"""The server's ServiceAccount (the chart's default is the server's full name; set so the Pod
Identity association of AMP remote write names it for certain)."""


def remote_write_policy(workspace_arn: str) -> dict[str, Any]:
    """What the server needs to write to an AMP workspace: aps:RemoteWrite on that workspace only
    (the action remote write is authorised as, on a workspace resource)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "RemoteWrite", "Effect": "Allow", "Action": "aps:RemoteWrite", "Resource": workspace_arn}
        ],
    }


def remote_write(settings: Metrics) -> list[dict[str, Any]]:
    """Every sample also to the AMP workspace, signed with SigV4 by the server's Pod Identity
    credentials (Prometheus's sigv4 block takes the AWS SDK's default credential chain)."""
    if settings.amp_remote_write_url is None:
        return []
    return [{"url": settings.amp_remote_write_url, "sigv4": {"region": settings.amp_region}}]


def prometheus_values(settings: Metrics) -> dict[str, Any]:
    server_extra: dict[str, Any] = {}
    writes = remote_write(settings)
    if writes:
        server_extra["remoteWrite"] = writes
    return {
        **{subchart: {"enabled": False} for subchart in SUBCHARTS},
        "serviceAccounts": {"server": {"create": True, "name": SERVICE_ACCOUNT}},
        "server": {
            **server_extra,
            "fullnameOverride": naming.PROMETHEUS_SERVICE,
            "service": {"servicePort": naming.PROMETHEUS_PORT},
            "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
            "retention": f"{settings.retention_days}d",
            "retentionSize": settings.retention_size,
            "persistentVolume": {"enabled": False},
            "emptyDir": {"sizeLimit": quantity(settings.disk)},
            "nodeSelector": {scheduling.ACCELERATOR_LABEL: "none"},
            "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
            "resources": RESOURCES,
        },
        "scrapeConfigs": scrape_configs(),
    }
