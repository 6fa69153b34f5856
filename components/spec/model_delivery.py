"""Which way an endpoint's model_source reaches its server, and what each way refuses
(components/render/model_loading.py has the facts; docs/model-delivery.md the reasons)."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic_core import PydanticCustomError

from components.catalog import pins
from components.spec.base import fail
from components.spec.images import Framework


def streams_by_default(
    framework: Framework | None, accelerator: str, image: str | None, model_path: str | None
) -> bool:
    """Stream where it is known to work: vLLM on NVIDIA GPUs in the pinned vLLM images, which install the
    streamer with its S3 backend. Another image may lack it (vLLM then fails at start importing it), the
    Neuron images are untested, and a model_path given beside model_source asks for a copy there."""
    pinned = pins().vllm
    return (
        framework == "vllm"
        and accelerator == "nvidia"
        and image in (pinned.image, pinned.efa_image)
        and model_path is None
    )


def loading_rules(
    model_source: str | None, model_loading: str | None, model_path: str | None, framework: Framework | None
) -> Iterator[PydanticCustomError]:
    if model_loading is None:
        return
    if model_source is None:
        yield fail(
            "loading_without_source",
            "says how model_source reaches the server, but the endpoint has no model_source: set model_source "
            "(an s3:// URI) or remove model_loading",
            at="model_loading",
        )
        return
    if model_loading != "stream":
        return
    if framework != "vllm":
        yield fail(
            "stream_framework",
            "'stream' needs vLLM's Run:ai Model Streamer loader (--load-format runai_streamer); {framework} has "
            "no loader that reads S3: set model_loading to 'sync' (an init container copies the weights into "
            "the pod)",
            at="model_loading",
            framework=framework,
        )
    if model_path is not None:
        yield fail(
            "stream_model_path",
            "'stream' reads the weights from model_source into memory, so there is no model_path to copy them "
            "to: remove model_path, or set model_loading to 'sync' to copy them there",
            at="model_loading",
        )
