"""Routing in the request path (``--routing``): which backend takes a request, by the policies of
front/routing.py, from what this front sent and holds in flight.

A backend is a prefill engine (``host/rank``), a decode pod or a server pod (its address). The front
sees text, not the engines' tokens, so a prompt's blocks are its characters in blocks of
``BLOCK_CHARACTERS``, each named by a hash chained over every block before it, as vLLM chains its
blocks' hashes (front/routing.py): an approximation of the engine's blocks of tokens whose error
only real traffic measures (docs/front.md, "Routing"). The hash is blake2b, the same in every front
process (Python's own ``hash`` of text is salted per process), so front replicas place a new prefix
on the same engine (``routing.rendezvous``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from front.metrics import Routed
from front.routing import ApproximatePrefix, LeastLoad, Policy, RandomChoice
from front.upstream import ConnectError, UpstreamError
from front.watch import Pods

LOG = logging.getLogger("mooncake-proxy")
R = TypeVar("R")

MODES = ("prefix", "least-load", "random")
BLOCK_CHARACTERS = 64
"""A block of the prompt's text: about 16 tokens at the 4 characters per token of English text under
the Llama 3 and Qwen tokenizers, vLLM's default block of 16 tokens (config/cache.py, ``block_size``)."""
INDEX_BLOCKS = 16384
"""How many blocks the approximate index believes an engine holds: 262,144 tokens, the order of one
GPU's KV cache for an 8B model at 16-bit (a smaller cache makes the index wrong more often, never the
answer wrong: a request sent where its prefix was evicted is computed in full)."""


def prompt_of(path: str, body: dict[str, Any]) -> str:
    """The text a completion's prompt is made of, in the order the engine sees it: a chat's messages
    (each role and content, a list of parts taken as its text parts), or a completion's prompt (token
    ids as their decimal text: the same ids give the same blocks)."""
    if path == "/v1/chat/completions":
        messages = body.get("messages")
        parts: list[str] = []
        for message in messages if isinstance(messages, list) else []:
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            if isinstance(content, list):
                texts = [part.get("text") for part in content if isinstance(part, dict) and part.get("type") == "text"]
                content = "".join(text for text in texts if isinstance(text, str))
            parts.append(f"<{message.get('role', '')}>{content if isinstance(content, str) else ''}")
        return "".join(parts)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if isinstance(prompt, str):
        return prompt
    return json.dumps(prompt, separators=(",", ":")) if prompt is not None else ""


def text_blocks(text: str, size: int = BLOCK_CHARACTERS) -> list[int]:
    """The chained hashes of every full block of ``size`` characters of ``text`` (a partial last block
    is left out, as vLLM leaves a partial block of tokens out of its prefix cache)."""
    hashes: list[int] = []
    parent = b""
    for start in range(0, len(text) - size + 1, size):
        parent = hashlib.blake2b(parent + text[start : start + size].encode(), digest_size=8).digest()
        hashes.append(int.from_bytes(parent, "big"))
    return hashes


def policy_of(mode: str) -> Policy:
    if mode == "prefix":
        return ApproximatePrefix(INDEX_BLOCKS)
    if mode == "least-load":
        return LeastLoad()
    if mode == "random":
        return RandomChoice(int.from_bytes(os.urandom(8), "big"))
    raise ValueError(f"routing mode must be one of {', '.join(MODES)}, got {mode!r}")


class Router:
    """One kind of backend (prefill engines, decode pods, server pods) under one policy: the requests
    this front holds in flight on each, and how much of the prompts it routed the chosen backend was
    believed to hold (the index's own hit rate, /metrics)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.policy = policy_of(mode)
        self.in_flight: dict[str, int] = {}
        self.known: set[str] = set()
        """The backends chosen since they were last known live (``keep``): /metrics shows each one's load."""
        self.blocks = 0
        """Blocks of the prompts routed."""
        self.matched = 0
        """Of those, blocks the chosen backend was believed to hold (the prefix mode only)."""

    def choose(self, backends: Sequence[str], blocks: Sequence[int]) -> str | None:
        """The backend of ``backends`` that takes a request of ``blocks``, counted in flight on it until
        ``done``; None when there is none."""
        if not backends:
            return None
        loads = {backend: self.in_flight.get(backend, 0) for backend in backends}
        backend = self.policy.choose(blocks, loads)
        if isinstance(self.policy, ApproximatePrefix):
            self.matched += self.policy.index.matched(backend, blocks)
        self.blocks += len(blocks)
        self.policy.sent(backend, blocks)
        self.in_flight[backend] = loads[backend] + 1
        self.known.add(backend)
        return backend

    def routed(self, backend: str) -> Routed:
        """What /metrics shows of this router, as the role ``backend``."""
        in_flight = {target: self.in_flight.get(target, 0) for target in self.known | self.in_flight.keys()}
        return Routed(backend, self.blocks, self.matched, in_flight)

    def done(self, backend: str) -> None:
        """A request ``choose`` sent to ``backend`` ended (answered, failed or cancelled)."""
        left = self.in_flight.get(backend, 0) - 1
        if left > 0:
            self.in_flight[backend] = left
        else:
            self.in_flight.pop(backend, None)

    def keep(self, live: Iterable[str]) -> None:
        """Only ``live`` backends are known: what the index believed any other holds is gone (a restarted
        engine is a new backend under its new id; a pod that left takes its cache with it)."""
        alive = set(live)
        self.known &= alive | self.in_flight.keys()
        if isinstance(self.policy, ApproximatePrefix):
            engines = self.policy.index.engines
            for gone in engines.keys() - alive:
                del engines[gone]


class NoPodError(UpstreamError):
    """No pod of the role is serving (every one tried, suspect or draining)."""


class PodChoice:
    """One request's pod (``--decode-pods``, ``--forward-pods``): chosen by ``router`` among the serving
    pods it has not tried, held in flight until ``release``. A pod whose connection is refused is out
    (``Pods.suspect``) and the next is tried: the request never reached it. ``send`` called again means
    the pod answered as a draining vLLM does (``Front.unrefused`` sends a refused completion again), so
    that pod is out while it drains and another takes the request."""

    def __init__(self, pods: Pods, router: Router, blocks: Sequence[int]) -> None:
        self.pods = pods
        self.router = router
        self.blocks = blocks
        self.tried: set[str] = set()
        self.held: str | None = None

    async def send(self, request: Callable[[str], Awaitable[R]]) -> R:
        """``request`` of the chosen pod's base URL; raises ``NoPodError`` when no pod is left to try."""
        if self.held is not None:
            self.pods.refused(self.held)
            self.release()
        while True:
            self.router.keep(self.pods.up)
            pod = self.router.choose([pod for pod in self.pods.up if pod not in self.tried], self.blocks)
            if pod is None:
                raise NoPodError(f"no {self.pods.role} pod is serving")
            self.tried.add(pod)
            self.held = pod
            try:
                return await request(self.pods.url(pod))
            except ConnectError as failure:
                LOG.warning("%s pod %s is unreachable (%s): taken out of rotation", self.pods.role, pod, failure)
                self.pods.suspect(pod)
                self.release()

    def release(self) -> None:
        """The request on the held pod ended."""
        if self.held is not None:
            self.router.done(self.held)
            self.held = None
