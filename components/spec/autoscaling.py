"""Autoscaling blocks shared by classic endpoints and Mooncake roles, and the grammar of their metrics.

A metric is a name and a target, ``<name>:<target>`` (docs/metrics.md, "Scaling metrics"):

- ``cpu:<percent>``, ``memory:<percent>``: the pods' resource utilisation (metrics-server);
- ``queue:<n>``: requests waiting per replica; ``running:<n>``: sequences running per replica;
- ``kv_cache:<fraction>``: mean KV-cache usage of the replicas, 0 < fraction <= 1;
- ``ttft_p90_ms:<n>``: the 90th percentile of time to first token over the last two minutes, in ms;
- ``gpu:<percent>``, ``gpu_memory:<percent>``: mean GPU and GPU-memory-bandwidth utilisation (DCGM);
- ``query:<target>:<PromQL>``: any PromQL against the region's Prometheus; its value (a total for
  the workload) divided by the replica count is held at ``target``.

All but cpu and memory are read from the region's metrics pipeline (Prometheus); the framework
metric table (components.metric_table.py) says which framework serves which.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from components.metric_table import SIGNAL_MEANING, SIGNAL_OF_METRIC, TABLE
from components.spec.base import SpecModel, fail, items
from components.spec.images import Framework

MetricName = Literal["cpu", "memory", "queue", "running", "kv_cache", "ttft_p90_ms", "gpu", "gpu_memory", "query"]
RESOURCE_METRICS = ("cpu", "memory")
"""Served by the kubelet's resource metrics (metrics-server), not by the pipeline."""
GPU_METRICS = ("gpu", "gpu_memory")
"""Served by NVIDIA's DCGM exporter for the pod holding the GPU."""
FRAMEWORK_METRICS = ("queue", "running", "kv_cache", "ttft_p90_ms")
"""Served by the inference server itself (components.metric_table.py)."""

_PERCENT = re.compile(r"^(cpu|memory|gpu|gpu_memory):([0-9]+)$")
_COUNT = re.compile(r"^(queue|running|ttft_p90_ms):([0-9]+)$")
_FRACTION = re.compile(r"^kv_cache:(0?\.[0-9]+|1(\.0*)?)$")
_QUERY = re.compile(r"^query:([0-9]+(\.[0-9]+)?):(.+)$", re.DOTALL)
_PODS = re.compile(r"^pods/([a-zA-Z_:][a-zA-Z0-9_:]*):([0-9]+)$")

MAX_PERCENT = 90
MAX_FRACTION = 0.9
"""The HPA acts only past its 10% tolerance (kube-controller-manager's
--horizontal-pod-autoscaler-tolerance, 0.1): a utilisation can never exceed a target above 90%
by more than that (requests equal limits here, so pods use at most 100% of a request), nor a
KV-cache usage (at most 1) one above 0.9, and such an autoscaler would never add a replica."""
GRAMMAR = (
    "'cpu:<percent>', 'memory:<percent>', 'gpu:<percent>', 'gpu_memory:<percent>' (percent 1-90: past 90 the "
    "autoscaler's 10% tolerance is never exceeded), 'queue:<n>', 'running:<n>', 'ttft_p90_ms:<n>' (n >= 1), "
    "'kv_cache:<fraction, over 0 up to 0.9>' or 'query:<target>:<PromQL>'"
)


@dataclass(frozen=True)
class ScalingMetric:
    """A validated metric string, taken apart."""

    name: MetricName
    target: str
    """As written, normalised: an integer, or a decimal for kv_cache and query."""
    query: str | None = None
    """The PromQL of ``query:``; None for the named metrics."""

    @property
    def pipeline(self) -> bool:
        """Read from the region's Prometheus (every metric but cpu and memory)."""
        return self.name not in RESOURCE_METRICS


def parse_metric(text: str) -> ScalingMetric:
    """A metric string that :data:`Metric` accepted, taken apart."""
    if text.startswith("query:"):
        target, _, query = text.removeprefix("query:").partition(":")
        return ScalingMetric("query", target, query)
    name, _, target = text.partition(":")
    return ScalingMetric(name, target)  # type: ignore[arg-type]  # the grammar admits only MetricName


def _decimal(text: str) -> str:
    value = float(text)
    return str(int(value)) if value.is_integer() else repr(value)


def _metric(value: str) -> str:
    text = value.strip()
    if match := _PERCENT.match(text):
        if 1 <= int(match.group(2)) <= MAX_PERCENT:
            return f"{match.group(1)}:{int(match.group(2))}"
    elif match := _COUNT.match(text):
        if int(match.group(2)) >= 1:
            return f"{match.group(1)}:{int(match.group(2))}"
    elif match := _FRACTION.match(text):
        if 0 < float(match.group(1)) <= MAX_FRACTION:
            return f"kv_cache:{_decimal(match.group(1))}"
    elif match := _QUERY.match(text):
        query = match.group(3).strip()
        if float(match.group(1)) > 0 and query:
            return f"query:{_decimal(match.group(1))}:{query}"
    elif match := _PODS.match(text):
        raise fail(
            "pods_metric",
            "'pods/<metric>' needs a custom-metrics adapter, which nothing in the cluster serves; scale on the "
            "region's Prometheus instead: a named metric ({grammar}) or the same series as "
            '\'query:{target}:sum({name}{{namespace="<namespace>",endpoint="<endpoint>"}})\', got {value!r}',
            grammar=GRAMMAR,
            target=match.group(2),
            name=match.group(1),
            value=value,
        )
    raise fail("metric", "must be {grammar}, got {value!r}", grammar=GRAMMAR, value=value)


Metric = Annotated[str, AfterValidator(_metric)]


class _Replicas(SpecModel):
    min_replicas: int = Field(
        1,
        ge=0,
        description="Fewest replicas the autoscaler keeps; 0 (scale to zero) for the prefill and decode roles "
        "of a split Mooncake endpoint, which its proxy wakes on the first request, and for a classic vLLM or "
        "SGLang endpoint, which then gets a gate in front of its server (two small pods that count requests and "
        "wake it; docs/metrics.md, 'Scale to zero').",
    )
    metrics: tuple[Metric, ...] = items(
        "Scaling targets: 'cpu:70', 'memory:80', 'queue:5', 'running:32', 'kv_cache:0.8', 'ttft_p90_ms:500', "
        "'gpu:60', 'gpu_memory:80' or 'query:<target>:<PromQL>' (docs/metrics.md).",
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
        names = [parse_metric(text).name for text in self.metrics]
        for index, name in enumerate(names):
            if name != "query" and name in names[:index]:
                yield fail("metric_twice", "names {name!r} twice; keep one target", at=f"metrics[{index}]", name=name)

    @property
    def parsed_metrics(self) -> tuple[ScalingMetric, ...]:
        return tuple(parse_metric(text) for text in self.metrics)


class Autoscaling(_Replicas):
    """Classic endpoints: a KEDA ScaledObject owns the replica count."""

    enabled: bool = Field(True, description="A present block autoscales unless this is false.")
    max_replicas: int = Field(10, ge=1, description="Most replicas the autoscaler may run.")

    def _rules(self) -> Iterator[PydanticCustomError]:
        return self._bounds(self.max_replicas)


class RoleAutoscaling(_Replicas):
    """One Mooncake role (prefill or decode) under its own autoscaler."""

    max_replicas: int = Field(ge=1, description="Most replicas of this role.")

    def _rules(self) -> Iterator[PydanticCustomError]:
        return self._bounds(self.max_replicas)


Front = Literal["server", "store", "proxy", "gate"]
WAKING_FRONTS = ("proxy", "gate")
"""What counts a workload's requests while it has no pod: a split endpoint's proxy, a classic endpoint's gate."""
GATELESS: dict[Framework, str] = {
    # text-generation-inference v3.3.7 Dockerfile: the final stage (nvidia/cuda base) has no system
    # python3; python3 is the venv's /usr/src/.venv/bin/python3, a link to the interpreter 'uv python
    # install' put under /root/.local/share/uv, which the gate's non-root user cannot reach.
    "tgi": "TGI's image (3.3.7) has no python3 the gate's non-root user can run: its one interpreter is under /root",
    # Triton's image (nvcr.io/nvidia/tritonserver:25.10-py3) is built by the server repository's build.py,
    # which lists no aiohttp among the Python packages it installs: not established, so refused.
    "triton": "Triton's image (25.10) is not known to carry aiohttp, which the gate needs",
}
"""Frameworks whose image cannot run the gate (components/render/gate.py runs the proxy program, python3
with aiohttp, on the endpoint's image; vLLM's requirements/common.txt and SGLang 0.5.6's wheel require
aiohttp), and why."""
NOTHING_WAKES = {
    "server": "nothing would wake it: its own metrics vanish with its pods, and nothing but the load balancer is "
    "in front of it, which answers 503 itself while no target is registered and holds no request a scaler could "
    "count",
    "store": "nothing would wake it: its own metrics vanish with its pods, and mode 'store' has no proxy in front "
    "of its server to count requests",
}
"""Why a workload cannot scale to zero, by what is in front of it; a split endpoint's roles are woken by
their proxy, a classic endpoint's server by its gate, each counting every request it receives
(components/render/autoscaling.py, wake_query)."""


def served_rules(
    block: _Replicas, at: str, framework: Framework, accelerator: str, role: str, front: Front = "server"
) -> Iterator[PydanticCustomError]:
    """Refuse a metric nothing serves for this workload: a framework metric the framework does not
    expose, a GPU metric on Neuron, and scaling to zero where nothing would wake the workload.

    ``front`` is what receives the workload's requests: ``gate`` (a classic endpoint: at min 0 it gets a
    gate, which counts them, when its framework's image can run it), ``store`` (a store-mode server: only
    the load balancer in front), ``proxy`` (a split Mooncake endpoint's proxy, which counts them) or
    ``server`` (only the load balancer)."""
    for index, metric in enumerate(block.parsed_metrics):
        signal = SIGNAL_OF_METRIC.get(metric.name)
        if signal is not None and signal not in TABLE[framework]:
            offered = sorted(name for name, used in SIGNAL_OF_METRIC.items() if used in TABLE[framework])
            yield fail(
                "metric_unserved",
                "{name!r} ({meaning}) is not exposed by {framework}: its metrics have none; use one it serves "
                "({offered}), gpu, cpu or a query",
                at=f"{at}.metrics[{index}]",
                name=metric.name,
                meaning=SIGNAL_MEANING[signal],
                framework=framework,
                offered=", ".join(offered) or "none",
            )
        if metric.name in GPU_METRICS and accelerator != "nvidia":
            yield fail(
                "metric_gpu",
                "{name!r} is read from NVIDIA's DCGM exporter, which {accelerator} nodes do not run; use cpu, memory "
                "or a framework metric",
                at=f"{at}.metrics[{index}]",
                name=metric.name,
                accelerator=accelerator,
            )
    if block.min_replicas != 0:
        return
    if front == "gate" and framework in GATELESS:
        yield fail(
            "scale_to_zero",
            "0 needs a gate in front of the server to count requests and wake it, which runs python3 with "
            "aiohttp on the endpoint's image, and {reason}; keep min_replicas at 1 or more, or serve with vLLM "
            "or SGLang (docs/metrics.md, 'Scale to zero')",
            at=f"{at}.min_replicas",
            reason=GATELESS[framework],
        )
    elif front not in WAKING_FRONTS:
        yield fail(
            "scale_to_zero",
            "0 would leave the {role} role without a pod, and {why}; keep min_replicas at 1 or more (the prefill "
            "and decode roles of a split Mooncake endpoint, modes 'disaggregated' and 'both', and the server of a "
            "classic vLLM or SGLang endpoint scale to zero: their proxy or gate counts requests and wakes them; "
            "docs/metrics.md, 'Scale to zero')",
            at=f"{at}.min_replicas",
            role=role,
            why=NOTHING_WAKES[front],
        )
