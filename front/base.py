"""What the proxy and the gate share: ``/health``, ``/metrics``, the counts and the answer at zero."""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from front.answers import SCALED_TO_ZERO, Own, as_json, error
from front.listener import Incoming, Reply
from front.metrics import EXPOSITION_TYPE, Counts, Routed, exposition
from front.refusals import RESENT_ON_ABORT, read_ahead
from front.upstream import Answer
from front.watch import Watch

LOG = logging.getLogger("mooncake-proxy")


class InFlight:
    """``with``: one request counted received, and in flight until the block ends however it ends."""

    __slots__ = ("counts",)

    def __init__(self, counts: Counts) -> None:
        self.counts = counts

    def __enter__(self) -> None:
        self.counts.requests += 1
        self.counts.last_request = time.time()
        self.counts.in_flight += 1

    def __exit__(self, *ended: object) -> None:
        self.counts.in_flight -= 1


class Front:
    """What the proxy and the gate share: /health, /metrics, the counts and the answer at zero."""

    def __init__(
        self,
        arguments: argparse.Namespace,
        watch: Watch,
        backends: Sequence[str],
    ) -> None:
        self.watch = watch
        self.scale_to_zero = frozenset(arguments.scale_to_zero)
        self.retry_after_seconds: int = arguments.retry_after_seconds
        self.counts = Counts(unserved=dict.fromkeys(backends, 0))
        self.in_flight = InFlight(self.counts)
        self.draining = False
        """SIGTERM came: /health answers 503 while the requests in flight finish (``serve``)."""

    def at_zero(self) -> list[str]:
        """The missing backends, when every one of them may be at zero (else none: the front cannot serve)."""
        missing = self.watch.missing()
        if self.watch.known and self.scale_to_zero.issuperset(missing):
            return missing
        return []

    def health_state(self, detail: bool = False) -> tuple[int, dict[str, Any]]:
        """What ``GET /health`` answers: 200 while the front serves (or is at zero), else 503, and its state."""
        state: dict[str, Any] = {**self.watch.state(detail), "answered": self.counts.answered}
        if routed := self.routing_counts():
            # What fleetctl verify reads of a front that routes (the metrics port admits only Prometheus):
            # per backend, the prompt blocks routed and those believed cached where they went.
            state["routed"] = {r.backend: {"blocks": int(r.blocks), "cached": int(r.cached)} for r in routed}
        at_zero = self.at_zero()
        if self.scale_to_zero:
            state[SCALED_TO_ZERO] = at_zero
        if self.draining:
            state["draining"] = True
        serving = (self.watch.ready or bool(at_zero)) and not self.draining
        return 200 if serving else 503, state

    async def health(self, request: web.Request, detail: bool = False) -> web.Response:
        """The metrics port's ``GET /health`` (aiohttp, serve.py ``metrics_site``)."""
        status, state = self.health_state(detail)
        return web.json_response(state, status=status)

    async def handle(self, incoming: Incoming, reply: Reply) -> None:
        """A request on the serving port: the front's own ``GET /health``, or one for its backends (any
        other method on /health included)."""
        if incoming.method == "GET" and incoming.path == "/health":
            status, state = self.health_state()
            as_json(state, status).send(reply)
            return
        if not self.routed(incoming.path):  # not a request for the backends: neither counted nor sent
            message = f"{incoming.path} is not served by a split endpoint (docs/mooncake-proxy.md, Routes)"
            error(404, message).send(reply)
            return
        with self.counted():
            own = await self.answer(incoming, reply)
            if own is not None:
                own.send(reply)

    async def answer(self, incoming: Incoming, reply: Reply) -> Own | None:
        """The answer to a request for the backends: relayed into ``reply``, or the front's own (returned)."""
        raise NotImplementedError

    async def metrics(self, request: web.Request) -> web.Response:
        # Content-Type set whole: aiohttp's content_type argument would not take the version parameter.
        text = exposition(self.counts, self.routing_counts())
        return web.Response(text=text, headers={"Content-Type": EXPOSITION_TYPE})

    def routing_counts(self) -> list[Routed]:
        """What the front's routers counted (``--routing``), for /metrics."""
        return []

    def counted(self) -> InFlight:
        """A request received: counted on arrival, in flight until whatever ends it (an answer, an error,
        the client gone: cancelled), as ``with front.counted():``."""
        return self.in_flight

    async def unrefused(self, send: Callable[[bool], Awaitable[Answer]], what: str) -> tuple[Answer, bytes] | None:
        """A completion's answer from ``send``, and what was read of it (refusals.read_ahead): sent on a
        pooled connection (``send(False)``), then again on a fresh one (``send(True)``: another pod behind
        the Service) while the engine refuses it (a draining vLLM: refusals.py), ``RESENT_ON_ABORT`` times
        at most; None when every try was refused. Raises what ``send`` and reading raise."""
        for attempt in range(RESENT_ON_ABORT + 1):
            answer = await send(attempt > 0)
            try:
                head = await read_ahead(answer)
            except BaseException:  # the client gone (cancelled) before the first token: so is the backend's request
                answer.close()
                raise
            if head is not None:
                return answer, head
            LOG.info("%s refused %s (its engine drains): sending it again on a fresh connection", answer.url, what)
        return None

    def routed(self, path: str) -> bool:
        """Whether ``path`` is one the front sends to its backends."""
        return True
