"""The NVIDIA DCGM exporter (Helm, pinned) on every NVIDIA node of a region that runs the metrics
pipeline: GPU utilisation and memory per GPU, named after the pod that holds the GPU.

Facts from NVIDIA/dcgm-exporter at tag 4.5.3-4.8.2 (config/pins.yaml charts.dcgm_exporter). The
chart always runs the exporter with DCGM_EXPORTER_KUBERNETES=true (deployment/templates/
daemonset.yaml), which asks the kubelet's pod-resources API (the chart mounts
/var/lib/kubelet/pod-resources) which pod holds each GPU, by the device ids the NVIDIA device
plugin hands out (GPU UUIDs), and puts ``namespace``, ``pod`` and ``container`` on that GPU's
series (internal/pkg/transformation/kubernetes.go). With ``kubernetes.enablePodLabels`` it also
reads the pod from the API server (a ClusterRole to get, list and watch pods, which the chart
creates) and copies its labels, names sanitised to [a-zA-Z0-9_], onto the series; only those the
allowlist regexes match (matched anywhere in the key, so anchored here). The region's Prometheus
turns the two copied labels into ``endpoint`` and ``role`` (components/platform/prometheus.py).
"""

from __future__ import annotations

from typing import Any

from components import naming, scheduling

NAMESPACE = naming.METRICS_NAMESPACE
POD_LABEL_ALLOWLIST = (r"^app\.kubernetes\.io/name$", r"^app\.kubernetes\.io/component$")
"""The pod labels copied onto a GPU's series: the endpoint's name and the role."""


def dcgm_values() -> dict[str, Any]:
    return {
        # Where the NVIDIA device plugin runs (components/platform/addons.py): every NVIDIA node.
        "nodeSelector": {scheduling.ACCELERATOR_LABEL: "nvidia"},
        "tolerations": scheduling.tolerations((scheduling.GPU_TAINT, scheduling.EFA_TAINT)),
        "kubernetes": {"enablePodLabels": True, "podLabelAllowlistRegex": list(POD_LABEL_ALLOWLIST)},
        # The chart's default ServiceMonitor needs the Prometheus operator's CRDs; our Prometheus
        # finds the exporter's pods itself.
        "serviceMonitor": {"enabled": False},
    }
