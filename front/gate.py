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
refusing pod is left for another one."""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable

import aiohttp
from aiohttp import web

from front.base import Front
from front.metrics import Routed
from front.refusals import COMPLETION_PATHS, RESENT_ON_ABORT
from front.relay import error, forward, forwarded_headers, relay, scaled_to_zero
from front.router import PodChoice, Router, prompt_of, text_blocks
from front.watch import SERVER, Server


class Gate(Front):
    """``--forward``: every request to the server as it came, its answer streamed back."""

    def __init__(
        self,
        arguments: argparse.Namespace,
        server: Server,
        sessions: tuple[aiohttp.ClientSession, aiohttp.ClientSession],
    ) -> None:
        super().__init__(arguments, server, sessions, [SERVER])
        self.server = server
        self.forward = arguments.forward
        self.router = None if server.pods is None else Router(arguments.routing)
        """With ``--forward-pods``: the server pod of each request."""

    def routing_counts(self) -> list[Routed]:
        return [] if self.router is None else [self.router.routed(SERVER)]

    async def answer(self, request: web.Request) -> web.StreamResponse:
        if at_zero := self.at_zero():
            self.counts.unserved_by(at_zero)
            return scaled_to_zero(at_zero, self.retry_after_seconds)
        if self.server.known and not self.server.up:
            self.counts.unserved_by([SERVER])
            return error(503, "the server is not serving")
        headers = forwarded_headers(request)
        choice = None
        if self.router is not None and self.server.pods is not None:
            choice = PodChoice(self.server.pods, self.router, await self.blocks(request))

        async def send(session: aiohttp.ClientSession) -> aiohttp.ClientResponse:
            if choice is None:
                return await forward(session, f"{self.forward}{request.rel_url}", request, headers)
            return await choice.send(lambda base: forward(session, f"{base}{request.rel_url}", request, headers))

        try:
            return await self.forwarded(request, send)
        finally:
            if choice is not None:
                choice.release()

    async def blocks(self, request: web.Request) -> list[int]:
        """The prompt's blocks, for the prefix mode (front/router.py); none for another request or mode."""
        if self.router is None or self.router.mode != "prefix" or request.path not in COMPLETION_PATHS:
            return []
        try:
            body = json.loads(await request.read())
        except ValueError:
            return []
        return text_blocks(prompt_of(request.path, body)) if isinstance(body, dict) else []

    async def forwarded(
        self, request: web.Request, send: Callable[[aiohttp.ClientSession], Awaitable[aiohttp.ClientResponse]]
    ) -> web.StreamResponse:
        """The server's answer to what ``send`` sent, relayed; the answers the gate gives itself."""
        try:
            if request.method == "POST" and request.path in COMPLETION_PATHS:
                unrefused = await self.unrefused(send, request.path)
            else:
                unrefused = await send(self.session), b""
        except (TimeoutError, aiohttp.ClientError) as failure:
            self.server.down()
            self.counts.unserved_by([SERVER])
            if SERVER in self.scale_to_zero:
                return scaled_to_zero([SERVER], self.retry_after_seconds)
            return error(503, f"the server is unreachable: {failure}")
        if unrefused is None:
            self.counts.unserved_by([SERVER])
            return error(503, f"the server refused the request {RESENT_ON_ABORT + 1} times: its pods are draining")
        answer, head = unrefused
        self.counts.answered += 1
        return await relay(request, answer, forward_headers=True, head=head)
