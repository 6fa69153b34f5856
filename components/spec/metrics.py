"""``regions.<r>.metrics``: the region's metrics pipeline (docs/metrics.md).

Prometheus in the cluster scrapes the inference pods and the NVIDIA DCGM exporter, KEDA scales
on what it answers, and Grafana shows the dashboards. ``enabled`` left unset is resolved where
the stack model sees both the regions and the endpoints placed in them (components/spec/stack.py):
on exactly when an endpoint there autoscales (KEDA runs every autoscaler, whatever its metrics).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from components.spec.base import SpecModel, fail
from components.spec.sizes import ByteSize

if TYPE_CHECKING:
    from components.spec.endpoint import Endpoint

MIN_DISK_BYTES = 2**30
RETENTION_SIZE_SHARE = 0.8
"""Prometheus stops at this share of ``disk`` (its retention by size); the rest is headroom for
the write-ahead log and compaction, so the emptyDir's limit never evicts the pod."""


_AMP_WORKSPACE_ARN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):aps:(?P<region>[a-z0-9-]+):[0-9]{12}:workspace/(?P<id>ws-[0-9a-f-]{36})$"
)


def _amp_workspace_arn(value: str) -> str:
    if not _AMP_WORKSPACE_ARN.match(value):
        raise fail(
            "amp_workspace_arn",
            "must be an Amazon Managed Service for Prometheus workspace ARN, "
            "arn:aws:aps:<region>:<12-digit account>:workspace/ws-<id>, got {value!r}",
            value=value,
        )
    return value


AmpWorkspaceArn = Annotated[str, AfterValidator(_amp_workspace_arn)]


class Metrics(SpecModel):
    enabled: bool | None = Field(
        None,
        description="Run the region's metrics pipeline (Prometheus, KEDA, the DCGM exporter on NVIDIA nodes, "
        "Grafana). Unset: on when an endpoint placed in the region autoscales (KEDA runs every autoscaler).",
    )
    retention_days: int = Field(7, ge=1, le=90, description="Days of samples Prometheus keeps.")
    disk: ByteSize = Field(
        str(10 * 2**30),
        description="Size of Prometheus's data volume (an emptyDir on a system node's disk, lost when the pod "
        "moves); it keeps at most 80% of it, dropping the oldest samples first.",
    )
    grafana: bool = Field(True, description="Run Grafana with the region's dashboards (reachable by port-forward).")
    amp_workspace_arn: AmpWorkspaceArn | None = Field(
        None,
        description="An Amazon Managed Service for Prometheus workspace the region's Prometheus also writes every "
        "sample to (remote write, SigV4 under EKS Pod Identity); scaling and Grafana keep reading the "
        "in-cluster Prometheus.",
    )

    def _rules(self) -> Iterator[PydanticCustomError]:
        if int(self.disk) < MIN_DISK_BYTES:
            yield fail("metrics_disk", "must be at least 1GiB, got {disk} bytes", at="disk", disk=self.disk)

    @property
    def amp_remote_write_url(self) -> str | None:
        """The workspace's remote write endpoint (AMP's service endpoints: aps-workspaces.<region>)."""
        if self.amp_workspace_arn is None:
            return None
        arn = _AMP_WORKSPACE_ARN.match(self.amp_workspace_arn)
        assert arn is not None
        domain = "amazonaws.com.cn" if arn["partition"] == "aws-cn" else "amazonaws.com"
        return f"https://aps-workspaces.{arn['region']}.{domain}/workspaces/{arn['id']}/api/v1/remote_write"

    @property
    def amp_region(self) -> str | None:
        arn = _AMP_WORKSPACE_ARN.match(self.amp_workspace_arn or "")
        return arn["region"] if arn else None

    @property
    def retention_size(self) -> str:
        """Prometheus's --storage.tsdb.retention.size, in MB (its units are powers of 1024)."""
        return f"{int(int(self.disk) * RETENTION_SIZE_SHARE) // 2**20}MB"


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
    """The endpoint autoscales at all: every autoscaler is a KEDA ScaledObject
    (components/render/autoscaling.py), cpu and memory alike, and KEDA runs with the pipeline."""
    return bool(scaling_metrics(endpoint))
