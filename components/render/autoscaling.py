"""HorizontalPodAutoscaler metrics from the spec's metric strings (classic endpoints and Mooncake roles)."""

from __future__ import annotations

from typing import Any

from components.render.kube import metadata

# GPU metrics are Pods metrics from NVIDIA's DCGM exporter, served to the autoscaler by a
# custom-metrics adapter (neither is installed by this program; see the README).
# DCGM_FI_DEV_GPU_UTIL: percent of time a kernel ran; DCGM_FI_DEV_MEM_COPY_UTIL: percent of
# time device memory was read or written (nvidia-smi's "memory utilization").
GPU_METRICS = {"gpu": "DCGM_FI_DEV_GPU_UTIL", "gpu_memory": "DCGM_FI_DEV_MEM_COPY_UTIL"}


def metric(text: str) -> dict[str, Any]:
    """One validated metric string (``cpu:70``, ``gpu:60``, ``pods/<name>:<value>``) as an autoscaling/v2 metric."""
    name, _, target = text.rpartition(":")
    if name in ("cpu", "memory"):
        return {
            "type": "Resource",
            "resource": {"name": name, "target": {"type": "Utilization", "averageUtilization": int(target)}},
        }
    pods_metric = GPU_METRICS.get(name) or name.removeprefix("pods/")
    return {
        "type": "Pods",
        "pods": {"metric": {"name": pods_metric}, "target": {"type": "AverageValue", "averageValue": target}},
    }


def horizontal_pod_autoscaler(
    name: str,
    namespace: str,
    labels: dict[str, str],
    target: str,
    min_replicas: int,
    max_replicas: int,
    metrics: tuple[str, ...],
    target_kind: str = "Deployment",
) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata(name, namespace, labels),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": target_kind, "name": target},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [metric(text) for text in metrics],
        },
    }
