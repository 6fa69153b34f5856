"""``regions.<r>.metrics``: the region's metrics pipeline (docs/metrics.md).

Prometheus in the cluster scrapes the inference pods and the NVIDIA DCGM exporter, KEDA scales
on what it answers, and Grafana shows the dashboards. ``enabled`` left unset is resolved where
the stack model sees both the regions and the endpoints placed in them (components/spec/stack.py):
on exactly when an endpoint there autoscales on a metric the cluster's metrics-server does not
serve (anything but cpu and memory).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import Field
from pydantic_core import PydanticCustomError

from components.spec.base import SpecModel, fail
from components.spec.sizes import ByteSize

if TYPE_CHECKING:
    from components.spec.endpoint import Endpoint

RESOURCE_METRICS = frozenset({"cpu", "memory"})
"""Metrics an autoscaler reads from the Kubernetes resource metrics API, not from the pipeline."""
MIN_DISK_BYTES = 2**30
RETENTION_SIZE_SHARE = 0.8
"""Prometheus stops at this share of ``disk`` (its retention by size); the rest is headroom for
the write-ahead log and compaction, so the emptyDir's limit never evicts the pod."""


class Metrics(SpecModel):
    enabled: bool | None = Field(
        None,
        description="Run the region's metrics pipeline (Prometheus, KEDA, the DCGM exporter on NVIDIA nodes, "
        "Grafana). Unset: on when an endpoint placed in the region autoscales on anything but cpu or memory.",
    )
    retention_days: int = Field(7, ge=1, le=90, description="Days of samples Prometheus keeps.")
    disk: ByteSize = Field(
        str(10 * 2**30),
        description="Size of Prometheus's data volume (an emptyDir on a system node's disk, lost when the pod "
        "moves); it keeps at most 80% of it, dropping the oldest samples first.",
    )
    grafana: bool = Field(True, description="Run Grafana with the region's dashboards (reachable by port-forward).")

    def _rules(self) -> Iterator[PydanticCustomError]:
        if int(self.disk) < MIN_DISK_BYTES:
            yield fail("metrics_disk", "must be at least 1GiB, got {disk} bytes", at="disk", disk=self.disk)

    @property
    def retention_size(self) -> str:
        """Prometheus's --storage.tsdb.retention.size, in MB (its units are powers of 1024)."""
        return f"{int(int(self.disk) * RETENTION_SIZE_SHARE) // 2**20}MB"


def metric_name(metric: str) -> str:
    """What a scaling target measures: the part before its target value ('queue:10' -> 'queue')."""
    return metric.rsplit(":", 1)[0]


def scaling_metrics(endpoint: Endpoint) -> tuple[str, ...]:
    """Every scaling target of the endpoint's enabled autoscalers (classic, or each Mooncake role)."""
    if endpoint.mooncake is not None:
        scaling = endpoint.mooncake.autoscaling
        if not scaling.enabled:
            return ()
        roles = [role for role in (scaling.prefill, scaling.decode) if role is not None]
        return tuple(metric for role in roles for metric in role.metrics)
    if endpoint.autoscaling is None or not endpoint.autoscaling.enabled:
        return ()
    return endpoint.autoscaling.metrics


def needs_pipeline(endpoint: Endpoint) -> bool:
    """The endpoint autoscales on a metric only the region's metrics pipeline serves."""
    return any(metric_name(metric) not in RESOURCE_METRICS for metric in scaling_metrics(endpoint))
