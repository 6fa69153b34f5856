"""The gate (``--forward URL``, docs/metrics.md "Scale to zero"): no prefill or decode; every request but
its own ``GET /health`` goes to ``URL`` as it came (method, path, query, body, headers but the
hop-by-hop ones), the answer streamed back with its status and headers, a client going away
cancelling the upstream request. The server is up while ``URL`` + ``--forward-health`` answers 200
(read every ``--refresh-seconds``); with ``--scale-to-zero server`` a missing server is answered 503
``scaled_to_zero`` with ``Retry-After``, and the series of /metrics count every forwarded request
(``backend="server"``). A completion the server refused (a draining vLLM) is sent again on a
fresh connection, which the Service gives another pod, before the client gets any of it (refusals.py)."""

from __future__ import annotations

import argparse

import aiohttp
from aiohttp import web

from front.base import Front
from front.refusals import COMPLETION_PATHS, RESENT_ON_ABORT
from front.relay import error, forward, forwarded_headers, relay, scaled_to_zero
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

    async def answer(self, request: web.Request) -> web.StreamResponse:
        if at_zero := self.at_zero():
            self.counts.unserved_by(at_zero)
            return scaled_to_zero(at_zero, self.retry_after_seconds)
        if self.server.known and not self.server.up:
            self.counts.unserved_by([SERVER])
            return error(503, "the server is not serving")
        url = f"{self.forward}{request.rel_url}"
        headers = forwarded_headers(request)

        async def send(session: aiohttp.ClientSession) -> aiohttp.ClientResponse:
            return await forward(session, url, request, headers)

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
