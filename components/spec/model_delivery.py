"""What an endpoint serves and which way its model_source reaches its server: where synced weights
go, the Hub ids a server downloads, and what each way refuses (components/render/model_loading.py
has the facts; docs/model-delivery.md the reasons)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic_core import PydanticCustomError

from components.catalog import pins
from components.render.frameworks import ADAPTERS
from components.spec.base import fail
from components.spec.images import Framework, repository_and_tag

if TYPE_CHECKING:
    from components.spec.endpoint import Endpoint

# huggingface_hub's validate_repo_id with the namespace required: each part 1-96 of letters,
# digits, '_', '.' and '-', starting and ending with a letter, digit or '_'; no '--' or '..'.
_HUB_PART = r"[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_HUB_ID = re.compile(rf"^{_HUB_PART}/{_HUB_PART}$")
MODELS_DIR = "/models"
"""Where model_source is synced when model_path is not given: /models/<last part of the source>."""


def is_hub_id(value: str) -> bool:
    """``org/name`` as the Hugging Face Hub spells repository ids."""
    return bool(_HUB_ID.match(value)) and "--" not in value and ".." not in value and not value.endswith(".git")


def streams_by_default(
    framework: Framework | None, accelerator: str, image: str | None, model_path: str | None
) -> bool:
    """Stream where it is known to work: vLLM on NVIDIA GPUs in vLLM's own image repository (the pinned
    images' repository, any tag: its OpenAI image installs the streamer with its S3 backend, so a tag bump
    keeps the way weights load). Another image may lack it (vLLM then fails at start importing it), the
    Neuron images are untested, and a model_path given beside model_source asks for a copy there."""
    pinned = pins().vllm
    vllm_repositories = {repository_and_tag(pinned_image)[0] for pinned_image in (pinned.image, pinned.efa_image)}
    return (
        framework == "vllm"
        and accelerator == "nvidia"
        and image is not None
        and repository_and_tag(image)[0] in vllm_repositories
        and model_path is None
    )


HUB_CACHE_FRAMEWORKS = ("vllm", "sglang")
"""Servers that download a Hub model with huggingface_hub in their own process, into HF_HUB_CACHE."""


def loading_rules(
    model_source: str | None,
    model_loading: str | None,
    model_path: str | None,
    framework: Framework | None,
    model_revision: str | None,
) -> Iterator[PydanticCustomError]:
    if model_revision is not None and (model_loading != "cache" or model_source is None):
        yield fail(
            "revision_without_cache",
            "names the revision of model_source's copy in the node cache; it needs model_source and "
            "model_loading 'cache': set both, or remove model_revision",
            at="model_revision",
        )
    if model_loading is None:
        return
    if model_loading == "cache" and model_source is None:
        if model_path is None and framework not in HUB_CACHE_FRAMEWORKS:
            yield fail(
                "hub_cache_framework",
                "'cache' keeps a Hub model in a Hub cache directory on the node, which {framework} is not known "
                "to use: copy the model to S3 and set model_source, or remove model_loading",
                at="model_loading",
                framework=framework,
            )
        if model_path is not None:
            yield fail(
                "cache_model_path",
                "'cache' keeps model_source or a Hub model on the node; model_path names weights already in "
                "the image: remove model_loading",
                at="model_loading",
            )
        return
    if model_source is None:
        yield fail(
            "loading_without_source",
            "says how model_source reaches the server, but the endpoint has no model_source: set model_source "
            "(an s3:// URI) or remove model_loading ('cache' alone keeps a Hub model on the node)",
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


def model_rules(endpoint: Endpoint) -> Iterator[PydanticCustomError]:
    """Every endpoint says what it serves; a model the server downloads is a Hub id."""
    yield from loading_rules(
        endpoint.model_source, endpoint.model_loading, endpoint.model_path, endpoint.framework, endpoint.model_revision
    )
    if endpoint.model_path is not None or endpoint.streams_weights:  # a synced model_source has set model_path
        return
    if endpoint.model is None:
        yield fail(
            "model_required",
            "is required: say what the endpoint serves with model (a Hugging Face Hub id such as "
            "Qwen/Qwen3-8B, which the server downloads), model_source (an s3:// URI of the weights, streamed "
            "or synced into the pod) or model_path (weights already in the image)",
            at="model",
        )
    elif ADAPTERS[endpoint.framework].repository:
        yield fail(
            "model_repository",
            "is taken for a Hub id, but {framework} serves a model repository and downloads nothing from the "
            "Hub: set model_source (an s3:// URI of the repository) or model_path, and model then only names "
            "the model clients call",
            at="model",
            framework=endpoint.framework,
        )
    elif not is_hub_id(endpoint.model):
        yield fail(
            "hub_id",
            "without model_source or model_path the server downloads the model from the Hugging Face Hub, so "
            "it must be a Hub id org/name such as Qwen/Qwen3-8B, got {value!r}; to serve local weights under "
            "this name, set model_source or model_path",
            at="model",
            value=endpoint.model,
        )
