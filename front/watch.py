"""What a front knows of its backends, and how it learns it: the gate's one server, the proxy's prefill
pods (found by DNS) and their engines (read from each pod's bootstrap server), the decode Service;
probed every ``--refresh-seconds`` and at once after a failed request.

Peers (docs/design.md, decision 16: every process survives its peers' restarts): every
``--refresh-seconds`` the prefill pods are the addresses the headless Service's name resolves
to: its ready pods (it publishes no not-ready address, so a terminating pod drops out:
components/render/mooncake_roles.py ``prefill_headless_service``), so pods an autoscaler adds or
removes are found like any other. A pod takes requests while its
``/health`` answers 200 and its bootstrap server's ``/query`` names its engines. vLLM gives an
engine a new id at every start, so the ids are read again at every refresh, and at once
after a prefill or decode fails. A peer whose probes time out serves as it did until
``--probe-misses`` in a row (``Silence``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import logging
import socket
import urllib.parse
from dataclasses import dataclass
from typing import Any

import aiohttp

LOG = logging.getLogger("mooncake-proxy")
PROBE_TIMEOUT = aiohttp.ClientTimeout(total=2)
RESOLVE_TIMEOUT_SECONDS = 10.0
CONCURRENT_PROBES = 64
ROLES = ("prefill", "decode")
SERVER = "server"
"""The one backend of the gate (--forward)."""


@dataclass(frozen=True)
class Engine:
    """One prefill engine: a data-parallel rank of a prefill pod, under its current id."""

    host: str
    """The pod's address as it goes into a URL (an IPv6 address in brackets)."""
    rank: int
    engine_id: str


def url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


async def resolve(name: str) -> list[str] | None:
    """Every address ``name`` resolves to, as each goes into a URL: a headless Service's ready pods (none
    while it has none: the name does not resolve); None when the lookup timed out."""
    loop = asyncio.get_running_loop()
    lookup = loop.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    try:
        answers = await asyncio.wait_for(lookup, RESOLVE_TIMEOUT_SECONDS)
    except TimeoutError:
        return None
    except OSError:
        return []
    return sorted({url_host(str(answer[4][0])) for answer in answers})


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


class Pods:
    """The pods behind a headless Service (``--decode-pods``, ``--forward-pods``: a URL whose host is the
    Service's name and whose port is the pods'), for a front that chooses the pod itself
    (``--routing``): the addresses the name resolves to (its ready pods), each serving while its
    ``health`` path answers 200. A pod that refused a request as a draining vLLM does stays out while
    its health answers 200 (a draining vLLM's does to the end) until it leaves the Service or its
    health fails once (a server restarting in the same pod comes back when it answers again)."""

    def __init__(self, watch: Watch, role: str, url: str, health: str) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.hostname is None:
            raise ValueError(f"{url!r} names no host")
        self.watch = watch
        self.role = role
        self.name = parts.hostname
        self.base = f"{parts.scheme}://{{host}}" + (f":{parts.port}" if parts.port is not None else "")
        self.health = health
        self.up: list[str] = []
        self.draining: set[str] = set()

    def url(self, host: str) -> str:
        return self.base.format(host=host)

    async def refresh(self) -> None:
        hosts = await resolve(self.name)
        if hosts is None:  # the lookup timed out: the pods are those we knew
            hosts = sorted(self.up)
        found = await asyncio.gather(*(self.watch.answers(f"{self.url(host)}{self.health}") for host in hosts))
        up = []
        for host, answered in zip(hosts, found, strict=True):
            if answered is False:
                self.draining.discard(host)
            if self.watch.heard(f"{self.role} {host}", answered, host in self.up) and host not in self.draining:
                up.append(host)
        if up != self.up:
            LOG.info("%s pods serving: %s", self.role, up or "none")
        self.up = up
        self.draining &= set(hosts)
        self.watch.silence.count = {
            peer: n
            for peer, n in self.watch.silence.count.items()
            if not peer.startswith(f"{self.role} ") or peer.removeprefix(f"{self.role} ") in hosts
        }

    def suspect(self, host: str) -> None:
        """Out of rotation until a refresh finds it serving again, which starts now."""
        if host in self.up:
            self.up.remove(host)
        self.watch.wake.set()

    def refused(self, host: str) -> None:
        """The pod's server refuses new requests (it drains)."""
        self.draining.add(host)
        self.suspect(host)


class Server(Watch):
    """The gate's one backend: the server Service, up while its health path answers 200."""

    def __init__(self, arguments: argparse.Namespace, session: aiohttp.ClientSession) -> None:
        super().__init__(arguments, session)
        self.up = False
        pods = arguments.forward_pods
        self.pods = None if pods is None else Pods(self, SERVER, pods, arguments.forward_health)
        """With ``--forward-pods``: the server's pods, each request sent to one the gate chooses."""

    def missing(self) -> list[str]:
        return [] if self.up else [SERVER]

    def state(self, detail: bool) -> dict[str, Any]:
        if detail and self.pods is not None:
            return {SERVER: self.up, "server_pods": list(self.pods.up)}
        return {SERVER: self.up}

    def down(self) -> None:
        """A forwarded request found no server: missing until a refresh finds it, which starts now (with
        ``--forward-pods``, missing only once no pod is left serving)."""
        self.up = self.pods is not None and bool(self.pods.up)
        self.wake.set()

    async def refresh(self) -> None:
        if self.pods is not None:
            await self.pods.refresh()
            up = bool(self.pods.up)
        else:
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
        pods = arguments.decode_pods
        self.decode_pods = None if pods is None else Pods(self, "decode", pods, "/health")
        """With ``--decode-pods``: the decode pods, each decode sent to one the proxy chooses."""

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
        state: dict[str, Any] = {
            "prefill": {host: {str(e.rank): e.engine_id for e in engines} for host, engines in self.engines.items()},
            "decode": self.decode_up,
        }
        if self.decode_pods is not None:
            state["decode_pods"] = list(self.decode_pods.up)
        return state

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

    async def decode_serving(self) -> bool:
        """Whether decode serves: a decode pod does (``--decode-pods``), or the decode Service answers."""
        if self.decode_pods is not None:
            await self.decode_pods.refresh()
            return bool(self.decode_pods.up)
        return self.heard("decode", await self.answers(f"{self.arguments.decode}/health"), self.decode_up)

    async def refresh(self) -> None:
        hosts = await resolve(self.arguments.prefill_service)
        if hosts is None:  # the lookup timed out: the pods are those we knew
            hosts = sorted(self.engines)
        decode = asyncio.ensure_future(self.decode_serving())
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
        decode_up = await decode
        if decode_up != self.decode_up:
            LOG.info("decode %s", "serving" if decode_up else "out of rotation")
        self.decode_up = decode_up
        for host in sorted(engines.keys() | self.engines.keys()):
            if engines.get(host) != self.engines.get(host):
                ids = [engine.engine_id for engine in engines.get(host, [])]
                LOG.info("prefill %s: %s", host, f"engines {ids}" if ids else "out of rotation")
        self.engines = engines
        kept = {*hosts, "decode"}
        self.silence.count = {p: n for p, n in self.silence.count.items() if p in kept or p.startswith("decode ")}
        self.draining = {host: engines for host, engines in self.draining.items() if host in hosts}
        self.known = True

    def candidates(self, tried: set[str]) -> list[Engine]:
        """The serving engines of pods not ``tried`` yet."""
        return [engine for host, engines in sorted(self.engines.items()) if host not in tried for engine in engines]

    def pick(self, tried: set[str]) -> Engine | None:
        """The next engine in turn, of a pod not ``tried`` yet."""
        candidates = self.candidates(tried)
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
