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
from collections.abc import Awaitable, Callable

from front.answers import Own, error, scaled_to_zero
from front.base import Front
from front.listener import Incoming, Reply
from front.metrics import Routed
from front.refusals import COMPLETION_PATHS, RESENT_ON_ABORT
from front.relay import forwarded_headers, relayed
from front.router import PodChoice, Router, prompt_of, text_blocks
from front.upstream import Answer, Pool, UpstreamError, request
from front.watch import SERVER, Server


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

    async def answer(self, incoming: Incoming, reply: Reply) -> Own | None:
        if at_zero := self.at_zero():
            self.counts.unserved_by(at_zero)
            return scaled_to_zero(at_zero, self.retry_after_seconds)
        if self.server.known and not self.server.up:
            self.counts.unserved_by([SERVER])
            return error(503, "the server is not serving")
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
            return await self.forwarded(incoming, reply, send)
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

    async def forwarded(
        self, incoming: Incoming, reply: Reply, send: Callable[[bool], Awaitable[Answer]]
    ) -> Own | None:
        """The server's answer to what ``send`` sent, relayed; or the answer the gate gives itself."""
        try:
            if incoming.method == "POST" and incoming.path in COMPLETION_PATHS:
                unrefused = await self.unrefused(send, incoming.path)
            else:
                unrefused = await send(False), b""
        except UpstreamError as failure:
            self.server.down()
            self.counts.unserved_by([SERVER])
            if SERVER in self.scale_to_zero:
                return scaled_to_zero([SERVER], self.retry_after_seconds)
            return error(503, f"the server is unreachable: {failure}")
        if unrefused is None:
            self.counts.unserved_by([SERVER])
            return error(503, f"the server refused the request {RESENT_ON_ABORT + 1} times: its pods are draining")
        answer, read = unrefused
        self.counts.answered += 1
        await relayed(incoming, reply, answer, read, forward_headers=True)
        return None
