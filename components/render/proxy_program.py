"""The prefill/decode proxy of a split Mooncake endpoint (modes ``disaggregated`` and ``both``),
and, with ``--forward``, the gate in front of a classic endpoint's server that may scale to zero.

This file is a program, not part of the rendering: ``components/render/proxy.py`` puts its
text into the ConfigMap ``<name>-proxy`` (``<name>-gate``) and those pods run it with ``python3``
from the endpoint's image. It needs only the standard library and aiohttp, which the vLLM image
carries (vLLM's requirements/common.txt), as does SGLang's (its wheel requires aiohttp), and nothing
in the Pulumi program imports it.

A request: prefill on one prefill engine (``max_tokens`` 1, ``min_tokens`` 1, ``kv_transfer_params``
with ``do_remote_decode`` and a transfer id), then decode through the decode Service with that
engine's bootstrap address and engine id (``do_remote_prefill``), the decode's answer
streamed back. The decoder pulls the KV from the very engine that prefilled it. A prefill that
finished other than at its length is the answer; ``n`` > 1 and prompt lists are refused 400
(``unsplittable``); the rest of vLLM's client surface goes to decode as it came (``FORWARDED_PATHS``).

Peers (docs/design.md, decision 16: every process survives its peers' restarts): every
``--refresh-seconds`` the prefill pods are the addresses the headless Service's name resolves
to (every pod, ready or not: the Service publishes not-ready addresses), so pods an
autoscaler adds or removes are found like any other. A pod takes requests while its
``/health`` answers 200 and its bootstrap server's ``/query`` names its engines. vLLM gives an
engine a new id at every start, so the ids are read again at every refresh, and at once
after a prefill or decode fails. ``/health`` is 200 only while at least one prefill engine
and the decode Service answer (or only roles at zero are missing, below), so Kubernetes and the
load balancer take a proxy that cannot serve out of rotation; a peer whose probes time out serves
as it did until ``--probe-misses`` in a row (``Silence``). Its body says how many engines serve, not
where (the metrics port's ``/health`` names the pods and engine ids), and how many requests this
process answered (``answered``), which ``fleetctl verify`` reads to measure a canary set's share.
SIGTERM drains (``serve``).

Scale to zero (docs/mooncake-proxy.md): the roles named by ``--scale-to-zero`` may have no pod
at all, their autoscaler waking them on the requests this proxy counts. While every missing
role is one of them, ``/health`` stays 200 (the proxy must stay in rotation to see the demand)
and names them under ``scaled_to_zero``, and a completion request is answered at once with 503,
``Retry-After`` and the error type ``scaled_to_zero``. A missing role not named there leaves
``/health`` at 503 and the requests with the 503s above.

The gate (``--forward URL``, docs/metrics.md "Scale to zero"): no prefill or decode; every request but
its own ``GET /health`` goes to ``URL`` as it came (method, path, query, body, headers but the
hop-by-hop ones), the answer streamed back with its status and headers, a client going away
cancelling the upstream request. The server is up while ``URL`` + ``--forward-health`` answers 200
(read every ``--refresh-seconds``); with ``--scale-to-zero server`` a missing server is answered as
above, and the series below count every forwarded request (``backend="server"``).

With ``--metrics-port``, ``GET /metrics`` on that port serves the Prometheus text exposition
(format 0.0.4, written here: no client library) of five series, every one present from start:
the completion requests received (on arrival, whatever their answer), those answered 503
because a role had no serving pod (per ``backend``), the decode answers relayed (``answered``),
the requests in flight and the time the last request arrived.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import socket
import time
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
RESENT_ON_CLOSED = 2
"""How many times a request is sent again on another connection when its own was closed before any answer."""
MAX_BODY_BYTES = 100 * 2**20
"""Long prompts and inline images exceed aiohttp's default limit of 1 MiB."""
COMPLETION_PATHS = ("/v1/completions", "/v1/chat/completions")
"""The routes split into a prefill and a decode (vLLM 0.33.0 entrypoints/openai/completion/api_router.py
and chat_completion/api_router.py)."""
FORWARDED_PATHS = frozenset({"/tokenize", "/detokenize", "/tokenizer_info", "/version"})
FORWARDED_PREFIX = "/v1/"
NOT_FORWARDED = frozenset({"/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/v1/realtime"})
"""What the proxy sends to decode as it came, unsplit (decode computes its own prefill): every route of
vLLM 0.33.0's OpenAI surface under ``/v1/`` (models, responses, messages, embeddings, audio, ...:
entrypoints/openai/*/api_router.py, anthropic/, pooling/, speech_to_text/) and the tokenizer's
(serve/tokenize/api_router.py), but the LoRA loading of one decode pod (an administrator's, and the
other pods would not have it) and the realtime WebSocket. vLLM's other routes (sleep, profiling, weight
updates, cache resets) are its operators', not a client's: 404 here."""
PREFILL_FINISHED_FOR_DECODE = "length"
"""The prefill's finish_reason when it kept the KV for decode: the connector keeps a prefill's blocks only
for ``FINISHED_LENGTH_CAPPED`` (vLLM 0.33.0 mooncake/mooncake_connector.py,
``MooncakeConnectorScheduler.request_finished``), which the OpenAI layer answers as "length"."""
ROLES = ("prefill", "decode")
SERVER = "server"
"""The one backend of the gate (--forward)."""
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer"}
    | {"transfer-encoding", "upgrade", "proxy-connection", "host", "content-length"}
)
"""Headers of one connection, not of the request (RFC 9110 section 7.6.1), never forwarded; the
host and length are those of the forwarded request, set by the client library."""


def connection_headers(headers: Any) -> set[str]:
    """The headers ``headers`` name in its Connection header: of that connection only, never forwarded."""
    return {name.strip().lower() for name in headers.get("Connection", "").split(",")}


SCALED_TO_ZERO = "scaled_to_zero"
"""The error type of a request answered while its roles are at zero, and /health's key naming them."""

REQUESTS = "inference_fleet_proxy_requests_total"
UNSERVED = "inference_fleet_proxy_unserved_requests_total"
ANSWERED = "inference_fleet_proxy_answered_total"
IN_FLIGHT = "inference_fleet_proxy_requests_in_flight"
LAST_REQUEST = "inference_fleet_proxy_last_request_timestamp_seconds"
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
    last_request: float = 0.0
    """Unix time of the last request received (0 before any): what wakes a backend at zero, a gauge
    so that a request is seen even when it came before this process's first scrape."""
    unserved: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    """Per backend (role, or the gate's server): requests answered 503 because it had no serving pod."""

    def unserved_by(self, roles: Sequence[str]) -> None:
        for role in roles:
            self.unserved[role] += 1


def exposition(counts: Counts) -> str:
    """The Prometheus text exposition format 0.0.4 of ``counts``: every series, zeros included."""
    families: list[tuple[str, str, str, list[tuple[str, float]]]] = [
        (REQUESTS, "counter", "Requests received, whatever their answer.", [("", counts.requests)]),
        (
            UNSERVED,
            "counter",
            "Requests answered 503 because the backend had no serving pod.",
            [(f'{{backend="{backend}"}}', value) for backend, value in counts.unserved.items()],
        ),
        (ANSWERED, "counter", "Backend answers relayed to clients.", [("", counts.answered)]),
        (IN_FLIGHT, "gauge", "Requests being answered.", [("", counts.in_flight)]),
        (LAST_REQUEST, "gauge", "Unix time of the last request received, 0 before any.", [("", counts.last_request)]),
    ]
    lines = []
    for name, kind, meaning, samples in families:
        lines += [f"# HELP {name} {meaning}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{labels} {value}" for labels, value in samples]
    return "\n".join(lines) + "\n"


class Silence:
    """Peers whose probes time out, and for how many probes in a row. A probe that times out is a busy
    peer (a saturated server answers /health late) as often as a gone one, so a peer stays as it was
    until ``limit`` probes in a row timed out; one answer (200 or not) ends its silence. A refused
    connection or a non-200 answer takes effect at once: the peer said it does not serve."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count: dict[str, int] = {}

    def heard(self, peer: str) -> None:
        self.count.pop(peer, None)

    def kept(self, peer: str) -> bool:
        """One more probe of ``peer`` timed out: whether it stays as it was."""
        self.count[peer] = self.count.get(peer, 0) + 1
        return self.count[peer] < self.limit


class Watch:
    """What a front knows of its backends, read again every ``--refresh-seconds`` (at once when
    woken: a failed request wakes it)."""

    def __init__(self, arguments: argparse.Namespace, session: aiohttp.ClientSession) -> None:
        self.arguments = arguments
        self.session = session
        self.known = False
        """Whether a refresh has completed: before it, no backend is known to be missing."""
        self.wake = asyncio.Event()
        self.silence = Silence(arguments.probe_misses)

    def heard(self, peer: str, up: bool | None, was: bool) -> bool:
        """Whether ``peer`` is up after a probe that answered ``up`` (None: timed out), having been ``was``."""
        if up is None:
            return was and self.silence.kept(peer)
        self.silence.heard(peer)
        return up

    @property
    def ready(self) -> bool:
        return not self.missing()

    def missing(self) -> list[str]:
        raise NotImplementedError

    def state(self, detail: bool) -> dict[str, Any]:
        """What /health says of the backends; with ``detail``, what only the metrics port shows."""
        raise NotImplementedError

    async def refresh(self) -> None:
        raise NotImplementedError

    async def answers(self, url: str) -> bool | None:
        """Whether ``url`` answers 200; None when it did not answer within the probe's timeout (a busy
        server, not a gone one: see ``Silence``)."""
        try:
            async with self.session.get(url, timeout=PROBE_TIMEOUT) as response:
                return response.status == 200
        except TimeoutError:  # before ClientError: aiohttp's ServerTimeoutError is both
            return None
        except (aiohttp.ClientError, ValueError):
            return False

    async def run(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception:  # the loop must outlive anything a peer answers
                LOG.exception("refreshing the peers failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.arguments.refresh_seconds)
            self.wake.clear()


class Server(Watch):
    """The gate's one backend: the server Service, up while its health path answers 200."""

    def __init__(self, arguments: argparse.Namespace, session: aiohttp.ClientSession) -> None:
        super().__init__(arguments, session)
        self.up = False

    def missing(self) -> list[str]:
        return [] if self.up else [SERVER]

    def state(self, detail: bool) -> dict[str, Any]:
        return {SERVER: self.up}

    def down(self) -> None:
        """A forwarded request found no server: missing until a refresh finds it, which starts now."""
        self.up = False
        self.wake.set()

    async def refresh(self) -> None:
        answered = await self.answers(f"{self.arguments.forward}{self.arguments.forward_health}")
        up = self.heard(SERVER, answered, self.up)
        if up != self.up:
            LOG.info("server %s", "serving" if up else "out of rotation")
        self.up = up
        self.known = True


class Peers(Watch):
    """What the proxy knows of its peers: the usable prefill engines per pod, and whether
    the decode Service answers. Only the refresh loop replaces it; a failed request takes
    a pod out at once and wakes the loop."""

    def __init__(self, arguments: argparse.Namespace, session: aiohttp.ClientSession) -> None:
        super().__init__(arguments, session)
        self.engines: dict[str, list[Engine]] = {}
        self.decode_up = False
        self.turn = itertools.count()
        self.probes = asyncio.Semaphore(CONCURRENT_PROBES)
        self.draining: dict[str, list[Engine]] = {}
        """Pods whose engines refused a request as a draining vLLM does, and those engines."""

    def prefill_url(self, host: str) -> str:
        return f"http://{host}:{self.arguments.prefill_port}"

    def bootstrap_url(self, host: str) -> str:
        return f"http://{host}:{self.arguments.bootstrap_port}"

    def missing(self) -> list[str]:
        """The roles with no serving pod: prefill without an engine, decode while its Service does not answer."""
        up = {"prefill": bool(self.engines), "decode": self.decode_up}
        return [role for role in ROLES if not up[role]]

    def state(self, detail: bool) -> dict[str, Any]:
        """The prefill engines by pod and id on the metrics port; on the serving port, which the load
        balancer reaches, only how many serve (no pod address, no engine id)."""
        if not detail:
            return {"prefill": sum(map(len, self.engines.values())), "decode": self.decode_up}
        return {
            "prefill": {host: {str(e.rank): e.engine_id for e in engines} for host, engines in self.engines.items()},
            "decode": self.decode_up,
        }

    async def resolve(self) -> list[str] | None:
        """Every prefill pod's address (none while the Service has no pod: the name does not resolve);
        None when the lookup timed out."""
        loop = asyncio.get_running_loop()
        lookup = loop.getaddrinfo(self.arguments.prefill_service, None, type=socket.SOCK_STREAM)
        try:
            answers = await asyncio.wait_for(lookup, RESOLVE_TIMEOUT_SECONDS)
        except TimeoutError:
            return None
        except OSError:
            return []
        return sorted({url_host(str(answer[4][0])) for answer in answers})

    async def probe(self, host: str) -> list[Engine] | None:
        """The pod's engines under their current ids; none unless it serves and names them; None when
        it did not answer in time."""
        async with self.probes:
            up = await self.answers(f"{self.prefill_url(host)}/health")
            if not up:
                return None if up is None else []
            try:
                async with self.session.get(f"{self.bootstrap_url(host)}/query", timeout=PROBE_TIMEOUT) as response:
                    if response.status != 200:
                        return []
                    return engines_of(host, await response.json(content_type=None))
            except TimeoutError:
                return None
            except (aiohttp.ClientError, ValueError):
                return []

    async def refresh(self) -> None:
        hosts = await self.resolve()
        if hosts is None:  # the lookup timed out: the pods are those we knew
            hosts = sorted(self.engines)
        decode = asyncio.ensure_future(self.answers(f"{self.arguments.decode}/health"))
        found = await asyncio.gather(*(self.probe(host) for host in hosts))
        engines = {}
        for host, listed in zip(hosts, found, strict=True):
            if listed is not None and host in self.draining:
                if listed == self.draining[host]:
                    listed = []  # still the draining engines: their /health answers 200 to the end
                else:
                    del self.draining[host]
            was = self.engines.get(host, [])
            if self.heard(host, None if listed is None else bool(listed), bool(was)):
                engines[host] = listed or was
        decode_up = self.heard("decode", await decode, self.decode_up)
        if decode_up != self.decode_up:
            LOG.info("decode %s", "serving" if decode_up else "out of rotation")
        self.decode_up = decode_up
        for host in sorted(engines.keys() | self.engines.keys()):
            if engines.get(host) != self.engines.get(host):
                ids = [engine.engine_id for engine in engines.get(host, [])]
                LOG.info("prefill %s: %s", host, f"engines {ids}" if ids else "out of rotation")
        self.engines = engines
        self.silence.count = {peer: n for peer, n in self.silence.count.items() if peer in {*hosts, "decode"}}
        self.draining = {host: engines for host, engines in self.draining.items() if host in hosts}
        self.known = True

    def pick(self, tried: set[str]) -> Engine | None:
        """The next engine in turn, of a pod not ``tried`` yet."""
        candidates = [
            engine for host, engines in sorted(self.engines.items()) if host not in tried for engine in engines
        ]
        if not candidates:
            return None
        return candidates[next(self.turn) % len(candidates)]

    def refused(self, host: str) -> None:
        """The pod's engines refuse new requests (they drain): out of rotation while they run under these ids."""
        self.draining[host] = self.engines.get(host, [])

    def suspect(self, host: str) -> None:
        """Out of rotation until a refresh finds it serving again, which starts now."""
        self.engines.pop(host, None)
        self.wake.set()

    async def still_current(self, engine: Engine) -> bool:
        """Whether ``engine`` still runs under its id, asked of its pod now."""
        engines = await self.probe(engine.host) or []
        if engines:
            self.engines[engine.host] = engines
        else:
            self.suspect(engine.host)
        return engine in engines


class Front:
    """What the proxy and the gate share: /health, /metrics, the counts and the answer at zero."""

    def __init__(
        self, arguments: argparse.Namespace, watch: Watch, session: aiohttp.ClientSession, backends: Sequence[str]
    ) -> None:
        self.watch = watch
        self.session = session
        self.scale_to_zero = frozenset(arguments.scale_to_zero)
        self.retry_after_seconds: int = arguments.retry_after_seconds
        self.counts = Counts(unserved=dict.fromkeys(backends, 0))
        self.draining = False
        """SIGTERM came: /health answers 503 while the requests in flight finish (``serve``)."""

    def at_zero(self) -> list[str]:
        """The missing backends, when every one of them may be at zero (else none: the front cannot serve)."""
        missing = self.watch.missing()
        if self.watch.known and self.scale_to_zero.issuperset(missing):
            return missing
        return []

    async def health(self, request: web.Request, detail: bool = False) -> web.Response:
        state: dict[str, Any] = {**self.watch.state(detail), "answered": self.counts.answered}
        at_zero = self.at_zero()
        if self.scale_to_zero:
            state[SCALED_TO_ZERO] = at_zero
        if self.draining:
            state["draining"] = True
        serving = (self.watch.ready or bool(at_zero)) and not self.draining
        return web.json_response(state, status=200 if serving else 503)

    async def metrics(self, request: web.Request) -> web.Response:
        # Content-Type set whole: aiohttp's content_type argument would not take the version parameter.
        return web.Response(text=exposition(self.counts), headers={"Content-Type": EXPOSITION_TYPE})

    async def received(self, request: web.Request) -> web.StreamResponse:
        self.counts.requests += 1
        self.counts.last_request = time.time()
        self.counts.in_flight += 1
        try:  # whatever ends the request: an answer, an error, the client gone (cancelled)
            return await self.answer(request)
        finally:
            self.counts.in_flight -= 1

    def routed(self, path: str) -> bool:
        """Whether ``path`` is one the front sends to its backends."""
        return True

    async def answer(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError


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


def forwarded_headers(request: web.Request) -> list[tuple[str, str]]:
    """The client's headers but the hop-by-hop ones, and who the client is."""
    dropped = HOP_BY_HOP | connection_headers(request.headers)
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


class Gate(Front):
    """``--forward``: every request to the server as it came, its answer streamed back."""

    def __init__(self, arguments: argparse.Namespace, server: Server, session: aiohttp.ClientSession) -> None:
        super().__init__(arguments, server, session, [SERVER])
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
        try:
            answer = await forward(self.session, url, request, forwarded_headers(request))
        except (TimeoutError, aiohttp.ClientError) as failure:
            self.server.down()
            self.counts.unserved_by([SERVER])
            if SERVER in self.scale_to_zero:
                return scaled_to_zero([SERVER], self.retry_after_seconds)
            return error(503, f"the server is unreachable: {failure}")
        self.counts.answered += 1
        return await relay(request, answer, forward_headers=True)


def unsplittable(path: str, body: dict[str, Any]) -> str | None:
    """Why a completion request cannot go through one prefill and one decode, naming its field; None
    when it can. vLLM makes several engine requests of ``n`` > 1 (v1/engine/parallel_sampling.py: child
    requests with the parent's sampling parameters, ``kv_transfer_params`` included), of a list of
    prompts (completion/serving.py: one per prompt) and of beam search; the Mooncake connector keys a
    transfer by its id (mooncake_connector.py, ``reqs_need_send[transfer_id]``), so they would overwrite
    one another's KV on the prefill and wait for it on the decode."""
    n = body.get("n")
    if n is not None and n != 1:
        return f"n is {n!r}: a split endpoint answers one choice per request (n 1); send n requests"
    if body.get("use_beam_search"):
        return "use_beam_search is not supported on a split endpoint"
    if path == "/v1/completions":
        prompt, embeds = body.get("prompt"), body.get("prompt_embeds")
        texts = len(prompt) if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) else 1
        counts = {"prompt": texts if prompt not in (None, "") else 0}
        counts["prompt_embeds"] = len(embeds) if isinstance(embeds, list) else 1 if embeds else 0
        if (prompts := sum(counts.values())) > 1:
            fields = " and ".join(name for name, count in counts.items() if count)
            verb = "hold" if " and " in fields else "holds"
            return f"{fields} {verb} {prompts} prompts: a split endpoint answers one prompt per request"
    return None


def prefill_body(body: dict[str, Any], request_id: str) -> dict[str, Any]:
    """The client's request as the prefill gets it: one token, whatever the client asked, never streamed.
    ``min_tokens`` 1 (the client's replaced: vLLM 0.33.0 sampling_params.py ``_verify_args`` refuses
    ``min_tokens`` above ``max_tokens``) keeps the one token from being EOS or a stop token: vLLM masks
    them until ``min_tokens`` tokens are out (v1/sample/logits_processor, ``MinTokensLogitsProcessor``),
    and ``check_stop`` (v1/core/sched/utils.py) would otherwise finish the request ``FINISHED_STOPPED``,
    whose KV the connector frees at once. The decode still samples its first token under the client's
    own limits."""
    payload = {
        **body,
        "kv_transfer_params": {
            "do_remote_decode": True,
            "do_remote_prefill": False,
            "transfer_id": f"xfer-{request_id}",
        },
        "stream": False,
        "max_tokens": 1,
        "min_tokens": 1,
    }
    if "max_completion_tokens" in payload:
        payload["max_completion_tokens"] = 1
    payload.pop("stream_options", None)
    return payload


def finished_for_decode(answer: Any) -> bool:
    """Whether the prefill's answer says it kept the KV for decode: every choice finished at its length."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices:
        return True  # not a completion we can read: decode answers (and says what went wrong)
    return all(isinstance(c, dict) and c.get("finish_reason") == PREFILL_FINISHED_FOR_DECODE for c in choices)


def refused_by_engine(answer: Any) -> bool:
    """Whether the engine finished the request without running it: "abort" (a draining vLLM refuses every
    new request so: v1/engine/core.py ``_reject_add_in_shutdown``, while its server still accepts and its
    /health answers 200: entrypoints/launchers/launcher.py) or "error". Another pod may run it."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    finished = {c.get("finish_reason") for c in choices if isinstance(c, dict)} if isinstance(choices, list) else set()
    return bool(finished & {"abort", "error"})


def as_events(path: str, answer: dict[str, Any], body: dict[str, Any]) -> bytes:
    """A whole completion (vLLM's non-streamed answer) as the server-sent events vLLM streams for it:
    one chunk per choice (chat: ``chat.completion.chunk`` with the message as its ``delta``), a usage
    chunk when the client asked for it (``stream_options.include_usage``), then ``[DONE]``."""
    chat = path == "/v1/chat/completions"
    kind = "chat.completion.chunk" if chat else "text_completion"
    common: dict[str, Any] = {key: answer[key] for key in ("id", "created", "model") if key in answer}
    chunks: list[dict[str, Any]] = []
    for choice in answer.get("choices", []):
        part: dict[str, Any]
        if chat:
            delta = dict(choice.get("message") or {})
            part = {"index": choice.get("index", 0), "delta": delta, "logprobs": choice.get("logprobs")}
            part |= {"finish_reason": choice.get("finish_reason"), "stop_reason": choice.get("stop_reason")}
        else:
            part = dict(choice)
        chunks.append({**common, "object": kind, "choices": [part]})
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") and "usage" in answer:
        chunks.append({**common, "object": kind, "choices": [], "usage": answer["usage"]})
    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
    return "".join(events).encode()


class Proxy(Front):
    def __init__(self, arguments: argparse.Namespace, peers: Peers, session: aiohttp.ClientSession) -> None:
        super().__init__(arguments, peers, session, ROLES)
        self.decode = arguments.decode
        self.peers = peers
        self.key = os.environ.get("VLLM_API_KEY")

    def headers(self, request_id: str) -> dict[str, str]:
        headers = {"X-Request-Id": request_id}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        return headers

    async def answer(self, request: web.Request) -> web.StreamResponse:
        if request.path not in COMPLETION_PATHS or request.method != "POST":
            return await self.unsplit(request)
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return error(400, "the request body must be a JSON object")
        if refused := unsplittable(request.path, body):
            return error(400, refused)
        if at_zero := self.at_zero():
            self.counts.unserved_by(at_zero)
            return scaled_to_zero(at_zero, self.retry_after_seconds)
        retried = False
        while True:
            request_id = uuid.uuid4().hex
            prefilled = await self.prefill(request.path, body, request_id)
            if isinstance(prefilled, web.Response):
                return prefilled
            engine, prefill_answer = prefilled
            if not finished_for_decode(prefill_answer):
                # Finished before its length (a stop string in its one token): the prefill freed the KV,
                # and the answer is whole. vLLM would have answered the client just this.
                self.counts.answered += 1
                if body.get("stream"):
                    events = as_events(request.path, prefill_answer, body)
                    return web.Response(body=events, content_type="text/event-stream")
                return web.json_response(prefill_answer)
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
                answer = await sent(
                    self.session, "POST", url, json=payload, headers=self.headers(request_id), timeout=REQUEST_TIMEOUT
                )
            except (TimeoutError, aiohttp.ClientError) as failure:
                return self.decode_unreachable(failure)
            if answer.status >= 500 and not retried and not await self.peers.still_current(engine):
                # The prefill pod restarted since the last refresh, so decode found no engine
                # under the id we named and the KV went with the old process: prefill again.
                answer.close()
                retried = True
                LOG.warning("prefill %s restarted under request %s: prefilling again", engine.host, request_id)
                continue
            self.counts.answered += 1
            return await relay(request, answer)

    def decode_unreachable(self, failure: Exception) -> web.Response:
        self.peers.decode_up = False
        self.peers.wake.set()
        self.counts.unserved_by(["decode"])
        return error(503, f"decode is unreachable: {failure}")

    def routed(self, path: str) -> bool:
        forwarded = path.startswith(FORWARDED_PREFIX) or path in FORWARDED_PATHS
        return path in COMPLETION_PATHS or (forwarded and path not in NOT_FORWARDED)

    async def unsplit(self, request: web.Request) -> web.StreamResponse:
        """A route of vLLM's surface that needs no prefill (``FORWARDED_PATHS``): to decode as it came,
        with the proxy's key in place of the client's when the role servers require one."""
        if "decode" in self.at_zero():
            self.counts.unserved_by(["decode"])
            return scaled_to_zero(["decode"], self.retry_after_seconds)
        headers = forwarded_headers(request)
        if self.key:
            headers = [(k, v) for k, v in headers if k.lower() != "authorization"]
            headers.append(("Authorization", f"Bearer {self.key}"))
        try:
            answer = await forward(self.session, f"{self.decode}{request.rel_url}", request, headers)
        except (TimeoutError, aiohttp.ClientError) as failure:
            return self.decode_unreachable(failure)
        self.counts.answered += 1
        return await relay(request, answer, forward_headers=True)

    async def prefill(
        self, path: str, body: dict[str, Any], request_id: str
    ) -> tuple[Engine, dict[str, Any]] | web.Response:
        """The engine that prefilled the request and its answer, or the answer to give the client."""
        payload = prefill_body(body, request_id)
        tried: set[str] = set()
        while (engine := self.peers.pick(tried)) is not None:
            tried.add(engine.host)
            headers = {**self.headers(request_id), "X-data-parallel-rank": str(engine.rank)}
            url = f"{self.peers.prefill_url(engine.host)}{path}"
            try:
                answer = await sent(self.session, "POST", url, json=payload, headers=headers, timeout=REQUEST_TIMEOUT)
                async with answer:
                    content = await answer.read()
                    if answer.status < 400:
                        try:
                            prefilled = json.loads(content)
                        except ValueError:
                            prefilled = {}
                        if not refused_by_engine(prefilled):
                            return engine, prefilled
                        reason = "its engine refused the request (draining)"
                        self.peers.refused(engine.host)
                    elif answer.status < 500:  # the request itself: no other prefill pod would take it
                        return web.Response(status=answer.status, body=content, content_type=answer.content_type)
                    else:
                        reason = f"answered {answer.status}"
            except (TimeoutError, aiohttp.ClientError) as failure:
                reason = str(failure) or type(failure).__name__
            LOG.warning("prefill %s failed (%s): taken out of rotation", engine.host, reason)
            self.peers.suspect(engine.host)
        self.counts.unserved_by(["prefill"] if self.peers.decode_up else ["prefill", "decode"])
        return error(503, "no prefill instance is available")


async def relay(
    request: web.Request, answer: aiohttp.ClientResponse, forward_headers: bool = False
) -> web.StreamResponse:
    """A backend's answer, streamed as it comes (server-sent events included): its status and content
    type, and with ``forward_headers`` every header but the hop-by-hop ones (its length kept, so a
    sized answer stays sized)."""
    async with answer:
        if forward_headers:
            dropped = (HOP_BY_HOP - {"content-length"}) | connection_headers(answer.headers)
            headers = [(k, v) for k, v in answer.headers.items() if k.lower() not in dropped]
            response = web.StreamResponse(status=answer.status, reason=answer.reason, headers=headers)
        else:
            response = web.StreamResponse(status=answer.status)
            response.content_type = answer.content_type
        await response.prepare(request)
        async for chunk in answer.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response


FRONT = web.AppKey("front", Front)


def application(arguments: argparse.Namespace) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES)

    async def peers_and_session(app: web.Application) -> AsyncIterator[None]:
        # Idle connections are dropped before vLLM drops them (VLLM_HTTP_TIMEOUT_KEEP_ALIVE, 5 s), so a
        # request never goes out on a connection the server is closing.
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_TO_PEERS_SECONDS)
        # The gate passes answers on as they came, compressed or not.
        session = aiohttp.ClientSession(connector=connector, auto_decompress=arguments.forward is None)
        watch: Watch
        if arguments.forward is not None:
            server = Server(arguments, session)
            app[FRONT], watch = Gate(arguments, server, session), server
        else:
            peers = Peers(arguments, session)
            app[FRONT], watch = Proxy(arguments, peers, session), peers
        refresh = asyncio.create_task(watch.run())
        metrics = await metrics_site(arguments, app[FRONT]) if arguments.metrics_port is not None else None
        yield
        if metrics is not None:
            await metrics.cleanup()
        refresh.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await refresh
        await session.close()

    async def health(request: web.Request) -> web.Response:
        return await request.app[FRONT].health(request)

    async def received(request: web.Request) -> web.StreamResponse:
        front = request.app[FRONT]
        if not front.routed(request.path):  # not a request for the backends: neither counted nor sent
            return error(404, f"{request.path} is not served by a split endpoint (docs/mooncake-proxy.md, Routes)")
        return await front.received(request)

    app.cleanup_ctx.append(peers_and_session)
    app.router.add_get("/health", health)
    # Everything else, whatever its method (a POST to /health included: only the GET is the front's).
    app.router.add_route("*", "/{path:.*}", received)
    return app


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--prefill-service", help="DNS name resolving to every prefill pod")
    parser.add_argument("--prefill-port", type=int, help="the prefill servers' HTTP port")
    parser.add_argument("--bootstrap-port", type=int, help="the prefill pods' Mooncake bootstrap port")
    parser.add_argument("--decode", help="URL of the decode Service")
    parser.add_argument("--forward", help="the gate: URL of the server Service every request goes to")
    parser.add_argument("--forward-health", default="/health", help="the server's health path (with --forward)")
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
    split = {"--prefill-service": arguments.prefill_service, "--prefill-port": arguments.prefill_port}
    split |= {"--bootstrap-port": arguments.bootstrap_port, "--decode": arguments.decode}
    if arguments.forward is not None:
        given = [flag for flag, value in split.items() if value is not None]
        if given:
            parser.error(f"--forward sends every request to one server: {', '.join(given)} do not apply")
        if set(arguments.scale_to_zero) - {SERVER}:
            parser.error("with --forward, --scale-to-zero takes only server")
        if not arguments.forward_health.startswith("/"):
            parser.error(f"--forward-health must be a path starting with /, got {arguments.forward_health!r}")
        arguments.forward = arguments.forward.rstrip("/")
        return arguments
    absent = [flag for flag, value in split.items() if value is None]
    if absent:
        parser.error(f"the prefill/decode proxy needs {', '.join(absent)} (or --forward URL for the gate)")
    if SERVER in arguments.scale_to_zero:
        parser.error("--scale-to-zero server needs --forward")
    arguments.decode = arguments.decode.rstrip("/")
    return arguments


async def serve(arguments: argparse.Namespace) -> None:
    """Serves until SIGTERM (or SIGINT), then drains: the listening socket closes at once (new connections
    are refused, so readiness fails and the pod leaves its Service), idle connections close, /health on
    a connection still open answers 503 ``draining``, and the requests in flight (streams included) get
    ``--drain-seconds`` to finish before they are cancelled. The peers are still watched meanwhile: a
    request in flight may need a prefill again. In a pod, the preStop before SIGTERM has let the load
    balancer stop sending (components/render/drain.py)."""
    app = application(arguments)
    runner = web.AppRunner(
        app,
        shutdown_timeout=arguments.drain_seconds,
        keepalive_timeout=arguments.keepalive_seconds,
        handler_cancellation=True,  # a client that goes away cancels its decode
        access_log=None,
    )
    await runner.setup()
    await web.TCPSite(runner, arguments.host, arguments.port).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    front = app[FRONT]
    front.draining = True
    LOG.info("draining: %d requests in flight, up to %d s", front.counts.in_flight, arguments.drain_seconds)
    await runner.cleanup()
    LOG.info("drained")


def main(argv: Sequence[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(arguments))


if __name__ == "__main__":
    main()
