"""Routing in the front's request path (front/router.py): a prompt's blocks of text, the router's
choice and its load, and one request's choice of pod (refused connections, a draining pod). The
program runs routed against stand-ins in tests/e2e/test_routing.py."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from typing import Any

import pytest

from front.metrics import BACKEND_IN_FLIGHT, ROUTED_BLOCKS, ROUTED_CACHED_BLOCKS, Counts, exposition
from front.router import BLOCK_CHARACTERS, NoPodError, PodChoice, Router, prompt_of, text_blocks
from front.serve import parse_arguments
from front.upstream import ConnectError
from front.watch import Pods, Watch


def test_a_chats_prompt_is_its_messages_roles_and_text_in_order() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {}}]},
        ]
    }
    assert prompt_of("/v1/chat/completions", body) == "<system>be brief<user>hi"


@pytest.mark.parametrize(
    ("prompt", "text"), [("hello", "hello"), (["hello"], "hello"), ([1, 2, 3], "[1,2,3]"), (None, "")]
)
def test_a_completions_prompt_is_its_text_or_its_token_ids(prompt: Any, text: str) -> None:
    assert prompt_of("/v1/completions", {"prompt": prompt}) == text


def test_blocks_chain_over_the_prefix_leave_a_partial_block_out_and_are_the_same_in_every_process() -> None:
    """Python's own hash of text is salted per process; the front's blocks must not be, or two front
    replicas would place one prefix on two engines."""
    text = "a" * BLOCK_CHARACTERS + "b" * BLOCK_CHARACTERS + "c" * (BLOCK_CHARACTERS - 1)
    blocks = text_blocks(text)
    assert len(blocks) == 2
    assert text_blocks("z" * BLOCK_CHARACTERS + "b" * BLOCK_CHARACTERS)[1] != blocks[1]  # the parent counts
    program = f"from front.router import text_blocks; print(text_blocks({text!r}))"
    other = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == str(blocks)


def test_the_prefix_router_sends_a_prompt_back_where_it_sent_it_and_counts_what_it_believed_cached() -> None:
    router = Router("prefix")
    blocks = text_blocks("x" * BLOCK_CHARACTERS * 4)
    first = router.choose(["a", "b"], blocks)
    assert first is not None
    router.done(first)
    assert router.choose(["a", "b"], blocks) == first
    assert (router.blocks, router.matched) == (8, 4)
    assert router.in_flight == {first: 1}


def test_the_least_load_router_counts_in_flight_until_done() -> None:
    router = Router("least-load")
    assert [router.choose(["a", "b"], []) for _ in range(3)] == ["a", "b", "a"]
    router.done("a")
    router.done("a")
    assert router.choose(["a", "b"], []) == "a"
    assert router.choose([], []) is None


def test_a_router_forgets_what_it_believed_of_a_backend_that_is_gone() -> None:
    router = Router("prefix")
    blocks = text_blocks("y" * BLOCK_CHARACTERS)
    chosen = router.choose(["a"], blocks)
    assert chosen == "a"
    router.done("a")
    router.keep(["b"])
    assert router.choose(["a", "b"], blocks) is not None
    assert router.matched == 0  # "a" came back as a new engine: nothing believed cached there
    assert set(router.routed("prefill").in_flight) <= {"a", "b"}


def test_an_unknown_mode_is_refused_naming_the_modes() -> None:
    with pytest.raises(ValueError, match="prefix, least-load, random"):
        Router("round-robin")


def test_the_routing_series_are_exported_only_with_routing() -> None:
    assert ROUTED_BLOCKS not in exposition(Counts())
    router = Router("prefix")
    router.choose(["10.0.0.1"], text_blocks("q" * BLOCK_CHARACTERS * 2))
    text = exposition(Counts(), [router.routed("decode")])
    assert f'{ROUTED_BLOCKS}{{backend="decode"}} 2' in text
    assert f'{ROUTED_CACHED_BLOCKS}{{backend="decode"}} 0' in text
    assert f'{BACKEND_IN_FLIGHT}{{backend="decode",target="10.0.0.1"}} 1' in text


class Answer:
    """What ``PodChoice.send`` hands back: a stand-in for aiohttp's response, naming its pod."""

    def __init__(self, base: str) -> None:
        self.base = base


def pods(*hosts: str) -> Pods:
    arguments = argparse.Namespace(probe_misses=3)
    watch = Watch(arguments, session=None)  # type: ignore[arg-type]  # never probes here
    found = Pods(watch, "decode", "http://decode-pods.ns.svc:8080", "/health")
    found.up = list(hosts)
    return found


def refused_connection(base: str) -> ConnectError:
    return ConnectError(f"cannot connect to {base}: [Errno 111] Connection refused")


def test_a_pod_whose_connection_is_refused_is_taken_out_and_the_next_one_takes_the_request() -> None:
    found = pods("10.0.0.1", "10.0.0.2")
    router = Router("least-load")
    choice = PodChoice(found, router, [])
    sent: list[str] = []

    async def request(base: str) -> Any:
        sent.append(base)
        if base.startswith("http://10.0.0.1"):
            raise refused_connection(base)
        return Answer(base)

    answer: Any = asyncio.run(choice.send(request))
    assert sent == ["http://10.0.0.1:8080", "http://10.0.0.2:8080"]
    assert answer.base == "http://10.0.0.2:8080"
    assert found.up == ["10.0.0.2"]
    assert router.in_flight == {"10.0.0.2": 1}
    choice.release()
    assert router.in_flight == {}


def test_a_second_send_means_the_pod_refused_as_a_draining_vllm_does_and_another_takes_it() -> None:
    """Front.unrefused sends a refused completion again: the pod that refused it is out while it drains."""
    found = pods("10.0.0.1", "10.0.0.2")
    choice = PodChoice(found, Router("least-load"), [])

    async def request(base: str) -> Any:
        return Answer(base)

    first: Any = asyncio.run(choice.send(request))
    second: Any = asyncio.run(choice.send(request))
    assert (first.base, second.base) == ("http://10.0.0.1:8080", "http://10.0.0.2:8080")
    assert found.draining == {"10.0.0.1"}
    with pytest.raises(NoPodError, match="no decode pod is serving"):
        asyncio.run(choice.send(request))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--decode-pods", "http://d:1"], "--decode-pods needs --routing"),
        (["--routing", "prefix", "--decode-pods", "d:1"], "--decode-pods must be a URL"),
        (["--routing", "prefix", "--forward-pods", "http://s:1"], "--forward-pods needs --forward"),
    ],
)
def test_the_proxys_routing_arguments_are_checked(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    split = ["--prefill-service", "p", "--prefill-port", "1", "--bootstrap-port", "2", "--decode", "http://d"]
    with pytest.raises(SystemExit):
        parse_arguments([*split, *argv])
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--routing", "random"], "--routing with --forward needs --forward-pods"),
        (["--routing", "random", "--forward-pods", "http://s:1", "--decode-pods", "http://d:1"], "do not apply"),
    ],
)
def test_the_gates_routing_arguments_are_checked(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse_arguments(["--forward", "http://s", *argv])
    assert message in capsys.readouterr().err


def test_routed_arguments_parse() -> None:
    arguments = parse_arguments(
        ["--forward", "http://s", "--routing", "prefix", "--forward-pods", "http://s-pods:8080"]
    )
    assert (arguments.routing, arguments.forward_pods) == ("prefix", "http://s-pods:8080")
