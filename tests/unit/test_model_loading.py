"""How model_source reaches the server: streamed by vLLM's Run:ai Model Streamer loader where that is
known to work, synced by an init container elsewhere; the streamer sized from the pod; what each
way refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.render.classic import classic_objects
from components.render.model_loading import MAX_READERS, MIN_READERS, STREAMER_MEMORY_SHARE, streamer_config
from components.spec import SpecError, parse_stack_config
from tests.unit.stack_builders import DELETE, classic_endpoint, placed_endpoint, stack_config

SOURCE = "s3://models/llama-8b"
GIB = 1024**3


def pod(overrides: dict[str, Any]) -> dict[str, Any]:
    config = stack_config(endpoints={"chat": classic_endpoint({"model_source": SOURCE, **overrides})})
    spec: dict[str, Any] = classic_objects(placed_endpoint(config))["deployment"]["spec"]["template"]["spec"]
    return spec


def problems(overrides: dict[str, Any]) -> list[tuple[str, str]]:
    config = stack_config(endpoints={"chat": classic_endpoint(overrides)})
    with pytest.raises(SpecError) as caught:
        parse_stack_config(config)
    return [(problem.path, problem.message) for problem in caught.value.problems]


def test_the_pinned_vllm_image_streams_model_source_into_memory_with_no_init_container() -> None:
    spec = pod({"gpu_count": 2, "resources": {"cpu": "16", "memory": "128GiB"}})
    (server,) = spec["containers"]
    args = server["args"]
    assert args[0] == SOURCE  # the positional model is the S3 URI itself
    assert args[args.index("--load-format") + 1] == "runai_streamer"
    assert json.loads(args[args.index("--model-loader-extra-config") + 1]) == {
        "concurrency": 16,  # 2 readers per CPU, split over the pod's 2 workers
        "memory_limit": 128 * GIB // 8 // 2,
    }
    assert "initContainers" not in spec
    assert [volume["name"] for volume in spec["volumes"]] == ["dshm"]  # no copy of the weights on disk
    assert {"name": "AWS_REGION", "value": "us-east-1"} in server["env"]  # the region the S3 clients sign for


def test_sync_copies_model_source_into_the_pod_before_the_server_starts() -> None:
    spec = pod({"model_loading": "sync"})
    (sync,) = spec["initContainers"]
    assert sync["args"][:4] == ["s3", "sync", SOURCE, "/models/llama-8b"]
    args = spec["containers"][0]["args"]
    assert args[0] == "/models/llama-8b"
    assert "--load-format" not in args


@pytest.mark.parametrize(
    "overrides",
    [
        {"image": "lmsysorg/sglang:v0.5.6"},  # no S3 loader
        {"image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/own/vllm:1"},  # may lack the streamer
        {"model_path": "/weights"},  # asks for a copy there
    ],
    ids=["sglang", "own-vllm-image", "model-path"],
)
def test_where_streaming_is_not_known_to_work_model_source_is_synced(overrides: dict[str, Any]) -> None:
    assert "initContainers" in pod(overrides)


def test_an_own_vllm_image_streams_when_asked_to() -> None:
    spec = pod({"image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/own/vllm:1", "model_loading": "stream"})
    assert "initContainers" not in spec
    assert "runai_streamer" in spec["containers"][0]["args"]


@pytest.mark.parametrize(
    ("overrides", "path", "fragment"),
    [
        (
            {"image": "lmsysorg/sglang:v0.5.6", "model_source": SOURCE, "model_loading": "stream"},
            "endpoints.chat.model_loading",
            "'stream' needs vLLM's Run:ai Model Streamer loader (--load-format runai_streamer); sglang has no "
            "loader that reads S3: set model_loading to 'sync'",
        ),
        (
            {"model_source": SOURCE, "model_loading": "stream", "model_path": "/weights"},
            "endpoints.chat.model_loading",
            "there is no model_path to copy them to: remove model_path, or set model_loading to 'sync'",
        ),
        (
            {"model_loading": "sync"},
            "endpoints.chat.model_loading",
            "the endpoint has no model_source: set model_source (an s3:// URI) or remove model_loading",
        ),
        (
            {"model_source": SOURCE, "args": ["--load-format", "safetensors"]},
            "endpoints.chat.args",
            "model_loading",
        ),
        (
            {"model_source": SOURCE, "args": ["--model", "/elsewhere"]},
            "endpoints.chat.args",
            "'--model' is rendered from model_source",
        ),
    ],
    ids=["stream-without-vllm", "stream-with-model-path", "loading-without-source", "load-format-in-args", "model"],
)
def test_rejects_what_the_chosen_loading_cannot_do(overrides: dict[str, Any], path: str, fragment: str) -> None:
    (problem,) = problems(overrides)
    assert problem[0].startswith(path)
    assert fragment in problem[1]


def test_a_synced_endpoint_may_choose_its_own_load_format() -> None:
    assert "initContainers" in pod({"model_loading": "sync", "args": ["--load-format", "fastsafetensors"]})


def test_a_streamed_endpoint_without_model_answers_to_its_source() -> None:
    config = stack_config(endpoints={"chat": classic_endpoint({"model": DELETE, "model_source": SOURCE})})
    assert placed_endpoint(config).spec.served_model_name == SOURCE


@given(
    cpu=st.integers(min_value=1, max_value=192),
    memory_gib=st.integers(min_value=1, max_value=2048),
    gpus=st.integers(min_value=0, max_value=8),
)
def test_the_streamer_never_outgrows_its_share_of_the_pod(cpu: int, memory_gib: int, gpus: int) -> None:
    config = streamer_config(str(cpu), memory_gib * GIB, gpus)
    processes = max(gpus, 1)
    assert MIN_READERS <= config["concurrency"] <= MAX_READERS
    assert config["memory_limit"] * processes <= memory_gib * GIB // STREAMER_MEMORY_SHARE


def test_readers_follow_the_pods_cpus_in_millicores() -> None:
    assert streamer_config("4", 8 * GIB, 1)["concurrency"] == 8
    assert streamer_config("7500m", 8 * GIB, 1)["concurrency"] == 15
    assert streamer_config("1.5", 8 * GIB, 1)["concurrency"] == MIN_READERS
    assert streamer_config("192", 8 * GIB, 1)["concurrency"] == MAX_READERS


# The node cache.


def test_a_cached_model_source_is_filled_once_per_node_and_mounted_read_only() -> None:
    spec = pod({"model_loading": "cache", "model_revision": "v2"})
    (fill,) = spec["initContainers"]
    assert fill["image"] == spec["containers"][0]["image"]  # python3 and boto3 of the server's image
    assert fill["command"][:2] == ["python3", "-c"]
    assert fill["args"] == [SOURCE, "/model-cache/s3", "v2"]
    assert {"name": "model-cache", "mountPath": "/model-cache"} in fill["volumeMounts"]
    cache_volume = {
        "name": "model-cache",
        "hostPath": {"path": "/mnt/k8s-disks/0/inference-fleet/models", "type": "DirectoryOrCreate"},
    }
    assert cache_volume in spec["volumes"]
    server = spec["containers"][0]
    assert server["args"][0] == "/models/llama-8b"
    assert {
        "name": "model-cache",
        "mountPath": "/models/llama-8b",
        "subPath": "s3/models/llama-8b/v2",  # where the fill program puts revision v2
        "readOnly": True,
    } in server["volumeMounts"]


def test_a_cached_hub_model_downloads_into_the_nodes_hub_cache() -> None:
    config = stack_config(endpoints={"chat": classic_endpoint({"model_loading": "cache"})})
    spec = classic_objects(placed_endpoint(config))["deployment"]["spec"]["template"]["spec"]
    server = spec["containers"][0]
    assert "initContainers" not in spec
    assert {"name": "HF_HUB_CACHE", "value": "/model-cache/hub"} in server["env"]
    assert {"name": "model-cache", "mountPath": "/model-cache/hub", "subPath": "hub"} in server["volumeMounts"]


def test_the_fill_programs_copy_is_where_the_server_mounts_it() -> None:
    from components.render.model_cache_fill import target
    from components.render.node_cache import entry

    for source in ("s3://models/llama-8b", "s3://models/team/llama-8b/", "s3://models"):
        assert str(target(source, "/c", "r1")) == f"/c/{entry(source, 'r1').removeprefix('s3/')}"


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"model_source": SOURCE, "model_revision": "v2"}, "it needs model_source and model_loading 'cache'"),
        (
            {"image": "ghcr.io/huggingface/text-generation-inference:3.3.6", "model_loading": "cache"},
            "which tgi is not known to use: copy the model to S3 and set model_source",
        ),
    ],
    ids=["revision-without-cache", "hub-cache-on-tgi"],
)
def test_rejects_what_the_node_cache_cannot_do(overrides: dict[str, Any], fragment: str) -> None:
    (problem,) = problems(overrides)
    assert fragment in problem[1]
