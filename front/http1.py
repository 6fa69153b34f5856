"""HTTP/1.1 framing for the front's own data path (RFC 9112): a message's head parsed, its body's framing
read from its headers, a chunked body decoded, and the bytes of a connection read as they arrive.

Strict on what a client sends: one request line of three parts, header names that are tokens, no line
folding, no bare CR or LF, Content-Length and Transfer-Encoding never together, chunked the only
transfer coding. Anything else is a ``BadMessageError`` the server answers with its status and then closes
the connection, because where one message ends can no longer be known. What a backend answers is read
as leniently as the RFC allows a client (a missing reason phrase, a close-delimited body)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

HEAD_LIMIT = 64 * 2**10
"""The longest head (request or status line and headers) read: larger is 431."""
LINE_LIMIT = 8 * 2**10
"""The longest chunk-size line or trailer line of a chunked body."""
TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
"""A method or a header name (RFC 9110 section 5.6.2)."""
HEADER_LINE = re.compile(TOKEN + r":[^\r\n\x00]*")
HEADER_BLOCK = re.compile(r"(?:" + TOKEN + r":[^\r\n\x00]*\r\n)*")
"""Header lines, each a name, a colon and a value: no line folding, no bare CR or LF, no NUL."""
REQUEST_LINE = re.compile(r"(" + TOKEN + r") ([\x21-\x7e]+) (HTTP/1\.[01])\r\n")
"""A method, a target of visible ASCII (no white space or control character), a version served."""
VERSION = re.compile(r"HTTP/\d\.\d")
STATUS_LINE = re.compile(r"(HTTP/1\.\d) (\d{3})(?: ([^\r\n]*))?\r\n")
HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
CRLF = b"\r\n"
END_OF_HEAD = b"\r\n\r\n"


class BadMessageError(Exception):
    """A message whose framing cannot be read; ``status`` is what a server answers it with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Headers:
    """A message's headers in order, as they came (names and values as text), looked up by name in any case."""

    __slots__ = ("index", "items_")

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self.items_ = items
        self.index: dict[str, str] = {}
        for name, value in items:
            key = name.lower()
            # Repeated fields are one list (RFC 9110 section 5.3), as aiohttp's getone would not give them.
            self.index[key] = f"{self.index[key]}, {value}" if key in self.index else value

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.index.get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self.index

    def items(self) -> list[tuple[str, str]]:
        return self.items_

    def tokens(self, name: str) -> set[str]:
        """A list-valued field's elements, lowercased (Connection, Transfer-Encoding)."""
        value = self.index.get(name.lower())
        if not value:
            return set()
        return {token.strip().lower() for token in value.split(",") if token.strip()}


def header_lines(text: str, status: int) -> Headers:
    """The header lines of a head decoded as Latin-1, each ending in CRLF; ``BadMessageError(status)``
    unless every one is a token, a colon and a value without CR, LF or NUL (no line folding)."""
    if HEADER_BLOCK.fullmatch(text) is None:
        bad = next((line for line in text.split("\r\n") if HEADER_LINE.fullmatch(line) is None), text)
        raise BadMessageError(status, f"not a header line: {bad[:80]!r}")
    items = []
    for line in text.split("\r\n")[:-1]:
        name, _, value = line.partition(":")
        items.append((name, value.strip(" \t")))
    return Headers(items)


@dataclass(slots=True)
class RequestHead:
    method: str
    target: str
    """The request target as sent: path and query."""
    version: str
    headers: Headers

    @property
    def path(self) -> str:
        return self.target.partition("?")[0]

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.tokens("Connection")
        if self.version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection


def request_head(head: bytes) -> RequestHead:
    """A request's head (without its final empty line); raises ``BadMessageError``."""
    text = head.decode("latin-1").lstrip("\r\n") + "\r\n"  # an empty line before it is ignored (RFC 9112 2.2)
    line = REQUEST_LINE.match(text)
    if line is None:
        first = text.partition("\r\n")[0]
        version = first.rpartition(" ")[2]
        if VERSION.fullmatch(version) and version not in ("HTTP/1.0", "HTTP/1.1"):
            raise BadMessageError(505, f"HTTP version {version!r} is not served (HTTP/1.1 and HTTP/1.0 are)")
        raise BadMessageError(400, f"not a request line: {first[:80]!r}")
    method, target, version = line.groups()
    return RequestHead(method, target, version, header_lines(text[line.end() :], 400))


@dataclass(slots=True)
class ResponseHead:
    status: int
    reason: str
    version: str
    headers: Headers


def response_head(head: bytes) -> ResponseHead:
    """A backend's status line and headers; raises ``BadMessageError`` (then the backend's answer is unusable)."""
    text = head.decode("latin-1") + "\r\n"
    line = STATUS_LINE.match(text)
    if line is None:
        raise BadMessageError(502, f"not a status line: {text.partition(chr(13))[0][:80]!r}")
    version, status, reason = line.groups()
    return ResponseHead(int(status), reason or "", version, header_lines(text[line.end() :], 502))


CHUNKED = -1
"""``body_length`` of a chunked body."""
UNTIL_CLOSE = -2
"""``body_length`` of a response body that ends when its connection closes."""


def content_length(headers: Headers) -> int | None:
    value = headers.get("Content-Length")
    if value is None:
        return None
    if value.isdigit() and len(value) <= 18:
        return int(value)
    values = {part.strip() for part in value.split(",")}
    if len(values) != 1 or not (only := values.pop()).isdigit() or len(only) > 18:
        raise BadMessageError(400, f"Content-Length is not one number: {value[:40]!r}")
    return int(only)


def request_body_length(head: RequestHead) -> int:
    """How the request's body is framed: its length, or ``CHUNKED``; raises ``BadMessageError``."""
    if "Transfer-Encoding" in head.headers:
        if "Content-Length" in head.headers:
            raise BadMessageError(400, "Content-Length and Transfer-Encoding together")
        if (head.headers.get("Transfer-Encoding") or "").strip().lower() != "chunked" or head.version == "HTTP/1.0":
            raise BadMessageError(501, "the only transfer coding served is chunked (on HTTP/1.1)")
        return CHUNKED
    return content_length(head.headers) or 0


def response_body_length(method: str, head: ResponseHead) -> int:
    """How a backend's answer to ``method`` is framed (RFC 9112 section 6.3): 0, a length, ``CHUNKED`` or
    ``UNTIL_CLOSE``."""
    if method == "HEAD" or head.status in (204, 304) or 100 <= head.status < 200:
        return 0
    if "Transfer-Encoding" in head.headers:
        codings = [c.strip().lower() for c in (head.headers.get("Transfer-Encoding") or "").split(",")]
        return CHUNKED if codings[-1] == "chunked" else UNTIL_CLOSE
    length = content_length(head.headers)
    return UNTIL_CLOSE if length is None else length


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body."""
    return b"%x\r\n%b\r\n" % (len(data), data)


LAST_CHUNK = b"0\r\n\r\n"


class Inbox:
    """What a connection's peer sent and the front has not read yet, filled by its protocol's
    ``data_received``; reading waits for more. Reading is paused while more than ``high`` bytes wait."""

    __slots__ = ("buffer", "eof", "high", "paused", "transport", "waiter")

    def __init__(self, high: int = 2**20) -> None:
        self.buffer = bytearray()
        self.waiter: asyncio.Future[None] | None = None
        self.eof = False
        self.transport: asyncio.Transport | None = None
        self.paused = False
        self.high = high

    def feed(self, data: bytes) -> None:
        self.buffer += data
        if self.transport is not None and not self.paused and len(self.buffer) > self.high:
            self.paused = True
            self.transport.pause_reading()
        self.wake()

    def end(self) -> None:
        self.eof = True
        self.wake()

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def more(self) -> None:
        """Waits for more bytes; raises ``EOFError`` when the peer closed and nothing more will come."""
        if self.eof:
            raise EOFError("the connection closed")
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    def take(self, size: int) -> bytes:
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    async def until(self, separator: bytes, limit: int, status: int = 431) -> bytes:
        """The bytes before ``separator`` (which is consumed too); ``BadMessageError(status)`` past ``limit``."""
        start = 0
        while (end := self.buffer.find(separator, start)) < 0:
            if len(self.buffer) > limit:
                raise BadMessageError(status, f"a head or line over {limit} bytes")
            start = max(0, len(self.buffer) - len(separator) + 1)
            await self.more()
        if end > limit:
            raise BadMessageError(status, f"a head or line over {limit} bytes")
        data = self.take(end)
        del self.buffer[: len(separator)]
        return data

    async def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            await self.more()
        return self.take(size)

    async def some(self, most: int) -> bytes:
        """Whatever has come, up to ``most`` bytes (b"" only at the end)."""
        while not self.buffer:
            if self.eof:
                return b""
            await self.more()
        return self.take(most)


async def chunked_body(inbox: Inbox, limit: int | None = None) -> list[bytes]:
    """A whole chunked body's data, its trailers read and dropped; ``BadMessageError(413)`` past ``limit``."""
    parts: list[bytes] = []
    total = 0
    while (data := await next_chunk(inbox)) is not None:
        total += len(data)
        if limit is not None and total > limit:
            raise BadMessageError(413, f"the body is over {limit} bytes")
        parts.append(data)
    return parts


async def next_chunk(inbox: Inbox) -> bytes | None:
    """One chunk's data of a chunked body; None after its last chunk and trailers."""
    line = await inbox.until(CRLF, LINE_LIMIT, 400)
    size_text = line.partition(b";")[0].strip(b" \t")
    if HEX.fullmatch(size_text) is None:
        raise BadMessageError(400, f"not a chunk size: {line[:40]!r}")
    size = int(size_text, 16)
    if size == 0:
        while await inbox.until(CRLF, LINE_LIMIT, 400):  # trailers, up to the empty line
            pass
        return None
    data = await inbox.exactly(size + 2)
    if data[-2:] != CRLF:
        raise BadMessageError(400, "a chunk not followed by CRLF")
    return data[:-2]
