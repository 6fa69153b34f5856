"""How a front passes requests and answers on: the client's headers forwarded but the hop-by-hop ones,
and a backend's answer relayed as it comes (with its headers but the hop-by-hop ones, or its status and
type alone)."""

from __future__ import annotations

import logging
from typing import Any

from front.http1 import CHUNKED
from front.listener import Incoming, Reply
from front.upstream import Answer, DisconnectedError

LOG = logging.getLogger("mooncake-proxy")
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer"}
    | {"transfer-encoding", "upgrade", "proxy-connection", "host", "content-length"}
)
"""Headers of one connection, not of the request (RFC 9110 section 7.6.1), never forwarded; the
host and length are those of the forwarded request (front/upstream.py ``request`` sets them)."""
RELAYED_DROPPED = HOP_BY_HOP - {"content-length"}
"""Of an answer relayed with its headers: its length is kept (a sized answer stays sized)."""
EXPECTATION = frozenset({"expect"})
"""A request's ``Expect: 100-continue`` is the front's to answer (it reads the whole body before it
forwards it: RFC 9110 section 10.1.1), never forwarded."""


def connection_headers(headers: Any) -> set[str]:
    """The headers ``headers`` name in its Connection header: of that connection only, never forwarded."""
    value = headers.get("Connection")
    return {name.strip().lower() for name in value.split(",")} if value else set()


def forwarded_headers(request: Incoming) -> list[tuple[str, str]]:
    """The client's headers but the hop-by-hop ones and the expectation, and who the client is."""
    dropped = HOP_BY_HOP | EXPECTATION | connection_headers(request.headers)
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in dropped]
    if request.remote:
        headers.append(("X-Forwarded-For", request.remote))
    return headers


async def relayed(incoming: Incoming, reply: Reply, answer: Answer, read: bytes, forward_headers: bool) -> None:
    """``answer`` to the client as it comes: its status and reason, and with ``forward_headers`` every header
    but the hop-by-hop ones (else its content type alone); its body (``read`` first: what was read of it
    ahead, refusals.read_ahead) streamed, sized when it was, passed on as it came when it can be. A body cut
    short leaves the client's answer unfinished (its connection closes)."""
    try:
        if forward_headers:
            dropped = RELAYED_DROPPED | connection_headers(answer.headers)
            headers = [(k, v) for k, v in answer.headers.items() if k.lower() not in dropped]
        else:
            content_type = answer.headers.get("Content-Type")
            headers = [("Content-Type", content_type)] if content_type else []
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
    except DisconnectedError as cut:
        LOG.warning("%s", cut)
    finally:
        if not answer.ended:
            answer.close()
