"""The prefill/decode proxy of a split Mooncake endpoint (modes ``disaggregated`` and ``both``).

This file is a program, not part of the rendering: ``components/render/proxy.py`` puts its
text into the ConfigMap ``<name>-proxy`` and the proxy pods run it with ``python3`` from the
endpoint's vLLM image. It needs only the standard library and aiohttp, which the vLLM image
carries (vLLM's requirements/common.txt), and nothing in the Pulumi program imports it.

A request: prefill on one prefill engine (``max_tokens`` 1, ``kv_transfer_params`` with
``do_remote_decode`` and a transfer id), then decode through the decode Service with that
engine's bootstrap address and engine id (``do_remote_prefill``), the decode's answer
streamed back. The decoder pulls the KV from the very engine that prefilled it.

Peers (docs/design.md, decision 16: every process survives its peers' restarts): every
``--refresh-seconds`` the prefill pods are the addresses the headless Service's name resolves
to (every pod, ready or not: the Service publishes not-ready addresses), so pods an
autoscaler adds or removes are found like any other. A pod takes requests while its
``/health`` answers 200 and its bootstrap server's ``/query`` names its engines. vLLM gives an
engine a new id at every start, so the ids are read again at every refresh, and at once
after a prefill or decode fails. ``/health`` is 200 only while at least one prefill engine
and the decode Service answer (or only roles at zero are missing, below), so Kubernetes and the
load balancer take a proxy that cannot serve out of rotation. Its body also says how many
requests decode has answered through this process (``answered``), which ``fleetctl verify``
reads to measure a canary set's share.

Scale to zero (docs/mooncake-proxy.md): the roles named by ``--scale-to-zero`` may have no pod
at all, their autoscaler waking them on the requests this proxy counts. While every missing
role is one of them, ``/health`` stays 200 (the proxy must stay in rotation to see the demand)
and names them under ``scaled_to_zero``, and a completion request is answered at once with 503,
``Retry-After`` and the error type ``scaled_to_zero``. A missing role not named there leaves
``/health`` at 503 and the requests with the 503s above.

With ``--metrics-port``, ``GET /metrics`` on that port serves the Prometheus text exposition
(format 0.0.4, written here: no client library) of four series, every one present from start:
the completion requests received (on arrival, whatever their answer), those answered 503
because a role had no serving pod (per ``backend``), the decode answers relayed (``answered``)
and the requests in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

LOG = logging.getLogger("mooncake-proxy")
PROBE_TIMEOUT = aiohttp.ClientTimeout(total=2)
RESOLVE_TIMEOUT_SECONDS = 10.0
CONCURRENT_PROBES = 64
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=5)
"""A generation may take minutes; only connecting is bounded."""
KEEPALIVE_TO_PEERS_SECONDS = 3.0
MAX_BODY_BYTES = 100 * 2**20
"""Long prompts and inline images exceed aiohttp's default limit of 1 MiB."""
COMPLETION_PATHS = ("/v1/completions", "/v1/chat/completions")
ROLES = ("prefill", "decode")
SCALED_TO_ZERO = "scaled_to_zero"
"""The error type of a request answered while its roles are at zero, and /health's key naming them."""

REQUESTS = "inference_fleet_proxy_requests_total"
UNSERVED = "inference_fleet_proxy_unserved_requests_total"
ANSWERED = "inference_fleet_proxy_answered_total"
IN_FLIGHT = "inference_fleet_proxy_requests_in_flight"
"""The series of /metrics (components/metric_table.py holds the same names for the rendering; a test
holds them equal: this program runs alone in its pod and imports nothing of ours)."""
EXPOSITION_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Engine:
    """One prefill engine: a data-parallel rank of a prefill pod, under its current id."""

    host: str
    """The pod's address as it goes into a URL (an IPv6 address in brackets)."""
    rank: int
    engine_id: str


def url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def engines_of(host: str, query: Any) -> list[Engine]:
    """The engines named by a bootstrap server's ``/query`` answer, which maps each
    data-parallel rank to ``{"engine_id": ..., "worker_addr": {tp: {pp: address}}}``."""
    if not isinstance(query, dict):
        return []
    engines = []
    for rank, entry in query.items():
        engine_id = entry.get("engine_id") if isinstance(entry, dict) else None
        if str(rank).isdigit() and isinstance(engine_id, str) and engine_id:
            engines.append(Engine(host, int(rank), engine_id))
    return sorted(engines, key=lambda engine: engine.rank)


def error(status: int, message: str) -> web.Response:
    """An error in the OpenAI API's shape, as vLLM answers them."""
    kind = "invalid_request_error" if status < 500 else "service_unavailable"
    return web.json_response({"error": {"message": message, "type": kind, "code": status}}, status=status)


def scaled_to_zero(missing: Sequence[str], retry_after_seconds: int) -> web.Response:
    """The answer while ``missing`` (roles of --scale-to-zero) have no pod: this request wakes them."""
    roles = " and ".join(missing)
    woken = "them" if len(missing) > 1 else "it"
    message = f"{roles} scaled to zero: this request wakes {woken}; retry in a few minutes"
    return web.json_response(
        {"error": {"message": message, "type": SCALED_TO_ZERO, "code": 503}},
        status=503,
        headers={"Retry-After": str(retry_after_seconds)},
    )


@dataclass
class Counts:
    """What /metrics exports, since this process started."""

    requests: int = 0
    """Completion requests received, counted on arrival whatever their answer."""
    answered: int = 0
    """Requests whose decode answer this process relayed."""
    in_flight: int = 0
    unserved: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    """Per role: requests answered 503 because it had no serving pod."""

    def unserved_by(self, roles: Sequence[str]) -> None:
        for role in roles:
            self.unserved[role] += 1


def exposition(counts: Counts) -> str:
    """The Prometheus text exposition format 0.0.4 of ``counts``: every series, zeros included."""
    families: list[tuple[str, str, str, list[tuple[str, int]]]] = [
        (REQUESTS, "counter", "Completion requests received, whatever their answer.", [("", counts.requests)]),
        (
            UNSERVED,
            "counter",
            "Completion requests answered 503 because the backend role had no serving pod.",
            [(f'{{backend="{role}"}}', counts.unserved[role]) for role in ROLES],
        ),
        (ANSWERED, "counter", "Decode answers relayed to clients.", [("", counts.answered)]),
        (IN_FLIGHT, "gauge", "Completion requests being answered.", [("", counts.in_flight)]),
    ]
    lines = []
    for name, kind, meaning, samples in families:
        lines += [f"# HELP {name} {meaning}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{labels} {value}" for labels, value in samples]
    return "\n".join(lines) + "\n"


class Peers:
    """What the proxy knows of its peers: the usable prefill engines per pod, and whether
    the decode Service answers. Only the refresh loop replaces it; a failed request takes
    a pod out at once and wakes the loop."""

    def __init__(self, arguments: argparse.Namespace, session: aiohttp.ClientSession) -> None:
        self.arguments = arguments
        self.session = session
        self.engines: dict[str, list[Engine]] = {}
        self.decode_up = False
        self.known = False
        """Whether a refresh has completed: before it, no role is known to be missing."""
        self.turn = itertools.count()
        self.wake = asyncio.Event()
        self.probes = asyncio.Semaphore(CONCURRENT_PROBES)

    def prefill_url(self, host: str) -> str:
        return f"http://{host}:{self.arguments.prefill_port}"

    def bootstrap_url(self, host: str) -> str:
        return f"http://{host}:{self.arguments.bootstrap_port}"

    @property
    def ready(self) -> bool:
        return bool(self.engines) and self.decode_up

    def missing(self) -> list[str]:
        """The roles with no serving pod: prefill without an engine, decode while its Service does not answer."""
        up = {"prefill": bool(self.engines), "decode": self.decode_up}
        return [role for role in ROLES if not up[role]]

    def state(self) -> dict[str, Any]:
        return {
            "prefill": {host: {str(e.rank): e.engine_id for e in engines} for host, engines in self.engines.items()},
            "decode": self.decode_up,
        }

    async def resolve(self) -> list[str]:
        """Every prefill pod's address (none while the Service has no pod: the name does not resolve)."""
        loop = asyncio.get_running_loop()
        lookup = loop.getaddrinfo(self.arguments.prefill_service, None, type=socket.SOCK_STREAM)
        try:
            answers = await asyncio.wait_for(lookup, RESOLVE_TIMEOUT_SECONDS)
        except (TimeoutError, OSError):
            return []
        return sorted({url_host(str(answer[4][0])) for answer in answers})

    async def answers(self, url: str) -> bool:
        try:
            async with self.session.get(url, timeout=PROBE_TIMEOUT) as response:
                return response.status == 200
        except (TimeoutError, aiohttp.ClientError, ValueError):
            return False

    async def probe(self, host: str) -> list[Engine]:
        """The pod's engines under their current ids; none unless it serves and names them."""
        async with self.probes:
            if not await self.answers(f"{self.prefill_url(host)}/health"):
                return []
            try:
                async with self.session.get(f"{self.bootstrap_url(host)}/query", timeout=PROBE_TIMEOUT) as response:
                    if response.status != 200:
                        return []
                    return engines_of(host, await response.json(content_type=None))
            except (TimeoutError, aiohttp.ClientError, ValueError):
                return []

    async def refresh(self) -> None:
        hosts = await self.resolve()
        found = await asyncio.gather(*(self.probe(host) for host in hosts))
        engines = {host: listed for host, listed in zip(hosts, found, strict=True) if listed}
        self.decode_up = await self.answers(f"{self.arguments.decode}/health")
        for host in sorted(engines.keys() | self.engines.keys()):
            if engines.get(host) != self.engines.get(host):
                ids = [engine.engine_id for engine in engines.get(host, [])]
                LOG.info("prefill %s: %s", host, f"engines {ids}" if ids else "out of rotation")
        self.engines = engines
        self.known = True

    async def run(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception:  # the loop must outlive anything a peer answers
                LOG.exception("refreshing the peers failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.arguments.refresh_seconds)
            self.wake.clear()

    def pick(self, tried: set[str]) -> Engine | None:
        """The next engine in turn, of a pod not ``tried`` yet."""
        candidates = [
            engine for host, engines in sorted(self.engines.items()) if host not in tried for engine in engines
        ]
        if not candidates:
            return None
        return candidates[next(self.turn) % len(candidates)]

    def suspect(self, host: str) -> None:
        """Out of rotation until a refresh finds it serving again, which starts now."""
        self.engines.pop(host, None)
        self.wake.set()

    async def still_current(self, engine: Engine) -> bool:
        """Whether ``engine`` still runs under its id, asked of its pod now."""
        engines = await self.probe(engine.host)
        if engines:
            self.engines[engine.host] = engines
        else:
            self.suspect(engine.host)
        return engine in engines


class Proxy:
    def __init__(self, arguments: argparse.Namespace, peers: Peers, session: aiohttp.ClientSession) -> None:
        self.decode = arguments.decode
        self.peers = peers
        self.session = session
        self.key = os.environ.get("VLLM_API_KEY")
        self.scale_to_zero = frozenset(arguments.scale_to_zero)
        self.retry_after_seconds: int = arguments.retry_after_seconds
        self.counts = Counts()

    def headers(self, request_id: str) -> dict[str, str]:
        headers = {"X-Request-Id": request_id}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        return headers

    def at_zero(self) -> list[str]:
        """The missing roles, when every one of them may be at zero (else none: the proxy cannot serve)."""
        missing = self.peers.missing()
        if self.peers.known and self.scale_to_zero.issuperset(missing):
            return missing
        return []

    async def health(self, request: web.Request) -> web.Response:
        state: dict[str, Any] = {**self.peers.state(), "answered": self.counts.answered}
        at_zero = self.at_zero()
        if self.scale_to_zero:
            state[SCALED_TO_ZERO] = at_zero
        return web.json_response(state, status=200 if self.peers.ready or at_zero else 503)

    async def metrics(self, request: web.Request) -> web.Response:
        # Content-Type set whole: aiohttp's content_type argument would not take the version parameter.
        return web.Response(text=exposition(self.counts), headers={"Content-Type": EXPOSITION_TYPE})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        self.counts.requests += 1
        self.counts.in_flight += 1
        try:  # whatever ends the request: an answer, an error, the client gone (cancelled)
            return await self.complete(request)
        finally:
            self.counts.in_flight -= 1

    async def complete(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return error(400, "the request body must be a JSON object")
        if at_zero := self.at_zero():
            self.counts.unserved_by(at_zero)
            return scaled_to_zero(at_zero, self.retry_after_seconds)
        retried = False
        while True:
            request_id = uuid.uuid4().hex
            prefilled = await self.prefill(request.path, body, request_id)
            if isinstance(prefilled, web.Response):
                return prefilled
            engine = prefilled
            payload = {
                **body,
                "kv_transfer_params": {
                    "do_remote_decode": False,
                    "do_remote_prefill": True,
                    "remote_bootstrap_addr": self.peers.bootstrap_url(engine.host),
                    "remote_engine_id": engine.engine_id,
                    "transfer_id": f"xfer-{request_id}",
                },
            }
            url = f"{self.decode}{request.path}"
            try:
                answer = await self.session.post(
                    url, json=payload, headers=self.headers(request_id), timeout=REQUEST_TIMEOUT
                )
            except (TimeoutError, aiohttp.ClientError) as failure:
                self.peers.decode_up = False
                self.peers.wake.set()
                self.counts.unserved_by(["decode"])
                return error(503, f"decode is unreachable: {failure}")
            if answer.status >= 500 and not retried and not await self.peers.still_current(engine):
                # The prefill pod restarted since the last refresh, so decode found no engine
                # under the id we named and the KV went with the old process: prefill again.
                answer.close()
                retried = True
                LOG.warning("prefill %s restarted under request %s: prefilling again", engine.host, request_id)
                continue
            self.counts.answered += 1
            return await self.relay(request, answer)

    async def prefill(self, path: str, body: dict[str, Any], request_id: str) -> Engine | web.Response:
        """The engine that prefilled the request, or the answer to give the client."""
        payload = {
            **body,
            "kv_transfer_params": {
                "do_remote_decode": True,
                "do_remote_prefill": False,
                "transfer_id": f"xfer-{request_id}",
            },
            "stream": False,
            "max_tokens": 1,
        }
        if "max_completion_tokens" in payload:
            payload["max_completion_tokens"] = 1
        payload.pop("stream_options", None)
        tried: set[str] = set()
        while (engine := self.peers.pick(tried)) is not None:
            tried.add(engine.host)
            headers = {**self.headers(request_id), "X-data-parallel-rank": str(engine.rank)}
            url = f"{self.peers.prefill_url(engine.host)}{path}"
            try:
                async with self.session.post(url, json=payload, headers=headers, timeout=REQUEST_TIMEOUT) as answer:
                    content = await answer.read()
                    if answer.status < 400:
                        return engine
                    if answer.status < 500:  # the request itself: no other prefill pod would take it
                        return web.Response(status=answer.status, body=content, content_type=answer.content_type)
                    reason = f"answered {answer.status}"
            except (TimeoutError, aiohttp.ClientError) as failure:
                reason = str(failure) or type(failure).__name__
            LOG.warning("prefill %s failed (%s): taken out of rotation", engine.host, reason)
            self.peers.suspect(engine.host)
        self.counts.unserved_by(["prefill"] if self.peers.decode_up else ["prefill", "decode"])
        return error(503, "no prefill instance is available")

    async def relay(self, request: web.Request, answer: aiohttp.ClientResponse) -> web.StreamResponse:
        """The decode's answer, streamed as it comes (server-sent events included)."""
        async with answer:
            response = web.StreamResponse(status=answer.status)
            response.content_type = answer.content_type
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response


PROXY = web.AppKey("proxy", Proxy)


def application(arguments: argparse.Namespace) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES)

    async def peers_and_session(app: web.Application) -> AsyncIterator[None]:
        # Idle connections are dropped before vLLM drops them (VLLM_HTTP_TIMEOUT_KEEP_ALIVE, 5 s), so a
        # request never goes out on a connection the server is closing.
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_TO_PEERS_SECONDS)
        session = aiohttp.ClientSession(connector=connector)
        peers = Peers(arguments, session)
        app[PROXY] = Proxy(arguments, peers, session)
        refresh = asyncio.create_task(peers.run())
        metrics = await metrics_site(arguments, app[PROXY]) if arguments.metrics_port is not None else None
        yield
        if metrics is not None:
            await metrics.cleanup()
        refresh.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await refresh
        await session.close()

    async def health(request: web.Request) -> web.Response:
        return await request.app[PROXY].health(request)

    async def completions(request: web.Request) -> web.StreamResponse:
        return await request.app[PROXY].completions(request)

    app.cleanup_ctx.append(peers_and_session)
    app.router.add_get("/health", health)
    for path in COMPLETION_PATHS:
        app.router.add_post(path, completions)
    return app


async def metrics_site(arguments: argparse.Namespace, proxy: Proxy) -> web.AppRunner:
    """``GET /metrics`` on its own port, so the serving port (open to the load balancer) serves none."""

    async def metrics(request: web.Request) -> web.Response:
        return await proxy.metrics(request)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, arguments.host, arguments.metrics_port).start()
    return runner


def seconds(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--prefill-service", required=True, help="DNS name resolving to every prefill pod")
    parser.add_argument("--prefill-port", type=int, required=True, help="the prefill servers' HTTP port")
    parser.add_argument("--bootstrap-port", type=int, required=True, help="the prefill pods' Mooncake bootstrap port")
    parser.add_argument("--decode", required=True, help="URL of the decode Service")
    parser.add_argument("--refresh-seconds", type=float, default=2.0)
    parser.add_argument(
        "--keepalive-seconds", type=float, default=75.0, help="idle client connections are kept this long"
    )
    parser.add_argument("--metrics-port", type=int, help="serve GET /metrics (Prometheus text format) on this port")
    parser.add_argument(
        "--scale-to-zero",
        action="append",
        choices=ROLES,
        default=[],
        metavar="ROLE",
        help="a role (prefill or decode) that may have no pod: while only such roles are missing, /health stays 200 "
        "and requests get 503 with Retry-After (repeatable)",
    )
    parser.add_argument(
        "--retry-after-seconds", type=seconds, default=30, help="the Retry-After of requests answered at zero"
    )
    arguments = parser.parse_args(argv)
    arguments.decode = arguments.decode.rstrip("/")
    return arguments


def main(argv: Sequence[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    web.run_app(
        application(arguments),
        host=arguments.host,
        port=arguments.port,
        keepalive_timeout=arguments.keepalive_seconds,
        handler_cancellation=True,  # a client that goes away cancels its decode
        access_log=None,
        print=None,
    )


if __name__ == "__main__":
    main()
