"""The front's data path to its backends, on asyncio's protocols: requests written whole in one send on
kept-alive connections (a pool per host and port, an idle connection dropped after ``idle_seconds``, before
vLLM's uvicorn drops it: serve.KEEPALIVE_TO_PEERS_SECONDS), each answer read as it comes.

What aiohttp's client did for the front, at a fraction of its cost (docs/front.md, "Cost in the data
path"): no URL objects, no cookie jar, no per-request timers but the connect's, nothing added to the
request but ``Host`` and its length, the answer's body passed on without decompression. A request whose
connection closed before any of the answer came is sent again on another (``RESENT_ON_CLOSED`` times at
most): a draining uvicorn closes its idle keep-alive connections, and a request the pool had just put
on one never reached it."""

from __future__ import annotations

import asyncio
import logging
from typing import cast
from urllib.parse import urlsplit

from front.http1 import (
    CHUNKED,
    CRLF,
    END_OF_HEAD,
    HEAD_LIMIT,
    HEX,
    LINE_LIMIT,
    UNTIL_CLOSE,
    BadMessageError,
    Inbox,
    next_chunk,
    response_body_length,
    response_head,
)

LOG = logging.getLogger("mooncake-proxy")
RESENT_ON_CLOSED = 2
CONNECT_SECONDS = 5.0
"""Connecting is bounded; a generation may take minutes, so nothing else is."""
SCAN_SIZE, SCAN_DATA, SCAN_CRLF, SCAN_TRAILERS, SCAN_DONE = range(5)
"""Where ``Answer.passed`` is in a chunked body: at a chunk-size line, in a chunk's data, at the CRLF
after it, in the trailers, past the end."""
SWEEP_SECONDS = 0.5
"""How often idle connections are looked at: one is dropped between ``idle_seconds`` and that much later."""
READ_SIZE = 2**18
"""The most of a sized or close-delimited body passed on in one piece."""


class UpstreamError(Exception):
    """The backend could not be reached or gave no usable answer."""


class ConnectError(UpstreamError):
    """No connection could be opened (refused, unreachable, a name that does not resolve, a timeout)."""


class DisconnectedError(UpstreamError):
    """The connection closed before the answer was whole."""


class Link(asyncio.Protocol):
    """One connection to a backend."""

    def __init__(self) -> None:
        self.inbox = Inbox()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio's classes
        self.transport = self.inbox.transport = transport

    def data_received(self, data: bytes) -> None:
        self.inbox.feed(data)

    def eof_received(self) -> bool:
        self.inbox.end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.inbox.end()

    @property
    def usable(self) -> bool:
        """Open, and not closed by its peer."""
        return self.transport is not None and not self.transport.is_closing() and not self.inbox.eof

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


Address = tuple[str, int]


def address_of(url: str) -> tuple[Address, str]:
    """A base URL's host and port, and the Host header naming them (``http://`` only)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"the front's data path speaks plain HTTP/1.1: {url!r} is not http://HOST[:PORT]")
    port = parts.port or 80
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return (parts.hostname, port), host if port == 80 else f"{host}:{port}"  # the default port unsaid, as aiohttp


class Pool:
    """Kept-alive connections per backend address; a fresh one on demand. An idle connection is dropped
    once it has been idle ``idle_seconds`` (a sweep every ``SWEEP_SECONDS`` while any is idle, not a timer
    per request)."""

    def __init__(self, idle_seconds: float) -> None:
        self.idle_seconds = idle_seconds
        self.idle: dict[Address, list[tuple[float, Link]]] = {}
        self.sweep: asyncio.TimerHandle | None = None

    async def link(self, address: Address, fresh: bool) -> tuple[Link, bool]:
        """A connection to ``address`` and whether it was reused; ``fresh``: a new one, whatever is idle."""
        idle = self.idle.get(address)
        loop = asyncio.get_running_loop()
        if idle and not fresh:
            oldest = loop.time() - self.idle_seconds
            while idle:
                since, link = idle.pop()
                if since > oldest and link.usable:
                    return link, True
                link.close()
        try:
            _, link = await asyncio.wait_for(loop.create_connection(Link, *address), CONNECT_SECONDS)
        except (OSError, TimeoutError) as failure:
            raise ConnectError(f"cannot connect to {address[0]}:{address[1]}: {failure or 'timed out'}") from None
        return link, False

    def give_back(self, address: Address, link: Link) -> None:
        """``link`` idle again; dropped when closed or when bytes nobody asked for wait on it."""
        if not link.usable or link.inbox.buffer:
            link.close()
            return
        loop = asyncio.get_running_loop()
        self.idle.setdefault(address, []).append((loop.time(), link))
        if self.sweep is None:
            self.sweep = loop.call_later(SWEEP_SECONDS, self.swept)

    def swept(self) -> None:
        """Every connection idle too long closed; the next sweep set while any is left."""
        loop = asyncio.get_running_loop()
        oldest = loop.time() - self.idle_seconds
        for address, idle in list(self.idle.items()):
            kept = [(since, link) for since, link in idle if since > oldest and link.usable]
            for since, link in idle:
                if since <= oldest or not link.usable:
                    link.close()
            if kept:
                self.idle[address] = kept
            else:
                del self.idle[address]
        self.sweep = loop.call_later(SWEEP_SECONDS, self.swept) if self.idle else None

    def take_back(self, address: Address, link: Link) -> bool:
        """``link`` out of the pool, if it is idle there."""
        idle = self.idle.get(address, [])
        for entry in idle:
            if entry[1] is link:
                idle.remove(entry)
                return True
        return False

    def close(self) -> None:
        if self.sweep is not None:
            self.sweep.cancel()
            self.sweep = None
        for idle in self.idle.values():
            for _, link in idle:
                link.close()
        self.idle.clear()


class Answer:
    """A backend's answer: its status line and headers at once, its body (decoded of its framing) read
    as it comes. Reading it to its end gives the connection back to the pool when it may carry another
    request; ``close`` drops it."""

    def __init__(self, pool: Pool, address: Address, link: Link, method: str, url: str, head_bytes: bytes) -> None:
        head = response_head(head_bytes)
        self.pool, self.address, self.link, self.url = pool, address, link, url
        self.status, self.reason, self.headers = head.status, head.reason, head.headers
        self.length = response_body_length(method, head)
        self.remaining = self.length
        self.reusable = head.version == "HTTP/1.1" and "close" not in head.headers.tokens("Connection")
        self.pending = bytearray()
        """Body already read (by ``readline``) and not yet taken."""
        self.ended = self.length == 0
        self.closed = False
        self.scan = SCAN_SIZE
        self.left = 0
        if self.ended:
            self.finish()

    @property
    def content_type(self) -> str:
        """The media type alone, lowercased (aiohttp's ``ClientResponse.content_type``)."""
        value = self.headers.get("Content-Type")
        return value.partition(";")[0].strip().lower() if value else "application/octet-stream"

    def finish(self) -> None:
        self.ended = True
        if not self.closed:
            self.closed = True
            if self.reusable and self.length != UNTIL_CLOSE:
                self.pool.give_back(self.address, self.link)
            else:
                self.link.close()

    def close(self) -> None:
        """Drop the connection: an answer not read to its end, or one whose connection must not carry
        another request (a refusal's, refusals.read_ahead), even when it was given back already and is
        still idle in the pool."""
        if not self.closed:
            self.closed = True
            self.link.close()
        elif self.pool.take_back(self.address, self.link):
            self.link.close()

    async def piece(self) -> bytes:
        """The next piece of the body as framed off the wire (b"" at its end); ``DisconnectedError`` when the
        connection closed before the body was whole."""
        if self.ended:
            return b""
        inbox = self.link.inbox
        try:
            if self.length == CHUNKED:
                data = await next_chunk(inbox)
                if data is None:
                    self.finish()
                    return b""
                return data
            data = await inbox.some(READ_SIZE if self.length == UNTIL_CLOSE else min(self.remaining, READ_SIZE))
        except (EOFError, BadMessageError) as failure:
            self.close()
            raise DisconnectedError(f"{self.url}: the answer's body was cut short ({failure})") from None
        if self.length == UNTIL_CLOSE:
            if not data:
                self.finish()
            return data
        if not data:
            self.close()
            raise DisconnectedError(f"{self.url}: the answer's body was cut short")
        self.remaining -= len(data)
        if self.remaining == 0:
            self.finish()
        return data

    async def passed(self) -> bytes:
        """The body's next bytes as they came off the wire, framing included (a chunked body's chunk sizes,
        last chunk and trailers), so that they can be passed on without being decoded and encoded again;
        b"" at its end. Only from a chunk's start (what ``piece`` and ``readline`` leave), with nothing
        ``pending``. ``DisconnectedError`` when the connection closed before the body was whole."""
        assert not self.pending, "passed() after readline() must take pending first"
        if self.ended:
            return b""
        if self.length != CHUNKED:
            return await self.piece()
        inbox = self.link.inbox
        while True:
            buffer = inbox.buffer
            try:
                end = self.scanned(buffer)
            except BadMessageError as bad:
                self.close()
                raise DisconnectedError(f"{self.url}: not a chunked body ({bad})") from None
            if end:
                data = inbox.take(end)
                if self.scan == SCAN_DONE:
                    self.finish()
                return data
            try:
                await inbox.more()
            except EOFError:
                self.close()
                raise DisconnectedError(f"{self.url}: the answer's body was cut short") from None

    def scanned(self, buffer: bytearray) -> int:
        """How much of ``buffer`` is whole chunked framing and data (``scan`` and ``left`` carried from one
        call to the next: within a chunk's data ``left`` bytes remain, then its CRLF)."""
        position, size = 0, len(buffer)
        while position < size and self.scan != SCAN_DONE:
            if self.scan == SCAN_DATA:
                step = min(self.left, size - position)
                position += step
                self.left -= step
                if self.left:
                    break
                self.scan = SCAN_CRLF
            elif self.scan == SCAN_CRLF:
                if size - position < 2:
                    break
                if buffer[position : position + 2] != CRLF:
                    raise BadMessageError(502, "a chunk not followed by CRLF")
                position += 2
                self.scan = SCAN_SIZE
            else:
                end = buffer.find(CRLF, position)
                if end < 0:
                    if size - position > LINE_LIMIT:
                        raise BadMessageError(502, "a chunk-size or trailer line too long")
                    break
                line = bytes(buffer[position:end])
                position = end + 2
                if self.scan == SCAN_TRAILERS:
                    if not line:
                        self.scan = SCAN_DONE
                    continue
                size_text = line.partition(b";")[0].strip(b" \t")
                if HEX.fullmatch(size_text) is None:
                    raise BadMessageError(502, f"not a chunk size: {line[:40]!r}")
                self.left = int(size_text, 16)
                self.scan = SCAN_DATA if self.left else SCAN_TRAILERS
        return position

    async def data(self) -> bytes:
        """What ``readline`` read ahead, else the next piece."""
        if self.pending:
            data = bytes(self.pending)
            self.pending.clear()
            return data
        return await self.piece()

    async def readline(self) -> bytes:
        """The body up to and with its next LF (the rest at its end; b"" once nothing is left)."""
        while (end := self.pending.find(b"\n")) < 0:
            data = await self.piece()
            if not data:
                line = bytes(self.pending)
                self.pending.clear()
                return line
            self.pending += data
        line = bytes(self.pending[: end + 1])
        del self.pending[: end + 1]
        return line

    async def read(self) -> bytes:
        parts = [bytes(self.pending)]
        self.pending.clear()
        while data := await self.piece():
            parts.append(data)
        return b"".join(parts)


async def request(
    pool: Pool,
    base: str,
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    fresh: bool = False,
) -> Answer:
    """``method target`` with ``headers`` and ``body`` to the backend at ``base`` (``http://HOST:PORT``):
    on a pooled connection unless ``fresh``; sent again on another connection when its own closed before
    any answer (``RESENT_ON_CLOSED`` times at most). Raises ``ConnectError``, ``DisconnectedError``."""
    address, host = addresses(base)
    lines = [f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n"]
    lines += [f"{name}: {value}\r\n" for name, value in headers]
    if body or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body)}\r\n")
    lines.append("\r\n")
    message = "".join(lines).encode("latin-1") + body
    for attempt in range(RESENT_ON_CLOSED + 1):
        link, reused = await pool.link(address, fresh)
        assert link.transport is not None
        link.transport.write(message)
        try:
            while True:
                head = await link.inbox.until(END_OF_HEAD, HEAD_LIMIT, 502)
                answer = Answer(pool, address, link, method, f"{base}{target}", head)
                if not 100 <= answer.status < 200:
                    return answer
        except EOFError:
            link.close()
            if attempt == RESENT_ON_CLOSED:
                raise DisconnectedError(f"{method} {base}{target}: the connection closed before an answer") from None
            LOG.info("%s %s%s: connection closed before an answer: sending it again", method, base, target)
            fresh = fresh or reused
        except BadMessageError as bad:
            link.close()
            raise DisconnectedError(f"{method} {base}{target}: not an HTTP answer ({bad})") from None
        except BaseException:
            link.close()
            raise
    raise AssertionError("unreachable")


_ADDRESSES: dict[str, tuple[Address, str]] = {}


def addresses(base: str) -> tuple[Address, str]:
    """``address_of``, remembered: a front talks to a handful of bases."""
    found = _ADDRESSES.get(base)
    if found is None:
        if len(_ADDRESSES) > 4096:  # pods come and go over a front's life
            _ADDRESSES.clear()
        found = _ADDRESSES[base] = address_of(base)
    return found
