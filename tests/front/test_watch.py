"""What the front reads of its backends (front/watch.py): the engines a bootstrap server names, the
pods' addresses as they go into URLs."""

from __future__ import annotations

from typing import Any

import pytest

from front.watch import Engine, engines_of, url_host

ENGINE = "5f2b7c1e-9a53-4c1b-8d1f-2a0e6b3c4d5e"


def test_engines_are_read_from_the_bootstrap_servers_query_answer() -> None:
    """vLLM 0.33.0 MooncakeBootstrapServer.query: dict[dp_rank, EngineEntry(engine_id, worker_addr)] as JSON."""
    answer = {
        "1": {"engine_id": "second", "worker_addr": {"0": {"0": "tcp://10.0.3.7:51234"}}},
        "0": {"engine_id": ENGINE, "worker_addr": {"0": {"0": "tcp://10.0.3.7:50001"}, "1": {"0": "tcp://x:1"}}},
    }
    assert engines_of("10.0.3.7", answer) == [Engine("10.0.3.7", 0, ENGINE), Engine("10.0.3.7", 1, "second")]


@pytest.mark.parametrize(
    "answer",
    [{}, [], None, "x", {"0": {"worker_addr": {}}}, {"0": {"engine_id": ""}}, {"rank": {"engine_id": ENGINE}}],
)
def test_an_answer_naming_no_engine_leaves_the_pod_out(answer: Any) -> None:
    """A bootstrap server whose workers have not registered answers {}: no engine to send decode to."""
    assert engines_of("10.0.3.7", answer) == []


def test_ipv6_pod_addresses_are_bracketed_in_urls() -> None:
    assert url_host("fd00:ec2::12") == "[fd00:ec2::12]"
    assert url_host("10.0.3.7") == "10.0.3.7"
