"""How long a server may take to start, from the size of its model and the path the weights take
(docs/model-delivery.md, "Startup budgets"): the startup probe's budget, the Deployment's progress
deadline and how long Pulumi waits for a rollout all follow from it, instead of one constant.

The rates are planning figures for one pod, deliberately low so a healthy start is never cut short;
a real cluster's are in the server's log (docs/model-delivery.md says where) and belong here once
measured. A model of unknown size keeps the 30 minutes every endpoint had before.
"""

from __future__ import annotations

import math
from typing import Literal

LoadPath = Literal["hub", "sync", "stream", "cache", "local"]

STARTUP_PERIOD_SECONDS = 10
UNKNOWN_SIZE_SECONDS = 1800
"""A model of unknown size: the budget every endpoint had before sizes were known."""
ENGINE_START_SECONDS = 600
"""What a start costs beside the weights: the image's Python, the GPU's context, compiled graphs, the
KV cache allocated and profiled."""
SAFETY_FACTOR = 2
BYTES_PER_SECOND: dict[LoadPath, int] = {
    "hub": 100_000_000,  # the Hugging Face Hub over the internet, one pod
    "sync": 200_000_000,  # aws s3 sync to the pod's disk, then read back
    "stream": 400_000_000,  # concurrent ranged GETs straight into memory
    "cache": 200_000_000,  # the first pod on a node fills the cache at S3's rate; the next read locally
    "local": 1_000_000_000,  # weights already on the node (model_path)
}


def startup_seconds(size_bytes: int | None, path: LoadPath) -> int:
    if size_bytes is None:
        return UNKNOWN_SIZE_SECONDS
    loading = SAFETY_FACTOR * size_bytes / BYTES_PER_SECOND[path]
    return ENGINE_START_SECONDS + math.ceil(loading / STARTUP_PERIOD_SECONDS) * STARTUP_PERIOD_SECONDS


def failure_threshold(seconds: int) -> int:
    """Startup probe failures allowed before liveness counts: the whole budget."""
    return math.ceil(seconds / STARTUP_PERIOD_SECONDS)


def progress_deadline_seconds(seconds: int) -> int:
    """A rollout counts as stuck only after twice the time a pod may take to load its model."""
    return 2 * seconds


def rollout_timeout(seconds: int) -> str:
    """Pulumi waits for a rollout until the Deployment reports it stuck, never for less."""
    return f"{progress_deadline_seconds(seconds) // 60 + 10}m"
