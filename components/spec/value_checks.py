"""Values that parse but would not run: each refused with its field and the fix.

* ``gpu_count: 0`` on vLLM's CUDA image: the pod gets no GPU, and the server exits at start because
  no platform is found (vLLM ``vllm/config/device.py`` DeviceConfig: "Failed to infer device type").
  vLLM's CPU builds are images of their own (their repository name says ``cpu``); those may run
  without a GPU.
* ``engine.context_length`` past what the model takes: vLLM refuses a ``--max-model-len`` above the
  model's ``max_position_embeddings`` at start ("User-specified max_model_len ... is greater than the
  derived max_model_len", ``vllm/config/model.py`` ``_get_and_verify_max_len``), and so do SGLang and TGI
  in their own words. Bounded where the bound is known: a Hub model of :data:`MODEL_CONTEXT`, which the
  server downloads itself (weights from ``model_source`` or ``model_path`` may be another model), and
  the KV cache the record states (``total_kv_blocks`` x ``kv_cache_block_size`` tokens: one sequence
  must fit).
  (Both vLLM places were found in vLLM's source across its releases, not read at the v0.33.0 tag the
  stacks pin; the messages are vLLM's own.)
* A canary whose image is the endpoint's own: it runs what the primary runs, so the weight it takes
  compares nothing (a canary has no arguments of its own: the image, and a Mooncake canary set's
  topology, are all that tell the two apart).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from pydantic_core import PydanticCustomError

from components.spec.base import fail

if TYPE_CHECKING:
    from components.spec.endpoint import Endpoint

MODEL_CONTEXT: Final[dict[str, int]] = {
    # max_position_embeddings of each model's config.json on the Hugging Face Hub.
    "meta-llama/Llama-3.1-8B-Instruct": 131072,
    "meta-llama/Llama-3.1-70B-Instruct": 131072,
    "meta-llama/Llama-3.1-405B-Instruct": 131072,
    "Qwen/Qwen3-0.6B": 40960,
    "Qwen/Qwen3-8B": 40960,
}
"""The models of the example stacks and their longest context; a model not listed is not bounded here."""


def is_cpu_build(image: str) -> bool:
    """vLLM's CPU images name themselves so (``public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo``, where vLLM
    publishes them); the tag is not looked at."""
    repository = image.rsplit("@", 1)[0].rsplit(":", 1)[0] if "/" in image else image
    return "cpu" in repository.lower()


def gpu_rules(endpoint: Endpoint, roles: dict[str, str]) -> Iterator[PydanticCustomError]:
    """``roles`` maps each vLLM role to the path of its gpu_count (the endpoint's own for a classic one)."""
    if endpoint.framework != "vllm" or endpoint.accelerator != "nvidia" or endpoint.image is None:
        return
    if is_cpu_build(endpoint.image):
        return
    refused: set[str] = set()
    for role, at in roles.items():
        count = endpoint.gpu_count if role == "server" else endpoint.role_spec(role).gpu_count
        if count == 0 and at not in refused:
            refused.add(at)
            yield fail(
                "gpu_count_zero",
                "is 0, but {image} is vLLM's CUDA build: the pod gets no GPU and the server exits at start "
                '("Failed to infer device type"); give it gpu_count 1 or more, or a CPU build of vLLM '
                "(an image whose repository name says cpu)",
                at=at,
                image=endpoint.image,
            )


def context_rules(endpoint: Endpoint) -> Iterator[PydanticCustomError]:
    engine = endpoint.engine
    if engine is None or engine.context_length is None:
        return
    length = engine.context_length
    downloaded = endpoint.model_source is None and endpoint.model_path is None
    limit = MODEL_CONTEXT.get(endpoint.model or "") if downloaded else None
    if limit is not None and length > limit:
        yield fail(
            "context_too_long",
            "is {length} tokens, but {model} takes at most {limit} (max_position_embeddings in its "
            "config.json): {framework} refuses a longer context at start; set at most {limit}, or leave "
            "it out for the model's own",
            at="engine.context_length",
            length=length,
            model=endpoint.model,
            limit=limit,
            framework=endpoint.framework,
        )
    if engine.total_kv_blocks is not None and engine.kv_cache_block_size is not None:
        capacity = engine.total_kv_blocks * engine.kv_cache_block_size
        if length > capacity:
            yield fail(
                "context_past_kv_cache",
                "is {length} tokens, but the KV cache stated here holds {capacity} (total_kv_blocks {blocks} x "
                "kv_cache_block_size {size}): one sequence must fit; lower context_length or state the cache "
                "the engine has",
                at="engine.context_length",
                length=length,
                capacity=capacity,
                blocks=engine.total_kv_blocks,
                size=engine.kv_cache_block_size,
            )


def canary_rules(endpoint: Endpoint) -> Iterator[PydanticCustomError]:
    canary = endpoint.canary
    if canary is None or endpoint.image is None or canary.image != endpoint.image:
        return
    mooncake = endpoint.mooncake
    if mooncake is not None and canary.topology is not None and canary.topology != mooncake.topology:
        return  # a canary set of another shape tries that shape (its counts default to the primary's)
    shape = " and the canary set's topology is the endpoint's" if mooncake is not None else ""
    yield fail(
        "canary_same_image",
        "is the endpoint's own image ({image}){shape}: the canary would run what the primary runs and "
        "compare nothing; give it the image to try, or remove the canary (fleetctl canary rollback NAME)",
        at="canary.image",
        image=canary.image,
        shape=shape,
    )
