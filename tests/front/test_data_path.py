"""The gate's own HTTP/1.1 data path (front/http1.py, front/listener.py, front/upstream.py), byte by byte:
the gate in this process on loopback, a client on a raw socket, and a backend that answers with whatever
framing the test scripts (sized, chunked, close-delimited, cut short). What the rendered gate does as a
whole is tests/e2e/test_gate.py's; these are the edges a client, a load balancer or a server can bring.
The framing rules are RFC 9112's (sections 6 and 7)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from front.gate import Gate
from front.http1 import BadMessageError, request_body_length, request_head, response_head
from front.listener import Listener
from front.upstream import Pool
from front.watch import Server

HOST = "127.0.0.1"
Script = Callable[[bytes, asyncio.StreamWriter], Awaitable[bool]]
"""A backend's answer to one request (its head and body as received): writes it and says whether to keep
the connection."""


class Backend:
    """A raw HTTP/1.1 server: reads each request (head, and a body by Content-Length), answers by ``script``."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[bytes] = []
        self.ports: list[int] = []
        self.closed = asyncio.Event()
        """A connection closed by its client."""

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                self.ports.append(writer.get_extra_info("peername")[1])
                if not await self.script(head + body, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed.set()
        finally:
            writer.close()


def sized(body: bytes, extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def json_answer(value: Any) -> Script:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(sized(json.dumps(value).encode()))
        return True

    return script


@contextlib.asynccontextmanager
async def gate_before(
    backend: Backend, keepalive: float = 30.0, max_body: int = 2**20
) -> AsyncIterator[tuple[int, Listener]]:
    server = await asyncio.start_server(backend.connection, HOST, 0)
    url = f"http://{HOST}:{server.sockets[0].getsockname()[1]}"
    arguments = argparse.Namespace(
        forward=url, forward_pods=None, routing=None, scale_to_zero=[], retry_after_seconds=1, probe_misses=3
    )
    watch = Server(arguments, None)  # type: ignore[arg-type]  # no probes: the test says the server is up
    watch.known = watch.up = True
    pool = Pool(3.0)
    listener = Listener(Gate(arguments, watch, pool).handle, keepalive, max_body)
    await listener.start(HOST, 0)
    assert listener.server is not None
    try:
        yield listener.server.sockets[0].getsockname()[1], listener
    finally:
        await listener.drain(1)
        pool.close()
        server.close()


async def exchange(port: int, data: bytes, until_close: bool = True, wait: float = 5.0) -> bytes:
    """``data`` sent on a new connection; what came back until the gate closed it (or ``wait`` passed)."""
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(data)
    await writer.drain()
    received = b""
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), wait):
            received += chunk
    except TimeoutError:
        assert not until_close, f"the gate kept the connection open; received {received[:200]!r}"
    writer.close()
    return received


def run(test: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(test(), 30))


POST = b"POST /v1/completions HTTP/1.1\r\nHost: gate\r\nContent-Type: application/json\r\n"


def test_pipelined_requests_are_answered_in_order_on_one_kept_alive_backend_connection() -> None:
    answers = iter([{"n": 1}, {"n": 2}])

    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(sized(json.dumps(next(answers)).encode()))
        return True

    backend = Backend(script)

    async def test() -> bytes:
        async with gate_before(backend) as (port, _):
            one = POST + b"Content-Length: 2\r\n\r\n{}"
            return await exchange(port, one + one + b"GET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n")

    backend_script = backend.script

    async def with_models(request: bytes, writer: asyncio.StreamWriter) -> bool:
        if request.startswith(b"GET"):
            writer.write(sized(b'{"models": []}'))
            return True
        return await backend_script(request, writer)

    backend.script = with_models
    received = run(test)
    assert received.count(b"HTTP/1.1 200 OK") == 3
    assert received.index(b'{"n": 1}') < received.index(b'{"n": 2}') < received.index(b'{"models": []}')
    assert b"Connection: close" in received.rsplit(b"HTTP/1.1 200", 1)[1]  # the last answer says it closes
    assert len(set(backend.ports)) == 1  # one pooled connection to the backend for all three


def test_a_chunked_request_body_goes_to_the_server_sized_and_expect_100_continue_is_answered() -> None:
    backend = Backend(json_answer({"ok": True}))

    async def test() -> bytes:
        async with gate_before(backend) as (port, _):
            body = b'5\r\n{"a":\r\n3;ext=1\r\n 1}\r\n0\r\nX-Trailer: t\r\n\r\n'
            head = POST + b"Transfer-Encoding: chunked\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
            return await exchange(port, head + body)

    received = run(test)
    assert received.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
    (forwarded,) = backend.requests
    assert forwarded.endswith(b'Content-Length: 8\r\n\r\n{"a": 1}')
    assert b"transfer-encoding" not in forwarded.lower()
    assert b"expect" not in forwarded.lower().split(b"\r\n\r\n")[0]


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET / HTTP/1.1\r\nX-Folded: a\r\n b\r\n\r\n", 400),  # obsolete line folding
        (b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400),
        (b"GET /a b HTTP/1.1\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", 400),  # smuggling shape
        (b"POST / HTTP/1.1\r\nContent-Length: 2, 3\r\n\r\n{}", 400),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        (b"GET / HTTP/2.0\r\n\r\n", 505),
        (b"GET / HTTP/1.1\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n", 431),
        (POST + b"Content-Length: 2000000\r\n\r\n", 413),
    ],
    ids=["folding", "name", "target", "cl-and-te", "two-lengths", "gzip", "http2", "long-head", "large-body"],
)
def test_a_request_whose_framing_cannot_be_read_is_refused_and_its_connection_closed(
    request_bytes: bytes, status: int
) -> None:
    backend = Backend(json_answer({}))

    async def test() -> bytes:
        async with gate_before(backend) as (port, _):
            return await exchange(port, request_bytes)

    received = run(test)
    assert received.startswith(f"HTTP/1.1 {status} ".encode()), received[:80]
    assert b"Connection: close" in received
    assert json.loads(received.split(b"\r\n\r\n", 1)[1])["error"]["code"] == status
    assert backend.requests == []  # nothing reached the server


def test_a_chunked_stream_reaches_the_client_as_the_server_framed_it() -> None:
    """Passed on as it came (front/upstream.py ``Answer.passed``), chunk extensions and trailers included."""
    chunks = [b"data: one\n\n", b"data: two\n\n" * 3, b"data: [DONE]\n\n"]
    framed = b"".join(b"%x;e=1\r\n%b\r\n" % (len(c), c) for c in chunks) + b"0\r\nX-T: 1\r\n\r\n"

    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (framed[:3], framed[3:20], framed[20:]):  # split mid-line and mid-chunk
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.01)
        return True

    async def test() -> bytes:
        async with gate_before(Backend(script)) as (port, _):
            return await exchange(port, b"GET /v1/x HTTP/1.1\r\nConnection: close\r\n\r\n")

    received = run(test)
    head, body = received.split(b"\r\n\r\n", 1)
    assert b"Transfer-Encoding: chunked" in head
    assert body == framed


def test_an_http_1_0_client_gets_the_chunked_answer_decoded_and_the_connection_closed() -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        return True

    async def test() -> bytes:
        async with gate_before(Backend(script)) as (port, _):
            return await exchange(port, b"GET /v1/x HTTP/1.0\r\n\r\n")

    head, body = run(test).split(b"\r\n\r\n", 1)
    assert b"Connection: close" in head
    assert b"Transfer-Encoding" not in head
    assert body == b"abcde"


def test_a_close_delimited_answer_is_passed_on_chunked_and_a_cut_one_is_not_finished() -> None:
    def answering(cut: bool) -> Script:
        async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
            if cut:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
            else:
                writer.write(b"HTTP/1.0 200 OK\r\n\r\nuntil the end")
            return False  # the backend closes

        return script

    async def test(cut: bool) -> bytes:
        async with gate_before(Backend(answering(cut))) as (port, _):
            return await exchange(port, b"GET /v1/x HTTP/1.1\r\nConnection: close\r\n\r\n")

    whole = asyncio.run(test(False))
    head, body = whole.split(b"\r\n\r\n", 1)
    assert b"Transfer-Encoding: chunked" in head
    assert body == b"d\r\nuntil the end\r\n0\r\n\r\n"
    cut = asyncio.run(test(True))
    head, body = cut.split(b"\r\n\r\n", 1)
    assert b"Content-Length: 100" in head
    assert body == b"only part"


def test_a_head_request_gets_the_servers_length_and_no_body() -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n")
        if request.startswith(b"GET"):
            writer.write(b"x" * 1234)
        return True

    async def test() -> bytes:
        async with gate_before(Backend(script)) as (port, _):
            return await exchange(port, b"HEAD /v1/x HTTP/1.1\r\n\r\nGET /v1/x HTTP/1.1\r\nConnection: close\r\n\r\n")

    received = run(test)
    first, second = received.split(b"HTTP/1.1 200 OK\r\n")[1:]
    assert b"Content-Length: 1234" in first
    assert first.endswith(b"\r\n\r\n")
    assert second.endswith(b"\r\n\r\n" + b"x" * 1234)  # the connection went on, to the next answer


def test_a_client_gone_mid_stream_closes_the_servers_connection() -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        while True:
            writer.write(b"6\r\ndata:\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)

    backend = Backend(script)

    async def test() -> bool:
        async with gate_before(backend) as (port, _):
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(b"GET /v1/stream HTTP/1.1\r\n\r\n")
            await reader.readuntil(b"data:")
            writer.close()
            await asyncio.wait_for(backend.closed.wait(), 5)
            return backend.closed.is_set()

    assert run(test)


def test_an_idle_client_connection_is_closed_after_the_keepalive() -> None:
    async def test() -> tuple[bytes, float]:
        async with gate_before(Backend(json_answer({})), keepalive=0.3) as (port, _):
            loop = asyncio.get_running_loop()
            start = loop.time()
            received = await exchange(port, b"GET /v1/x HTTP/1.1\r\n\r\n")
            return received, loop.time() - start

    received, took = run(test)
    assert received.startswith(b"HTTP/1.1 200 OK")
    assert 0.3 <= took < 3


def test_the_drain_lets_a_request_in_flight_finish_and_refuses_new_connections() -> None:
    release = asyncio.Event()

    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        await release.wait()
        writer.write(sized(b'{"late": true}'))
        return True

    async def test() -> tuple[bytes, bool, bool]:
        async with gate_before(Backend(script)) as (port, listener):
            in_flight = asyncio.ensure_future(exchange(port, b"GET /v1/x HTTP/1.1\r\n\r\n"))
            idle_reader, idle_writer = await asyncio.open_connection(HOST, port)
            await asyncio.sleep(0.2)
            drained = asyncio.ensure_future(listener.drain(5))
            await asyncio.sleep(0.2)
            idle_closed = await asyncio.wait_for(idle_reader.read(), 2) == b""
            try:
                await asyncio.open_connection(HOST, port)
                refused = False
            except OSError:
                refused = True
            release.set()
            await drained
            idle_writer.close()
            return await in_flight, idle_closed, refused

    answered, idle_closed, refused = run(test)
    assert answered.startswith(b"HTTP/1.1 200 OK")
    assert b"Connection: close" in answered
    assert answered.endswith(b'{"late": true}')
    assert idle_closed
    assert refused


def test_a_backend_connection_closed_while_idle_costs_no_request() -> None:
    """As uvicorn drops an idle keep-alive connection (a draining vLLM): the request the pool had put on
    it goes again on a new one (front/upstream.py ``RESENT_ON_CLOSED``)."""
    served = 0

    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        nonlocal served
        served += 1
        if served == 2:
            return False  # closes the kept-alive connection without an answer, as a server closing it
        writer.write(sized(b"{}"))
        return True

    backend = Backend(script)

    async def test() -> list[bytes]:
        async with gate_before(backend) as (port, _):
            first = await exchange(port, b"GET /v1/x HTTP/1.1\r\nConnection: close\r\n\r\n")
            second = await exchange(port, b"GET /v1/x HTTP/1.1\r\nConnection: close\r\n\r\n")
            return [first, second]

    assert all(answer.startswith(b"HTTP/1.1 200 OK") for answer in run(test))
    assert served == 3
    assert len(set(backend.ports)) == 2


def test_the_parsers_read_what_the_rfc_allows_and_keep_the_headers_as_sent() -> None:
    head = request_head(
        b"\r\nPOST /v1/a?b=c HTTP/1.1\r\nX-A: 1\r\nx-a: 2\r\nContent-Length:  7 \r\nConnection: Keep-Alive, X-A"
    )
    assert (head.method, head.target, head.path, head.version) == ("POST", "/v1/a?b=c", "/v1/a", "HTTP/1.1")
    assert head.headers.items()[:2] == [("X-A", "1"), ("x-a", "2")]
    assert head.headers.get("x-A") == "1, 2"
    assert head.headers.tokens("connection") == {"keep-alive", "x-a"}
    assert request_body_length(head) == 7
    assert head.keep_alive
    assert not request_head(b"GET / HTTP/1.0").keep_alive
    answer = response_head(b"HTTP/1.1 204\r\nServer: s")
    assert (answer.status, answer.reason, answer.headers.get("server")) == (204, "", "s")
    with pytest.raises(BadMessageError):
        response_head(b"ICY 200 OK")
