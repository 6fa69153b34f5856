"""Autoscaling blocks shared by classic endpoints and Mooncake roles."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from components.spec.base import SpecModel, fail, items

UTILIZATION_METRICS = ("cpu", "memory", "gpu", "gpu_memory")
_UTILIZATION = re.compile(r"^(cpu|memory|gpu|gpu_memory):([0-9]+)$")
_CUSTOM = re.compile(r"^pods/([a-zA-Z_:][a-zA-Z0-9_:]*):([0-9]+)$")


def _metric(value: str) -> str:
    text = value.strip()
    utilization = _UTILIZATION.match(text)
    if utilization and 1 <= int(utilization.group(2)) <= 100:
        return f"{utilization.group(1)}:{int(utilization.group(2))}"
    custom = _CUSTOM.match(text)
    if custom and int(custom.group(2)) >= 1:
        return f"pods/{custom.group(1)}:{int(custom.group(2))}"
    raise fail(
        "metric",
        "must be '<cpu|memory|gpu|gpu_memory>:<percent 1-100>' or 'pods/<metric>:<average value >= 1>', got {value!r}",
        value=value,
    )


Metric = Annotated[str, AfterValidator(_metric)]


class _Replicas(SpecModel):
    min_replicas: int = Field(1, ge=1, description="Fewest replicas the autoscaler keeps.")
    metrics: tuple[Metric, ...] = items(
        "Scaling targets: 'cpu:70', 'memory:80', 'gpu:60', 'gpu_memory:80' or 'pods/<metric>:<value>'.",
        default=("cpu:70",),
        min_length=1,
    )

    def _bounds(self, max_replicas: int) -> Iterator[PydanticCustomError]:
        if max_replicas < self.min_replicas:
            yield fail(
                "replica_bounds",
                "max_replicas must be >= min_replicas, got max_replicas {max} < min_replicas {min}",
                max=max_replicas,
                min=self.min_replicas,
            )


class Autoscaling(_Replicas):
    """Classic endpoints: a HorizontalPodAutoscaler owns the replica count."""

    enabled: bool = Field(True, description="A present block autoscales unless this is false.")
    max_replicas: int = Field(10, ge=1, description="Most replicas the autoscaler may run.")

    def _rules(self) -> Iterator[PydanticCustomError]:
        return self._bounds(self.max_replicas)


class RoleAutoscaling(_Replicas):
    """One Mooncake role (prefill or decode) under its own autoscaler."""

    max_replicas: int = Field(ge=1, description="Most replicas of this role.")

    def _rules(self) -> Iterator[PydanticCustomError]:
        return self._bounds(self.max_replicas)
