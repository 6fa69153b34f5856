"""Every query a ScaledObject renders, run by the real Prometheus engine (`promtool test rules`, from
Debian's prometheus package, which `make system-deps` installs) over recorded series: once with the
scaled role's pods busy enough that the autoscaler must add a replica, once with them idle enough
that it must not, and each time beside other pods (another role, another endpoint, another
namespace) whose series would flip the decision if the query selected them.

The decision is KEDA's (pkg/scalers/prometheus_scaler.go hands the query's one value to the HPA):
AverageValue targets divide it by the replica count; Value targets compare it as it is; the HPA
acts past its 10% tolerance. Expected outcomes are 1 (scale up) or 0, so no float is compared."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from components.metric_table import DCGM, PROXY_IN_FLIGHT, PROXY_LAST_REQUEST, SIGNAL_OF_METRIC, TABLE, Series
from components.render.endpoint import endpoint_objects
from components.render.placement import placed
from components.spec import StackSpec, parse_stack_config
from components.spec.images import Framework
from fleetctl.stackfile import read_stack_file
from tests.prometheus_tools import binary

from .stack_builders import DELETE, with_classic, with_mooncake

PROJECT = Path(__file__).resolve().parents[2]
REPLICAS = 2
TOLERANCE = 0.1  # the HPA controller's default --horizontal-pod-autoscaler-tolerance
INTERVAL = 30
IMAGES: dict[Framework, str] = {
    "vllm": "vllm/vllm-openai:v0.33.0",
    "sglang": "lmsysorg/sglang:v0.5.6",
    "tgi": "ghcr.io/huggingface/text-generation-inference:3.3.6",
    "triton": "nvcr.io/nvidia/tritonserver:25.10-py3",
}
WAKE = "wake"
TARGETS = {"queue": "5", "running": "16", "kv_cache": "0.8", "ttft_p90_ms": "500", "gpu": "70", "gpu_memory": "60"}


@dataclass(frozen=True)
class Scaled:
    """One prometheus trigger of a rendered ScaledObject and what it scales."""

    label: str
    framework: Framework
    namespace: str
    endpoint: str
    role: str
    metric: str
    trigger: dict[str, Any]


def scaled_triggers(spec: StackSpec, label: str) -> Iterator[Scaled]:
    for placement in spec.placements:
        endpoint = placed(spec, placement)
        for manifest in endpoint_objects(endpoint).values():
            if manifest["kind"] != "ScaledObject":
                continue
            role = manifest["metadata"]["labels"]["app.kubernetes.io/component"]
            for trigger in manifest["spec"]["triggers"]:
                if trigger["type"] == "prometheus" and trigger["name"] != WAKE:  # its own tests, below
                    metric = trigger["name"].replace("-", "_")
                    yield Scaled(
                        f"{label}/{placement.region}/{manifest['metadata']['name']}/{metric}",
                        endpoint.spec.framework,
                        endpoint.namespace,
                        endpoint.name,
                        role,
                        metric,
                        trigger,
                    )


def example(stack: str) -> StackSpec:
    stack_file = read_stack_file(PROJECT / "stacks" / f"Pulumi.{stack}.yaml")
    return parse_stack_config(stack_file.project_config, stack=stack_file.stack)


def every_framework_and_metric() -> Iterator[Scaled]:
    """Each metric each framework serves, on a classic endpoint, and the roles of a split one."""
    for framework, row in TABLE.items():
        metrics = [m for m, signal in SIGNAL_OF_METRIC.items() if signal in row] + list(DCGM)
        overrides: dict[str, Any] = {
            "image": IMAGES[framework],
            "autoscaling": {"max_replicas": 4, "metrics": [f"{m}:{TARGETS[m]}" for m in metrics]},
        }
        if framework == "triton":
            overrides.update({"model": DELETE, "model_source": "s3://models/repository"})
        yield from scaled_triggers(parse_stack_config(with_classic(overrides)), framework)
    roles = {
        "enabled": True,
        "prefill": {"max_replicas": 3, "metrics": ["queue:4", "ttft_p90_ms:800"]},
        "decode": {"max_replicas": 3, "metrics": ["running:48", "kv_cache:0.85", "gpu:80"]},
    }
    yield from scaled_triggers(parse_stack_config(with_mooncake({"mooncake": {"autoscaling": roles}})), "mooncake")


CASES = [
    *every_framework_and_metric(),
    *scaled_triggers(example("prod"), "prod"),
    *scaled_triggers(example("dev"), "dev"),
]


# Recorded series.


def labels(scaled: Scaled, pod: str, **overrides: str) -> str:
    found = {"namespace": scaled.namespace, "endpoint": scaled.endpoint, "role": scaled.role, "pod": pod}
    found.update(overrides)
    return "{" + ",".join(f'{key}="{value}"' for key, value in found.items()) + "}"


def neighbours(scaled: Scaled) -> list[dict[str, str]]:
    """Pods whose series the query must leave out."""
    other_role = "canary" if scaled.role == "server" else ("decode" if scaled.role == "prefill" else "prefill")
    return [
        {"role": other_role},
        {"endpoint": f"{scaled.endpoint}-other"},
        {"namespace": f"{scaled.namespace}-other"},
    ]


def gauge(name: str, scaled: Scaled, ours: float, theirs: float) -> list[dict[str, str]]:
    steps = 10
    series = [
        {"series": f"{name}{labels(scaled, f'{scaled.endpoint}-{index}')}", "values": f"{ours}x{steps}"}
        for index in range(REPLICAS)
    ]
    for index, override in enumerate(neighbours(scaled)):
        series.append(
            {"series": f"{name}{labels(scaled, f'neighbour-{index}', **override)}", "values": f"{theirs}x{steps}"}
        )
    return series


def histogram(entry: Series, scaled: Scaled, ours: int, theirs: int) -> list[dict[str, str]]:
    """Every observation of our pods in bucket ``ours`` (an index of the release's buckets), the
    neighbours' in bucket ``theirs``; ten observations a scrape, for ten minutes."""
    bounds = [*(f"{bound:g}" for bound in entry.buckets), "+Inf"]
    series = []
    pods: list[tuple[str, dict[str, str], int]] = [(f"{scaled.endpoint}-{i}", {}, ours) for i in range(REPLICAS)]
    pods += [(f"neighbour-{i}", override, theirs) for i, override in enumerate(neighbours(scaled))]
    for pod, override, bucket in pods:
        for index, bound in enumerate(bounds):
            rate = 10 if index >= bucket else 0
            series_labels = labels(scaled, pod, **override)[:-1] + f',le="{bound}"}}'
            series.append({"series": f"{entry.sample}{series_labels}", "values": f"0+{rate}x20"})
    return series


@dataclass(frozen=True)
class Situation:
    series: list[dict[str, str]]
    scales: bool


def situations(scaled: Scaled) -> Iterator[Situation]:
    """A busy and an idle state of the scaled pods, with neighbours in the opposite state."""
    target = float(scaled.trigger["metadata"]["threshold"])
    if scaled.metric in DCGM:
        name = DCGM[scaled.metric].name
        yield Situation(gauge(name, scaled, min(100.0, target * 1.5), target * 0.5), True)
        yield Situation(gauge(name, scaled, target * 0.5, 100.0), False)
        return
    entry = TABLE[scaled.framework][SIGNAL_OF_METRIC[scaled.metric]]
    if scaled.metric in ("queue", "running"):  # per replica
        yield Situation(gauge(entry.name, scaled, target * 1.5, 0), True)
        yield Situation(gauge(entry.name, scaled, target * 0.5, target * 10), False)
    elif scaled.metric == "kv_cache":
        yield Situation(gauge(entry.name, scaled, 1.0, 0), True)  # a full cache (validation keeps targets <= 0.9)
        yield Situation(gauge(entry.name, scaled, target / 2, 1.0), False)
    else:  # ttft_p90_ms: all observations in one bucket put the 90th percentile 90% into it
        assert entry.to_ms is not None
        bounds_ms = [bound * entry.to_ms for bound in entry.buckets]
        slow = next(i for i, bound in enumerate(bounds_ms) if i > 0 and bounds_ms[i - 1] > target * (1 + TOLERANCE))
        fast = [i for i, bound in enumerate(bounds_ms) if bound < target]
        yield Situation(histogram(entry, scaled, slow, 0), True)
        if fast:
            yield Situation(histogram(entry, scaled, fast[-1], slow), False)


def decision(trigger: dict[str, Any]) -> str:
    """PromQL that is 1 where the HPA would add a replica on this trigger's value, else 0."""
    query, threshold = trigger["metadata"]["query"], float(trigger["metadata"]["threshold"])
    value = f"({query}) / {REPLICAS}" if trigger["metricType"] == "AverageValue" else f"({query})"
    return f"{value} > bool {threshold * (1 + TOLERANCE)!r}"


def promtool() -> str:
    return binary("promtool")


@pytest.mark.parametrize("scaled", CASES, ids=[case.label for case in CASES])
def test_the_query_selects_its_role_and_moves_the_autoscaler_as_its_target_says(scaled: Scaled, tmp_path: Path) -> None:
    found = list(situations(scaled))
    assert any(s.scales for s in found)
    assert any(not s.scales for s in found)
    tests = [
        {
            "interval": f"{INTERVAL}s",
            "input_series": situation.series,
            "promql_expr_test": [
                {
                    "expr": decision(scaled.trigger),
                    "eval_time": "9m",
                    "exp_samples": [{"labels": "{}", "value": 1 if situation.scales else 0}],
                }
            ],
        }
        for situation in found
    ]
    path = tmp_path / "queries.yaml"
    yaml = YAML(typ="safe", pure=True)
    yaml.width = 4096
    with path.open("w") as out:
        yaml.dump({"rule_files": [], "evaluation_interval": f"{INTERVAL}s", "tests": tests}, out)
    result = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_fails_a_query_that_leaks_into_another_role(tmp_path: Path) -> None:
    """The harness can fail: a queue query without its role selector counts the neighbours' queue."""
    scaled = next(case for case in CASES if case.metric == "queue" and case.framework == "vllm")
    leaky = dict(scaled.trigger)
    leaky["metadata"] = {
        **scaled.trigger["metadata"],
        "query": scaled.trigger["metadata"]["query"].replace(f',role="{scaled.role}"', ""),
    }
    idle = next(s for s in situations(scaled) if not s.scales)
    test = {
        "interval": f"{INTERVAL}s",
        "input_series": idle.series,
        "promql_expr_test": [
            {"expr": decision(leaky), "eval_time": "9m", "exp_samples": [{"labels": "{}", "value": 0}]}
        ],
    }
    path = tmp_path / "leaky.yaml"
    YAML(typ="safe", pure=True).dump({"rule_files": [], "tests": [test]}, path)
    result = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "got: {} 1E+00" in result.stdout + result.stderr


# The wake trigger of a role at zero: the proxy's request counter, not the role's own series.


def wake_triggers() -> list[dict[str, Any]]:
    """Both wake triggers of a split endpoint whose roles may both go to zero, as rendered."""
    roles = {
        "enabled": True,
        "prefill": {"min_replicas": 0, "max_replicas": 3, "metrics": ["queue:4"]},
        "decode": {"min_replicas": 0, "max_replicas": 3, "metrics": ["running:48"]},
    }
    spec = parse_stack_config(with_mooncake({"mooncake": {"autoscaling": roles}}))
    found = [
        trigger
        for placement in spec.placements
        for manifest in endpoint_objects(placed(spec, placement)).values()
        if manifest["kind"] == "ScaledObject"
        for trigger in manifest["spec"]["triggers"]
        if trigger["name"] == WAKE
    ]
    assert len(found) == 2
    return found


PROXY = {"namespace": "inference", "endpoint": "chat", "role": "proxy"}
PROXY_NEIGHBOURS = [
    {"endpoint": "chat-canary"},  # the canary set's proxy, which the canary's own fixed roles serve
    {"endpoint": "chat-other"},
    {"namespace": "inference-other"},
]
SCRAPE = 15  # seconds, components/platform/prometheus.py SCRAPE_INTERVAL
SAMPLES = 36  # nine minutes of scrapes; the query is evaluated at the last, over [4m, 9m]


Pod = tuple[str, str]
"""A proxy pod's two gauges in promtool's expanding notation: the time of its last request (Unix
seconds, promtool's clock starting at 0) and its requests in flight."""


def proxy_series(ours: list[Pod], theirs: Pod | None) -> list[dict[str, str]]:
    """The gauges of each of our proxy pods (``ours``) and of the neighbours' proxies (``theirs``),
    which the query must leave out."""
    pods = [({**PROXY, "pod": f"chat-proxy-{index}"}, pod) for index, pod in enumerate(ours)]
    if theirs is not None:
        pods += [
            ({**PROXY, "pod": f"neighbour-{index}", **other}, theirs) for index, other in enumerate(PROXY_NEIGHBOURS)
        ]
    series = []
    for labels, (last, in_flight) in pods:
        series.append({"series": PROXY_LAST_REQUEST + _labels(labels), "values": last})
        series.append({"series": PROXY_IN_FLIGHT + _labels(labels), "values": in_flight})
    return series


def _labels(found: dict[str, str]) -> str:
    return "{" + ",".join(f'{key}="{value}"' for key, value in found.items()) + "}"


NOW = SAMPLES * SCRAPE
"""The evaluation time, seconds (promtool's clock, which time() reads)."""
NONE: Pod = (f"0x{SAMPLES}", f"0x{SAMPLES}")
"""A proxy that never received a request."""
BUSY: Pod = (f"0+{SCRAPE}x{SAMPLES}", f"3x{SAMPLES}")
"""A request at every scrape, three in flight."""
WAKE_SITUATIONS: dict[str, tuple[list[dict[str, str]], list[int]]] = {
    # One request two minutes ago after seven minutes without: wakes (1), whatever the neighbours do.
    "one request after none": (proxy_series([(f"0x28 {NOW - 120}x7", f"0x{SAMPLES}"), NONE], NONE), [1]),
    # A proxy pod that took a request before its first scrape (a new pod, a restarted Prometheus): its
    # series starts at that time, with no earlier sample, and still wakes.
    "a request before the pod's first scrape": (
        proxy_series([(f"_x31 {NOW - 80}x5", "_x31 0x5"), NONE], NONE),
        [1],
    ),
    # Requests at every scrape on both proxies: still 1 (clamped), so never a second replica from it.
    "many requests": (proxy_series([BUSY, BUSY], BUSY), [1]),
    # One stream, started eight minutes ago, still answering: the role stays up past the window.
    "a stream longer than the window": (proxy_series([("0x3 60x32", "0x3 1x32"), NONE], NONE), [1]),
    # The last request seven minutes ago, nothing in flight, neighbours busy: idle (0), may go to zero.
    "last request older than the window": (proxy_series([("0x8 120x27", f"0x{SAMPLES}"), NONE], BUSY), [0]),
    # Proxies that never received a request: idle.
    "never a request": (proxy_series([NONE, NONE], BUSY), [0]),
    # No proxy of ours was ever scraped: no sample (KEDA reads the empty result as 0, inactive).
    "no series": (proxy_series([], BUSY), []),
}


@pytest.mark.parametrize("trigger", wake_triggers(), ids=["prefill", "decode"])
@pytest.mark.parametrize("situation", WAKE_SITUATIONS, ids=list(WAKE_SITUATIONS))
def test_the_wake_query_is_one_while_the_endpoints_proxy_had_a_request_in_five_minutes_or_answers_one(
    trigger: dict[str, Any], situation: str, tmp_path: Path
) -> None:
    """KEDA wakes the role when the value exceeds activationThreshold 0 and lets it go to zero when
    it does not (pkg/scalers/prometheus_scaler.go returns ``val > ActivationThreshold`` as active);
    at 1 against threshold 1 (AverageValue) the HPA wants exactly one replica from it."""
    assert (trigger["metricType"], trigger["metadata"]["threshold"]) == ("AverageValue", "1")
    assert trigger["metadata"]["activationThreshold"] == "0"
    series, values = WAKE_SITUATIONS[situation]
    test = {
        "interval": f"{SCRAPE}s",
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": trigger["metadata"]["query"],
                "eval_time": f"{(SAMPLES * SCRAPE) // 60}m",
                "exp_samples": [{"labels": "{}", "value": value} for value in values],
            }
        ],
    }
    path = tmp_path / "wake.yaml"
    yaml = YAML(typ="safe", pure=True)
    yaml.width = 4096
    with path.open("w") as out:
        yaml.dump({"rule_files": [], "evaluation_interval": f"{SCRAPE}s", "tests": [test]}, out)
    result = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
