"""Which series each framework exposes for each signal the scalers and the dashboard read.

Names, types and units as each release defines them; every entry names the file it was read in.
A signal a framework does not expose is absent from its row, and a scaling metric on it is
refused at validation with the framework named (:func:`missing`). The releases:

- vLLM 0.33.0 (config/pins.yaml), the prometheus_client metrics of its stat logger;
- SGLang 0.5.6 (lmsysorg/sglang:v0.5.6), prometheus_client metrics, served only with
  ``--enable-metrics`` (sglang/srt/server_args.py; components/render/frameworks.py renders it);
- TGI 3.3.7 (text-generation-inference), the Rust ``metrics`` crate behind
  metrics-exporter-prometheus: counters keep their name (no ``_total``), and names ending in
  ``duration`` are histograms (router/src/server.rs sets their buckets);
- Triton 25.10 (core r25.10), its per-model metrics; the first-response histogram exists only
  with ``--metrics-config=histogram_latencies=true`` (src/metric_model_reporter.cc), which
  components/render/frameworks.py renders.

GPU signals come from NVIDIA's DCGM exporter, whatever the framework (:data:`DCGM`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # components.spec imports this table: only the type, no import cycle
    from components.spec.images import Framework

Signal = Literal["queue", "running", "kv_cache", "ttft", "inter_token", "requests", "kv_transfers"]
"""queue, running, kv_cache and ttft serve scaling metrics; the rest only the dashboard."""
SIGNAL_OF_METRIC: dict[str, Signal] = {
    "queue": "queue",
    "running": "running",
    "kv_cache": "kv_cache",
    "ttft_p90_ms": "ttft",
}
SIGNAL_MEANING: dict[Signal, str] = {
    "queue": "requests waiting",
    "running": "sequences running",
    "kv_cache": "KV-cache usage",
    "ttft": "time to first token",
    "inter_token": "inter-token latency",
    "requests": "requests finished",
    "kv_transfers": "KV transfers",
}


@dataclass(frozen=True)
class Series:
    name: str
    """The metric family as exposed (a histogram's ``_bucket``/``_count`` series add a suffix)."""
    type: Literal["gauge", "counter", "histogram"]
    source: str
    """The file of the release that defines it."""
    to_ms: float | None = None
    """Histograms of a duration: what turns one of its values into milliseconds."""
    buckets: tuple[float, ...] = ()
    """A histogram's default upper bounds (without +Inf), as its release sets them."""

    @property
    def count(self) -> str:
        """What counts events: a histogram's observations, a counter itself."""
        return f"{self.name}_count" if self.type == "histogram" else self.name

    @property
    def sample(self) -> str:
        """The series a query reads: a counter's as exposed, a histogram's buckets."""
        if self.type == "histogram":
            return f"{self.name}_bucket"
        return self.name


_VLLM_LOGGERS = "vllm 0.33.0 vllm/v1/metrics/loggers.py"
_VLLM_TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
_SGLANG = "sglang 0.5.6 sglang/srt/metrics/collector.py"
_SGLANG_TTFT_BUCKETS = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0,
)  # fmt: skip
_TGI_QUEUE = "text-generation-inference v3.3.7 backends/v3/src/queue.rs"
_TGI_BACKEND = "text-generation-inference v3.3.7 backends/v3/src/backend.rs"
_TGI_SERVER = "text-generation-inference v3.3.7 router/src/server.rs"
_TRITON = "triton-inference-server/core r25.10 src/metrics.cc"

TABLE: dict[Framework, dict[Signal, Series]] = {
    "vllm": {
        "queue": Series("vllm:num_requests_waiting", "gauge", _VLLM_LOGGERS),
        "running": Series("vllm:num_requests_running", "gauge", _VLLM_LOGGERS),
        "kv_cache": Series("vllm:kv_cache_usage_perc", "gauge", _VLLM_LOGGERS),  # a fraction: 1 is full
        "ttft": Series(
            "vllm:time_to_first_token_seconds",
            "histogram",
            f"{_VLLM_LOGGERS}, buckets vllm/v1/metrics/buckets.py",
            to_ms=1000.0,
            buckets=_VLLM_TTFT_BUCKETS,
        ),
        "inter_token": Series(
            "vllm:inter_token_latency_seconds",
            "histogram",
            f"{_VLLM_LOGGERS}, buckets vllm/v1/metrics/buckets.py",
            to_ms=1000.0,
        ),
        "requests": Series("vllm:request_success_total", "counter", _VLLM_LOGGERS),
        # One observation per transfer of the Mooncake connector (present only with it).
        "kv_transfers": Series(
            "vllm:mooncake_xfer_time_seconds",
            "histogram",
            "vllm 0.33.0 vllm/distributed/kv_transfer/kv_connector/v1/mooncake/stats.py",
        ),
    },
    "sglang": {
        "queue": Series("sglang:num_queue_reqs", "gauge", _SGLANG),
        "running": Series("sglang:num_running_reqs", "gauge", _SGLANG),
        "kv_cache": Series("sglang:token_usage", "gauge", _SGLANG),  # used share of the KV pool's tokens
        "ttft": Series(
            "sglang:time_to_first_token_seconds", "histogram", _SGLANG, to_ms=1000.0, buckets=_SGLANG_TTFT_BUCKETS
        ),
        "inter_token": Series("sglang:inter_token_latency_seconds", "histogram", _SGLANG, to_ms=1000.0),
        "requests": Series("sglang:num_requests_total", "counter", _SGLANG),
    },
    # TGI records no time to first token (its queue and inference durations are per request)
    # and no KV-cache usage.
    "tgi": {
        "queue": Series("tgi_queue_size", "gauge", _TGI_QUEUE),
        "running": Series("tgi_batch_current_size", "gauge", _TGI_BACKEND),
        "inter_token": Series("tgi_request_mean_time_per_token_duration", "histogram", _TGI_SERVER, to_ms=1000.0),
        "requests": Series("tgi_request_count", "counter", _TGI_SERVER),
    },
    # Triton counts pending requests per model but neither running sequences nor a KV cache (those
    # belong to a backend, e.g. TensorRT-LLM's, not to the server).
    "triton": {
        "queue": Series("nv_inference_pending_request_count", "gauge", _TRITON),
        "ttft": Series(
            "nv_inference_first_response_histogram_ms",
            "histogram",
            f"{_TRITON}, buckets src/metric_model_reporter.h",
            to_ms=1.0,
            buckets=(100.0, 500.0, 2000.0, 5000.0),
        ),
        "requests": Series("nv_inference_request_success", "counter", _TRITON),
    },
}

DCGM_SOURCE = "NVIDIA/dcgm-exporter etc/default-counters.csv"
DCGM: dict[str, Series] = {
    # Percent of the sample period a kernel ran on the GPU.
    "gpu": Series("DCGM_FI_DEV_GPU_UTIL", "gauge", DCGM_SOURCE),
    # Percent of the sample period device memory was read or written (nvidia-smi's "memory utilization").
    "gpu_memory": Series("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", DCGM_SOURCE),
}

# The split endpoint's proxy (front/metrics.py), which counts what it receives; the
# last two wake a role at zero (components/render/autoscaling.py, wake_query).
PROXY_REQUESTS = "inference_fleet_proxy_requests_total"
PROXY_UNSERVED = "inference_fleet_proxy_unserved_requests_total"
PROXY_ANSWERED = "inference_fleet_proxy_answered_total"
PROXY_IN_FLIGHT = "inference_fleet_proxy_requests_in_flight"
PROXY_LAST_REQUEST = "inference_fleet_proxy_last_request_timestamp_seconds"
# Only a front with --routing exports these (front/router.py): the prompt blocks it routed, those the
# chosen backend was believed to hold, and each backend's load as the front counts it.
PROXY_ROUTED_BLOCKS = "inference_fleet_proxy_routed_blocks_total"
PROXY_ROUTED_CACHED_BLOCKS = "inference_fleet_proxy_routed_cached_blocks_total"
PROXY_BACKEND_IN_FLIGHT = "inference_fleet_proxy_backend_requests_in_flight"

PREFIX_CACHE: dict[Framework, tuple[Series, Series]] = {
    # Prompt tokens found in the engine's own prefix cache, and prompt tokens looked up: the engine's hit
    # rate, what routing by prefix raises (prometheus_client adds _total to a counter's name).
    "vllm": (
        Series("vllm:prefix_cache_hits_total", "counter", _VLLM_LOGGERS),
        Series("vllm:prefix_cache_queries_total", "counter", _VLLM_LOGGERS),
    ),
}
"""(hits, queries) of the engine's prefix cache, in tokens, where the framework counts them."""


def series(framework: Framework, signal: Signal) -> Series | None:
    return TABLE[framework].get(signal)


def missing(framework: Framework, metric: str) -> bool:
    """True when ``framework`` exposes nothing a framework metric (``queue``, ...) reads."""
    signal = SIGNAL_OF_METRIC.get(metric)
    return signal is not None and signal not in TABLE[framework]
