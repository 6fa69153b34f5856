"""The gate (``--forward URL``, docs/metrics.md "Scale to zero"): no prefill or decode; every request but
its own ``GET /health`` goes to ``URL`` as it came (method, path, query, body, headers but the
hop-by-hop ones), the answer streamed back with its status and headers, a client going away
cancelling the upstream request. The server is up while ``URL`` + ``--forward-health`` answers 200
(read every ``--refresh-seconds``); with ``--scale-to-zero server`` a missing server is answered 503
``scaled_to_zero`` with ``Retry-After``, and the series of /metrics count every forwarded request
(``backend="server"``). A completion the server refused (a draining vLLM) is sent again on a
fresh connection, which the Service gives another pod, before the client gets any of it (refusals.py).

With ``--routing`` and ``--forward-pods URL`` (the server's headless Service), the gate chooses the
server pod of each request itself (front/router.py) instead of the Service's random choice; a
refusing pod is left for another one.

The gate's data path is the front's own (front/listener.py, front/upstream.py), not aiohttp's: a
request costs it a fraction of what aiohttp's server and client cost (docs/front.md, "Cost in the data
path"). Its probes and its metrics port stay on aiohttp."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Awaitable, Callable

from front.base import Front
from front.http1 import CHUNKED
from front.listener import Incoming, Reply
from front.metrics import Routed
from front.refusals import COMPLETION_PATHS, RESENT_ON_ABORT
from front.relay import HOP_BY_HOP, connection_headers, error_value, forwarded_headers, scaled_to_zero_value
from front.router import NoPod, PodChoice, Router, prompt_of, text_blocks
from front.upstream import Answer, DisconnectedError, Pool, UpstreamError, request
from front.watch import SERVER, Server

LOG = logging.getLogger("mooncake-proxy")
RELAYED_DROPPED = HOP_BY_HOP - {"content-length"}


class Gate(Front):
    """``--forward``: every request to the server as it came, its answer streamed back."""

    def __init__(self, arguments: argparse.Namespace, server: Server, pool: Pool) -> None:
        super().__init__(arguments, server, [SERVER])
        self.server = server
        self.pool = pool
        self.forward = arguments.forward
        self.router = None if server.pods is None else Router(arguments.routing)
        """With ``--forward-pods``: the server pod of each request."""

    def routing_counts(self) -> list[Routed]:
        return [] if self.router is None else [self.router.routed(SERVER)]

    async def handle(self, incoming: Incoming, reply: Reply) -> None:
        """A request on the serving port: the gate's own ``GET /health``, or one for the server."""
        if incoming.method == "GET" and incoming.path == "/health":
            reply.json(*self.health_state())
            return
        with self.counted():
            await self.answer(incoming, reply)

    async def answer(self, incoming: Incoming, reply: Reply) -> None:
        if at_zero := self.at_zero():
            self.counts.unserved_by(at_zero)
            reply.json(503, scaled_to_zero_value(at_zero), [("Retry-After", str(self.retry_after_seconds))])
            return
        if self.server.known and not self.server.up:
            self.counts.unserved_by([SERVER])
            reply.json(503, error_value(503, "the server is not serving"))
            return
        headers = forwarded_headers(incoming)
        head = incoming.head
        choice = None
        if self.router is not None and self.server.pods is not None:
            choice = PodChoice(self.server.pods, self.router, self.blocks(incoming))

        async def send(fresh: bool) -> Answer:
            if choice is None:
                return await request(self.pool, self.forward, head.method, head.target, headers, incoming.body, fresh)
            return await choice.send(
                lambda base: request(self.pool, base, head.method, head.target, headers, incoming.body, fresh)
            )

        try:
            await self.forwarded(incoming, reply, send)
        finally:
            if choice is not None:
                choice.release()

    def blocks(self, incoming: Incoming) -> list[int]:
        """The prompt's blocks, for the prefix mode (front/router.py); none for another request or mode."""
        if self.router is None or self.router.mode != "prefix" or incoming.path not in COMPLETION_PATHS:
            return []
        try:
            body = json.loads(incoming.body)
        except ValueError:
            return []
        return text_blocks(prompt_of(incoming.path, body)) if isinstance(body, dict) else []

    async def forwarded(self, incoming: Incoming, reply: Reply, send: Callable[[bool], Awaitable[Answer]]) -> None:
        """The server's answer to what ``send`` sent, relayed; the answers the gate gives itself."""
        try:
            if incoming.method == "POST" and incoming.path in COMPLETION_PATHS:
                unrefused = await self.unrefused(send, incoming.path)
            else:
                unrefused = await send(False), b""
        except (UpstreamError, NoPod) as failure:
            self.server.down()
            self.counts.unserved_by([SERVER])
            if SERVER in self.scale_to_zero:
                reply.json(503, scaled_to_zero_value([SERVER]), [("Retry-After", str(self.retry_after_seconds))])
            else:
                reply.json(503, error_value(503, f"the server is unreachable: {failure}"))
            return
        if unrefused is None:
            self.counts.unserved_by([SERVER])
            message = f"the server refused the request {RESENT_ON_ABORT + 1} times: its pods are draining"
            reply.json(503, error_value(503, message))
            return
        answer, read = unrefused
        self.counts.answered += 1
        await relayed(incoming, reply, answer, read)


async def relayed(incoming: Incoming, reply: Reply, answer: Answer, read: bytes) -> None:
    """``answer`` to the client as it came: its status, reason and headers but the hop-by-hop ones, its
    body (``read`` first: what was read of it ahead, refusals.read_ahead) streamed, sized when it was."""
    try:
        dropped = RELAYED_DROPPED | connection_headers(answer.headers)
        headers = [(k, v) for k, v in answer.headers.items() if k.lower() not in dropped]
        if incoming.method == "HEAD" or answer.status in (204, 304):
            reply.start(answer.status, answer.reason, headers, None, body=False)  # its length as it came
            reply.end()
            return
        length = answer.length if answer.length >= 0 else None
        reply.start(answer.status, answer.reason, [(k, v) for k, v in headers if k.lower() != "content-length"], length)
        await reply.write(read + await answer.data() if answer.pending else read)
        if answer.length >= 0 or (answer.length == CHUNKED and reply.chunked):
            # Sized, or chunked both ways: the bytes as they came, not decoded and encoded again.
            while data := await answer.passed():
                await reply.passed(data) if reply.chunked else await reply.write(data)
            reply.end(framed=reply.chunked)
            return
        while data := await answer.data():
            await reply.write(data)
        reply.end()
    except DisconnectedError as cut:  # the client's connection closes with its answer unfinished
        LOG.warning("%s", cut)
    finally:
        if not answer.ended:
            answer.close()
