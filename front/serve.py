"""The front's command line and its serving: the arguments, the serving port (front/listener.py), the
metrics port's application, and the drain on SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine, Sequence
from typing import Any

import aiohttp
from aiohttp import web

import front as package
from front.base import Front
from front.gate import Gate
from front.listener import Listener
from front.proxy import Proxy
from front.router import MODES
from front.upstream import Pool, address_of
from front.watch import ROLES, SERVER, Peers, Server, Watch

LOG = logging.getLogger("mooncake-proxy")
KEEPALIVE_TO_PEERS_SECONDS = 3.0
MAX_BODY_BYTES = 100 * 2**20
"""The largest request body taken (413 beyond): long prompts and inline images are megabytes."""


async def metrics_site(arguments: argparse.Namespace, proxy: Front) -> web.AppRunner:
    """``GET /metrics`` on its own port, so the serving port (open to the load balancer) serves none, and
    ``GET /health`` with what the serving port's leaves out (the prefill pods' addresses, engine ids)."""

    async def metrics(request: web.Request) -> web.Response:
        return await proxy.metrics(request)

    async def health(request: web.Request) -> web.Response:
        return await proxy.health(request, detail=True)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, arguments.host, arguments.metrics_port).start()
    return runner


def seconds(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=package.__doc__.splitlines()[0] if package.__doc__ else None)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--prefill-service", help="DNS name resolving to every prefill pod")
    parser.add_argument("--prefill-port", type=int, help="the prefill servers' HTTP port")
    parser.add_argument("--bootstrap-port", type=int, help="the prefill pods' Mooncake bootstrap port")
    parser.add_argument("--decode", help="URL of the decode Service")
    parser.add_argument("--forward", help="the gate: URL of the server Service every request goes to")
    parser.add_argument("--forward-health", default="/health", help="the server's health path (with --forward)")
    parser.add_argument(
        "--routing",
        choices=MODES,
        help="choose the backend of each request: prefix (the backend this front already sent the longest "
        "leading part of the prompt to, unless that would put it over 1.25 times the mean in flight), least-load "
        "(fewest requests in flight from this front) or random; the proxy's prefill engine, and with --decode-pods "
        "its decode pod; the gate's server pod (with --forward-pods)",
    )
    parser.add_argument(
        "--decode-pods",
        metavar="URL",
        help="with --routing: URL whose host resolves to every ready decode pod (a headless Service) and whose port "
        "is theirs; each decode goes to the pod the front chooses instead of through --decode",
    )
    parser.add_argument(
        "--forward-pods",
        metavar="URL",
        help="with --forward and --routing: URL whose host resolves to every ready server pod (a headless Service) "
        "and whose port is theirs; each request goes to the pod the gate chooses",
    )
    parser.add_argument("--refresh-seconds", type=float, default=2.0)
    parser.add_argument(
        "--probe-misses",
        type=positive,
        default=3,
        help="a backend whose health probes time out this many times in a row is out of rotation; until then it "
        "serves as it did (a refused connection or a non-200 answer takes it out at once)",
    )
    parser.add_argument(
        "--drain-seconds",
        type=seconds,
        default=120,
        help="after SIGTERM: how long the requests in flight may take to finish (new connections are refused and "
        "/health fails from the signal on); then the process exits",
    )
    parser.add_argument(
        "--keepalive-seconds", type=float, default=75.0, help="idle client connections are kept this long"
    )
    parser.add_argument("--metrics-port", type=int, help="serve GET /metrics (Prometheus text format) on this port")
    parser.add_argument(
        "--scale-to-zero",
        action="append",
        choices=(*ROLES, SERVER),
        default=[],
        metavar="ROLE",
        help="a role (prefill or decode; server with --forward) that may have no pod: while only such roles are "
        "missing, /health stays 200 and requests get 503 with Retry-After (repeatable)",
    )
    parser.add_argument(
        "--retry-after-seconds", type=seconds, default=30, help="the Retry-After of requests answered at zero"
    )
    arguments = parser.parse_args(argv)
    for flag, value in (("--decode-pods", arguments.decode_pods), ("--forward-pods", arguments.forward_pods)):
        if value is not None and arguments.routing is None:
            parser.error(f"{flag} needs --routing: without it the Service chooses the pod")
        if value is not None and not value.startswith(("http://", "https://")):
            parser.error(f"{flag} must be a URL (http://NAME:PORT), got {value!r}")
    split = {"--prefill-service": arguments.prefill_service, "--prefill-port": arguments.prefill_port}
    split |= {"--bootstrap-port": arguments.bootstrap_port, "--decode": arguments.decode}
    if arguments.forward is not None:
        given = [flag for flag, value in split.items() if value is not None]
        if given or arguments.decode_pods is not None:
            given += ["--decode-pods"] if arguments.decode_pods is not None else []
            parser.error(f"--forward sends every request to one server: {', '.join(given)} do not apply")
        if arguments.routing is not None and arguments.forward_pods is None:
            parser.error("--routing with --forward needs --forward-pods URL: the pods to choose between")
        if set(arguments.scale_to_zero) - {SERVER}:
            parser.error("with --forward, --scale-to-zero takes only server")
        if not arguments.forward_health.startswith("/"):
            parser.error(f"--forward-health must be a path starting with /, got {arguments.forward_health!r}")
        arguments.forward = arguments.forward.rstrip("/")
        plain_http(parser, {"--forward": arguments.forward, "--forward-pods": arguments.forward_pods})
        return arguments
    if arguments.forward_pods is not None:
        parser.error("--forward-pods needs --forward: it names the gate's server pods")
    absent = [flag for flag, value in split.items() if value is None]
    if absent:
        parser.error(f"the prefill/decode proxy needs {', '.join(absent)} (or --forward URL for the gate)")
    if SERVER in arguments.scale_to_zero:
        parser.error("--scale-to-zero server needs --forward")
    arguments.decode = arguments.decode.rstrip("/")
    plain_http(parser, {"--decode": arguments.decode, "--decode-pods": arguments.decode_pods})
    return arguments


def plain_http(parser: argparse.ArgumentParser, urls: dict[str, str | None]) -> None:
    """The backends' URLs are http:// (the data path speaks plain HTTP/1.1 to them: front/upstream.py)."""
    for flag, url in urls.items():
        try:
            if url is not None:
                address_of(url)
        except ValueError as bad:
            parser.error(f"{flag}: {bad}")


async def stopped() -> None:
    """Until SIGTERM (or SIGINT)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()


async def serve(arguments: argparse.Namespace) -> None:
    """Serves until SIGTERM (or SIGINT), then drains: the listening socket closes at once (new connections
    are refused, so readiness fails and the pod leaves its Service), idle connections close, /health on
    a connection still open answers 503 ``draining``, and the requests in flight (streams included) get
    ``--drain-seconds`` to finish before they are cancelled. The peers are still watched meanwhile: a
    request in flight may need a prefill again. In a pod, the preStop before SIGTERM has let the load
    balancer stop sending (components/render/drain.py).

    The serving port is the front's own data path (front/listener.py, front/upstream.py); the probes of
    the backends and the metrics port are aiohttp's."""
    # Idle connections are dropped before vLLM drops them (VLLM_HTTP_TIMEOUT_KEEP_ALIVE, 5 s), so a
    # request never goes out on a connection the server is closing.
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_TO_PEERS_SECONDS)
    session = aiohttp.ClientSession(connector=connector)
    pool = Pool(KEEPALIVE_TO_PEERS_SECONDS)
    front: Front
    watch: Watch
    if arguments.forward is not None:
        watch = server = Server(arguments, session)
        front = Gate(arguments, server, pool)
    else:
        watch = peers = Peers(arguments, session)
        front = Proxy(arguments, peers, pool)
    refresh = asyncio.create_task(watch.run())
    metrics = await metrics_site(arguments, front) if arguments.metrics_port is not None else None
    listener = Listener(front.handle, arguments.keepalive_seconds, MAX_BODY_BYTES)
    try:
        await listener.start(arguments.host, arguments.port)
        await stopped()
        front.draining = True
        LOG.info("draining: %d requests in flight, up to %d s", front.counts.in_flight, arguments.drain_seconds)
        await listener.drain(arguments.drain_seconds)
        LOG.info("drained")
    finally:
        if metrics is not None:
            await metrics.cleanup()
        refresh.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await refresh
        pool.close()
        await session.close()


def main(argv: Sequence[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(serve(arguments))


def run(main: Coroutine[Any, Any, None]) -> None:
    """``main`` on uvloop where the image has it (vLLM's and SGLang's do: the front's data path costs
    about a third less on it, docs/front.md), else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)
