"""How a front talks to its backends and answers its clients: a request sent (again on a fresh
connection when a draining server closed it under it), forwarded as it came but for the hop-by-hop
headers, an answer streamed back as it comes, and the errors it answers itself."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import aiohttp
from aiohttp import web

LOG = logging.getLogger("mooncake-proxy")
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=5)
"""A generation may take minutes; only connecting is bounded."""
RESENT_ON_CLOSED = 2
"""How many times a request is sent again on another connection when its own was closed before any answer."""
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer"}
    | {"transfer-encoding", "upgrade", "proxy-connection", "host", "content-length"}
)
"""Headers of one connection, not of the request (RFC 9110 section 7.6.1), never forwarded; the
host and length are those of the forwarded request, set by the client library."""


def connection_headers(headers: Any) -> set[str]:
    """The headers ``headers`` name in its Connection header: of that connection only, never forwarded."""
    value = headers.get("Connection")
    return {name.strip().lower() for name in value.split(",")} if value else set()


SCALED_TO_ZERO = "scaled_to_zero"
"""The error type of a request answered while its roles are at zero, and /health's key naming them."""


def error_value(status: int, message: str) -> dict[str, Any]:
    """An error in the OpenAI API's shape, as vLLM answers them."""
    kind = "invalid_request_error" if status < 500 else "service_unavailable"
    return {"error": {"message": message, "type": kind, "code": status}}


def error(status: int, message: str) -> web.Response:
    return web.json_response(error_value(status, message), status=status)


def scaled_to_zero_value(missing: Sequence[str]) -> dict[str, Any]:
    """The answer while ``missing`` (roles of --scale-to-zero) have no pod: this request wakes them; sent
    503 with ``Retry-After``."""
    roles = " and ".join(missing)
    woken = "them" if len(missing) > 1 else "it"
    message = f"{roles} scaled to zero: this request wakes {woken}; retry in a few minutes"
    return {"error": {"message": message, "type": SCALED_TO_ZERO, "code": 503}}


def scaled_to_zero(missing: Sequence[str], retry_after_seconds: int) -> web.Response:
    return web.json_response(
        scaled_to_zero_value(missing), status=503, headers={"Retry-After": str(retry_after_seconds)}
    )


async def sent(session: aiohttp.ClientSession, method: str, url: str, **options: Any) -> aiohttp.ClientResponse:
    """``session.request``, again on another connection when the one it took was closed under it before
    any answer (``RESENT_ON_CLOSED`` times at most). A server that drains (uvicorn on SIGTERM, as vLLM
    runs it) closes its idle keep-alive connections, and a request the pool had just put on one never
    reached it; a timeout or an answer is never sent again."""
    for attempt in range(RESENT_ON_CLOSED + 1):
        try:
            return await session.request(method, url, **options)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as closed:
            if isinstance(closed, TimeoutError) or attempt == RESENT_ON_CLOSED:
                raise
            LOG.info("%s %s: connection closed before an answer (%s): sending it again", method, url, closed)
    raise AssertionError("unreachable")


EXPECTATION = frozenset({"expect"})
"""A request's ``Expect: 100-continue`` is the front's to answer (it reads the whole body before it
forwards it: RFC 9110 section 10.1.1), never forwarded."""


def forwarded_headers(request: Any) -> list[tuple[str, str]]:
    """The client's headers but the hop-by-hop ones and the expectation, and who the client is (of an
    aiohttp ``web.Request`` or the front's own ``listener.Incoming``)."""
    dropped = HOP_BY_HOP | EXPECTATION | connection_headers(request.headers)
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in dropped]
    if request.remote:
        headers.append(("X-Forwarded-For", request.remote))
    return headers


async def forward(
    session: aiohttp.ClientSession, url: str, request: web.Request, headers: list[tuple[str, str]]
) -> aiohttp.ClientResponse:
    """``request`` as it came (method, query, body) to ``url``; raises what the session raises."""
    return await sent(
        session,
        request.method,
        url,
        headers=headers,
        data=await request.read() or None,
        # The client's headers only: none the client library would add (an Accept-Encoding the
        # client did not send would have the answer compressed for a client that cannot read it).
        skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"),
        allow_redirects=False,
        timeout=REQUEST_TIMEOUT,
    )


async def relay(
    request: web.Request, answer: aiohttp.ClientResponse, forward_headers: bool = False, head: bytes = b""
) -> web.StreamResponse:
    """A backend's answer, streamed as it comes (server-sent events included): its status and content
    type, and with ``forward_headers`` every header but the hop-by-hop ones (its length kept, so a
    sized answer stays sized); ``head`` is what was read of it already (refusals.read_ahead)."""
    async with answer:
        if forward_headers:
            dropped = (HOP_BY_HOP - {"content-length"}) | connection_headers(answer.headers)
            headers = [(k, v) for k, v in answer.headers.items() if k.lower() not in dropped]
            response = web.StreamResponse(status=answer.status, reason=answer.reason, headers=headers)
        else:
            response = web.StreamResponse(status=answer.status)
            response.content_type = answer.content_type
        await response.prepare(request)
        if head:
            await response.write(head)
        async for chunk in answer.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response
