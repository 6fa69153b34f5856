"""The front data-path benchmark's own parts (benchmarks/front/): its Go stand-ins answer as the Python
stand-ins of the end-to-end tests do (tests/e2e/pd_standins.py), its load generator counts what it got.
Neither nginx nor vllm-router is needed; skipped without Go."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.front import build, harness
from tests.e2e.pd_standins import Prefill


@pytest.fixture(scope="module")
def binaries() -> dict[str, Path]:
    try:
        return build.binaries()
    except build.GoMissingError as missing:
        pytest.skip(str(missing))


@pytest.fixture(scope="module")
def standins(binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Standins]:
    stand = harness.standins(binaries["standin"], tmp_path_factory.mktemp("standins"))
    with harness.stopped_at_exit(stand.processes):
        yield stand


def decode_params(stand: harness.Standins) -> dict[str, object]:
    return {
        "do_remote_decode": False,
        "do_remote_prefill": True,
        "remote_bootstrap_addr": f"http://{harness.HOST}:{stand.bootstrap_port}",
        "remote_engine_id": stand.engine_id,
        "transfer_id": "xfer-1",
    }


def test_the_prefill_bootstrap_query_has_the_shape_of_the_python_standins(standins: harness.Standins) -> None:
    status, body = harness.http(f"http://{harness.HOST}:{standins.bootstrap_port}/query")
    query = json.loads(body)
    python = Prefill(harness.HOST)
    python.engine_id = standins.engine_id
    expected = python.query()
    assert status == 200
    assert query["0"]["engine_id"] == expected["0"]["engine_id"]
    assert query["0"]["worker_addr"].keys() == expected["0"]["worker_addr"].keys() == {"0"}
    assert query["0"]["worker_addr"]["0"]["0"].startswith("tcp://")


def test_the_prefill_and_decode_take_only_what_the_connector_reads(standins: harness.Standins) -> None:
    body = {"model": "bench", "prompt": "hi", "max_tokens": 1, "stream": False}
    prefill = {"do_remote_decode": True, "do_remote_prefill": False, "transfer_id": "xfer-1"}
    ok, answer = harness.http(f"{standins.prefill}/v1/completions", {**body, "kv_transfer_params": prefill})
    assert ok == 200
    assert json.loads(answer)["choices"][0]["finish_reason"] == "length"
    assert harness.http(f"{standins.prefill}/v1/completions", body)[0] == 422
    decode = {**body, "max_tokens": 3, "kv_transfer_params": decode_params(standins)}
    ok, answer = harness.http(f"{standins.decode}/v1/chat/completions", decode)
    assert ok == 200
    assert json.loads(answer)["choices"][0]["message"]["content"] == "xxx"
    wrong = {**decode, "kv_transfer_params": {**decode_params(standins), "remote_engine_id": "another"}}
    assert harness.http(f"{standins.decode}/v1/completions", wrong)[0] == 422
    assert standins.stats()["decode"]["refused"] == 1


def test_the_load_generator_counts_every_streamed_event(binaries: dict[str, Path], standins: harness.Standins) -> None:
    direct = harness.Front("direct", False, standins.server)
    result = harness.load(binaries["load"], direct, ["-c", "4", "-n", "20", "-stream", "-tokens", "7"])
    assert (result.requests, result.errors, result.chunks) == (20, 0, 140)
    refused = harness.Front("decode without kv_transfer_params", False, standins.decode)
    result = harness.load(binaries["load"], refused, ["-c", "1", "-n", "3"])
    assert (result.requests, result.errors) == (0, 3)
    assert "422" in result.first_error


def test_a_process_trees_cpu_counts_its_living_children() -> None:
    busy = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        spent = 0.0
        for _ in range(100):
            spent = harness.tree_cpu_seconds(busy.pid)
            if spent > 0.05:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert spent > 0.05
        assert harness.tree_cpu_seconds(os.getpid()) >= spent  # the shell is this process's child
    finally:
        busy.kill()
        busy.wait()
