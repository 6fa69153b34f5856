"""Framework adapters: how each server is launched, and how the framework-neutral engine
record (docs/design.md, "The engine record") becomes that server's own flags. Facts as data, one function.

Flags rendered from a spec field are *owned* by that field: a user ``args`` entry that
repeats one is refused at validation (argparse servers would silently take the last
value, TGI's launcher would refuse to start), naming the field to set instead.

The model: the server loads ``model_path`` (local weights, synced from ``model_source`` or
already in the image) when there is one, or streams ``model_source`` from S3 itself
(components/render/model_loading.py), else the Hugging Face Hub id in ``model``, which it
downloads. ``model`` is also the name clients send, rendered as the served-name flag where
the framework has one; without ``model`` the servers answer to the path they loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from components.render.drain import SERVER_DRAIN_SECONDS
from components.render.model_loading import LOADING_SOURCE, REGION_ENV
from components.spec.engine import EngineCapabilities
from components.spec.images import Framework


@dataclass(frozen=True)
class Adapter:
    command: tuple[str, ...]
    """Empty: the image's own entrypoint (vLLM's ``vllm serve``, TGI's ``text-generation-launcher``)."""
    model_flag: str | None
    """None: the model is the first, positional argument."""
    port_flag: str
    parallel_flag: str | None
    """Splits the pod's GPUs over one model (tensor parallelism); None: the model's own config decides."""
    model_aliases: tuple[str, ...] = ()
    """Other flags that set the same model (owned alike)."""
    served_name_flag: str | None = None
    """The name clients send in a request's ``model`` field; None: the framework has no such flag."""
    repository: bool = False
    """The model flag takes a model repository whose directories name the models (Triton):
    local files only, never a Hub id, and ``model`` is not rendered."""
    engine_flags: Mapping[str, str] = field(default_factory=dict)
    """Engine-record field -> the flag that takes its value."""
    prefix_caching_on: str | None = None
    prefix_caching_off: str | None = None
    prefix_caching_env: str | None = None
    """Servers that read prefix caching from the environment (``1`` or ``0``)."""
    fixed: tuple[tuple[str, str], ...] = ()
    """Flags every server of the framework needs, owned by ``port`` (where it listens)."""
    joined: bool = False
    """``--flag=value`` rather than ``--flag value``."""
    metrics_on: str | None = None
    """The switch without which the server serves no /metrics, or not the metrics the scalers and the
    dashboard read (components/metric_table.py; fleetctl verify counts a canary's requests there).
    Not owned: repeating a switch in args is harmless."""
    metrics_port: int | None = None
    """Where the server serves Prometheus metrics at ``/metrics`` when not on its own port (the
    region's Prometheus scrapes there, docs/metrics.md); set by a ``fixed`` flag, so owned."""
    drain_flag: str | None = None
    """How long the server finishes its in-flight requests after SIGTERM, rendered as
    ``SERVER_DRAIN_SECONDS`` (components/render/drain.py); owned. None: the server drains until done
    (the pod's grace period bounds it)."""


DRAIN_SOURCE = "drain"
"""The owner of the drain flag: no spec field, the pod's drain timings (components/render/drain.py)."""

TRITON_METRICS_PORT = 8002
METRICS_PATH = "/metrics"
"""Where every framework serves Prometheus metrics: vLLM on its API port (0.33.0
vllm/entrypoints/serve/instrumentator/metrics.py mounts prometheus_client's app there), SGLang on
its port with --enable-metrics, TGI on its port (v3.3.7 router/src/server.rs routes /metrics; also
on --prometheus-port), Triton on its metrics port."""

ADAPTERS: dict[Framework, Adapter] = {
    "vllm": Adapter(
        command=(),
        model_flag=None,
        model_aliases=("--model",),  # `vllm serve` takes the positional over --model
        served_name_flag="--served-model-name",
        port_flag="--port",
        parallel_flag="--tensor-parallel-size",
        engine_flags={
            "context_length": "--max-model-len",
            "kv_cache_block_size": "--block-size",
            "total_kv_blocks": "--num-gpu-blocks-override",
            "max_num_seqs": "--max-num-seqs",
            "max_num_batched_tokens": "--max-num-batched-tokens",
        },
        prefix_caching_on="--enable-prefix-caching",
        prefix_caching_off="--no-enable-prefix-caching",
        # 0.33.0 vllm/engine/arg_utils.py "--shutdown-timeout" (default 0 = abort every request).
        drain_flag="--shutdown-timeout",
    ),
    "sglang": Adapter(
        command=("python3", "-m", "sglang.launch_server"),
        model_flag="--model-path",
        model_aliases=("--model",),
        served_name_flag="--served-model-name",
        port_flag="--port",
        parallel_flag="--tp-size",
        engine_flags={
            "context_length": "--context-length",
            "kv_cache_block_size": "--page-size",
            "max_num_seqs": "--max-running-requests",
            "max_num_batched_tokens": "--max-prefill-tokens",
        },
        prefix_caching_off="--disable-radix-cache",  # the radix cache is on by default
        fixed=(("--host", "0.0.0.0"),),  # SGLang listens on 127.0.0.1 unless told otherwise
        metrics_on="--enable-metrics",
        # No drain flag: on SIGTERM, 0.5.6 answers /health 503 and waits for every request it holds
        # before it exits, without a limit of its own (sglang/srt/managers/tokenizer_manager.py
        # sigterm_watchdog; http_server.py health_generate).
    ),
    # TGI's launcher has no served-name flag (v3.3.7): its OpenAI routes take any request
    # model and answer as --model-id (chat completions echo the request's).
    "tgi": Adapter(
        command=(),
        model_flag="--model-id",
        port_flag="--port",
        parallel_flag="--num-shard",
        engine_flags={
            "context_length": "--max-total-tokens",
            "max_num_seqs": "--max-concurrent-requests",
            "max_num_batched_tokens": "--max-batch-prefill-tokens",
        },
        prefix_caching_env="PREFIX_CACHING",
        # v3.3.7 launcher/src/main.rs: on SIGTERM the launcher stops the router, whose axum server
        # finishes its requests (router/src/server.rs with_graceful_shutdown), for up to this (default 90).
        drain_flag="--graceful-termination-timeout",
    ),
    # Engine settings of a Triton model live in its model repository (config.pbtxt), not in flags.
    # Triton serves its metrics on a port of their own, 8002 unless --metrics-port says otherwise
    # (server docs/user_guide/metrics.md); rendered, so a user's args cannot move it unseen.
    "triton": Adapter(
        command=("tritonserver",),
        model_flag="--model-repository",
        port_flag="--http-port",
        parallel_flag=None,
        fixed=(("--metrics-port", str(TRITON_METRICS_PORT)),),
        joined=True,
        repository=True,
        metrics_port=TRITON_METRICS_PORT,
        # Triton serves /metrics by default (on --metrics-port, 8002), but its time-to-first-response
        # histogram only with histogram latencies on (src/metric_model_reporter.cc, core r25.10).
        metrics_on="--metrics-config=histogram_latencies=true",
        # src/command_line_parser.cc: "Timeout (in seconds) when exiting to wait for in-flight
        # inferences to finish" (default 30).
        drain_flag="--exit-timeout-secs",
    ),
}


@dataclass(frozen=True)
class ServerInputs:
    port: int
    gpu_count: int
    model: str | None
    """The Hub id to download without ``model_dir``; with it, only the name clients send."""
    model_dir: str | None
    """Where the server loads the weights from: model_path (where model_source is synced), or the
    ``s3://`` URI itself when they are streamed."""
    engine: EngineCapabilities
    loader_flags: tuple[tuple[str, str], ...] = ()
    """How the server loads the weights when it streams them (components/render/model_loading.py)."""


@dataclass(frozen=True)
class ServerLaunch:
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: dict[str, str]
    owned: dict[str, str]
    """flag or environment variable -> the spec field it is rendered from."""
    served_model_name: str | None
    """What clients send as a request's model: ``model``, else the path the server loaded (vLLM,
    SGLang and TGI answer to it). Triton's repository names its models: ``model`` or None."""


def server_launch(framework: Framework, inputs: ServerInputs) -> ServerLaunch:
    adapter = ADAPTERS[framework]
    args: list[str] = []
    owned: dict[str, str] = {}

    def add(flag: str, value: object, source: str) -> None:
        owned[flag] = source
        args.extend([f"{flag}={value}"] if adapter.joined else [flag, str(value)])

    loaded, source = (inputs.model_dir, "model_path") if inputs.model_dir is not None else (inputs.model, "model")
    if inputs.loader_flags:
        source = "model_source"
    if loaded is not None:
        if adapter.model_flag is None:
            args.append(loaded)
        else:
            add(adapter.model_flag, loaded, source)
    for flag in adapter.model_aliases:
        owned[flag] = source
    for flag, value in inputs.loader_flags:
        add(flag, value, LOADING_SOURCE)
    served = inputs.model if adapter.repository else inputs.model or inputs.model_dir
    if adapter.served_name_flag is not None:
        owned[adapter.served_name_flag] = "model"
        if inputs.model is not None:
            add(adapter.served_name_flag, inputs.model, "model")
    for flag, value in adapter.fixed:
        add(flag, value, "port")
    add(adapter.port_flag, inputs.port, "port")
    if adapter.parallel_flag is not None and inputs.gpu_count > 1:
        add(adapter.parallel_flag, inputs.gpu_count, "gpu_count")
    for name, flag in adapter.engine_flags.items():
        value = getattr(inputs.engine, name)
        if value is not None:
            add(flag, value, f"engine.{name}")
    env: dict[str, str] = {}
    caching = inputs.engine.enable_prefix_caching
    switches = [flag for flag in (adapter.prefix_caching_on, adapter.prefix_caching_off) if flag is not None]
    for flag in switches:
        owned[flag] = "engine.enable_prefix_caching"
    switch = adapter.prefix_caching_on if caching else adapter.prefix_caching_off
    if caching is not None and switch is not None:
        args.append(switch)
    if caching is not None and adapter.prefix_caching_env is not None:
        env[adapter.prefix_caching_env] = "1" if caching else "0"
        owned[adapter.prefix_caching_env] = "engine.enable_prefix_caching"
    if adapter.metrics_on is not None:
        args.append(adapter.metrics_on)
    if adapter.drain_flag is not None:
        add(adapter.drain_flag, SERVER_DRAIN_SECONDS, DRAIN_SOURCE)
    if inputs.loader_flags:
        owned[REGION_ENV] = LOADING_SOURCE  # set per region by the pod (components/render/pods.py)
    return ServerLaunch(adapter.command, tuple(args), env, owned, served)


def flag_name(arg: str) -> str | None:
    """The flag an argument sets (``--port=8000`` and ``--port`` both set ``--port``)."""
    return arg.split("=", 1)[0] if arg.startswith("-") else None
