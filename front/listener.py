"""The serving port of the front's own data path, on asyncio's protocols: each client connection read
request by request (front/http1.py), each request handed whole (its body read) to the handler with a
``Reply`` to answer it on, answers streamed with backpressure, idle connections closed after
``--keepalive-seconds``, a client that goes away cancelling its request, and the drain on SIGTERM.

What aiohttp's web server did for the gate (serve.py ran it so: ``handler_cancellation``, its keepalive
and shutdown timeouts), without its request and response objects (docs/front.md, "Cost in the data path")."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from email.utils import formatdate
from typing import Any, cast

from front.answers import error
from front.http1 import (
    CHUNKED,
    END_OF_HEAD,
    HEAD_LIMIT,
    LAST_CHUNK,
    BadMessageError,
    Headers,
    Inbox,
    RequestHead,
    chunk,
    chunked_body,
    request_body_length,
    request_head,
)

LOG = logging.getLogger("mooncake-proxy")
REASONS = {
    100: "Continue", 200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Content Too Large",
    431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
    502: "Bad Gateway", 503: "Service Unavailable", 505: "HTTP Version Not Supported",
}  # fmt: skip
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
SWEEP_SECONDS = 1.0
"""How often idle client connections are looked at: one closes up to that much after its keepalive."""


class Incoming:
    """A request as it came, its body read whole."""

    __slots__ = ("body", "head", "remote")

    def __init__(self, head: RequestHead, body: bytes, remote: str | None) -> None:
        self.head, self.body, self.remote = head, body, remote

    @property
    def method(self) -> str:
        return self.head.method

    @property
    def path(self) -> str:
        return self.head.path

    @property
    def headers(self) -> Headers:
        return self.head.headers


class Reply:
    """The answer to one request: a head, then a body sized or chunked (close-delimited to an HTTP/1.0
    client), written as it comes; the head goes out with the body's first bytes, in one send."""

    __slots__ = ("chunked", "close_after", "connection", "ended", "head", "started", "version")

    def __init__(self, connection: ClientConnection, head: RequestHead | None) -> None:
        self.connection = connection
        self.version = head.version if head is not None else "HTTP/1.1"
        self.started = False
        self.chunked = False
        self.close_after = head is None or not head.keep_alive
        self.ended = False
        self.head = b""
        """The head, until it is sent."""

    def start(
        self, status: int, reason: str, headers: Sequence[tuple[str, str]], length: int | None, body: bool = True
    ) -> None:
        """The status line and ``headers``, none of which frame the body: ``length``, or None for a body
        sent as it comes. ``body`` False: an answer that has none (to a HEAD, a 204 or 304), whose
        ``headers`` are passed as they are."""
        assert not self.started, "one head per answer"
        self.started = True
        lines = [f"HTTP/1.1 {status} {reason or REASONS.get(status, '')}\r\n"]
        lines += [f"{name}: {value}\r\n" for name, value in headers]
        if self.connection.listener.draining:
            self.close_after = True
        if not body:
            pass
        elif length is not None:
            lines.append(f"Content-Length: {length}\r\n")
        elif self.version == "HTTP/1.1":
            self.chunked = True
            lines.append("Transfer-Encoding: chunked\r\n")
        else:
            self.close_after = True
        if self.close_after:
            lines.append("Connection: close\r\n")
        elif self.version == "HTTP/1.0":
            lines.append("Connection: keep-alive\r\n")
        lines.append("\r\n")
        self.head = "".join(lines).encode("latin-1")

    async def write(self, data: bytes) -> None:
        if data:
            self.connection.send(self.head + (chunk(data) if self.chunked else data))
            self.head = b""
            await self.connection.drained()

    async def passed(self, data: bytes) -> None:
        """``data`` as it is: a chunked body's framing passed on from a backend (front/upstream.py
        ``Answer.passed``), its last chunk included."""
        self.connection.send(self.head + data)
        self.head = b""
        await self.connection.drained()

    def end(self, framed: bool = False) -> None:
        """The answer is whole; ``framed``: its last chunk went out with ``passed``."""
        tail = LAST_CHUNK if self.chunked and not framed else b""
        if self.head or tail:
            self.connection.send(self.head + tail)
            self.head = b""
        self.ended = True

    def whole(self, status: int, body: bytes, headers: Sequence[tuple[str, str]]) -> None:
        """An answer of the front's own, all at once."""
        self.start(status, "", [*headers, ("Date", http_date())], len(body))
        self.connection.send(self.head + body)
        self.head = b""
        self.ended = True


_DATE: list[Any] = [0, ""]


def http_date() -> str:
    """The Date header's value, made once a second."""
    now = int(time.time())
    if _DATE[0] != now:
        _DATE[:] = [now, formatdate(now, usegmt=True)]
    return str(_DATE[1])


Handler = Callable[[Incoming, Reply], Awaitable[None]]


class ClientConnection(asyncio.Protocol):
    """One client's connection: its requests one after another (a pipelined one waits its turn)."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.inbox = Inbox(high=listener.max_body + HEAD_LIMIT)
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None
        self.busy = False
        """A request is being read or answered (else the connection waits for the next one)."""
        self.idle_since: float | None = None
        """When the connection began to wait for a request with nothing of one come (the listener's sweep
        closes it ``--keepalive-seconds`` later)."""
        self.writable: asyncio.Future[None] | None = None
        self.remote: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio's classes
        self.transport = self.inbox.transport = transport
        peer = transport.get_extra_info("peername")
        self.remote = str(peer[0]) if isinstance(peer, tuple) and peer else None
        self.listener.connections.add(self)
        self.task = asyncio.get_running_loop().create_task(self.run())

    def data_received(self, data: bytes) -> None:
        self.idle_since = None
        self.inbox.feed(data)

    def eof_received(self) -> bool:
        self.inbox.end()
        return True  # the answer to what came may still be written; run() closes

    def connection_lost(self, exc: Exception | None) -> None:
        self.inbox.end()
        self.listener.connections.discard(self)
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        if self.busy and self.task is not None:
            self.task.cancel()  # the client went away: so does its request, upstream included

    def pause_writing(self) -> None:
        self.writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        self.writable = None

    def send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    async def drained(self) -> None:
        if self.writable is not None:
            await self.writable

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def run(self) -> None:
        reply: Reply | None = None
        try:
            while not self.listener.draining:
                if not self.inbox.buffer:
                    self.idle_since = self.listener.loop.time()
                try:
                    raw = await self.inbox.until(END_OF_HEAD, HEAD_LIMIT)
                except EOFError:
                    return
                self.busy = True
                reply = None
                head = request_head(raw)
                reply = Reply(self, head)
                incoming = Incoming(head, await self.body(head), self.remote)
                await self.listener.handler(incoming, reply)
                if not reply.ended:  # a handler that raised after its head: the body cannot be finished
                    return
                self.busy = False
                if reply.close_after:
                    return
        except BadMessageError as bad:
            if reply is None or not reply.started:
                reply = Reply(self, None)
                error(bad.status, str(bad)).send(reply)
        except asyncio.CancelledError:
            pass  # the client went away, or the drain's time ran out
        except Exception:
            LOG.exception("the answer to a request failed")
            if reply is not None and not reply.started:
                reply = Reply(self, None)
                error(500, "the front failed").send(reply)
        finally:
            self.busy = False
            self.close()

    async def body(self, head: RequestHead) -> bytes:
        length = request_body_length(head)
        limit = self.listener.max_body
        if length > limit:
            raise BadMessageError(413, f"the body is over {limit} bytes")
        if length and "100-continue" in head.headers.tokens("Expect") and head.version == "HTTP/1.1":
            self.send(CONTINUE)
        if length == CHUNKED:
            return b"".join(await chunked_body(self.inbox, limit))
        return await self.inbox.exactly(length) if length else b""


class Listener:
    """The serving socket and its connections."""

    def __init__(self, handler: Handler, keepalive: float, max_body: int) -> None:
        self.handler = handler
        self.keepalive = keepalive
        self.max_body = max_body
        self.connections: set[ClientConnection] = set()
        self.draining = False
        self.server: asyncio.Server | None = None
        self.loop = asyncio.get_running_loop()
        self.sweep: asyncio.TimerHandle | None = None

    async def start(self, host: str, port: int) -> None:
        self.server = await self.loop.create_server(lambda: ClientConnection(self), host, port, backlog=1024)
        self.sweep = self.loop.call_later(SWEEP_SECONDS, self.swept)

    def swept(self) -> None:
        """Connections idle longer than ``keepalive`` closed (a sweep a second, not a timer per request)."""
        oldest = self.loop.time() - self.keepalive
        for connection in list(self.connections):
            if connection.idle_since is not None and connection.idle_since <= oldest:
                connection.close()
        self.sweep = self.loop.call_later(SWEEP_SECONDS, self.swept)

    async def drain(self, seconds: float) -> None:
        """New connections refused, idle ones closed, those answering a request given ``seconds`` to end
        it (each closes after its answer), then cancelled."""
        self.draining = True
        if self.sweep is not None:
            self.sweep.cancel()
        if self.server is not None:
            self.server.close()
        for connection in list(self.connections):
            if not connection.busy:
                connection.close()
        tasks = [c.task for c in self.connections if c.busy and c.task is not None]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=seconds)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        if self.server is not None:
            await self.server.wait_closed()
