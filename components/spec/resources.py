"""CPU and memory of a pod, and their defaults per GPU (an endpoint's, or one Mooncake role's)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, Field

from components.spec.base import SpecModel, fail
from components.spec.sizes import ByteSize

_CPU = re.compile(r"^([1-9][0-9]{0,3}|[0-9]{1,4}\.[0-9]{1,3}|[1-9][0-9]{0,6}m)$")

# Per-pod defaults, sized so a one-GPU pod fits the smallest GPU instances (4 vCPUs, 16 GiB).
CPU_PER_GPU = 3
MEMORY_PER_GPU = 12 * 2**30
CPU_WITHOUT_GPU = 2
MEMORY_WITHOUT_GPU = 8 * 2**30


def _cpu(value: object) -> str:
    text = str(value).strip()
    if (
        not isinstance(value, int | str)
        or isinstance(value, bool)
        or not _CPU.match(text)
        or float(text.rstrip("m")) == 0
    ):
        raise fail("cpu", "must be a positive CPU count such as 8, '1.5' or '500m', got {value!r}", value=value)
    return text


Cpu = Annotated[str, BeforeValidator(_cpu, json_schema_input_type=int | str)]


class Resources(SpecModel):
    """CPU and memory of each pod; requested and limited alike (with the GPUs: Guaranteed QoS)."""

    cpu: Cpu | None = Field(
        None, description="CPUs per pod (8, '1.5', '500m'); default 3 per GPU, 2 for a pod without GPUs."
    )
    memory: ByteSize | None = Field(
        None,
        description="Memory per pod, /dev/shm included (e.g. 96GiB); default 12 GiB per GPU, 8 GiB without GPUs.",
    )

    def filled(self, gpus: int, fallback: Resources | None = None) -> Resources:
        """Each amount this block states, else ``fallback``'s, else the default for ``gpus`` GPUs."""
        cpu = self.cpu or (fallback.cpu if fallback is not None else None)
        memory = self.memory or (fallback.memory if fallback is not None else None)
        return self.model_copy(
            update={
                "cpu": cpu or str(CPU_PER_GPU * gpus if gpus else CPU_WITHOUT_GPU),
                "memory": memory or str(MEMORY_PER_GPU * gpus if gpus else MEMORY_WITHOUT_GPU),
            }
        )
