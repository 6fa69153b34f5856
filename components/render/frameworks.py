"""Framework adapters: how each server is launched, and how the framework-neutral engine
record (spec section 6) becomes that server's own flags.

Flags rendered from a spec field are *owned* by that field: a user ``args`` entry that
repeats one is refused at validation (argparse servers would silently take the last
value, TGI's launcher would refuse to start), naming the field to set instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from components.spec.engine import EngineCapabilities
from components.spec.images import Framework


@dataclass(frozen=True)
class ServerLaunch:
    command: tuple[str, ...]
    """Empty: the image's own entrypoint (vLLM's ``vllm serve``, TGI's ``text-generation-launcher``)."""
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    owned: dict[str, str] = field(default_factory=dict)
    """flag -> the spec field it is rendered from."""


@dataclass(frozen=True)
class ServerInputs:
    port: int
    gpu_count: int
    model_dir: str | None
    """Where the weights are inside the pod (model_path, or where model_source is synced)."""
    engine: EngineCapabilities


class _Args:
    """Collects ``--flag value`` pairs together with the spec field each comes from."""

    def __init__(self) -> None:
        self.args: list[str] = []
        self.owned: dict[str, str] = {}

    def add(self, flag: str, value: object, source: str, *, joined: bool = False) -> None:
        if value is None:
            return
        self.owned[flag] = source
        self.args += [f"{flag}={value}"] if joined else [flag, str(value)]

    def switch(self, flag: str, source: str) -> None:
        self.owned[flag] = source
        self.args.append(flag)


def _vllm(inputs: ServerInputs) -> ServerLaunch:
    # The image's entrypoint is `vllm serve`; the model is its positional argument.
    collected = _Args()
    positional = [inputs.model_dir] if inputs.model_dir else []
    if inputs.model_dir:
        collected.owned["--model"] = "model_path"
    collected.add("--port", inputs.port, "port")
    if inputs.gpu_count > 1:
        collected.add("--tensor-parallel-size", inputs.gpu_count, "gpu_count")
    engine = inputs.engine
    collected.add("--max-model-len", engine.context_length, "engine.context_length")
    collected.add("--block-size", engine.kv_cache_block_size, "engine.kv_cache_block_size")
    collected.add("--num-gpu-blocks-override", engine.total_kv_blocks, "engine.total_kv_blocks")
    collected.add("--max-num-seqs", engine.max_num_seqs, "engine.max_num_seqs")
    collected.add("--max-num-batched-tokens", engine.max_num_batched_tokens, "engine.max_num_batched_tokens")
    if engine.enable_prefix_caching is not None:
        source = "engine.enable_prefix_caching"
        collected.switch(
            "--enable-prefix-caching" if engine.enable_prefix_caching else "--no-enable-prefix-caching", source
        )
        collected.owned["--enable-prefix-caching"] = collected.owned["--no-enable-prefix-caching"] = source
    return ServerLaunch((), (*positional, *collected.args), owned=collected.owned)


def _sglang(inputs: ServerInputs) -> ServerLaunch:
    collected = _Args()
    collected.add("--model-path", inputs.model_dir, "model_path")
    collected.add("--host", "0.0.0.0", "port")  # SGLang listens on 127.0.0.1 unless told otherwise
    collected.add("--port", inputs.port, "port")
    if inputs.gpu_count > 1:
        collected.add("--tp-size", inputs.gpu_count, "gpu_count")
    engine = inputs.engine
    collected.add("--context-length", engine.context_length, "engine.context_length")
    collected.add("--page-size", engine.kv_cache_block_size, "engine.kv_cache_block_size")
    collected.add("--max-running-requests", engine.max_num_seqs, "engine.max_num_seqs")
    collected.add("--max-prefill-tokens", engine.max_num_batched_tokens, "engine.max_num_batched_tokens")
    if engine.enable_prefix_caching is False:
        collected.switch("--disable-radix-cache", "engine.enable_prefix_caching")  # on by default
    return ServerLaunch(("python3", "-m", "sglang.launch_server"), tuple(collected.args), owned=collected.owned)


def _tgi(inputs: ServerInputs) -> ServerLaunch:
    # The image's entrypoint is `text-generation-launcher`.
    collected = _Args()
    collected.add("--model-id", inputs.model_dir, "model_path")
    collected.add("--port", inputs.port, "port")
    if inputs.gpu_count > 1:
        collected.add("--num-shard", inputs.gpu_count, "gpu_count")
    engine = inputs.engine
    collected.add("--max-total-tokens", engine.context_length, "engine.context_length")
    collected.add("--max-concurrent-requests", engine.max_num_seqs, "engine.max_num_seqs")
    collected.add("--max-batch-prefill-tokens", engine.max_num_batched_tokens, "engine.max_num_batched_tokens")
    env = {}
    if engine.enable_prefix_caching is not None:
        # TGI 3 reads prefix caching from its environment, not from a flag.
        env["PREFIX_CACHING"] = "1" if engine.enable_prefix_caching else "0"
    return ServerLaunch((), tuple(collected.args), env=env, owned=collected.owned)


def _triton(inputs: ServerInputs) -> ServerLaunch:
    # Engine settings of a Triton model live in its model repository (config.pbtxt), not in flags.
    collected = _Args()
    collected.add("--model-repository", inputs.model_dir, "model_path", joined=True)
    collected.add("--http-port", inputs.port, "port", joined=True)
    return ServerLaunch(("tritonserver",), tuple(collected.args), owned=collected.owned)


ADAPTERS: dict[Framework, Callable[[ServerInputs], ServerLaunch]] = {
    "vllm": _vllm,
    "sglang": _sglang,
    "tgi": _tgi,
    "triton": _triton,
}


def server_launch(framework: Framework, inputs: ServerInputs) -> ServerLaunch:
    return ADAPTERS[framework](inputs)


def flag_name(arg: str) -> str | None:
    """The flag an argument sets (``--port=8000`` and ``--port`` both set ``--port``)."""
    return arg.split("=", 1)[0] if arg.startswith("-") else None
