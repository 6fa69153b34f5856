"""How a front sees that a draining engine refused a request "abort" before its client gets any of the
answer, and sends it again on a fresh connection (front/refusals.py, Front.unrefused): against a
backend on loopback that refuses as vLLM 0.33.0 does (v1/engine/core.py ``_reject_add_in_shutdown``;
a chat stream opens with the role first, chat_completion/serving.py ``first_iteration``) and keeps its
connections alive as uvicorn does. The rollout scene (tests/e2e/test_rollout.py) runs it whole."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from front.base import Front
from front.refusals import DRAINING_ERROR, EVENT_STREAM, RESENT_ON_ABORT, decided, failed_before_output, read_ahead
from front.upstream import Answer, Pool, request
from front.watch import Server

ROLE = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
CHAT_ABORT = {"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "abort"}]}
TOKEN = {"choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]}
WHOLE_ABORT = {"choices": [{"index": 0, "text": "", "finish_reason": "abort"}]}


def events(*chunks: Any) -> bytes:
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def event(value: Any) -> list[bytes]:
    return [f"data: {json.dumps(value)}".encode()]


def test_a_role_or_a_usage_chunk_decides_nothing_a_token_or_a_finish_does() -> None:
    assert decided(event(ROLE)) is None
    assert decided(event({"choices": [], "usage": {"completion_tokens": 0}})) is None
    assert decided([b": a comment"]) is None
    assert decided(event(CHAT_ABORT)) is True
    assert decided(event(WHOLE_ABORT)) is True
    assert decided(event(TOKEN)) is False
    assert decided(event({"choices": [{"index": 0, "text": "x", "finish_reason": None}]})) is False
    assert decided(event({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]})) is False
    assert decided(event({"error": {"message": "kv load failed"}})) is False
    assert decided([b"data: [DONE]"]) is False


def test_an_answer_failed_before_any_output_is_a_5xx_or_a_stream_opening_on_an_error() -> None:
    """What the proxy runs again from the prefill (front/proxy.py): nothing of it reached the client."""
    load_failed = {"error": {"message": "pulling kv_caches failed", "type": "InternalServerError", "code": 500}}
    errored = {"choices": [{"index": 0, "text": "", "finish_reason": "error"}]}

    def opened(*chunks: Any) -> bytes:  # a stream's opening: up to its first decisive event
        return events(*chunks).removesuffix(b"data: [DONE]\n\n")

    assert failed_before_output(500, "application/json", json.dumps(load_failed).encode())
    assert failed_before_output(503, "text/plain", b"")
    assert failed_before_output(200, EVENT_STREAM, opened(load_failed))
    assert failed_before_output(200, EVENT_STREAM, opened(ROLE, load_failed))
    assert failed_before_output(200, EVENT_STREAM, opened(ROLE, errored))
    # Output, another finish, a whole answer or a client's error: passed on as it is.
    assert not failed_before_output(200, EVENT_STREAM, opened(ROLE, TOKEN))
    assert not failed_before_output(
        200, EVENT_STREAM, opened({"choices": [{"index": 0, "text": "x", "finish_reason": "error"}]})
    )
    assert not failed_before_output(
        200, EVENT_STREAM, opened({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]})
    )
    assert not failed_before_output(200, EVENT_STREAM, b"data: [DONE]\n\n")
    assert not failed_before_output(200, EVENT_STREAM, b"")
    assert not failed_before_output(200, "application/json", json.dumps(load_failed).encode())
    assert not failed_before_output(400, "application/json", json.dumps(load_failed).encode())


DRAINING_500 = {"error": {"message": DRAINING_ERROR, "type": "InternalServerError", "param": None, "code": 500}}
"""What a real vLLM answered a new request while it drained (tests/vllm/test_real_pair.py)."""


class Backend:
    """A completion server that refuses the first ``refusals`` requests (finished "abort", or with
    ``error`` the 500 of ``error``), then answers; it notes which connection (the client's port) each
    request came on."""

    def __init__(self, refusals: int, error: dict[str, Any] | None = None) -> None:
        self.refusals = refusals
        self.error = error
        self.ports: list[int] = []

        self.cut = asyncio.Event()
        """A stream held before its first token saw its connection closed."""

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if body.get("hold"):
            return await self.held(request)
        self.ports.append(request.transport.get_extra_info("peername")[1] if request.transport else 0)
        refused, self.refusals = self.refusals > 0, self.refusals - 1
        if refused and self.error is not None:
            return web.json_response(self.error, status=500)
        if not body.get("stream"):
            text = {"choices": [{"index": 0, "text": "hello back", "finish_reason": "length"}]}
            return web.json_response(WHOLE_ABORT if refused else text)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)  # chunked, kept alive after its end, as uvicorn's
        await response.write(events(ROLE, CHAT_ABORT) if refused else events(ROLE, TOKEN))
        await response.write_eof()
        return response

    async def held(self, request: web.Request) -> web.StreamResponse:
        """The role, then no token (a long prefill) for 5 s, or until the connection closes."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(events(ROLE).removesuffix(b"data: [DONE]\n\n"))
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:  # aiohttp's server cancels a handler whose connection was lost
            self.cut.set()
            raise
        return response


class Client:
    """How a front posts to its backends (front/upstream.py); ``fresh``: a connection of its own."""

    def __init__(self) -> None:
        self.pool = Pool(3.0)

    async def post(self, url: str, body: dict[str, Any], fresh: bool = False) -> Answer:
        base, _, path = url.partition("/v1/")
        headers = [("Content-Type", "application/json")]
        return await request(self.pool, base, "POST", f"/v1/{path}", headers, json.dumps(body).encode(), fresh)


def against(backend: Backend, test: Callable[[Front, Client, str], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", backend.completions)
        async with TestServer(app, host="127.0.0.1") as server:
            client = Client()
            arguments = argparse.Namespace(scale_to_zero=[], retry_after_seconds=1, probe_misses=3, forward_pods=None)
            front = Front(arguments, Server(arguments, None), ["server"])  # type: ignore[arg-type]  # no probes
            try:
                return await test(front, client, str(server.make_url("/v1/chat/completions")))
            finally:
                client.pool.close()

    return asyncio.run(run())


def sender(client: Client, url: str, stream: bool) -> Callable[[bool], Awaitable[Answer]]:
    async def send(fresh: bool) -> Answer:
        return await client.post(url, {"messages": [], "stream": stream}, fresh)

    return send


def test_a_refused_stream_is_sent_again_on_another_connection_and_its_own_is_not_reused() -> None:
    backend = Backend(refusals=0)

    async def test(front: Front, client: Client, url: str) -> tuple[bytes, bytes]:
        # One request first, so the pool holds a connection the refusal will come on; then the engine drains.
        await (await client.post(url, {"messages": []})).read()
        backend.refusals = 1
        unrefused = await front.unrefused(sender(client, url, stream=True), "a chat")
        assert unrefused is not None
        answer, head = unrefused
        rest = await answer.read()
        await (await client.post(url, {"messages": []})).read()
        return head, rest

    head, rest = against(backend, test)
    assert head == events(ROLE, TOKEN).removesuffix(b"data: [DONE]\n\n")  # read up to the first token
    assert rest == b"data: [DONE]\n\n"  # the rest left to stream on
    warm, refused, resent, after = backend.ports
    assert refused == warm  # the pool's connection brought the refusal
    assert resent != refused  # sent again on a connection of its own
    assert after != refused  # the refusing connection was closed, not handed out again
    assert after == resent  # the one the resend opened (to a pod that answered) is kept, as any other


def test_a_refused_whole_answer_is_sent_again_and_then_passed_on_whole() -> None:
    async def test(front: Front, client: Client, url: str) -> Any:
        unrefused = await front.unrefused(sender(client, url, stream=False), "a completion")
        assert unrefused is not None
        answer, head = unrefused
        answer.close()
        return json.loads(head)

    assert against(Backend(refusals=1), test)["choices"][0]["text"] == "hello back"


def test_a_draining_servers_500_is_sent_again_and_another_500_is_passed_on() -> None:
    """A draining vLLM refuses a new request 500 from its stopped tokenizer pool, streamed or not; any
    other 500 is the request's own answer, passed on whole."""

    async def test(front: Front, client: Client, url: str) -> Any:
        unrefused = await front.unrefused(sender(client, url, stream=True), "a chat")
        assert unrefused is not None
        answer, head = unrefused
        answer.close()
        return answer.status, head

    opening = events(ROLE, TOKEN).removesuffix(b"data: [DONE]\n\n")
    assert against(Backend(refusals=1, error=DRAINING_500), test) == (200, opening)
    other = {"error": {"message": "kv load failed", "type": "InternalServerError", "code": 500}}
    status, head = against(Backend(refusals=1, error=other), test)
    assert (status, json.loads(head)) == (500, other)  # read whole, passed on as the client's answer


def test_a_request_every_try_of_which_is_refused_gives_up_after_its_resends() -> None:
    backend = Backend(refusals=RESENT_ON_ABORT + 5)

    async def test(front: Front, client: Client, url: str) -> Any:
        return await front.unrefused(sender(client, url, stream=True), "a chat")

    assert against(backend, test) is None
    assert len(backend.ports) == RESENT_ON_ABORT + 1


def test_an_answer_that_is_not_a_completion_is_left_unread() -> None:
    async def test(front: Front, client: Client, url: str) -> bytes | None:
        answer = await client.post(url.replace("/chat/completions", "/nowhere"), {})
        try:
            return await read_ahead(answer)  # 404: nothing to read ahead of the client
        finally:
            answer.close()

    assert against(Backend(refusals=0), test) == b""


def test_a_client_gone_before_the_first_token_ends_the_backends_request() -> None:
    """The front reads a stream's opening before it answers its client; a client that leaves meanwhile
    (its handler cancelled) closes the backend's connection, as it does once the answer is relayed."""
    backend = Backend(refusals=0)

    async def test(front: Front, client: Client, url: str) -> bool:
        async def send(fresh: bool) -> Any:
            return await client.post(url, {"messages": [], "stream": True, "hold": True}, fresh)

        reading = asyncio.ensure_future(front.unrefused(send, "a chat"))
        await asyncio.sleep(0.3)
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)
        await asyncio.wait_for(backend.cut.wait(), 3)
        return backend.cut.is_set()

    assert against(backend, test)
