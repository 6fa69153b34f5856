"""fleetctl verify against local servers that answer like each framework, and wrongly in
every way the checks must catch; inside a private network namespace, loopback only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from fleetctl.verify.canary import consistent, tolerance
from tests.e2e.namespace import run_driver
from tests.e2e.verify_driver import SERVED_MODEL
from tests.unit.stack_builders import stack_config

ROOT = Path(__file__).resolve().parents[2]
IMAGES = {
    "vllm": "vllm/vllm-openai:v0.33.0",
    "sglang": "lmsysorg/sglang:v0.5.6",
    "tgi": "ghcr.io/huggingface/text-generation-inference:3.3.6",
    "triton": "nvcr.io/nvidia/tritonserver:25.10-py3",
}
WEIGHTS: dict[str, dict[str, str]] = {
    "vllm": {"model": SERVED_MODEL},
    "sglang": {"model": SERVED_MODEL},
    "tgi": {"model": SERVED_MODEL},
    "triton": {"model_source": "s3://models/repository"},
}
RENAMED = ("vllm-renamed", "vllm-unserved")
"""The stack file names another model than the server serves; only the first's record names the served one."""
CASES = [
    "vllm-good",
    *RENAMED,
    "vllm-empty",
    "vllm-malformed",
    "vllm-wrong-schema",
    "vllm-slow",
    "vllm-unhealthy",
    "sglang-good",
    "sglang-wrong-schema",
    "tgi-good",
    "tgi-wrong-schema",
    "triton-good",
    "triton-not-identity",
    "triton-wrong-output",
]


ROOMY = {"node_groups": {"system": {"max_size": 16}, "gpu": {"max_size": 24}, "p5": {"max_size": 16}}}
"""Node groups that hold every endpoint of the cases with its rollout surge (the schedulability check)."""


def write_stack(tmp_path: Path, endpoints: dict[str, Any]) -> Path:
    """A stack file with the minimal region and ``endpoints``."""
    stack = tmp_path / "Pulumi.verify.yaml"
    config = stack_config(region_overrides=ROOMY, endpoints=endpoints)
    document = {"config": {f"inference-fleet:{key}": value for key, value in config.items()}}
    with stack.open("w") as handle:
        YAML(typ="safe", pure=True).dump(document, handle)
    return stack


def endpoint(case: str) -> dict[str, Any]:
    framework = case.split("-")[0]
    weights = {"model": "Qwen/Qwen3-0.6B"} if case in RENAMED else WEIGHTS[framework]
    return {"image": IMAGES[framework], "node_group": "gpu", **weights}


def run_verify(tmp_path: Path, *extra: str, cases: list[str] = CASES) -> dict[str, Any]:
    stack = write_stack(tmp_path, {case: endpoint(case) for case in cases})
    outputs = tmp_path / "outputs.json"
    records: dict[str, Any] = {case: {"us-east-1": {"address": f"http://127.0.0.1:8080/{case}"}} for case in cases}
    if "vllm-renamed" in cases:  # the record's name, what was deployed, wins over the stack file's
        records["vllm-renamed"]["us-east-1"]["served_model_name"] = SERVED_MODEL
    outputs.write_text(json.dumps({"endpoints": records}))
    return run_driver("tests.e2e.verify_driver", str(stack), str(outputs), *extra)


def by_check(result: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(check["endpoint"], check["check"]): check for check in result["checks"]}


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if shutil.which("unshare") is None:
        pytest.fail("util-linux unshare is needed")
    return run_verify(tmp_path_factory.mktemp("verify"))


@pytest.mark.parametrize("case", ["vllm-good", "vllm-renamed", "sglang-good", "tgi-good", "triton-good"])
def test_a_correct_answer_of_each_framework_passes(result: dict[str, Any], case: str) -> None:
    checks = by_check(result)
    assert checks[(case, "health")]["status"] == "passed"
    assert checks[(case, "request")]["status"] == "passed", checks[(case, "request")]


@pytest.mark.parametrize(
    ("case", "check", "message"),
    [
        ("vllm-unserved", "request", "POST /v1/completions: HTTP 404"),
        ("vllm-empty", "request", "choices[0].text: expected non-empty text, got ''"),
        ("vllm-malformed", "request", "POST /v1/completions: the answer is not JSON"),
        ("vllm-wrong-schema", "request", "choices[0].text: missing from the answer"),
        ("vllm-slow", "request", "no answer within 1.0 s"),
        ("vllm-unhealthy", "health", "HTTP 503"),
        ("sglang-wrong-schema", "request", "text: missing from the answer"),
        ("tgi-wrong-schema", "request", "generated_text: missing from the answer"),
        ("triton-not-identity", "request", "outputs[0].data: expected [1, 2, 3, 4] (the identity of the input)"),
        ("triton-wrong-output", "request", "outputs[0].name: expected 'OUTPUT0', got 'OUT'"),
    ],
)
def test_every_wrong_answer_fails_naming_the_endpoint_region_and_field(
    result: dict[str, Any], case: str, check: str, message: str
) -> None:
    found = by_check(result)[(case, check)]
    assert (found["endpoint"], found["region"], found["status"]) == (case, "us-east-1", "failed")
    assert message in found["detail"]


def test_the_run_fails_when_any_check_fails(result: dict[str, Any]) -> None:
    assert result["code"] == 1


def test_all_good_endpoints_alone_pass(tmp_path: Path) -> None:
    good = run_verify(tmp_path, cases=["vllm-good", "sglang-good", "tgi-good", "triton-good"])
    assert good["code"] == 0
    assert {check["status"] for check in good["checks"]} == {"passed"}


def test_the_deadline_bounds_the_whole_run(tmp_path: Path) -> None:
    slow = run_verify(tmp_path, "--deadline", "0.8", cases=["vllm-slow", "vllm-unhealthy"])
    details = " ".join(check["detail"] for check in slow["checks"])
    assert slow["code"] == 1
    assert "the deadline of 0.8 s passed" in details


@pytest.mark.parametrize(
    ("hits", "requests", "weight", "expected"),
    [
        (10, 100, 10, True),
        (20, 100, 10, True),
        (25, 100, 10, False),
        (1, 100, 10, False),
        (0, 100, 10, False),
        (500, 1000, 50, True),
    ],
)
def test_the_canary_share_is_judged_by_a_binomial_tolerance(
    hits: int, requests: int, weight: int, expected: bool
) -> None:
    assert consistent(hits, requests, weight) is expected
    low, high = tolerance(requests, weight)
    assert low <= requests * weight / 100 <= high
