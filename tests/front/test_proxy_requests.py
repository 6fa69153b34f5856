"""What the proxy (front/proxy.py) makes of a client's request on a split
endpoint, and of its prefill's answer; and how it holds its peers through probes that time out. The
program runs against stand-ins in tests/e2e/test_mooncake_proxy.py and test_rollout.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from front.proxy import as_events, finished_for_decode, prefill_body, unsplittable
from front.refusals import refused_by_engine
from front.serve import parse_arguments
from front.watch import Silence

REQUIRED = ["--prefill-service", "p", "--prefill-port", "1", "--bootstrap-port", "2", "--decode", "http://d"]


@pytest.mark.parametrize("client", [{}, {"min_tokens": 0}, {"min_tokens": 7, "max_tokens": 16}])
def test_the_prefill_gets_one_token_that_cannot_be_eos_whatever_the_client_asked(client: dict[str, Any]) -> None:
    """min_tokens 1 with max_tokens 1 (vLLM 0.33.0 sampling_params.py refuses min_tokens > max_tokens)."""
    body = prefill_body({"prompt": "p", "stream": True, "stream_options": {"include_usage": True}, **client}, "r")
    assert (body["max_tokens"], body["min_tokens"], body["stream"]) == (1, 1, False)
    assert "stream_options" not in body
    assert body["kv_transfer_params"] == {"do_remote_decode": True, "do_remote_prefill": False, "transfer_id": "xfer-r"}


def test_a_chats_max_completion_tokens_is_capped_too() -> None:
    """The chat protocol takes max_completion_tokens over max_tokens (chat_completion/protocol.py)."""
    body = prefill_body({"messages": [], "max_completion_tokens": 64, "min_tokens": 8}, "r")
    assert (body["max_completion_tokens"], body["max_tokens"], body["min_tokens"]) == (1, 1, 1)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"n": 2}, "n is 2"),
        ({"n": 3, "messages": []}, "n is 3"),
        ({"use_beam_search": True}, "use_beam_search"),
        ({"prompt": ["a", "b"]}, "prompt holds 2 prompts"),
        ({"prompt": [[1, 2], [3]]}, "prompt holds 2 prompts"),
        ({"prompt": "a", "prompt_embeds": "e"}, "prompt and prompt_embeds hold"),
        ({"prompt_embeds": ["e", "f"]}, "prompt_embeds holds 2 prompts"),
    ],
)
def test_requests_vllm_fans_out_into_several_engine_requests_are_refused_naming_the_field(
    body: dict[str, Any], field: str
) -> None:
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    reason = unsplittable(path, body)
    assert reason is not None
    assert field in reason


@pytest.mark.parametrize(
    "body",
    [{"prompt": "a"}, {"prompt": ["a"]}, {"prompt": [1, 2, 3]}, {"prompt": [[1, 2]]}, {"n": 1}, {"n": None}],
)
def test_one_prompt_and_one_choice_go_through(body: dict[str, Any]) -> None:
    assert unsplittable("/v1/completions", body) is None


def answer(*reasons: str) -> dict[str, Any]:
    return {
        "id": "c",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "text": "", "finish_reason": r} for r in reasons],
    }


def test_only_a_prefill_capped_at_its_length_kept_the_kv_for_decode() -> None:
    """The connector keeps a prefill's blocks for FINISHED_LENGTH_CAPPED only (mooncake_connector.py)."""
    assert finished_for_decode(answer("length"))
    assert not finished_for_decode(answer("stop"))
    assert not finished_for_decode(answer("length", "stop"))
    assert finished_for_decode({})  # nothing to read: decode answers, and says what went wrong


def test_an_engine_that_refused_the_request_is_told_from_one_that_ran_it() -> None:
    """A draining vLLM answers a new request 200 with finish_reason "abort" (v1/engine/core.py)."""
    assert refused_by_engine(answer("abort"))
    assert refused_by_engine(answer("error"))
    assert not refused_by_engine(answer("stop"))
    assert not refused_by_engine({"choices": "x"})


def events(text: bytes) -> list[Any]:
    data = [line.removeprefix(b"data: ") for line in text.split(b"\n\n") if line]
    return [item.decode() if item == b"[DONE]" else json.loads(item) for item in data]


def test_a_whole_completion_streams_as_vllm_streams_it() -> None:
    whole = {**answer("stop"), "object": "text_completion", "usage": {"completion_tokens": 1}}
    plain = events(as_events("/v1/completions", whole, {"stream": True}))
    assert plain == [
        {"id": "c", "created": 1, "model": "m", "object": "text_completion", "choices": whole["choices"]},
        "[DONE]",
    ]
    usage = events(as_events("/v1/completions", whole, {"stream_options": {"include_usage": True}}))
    assert usage[1]["choices"] == []
    assert usage[1]["usage"] == {"completion_tokens": 1}


def test_a_whole_chat_completion_streams_its_message_as_the_delta() -> None:
    choice = {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop", "logprobs": None}
    (chunk, done) = events(as_events("/v1/chat/completions", {"id": "c", "choices": [choice]}, {}))
    assert done == "[DONE]"
    assert chunk["object"] == "chat.completion.chunk"
    assert chunk["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunk["choices"][0]["finish_reason"] == "stop"


def test_a_peer_stays_until_its_probes_time_out_misses_times_in_a_row() -> None:
    silence = Silence(3)
    assert (silence.kept("decode"), silence.kept("decode"), silence.kept("decode")) == (True, True, False)
    silence.heard("decode")
    assert silence.kept("decode")


def test_probe_misses_and_the_drain_are_arguments_checked() -> None:
    arguments = parse_arguments(REQUIRED)
    assert (arguments.probe_misses, arguments.drain_seconds) == (3, 120)
    assert parse_arguments([*REQUIRED, "--probe-misses", "5", "--drain-seconds", "0"]).probe_misses == 5
    for wrong in (["--probe-misses", "0"], ["--drain-seconds", "-1"]):
        with pytest.raises(SystemExit):
            parse_arguments([*REQUIRED, *wrong])
