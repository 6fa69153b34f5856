"""Streamed loading with real parts (tests/e2e/streamer_driver.py): the Run:ai Model Streamer from PyPI
(runai-model-streamer 0.17.1 with its S3 backend, requirements-streamer.txt) reads a safetensors file the
test makes from moto's S3 server on loopback, with nothing but the credentials EKS Pod Identity serves,
in the environment the program renders for a streamed endpoint."""

from __future__ import annotations

import json
import shutil
from functools import cache
from typing import Any

import pytest

from components.render.classic import classic_objects
from components.render.model_loading import STREAMER_REQUESTS
from tests.e2e.namespace import run_driver
from tests.e2e.streamer_driver import ACCESS_KEY, BUCKET, PREFIX, SESSION_TOKEN
from tests.unit.stack_builders import classic_endpoint, placed_endpoint, stack_config

MIB = 1024**2
FILE_BYTES = 24 * MIB
"""Large enough for many ranged reads, small enough for a shared two-core machine."""

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


def rendered_env() -> dict[str, str]:
    """The server container's environment as the program renders it for a streamed endpoint."""
    config = stack_config(endpoints={"chat": classic_endpoint({"model_source": f"s3://{BUCKET}/{PREFIX}"})})
    (container,) = classic_objects(placed_endpoint(config))["deployment"]["spec"]["template"]["spec"]["containers"]
    assert "runai_streamer" in container["args"]
    return {item["name"]: item["value"] for item in container.get("env", []) if "value" in item}


@cache
def streamed(token_matches: bool) -> dict[str, Any]:
    spec = {"bytes": FILE_BYTES, "env": rendered_env(), "token_matches": token_matches}
    return run_driver("tests.e2e.streamer_driver", json.dumps(spec), timeout=240)


def test_the_streamer_reads_every_tensor_with_pod_identity_credentials() -> None:
    result = streamed(True)
    assert result["errors"] == {}
    assert result["listed"] == [f"s3://{BUCKET}/{PREFIX}/model.safetensors"]
    assert result["pulled"] == ["config.json"]  # the small files vLLM pulls; the weights stay in S3
    assert result["tensors_equal"]
    assert result["bytes_read"] == FILE_BYTES


def test_every_s3_request_is_signed_with_the_agents_session() -> None:
    result = streamed(True)
    requests = result["s3_requests"]
    assert requests
    assert {(request["key_id"], request["session_token"]) for request in requests} == {(ACCESS_KEY, SESSION_TOKEN)}
    assert result["agent"]
    assert all(call["authorized"] for call in result["agent"])


def test_the_weights_arrive_in_ranged_reads() -> None:
    weights = [r for r in streamed(True)["s3_requests"] if r["path"].endswith("model.safetensors")]
    assert len(weights) > 2  # the header's length, the header, then the tensors
    assert all(request["method"] == "GET" and request["range"] for request in weights)


def test_the_streamer_makes_no_request_the_role_is_not_proven_to_allow() -> None:
    """tests/security/test_model_source_access.py proves the rendered role allows each declared request."""
    declared = {(request.method, request.on_object) for request in STREAMER_REQUESTS}
    made = {(r["method"], r["path"].rstrip("/") != f"/{BUCKET}") for r in streamed(True)["s3_requests"]}
    assert made <= declared
    for request in streamed(True)["s3_requests"]:
        if request["path"].rstrip("/") == f"/{BUCKET}":  # a listing: only of the model's prefix
            assert request["prefix"] == f"{PREFIX}/"
            assert "list-type" in request["query"]  # ListObjectsV2


def test_without_the_agents_credentials_no_request_is_signed() -> None:
    """The token in the file is not the agent's: boto3 is refused its container credentials and stops; the C++ reader
    goes on unsigned, which moto answers (it checks no signature) and S3 refuses for a private bucket."""
    result = streamed(False)
    assert set(result["errors"]) == {"listed", "pulled"}
    assert all("from container-role" in error for error in result["errors"].values())  # boto3 asked the agent
    assert result["agent"]
    assert not any(call["authorized"] for call in result["agent"])
    assert {request["key_id"] for request in result["s3_requests"]} == {None}
