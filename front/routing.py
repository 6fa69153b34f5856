"""Routing policies: which backend (a prefill engine, a server pod) takes a request, from what the
front knows of each one's prefix cache and load. Pure: no I/O, no clock; front/router.py uses them in
the request path (``--routing``), benchmarks/routing simulates them against stand-in engines
(docs/front.md, "Routing").

A request is its prompt cut into blocks, each block named by a hash chained over every block before
it (``block_hashes``), as vLLM names the blocks of its prefix cache (v1/core/kv_cache_utils.py,
``hash_block_tokens``: the parent's hash with the block's tokens), so one hash stands for the whole
prefix up to its block and the longest cached prefix is the longest run of leading hashes found.

The approximate index (``PrefixIndex``) is built from the requests the front itself sent: an engine
is taken to hold a request's blocks once the front sent it the request, least recently sent evicted
first beyond its capacity in blocks. It errs where the engine does otherwise: blocks it generated
(an answer the next turn sends back), requests another front replica sent it, a restart, an
eviction order that is not exactly least-recently-used.

The precise policy (``PrecisePrefix``) knows instead what each engine holds from the engine itself, its
KV events (front/engine_caches.py), keyed the same way from the token ids the events carry.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

BALANCE = 1.25
"""The most in flight an engine may hold, as a multiple of the mean over engines, when a prefix would
send it more (the goal of issue 30: max/mean in flight at or below 1.25)."""


def block_hashes(tokens: Sequence[int], block_size: int, parent: int = 0) -> list[int]:
    """The chained hashes of every full block of ``tokens`` (a partial last block is never cached),
    the first chained to ``parent``: 0 for a prompt's first block, a block's hash to go on after it."""
    if block_size < 1:
        raise ValueError(f"block_size must be 1 or more, got {block_size}")
    hashes: list[int] = []
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = hash((parent, tuple(tokens[start : start + block_size])))
        hashes.append(parent)
    return hashes


def leading_run(blocks: Sequence[int], held: Mapping[int, object] | set[int]) -> int:
    """How many of ``blocks``, from the first, are in ``held``: the prefix a cache holding them reuses."""
    count = 0
    for block in blocks:
        if block not in held:
            break
        count += 1
    return count


class BlockCache:
    """A bounded prefix cache in blocks, least recently used evicted first: what a stand-in engine holds,
    and what the approximate index believes one holds."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be 1 or more blocks, got {capacity}")
        self.capacity = capacity
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def cached(self, blocks: Sequence[int]) -> int:
        """The length of the leading run of ``blocks`` held, without touching them."""
        return leading_run(blocks, self.blocks)

    def store(self, blocks: Iterable[int]) -> list[int]:
        """``blocks`` used now: held (again) as the most recently used, the least recently used evicted
        (and returned, oldest first)."""
        for block in blocks:
            self.blocks[block] = None
            self.blocks.move_to_end(block)
        evicted = []
        while len(self.blocks) > self.capacity:
            evicted.append(self.blocks.popitem(last=False)[0])
        return evicted


class PrefixIndex:
    """The front's guess of every engine's prefix cache, from the requests it sent them."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.engines: dict[str, BlockCache] = {}

    def matched(self, engine: str, blocks: Sequence[int]) -> int:
        cache = self.engines.get(engine)
        return 0 if cache is None else cache.cached(blocks)

    def sent(self, engine: str, blocks: Sequence[int]) -> None:
        self.engines.setdefault(engine, BlockCache(self.capacity)).store(blocks)

    def forget(self, engine: str) -> None:
        """The engine restarted (a new engine id) or left: its cache is gone."""
        self.engines.pop(engine, None)


class Policy(Protocol):
    def choose(self, blocks: Sequence[int], loads: Mapping[str, int]) -> str:
        """The engine of ``loads`` (engine: requests in flight) that takes a request of ``blocks``."""
        ...

    def sent(self, engine: str, blocks: Sequence[int]) -> None:
        """The request went to ``engine``."""
        ...

    def answered(self, engine: str, blocks: Sequence[int]) -> None:
        """``engine`` answered a request: ``blocks`` are its prompt and the answer the front relayed."""
        ...


def least_loaded(loads: Mapping[str, int]) -> str:
    """The engine with the fewest in flight, the first by name among equals (deterministic)."""
    if not loads:
        raise ValueError("no engine to choose from")
    return min(sorted(loads), key=lambda engine: loads[engine])


def within_balance(loads: Mapping[str, int], balance: float = BALANCE) -> list[str]:
    """The engines that may take one more request and stay within ``balance`` times the mean in flight
    (counted with that request). The least loaded always may: requests come whole, and at low load
    (an idle fleet, one request each) no engine is within a fraction of the mean."""
    if not loads:
        raise ValueError("no engine to choose from")
    ceiling = math.floor(balance * (sum(loads.values()) + 1) / len(loads) + 1e-9)
    limit = max(ceiling, min(loads.values()) + 1)
    return [engine for engine in sorted(loads) if loads[engine] + 1 <= limit]


class RandomChoice:
    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def choose(self, blocks: Sequence[int], loads: Mapping[str, int]) -> str:
        return self.random.choice(sorted(loads))

    def sent(self, engine: str, blocks: Sequence[int]) -> None:
        pass

    def answered(self, engine: str, blocks: Sequence[int]) -> None:
        pass


class RoundRobin:
    def __init__(self) -> None:
        self.turn = 0

    def choose(self, blocks: Sequence[int], loads: Mapping[str, int]) -> str:
        engines = sorted(loads)
        engine = engines[self.turn % len(engines)]
        self.turn += 1
        return engine

    def sent(self, engine: str, blocks: Sequence[int]) -> None:
        pass

    def answered(self, engine: str, blocks: Sequence[int]) -> None:
        pass


class LeastLoad:
    def choose(self, blocks: Sequence[int], loads: Mapping[str, int]) -> str:
        return least_loaded(loads)

    def sent(self, engine: str, blocks: Sequence[int]) -> None:
        pass

    def answered(self, engine: str, blocks: Sequence[int]) -> None:
        pass


def rendezvous(block: int, engine: str) -> int:
    """The rank of ``engine`` for a prefix starting with ``block``, the same in every front process
    (highest random weight hashing: an engine that leaves moves only its own prefixes)."""
    return int.from_bytes(hashlib.blake2b(f"{block}/{engine}".encode(), digest_size=8).digest(), "big")


def longest_within_balance(
    matched: Mapping[str, int], loads: Mapping[str, int], blocks: Sequence[int] = (), balance: float = BALANCE
) -> str:
    """Of the engines within ``balance``, the one holding the longest prefix; among equals (a prefix no
    engine is known to hold included) the one its first block hashes to, so that front replicas, each
    knowing only what it sent, place a new prefix on the same engine instead of each on its own; with
    no block, the least loaded, then the first by name."""
    allowed = within_balance(loads, balance)
    if not blocks:
        return min(allowed, key=lambda engine: (-matched.get(engine, 0), loads[engine], engine))
    return min(allowed, key=lambda engine: (-matched.get(engine, 0), -rendezvous(blocks[0], engine)))


class ApproximatePrefix:
    """The longest prefix by the front's own index (``PrefixIndex``), within the load balance. With
    ``answers``, the index also takes each answer the front relayed once it is whole: the engine cached
    the blocks it generated, and a conversation's next turn sends them back."""

    def __init__(self, capacity: int, balance: float = BALANCE, answers: bool = False) -> None:
        self.index = PrefixIndex(capacity)
        self.balance = balance
        self.answers = answers

    def choose(self, blocks: Sequence[int], loads: Mapping[str, int]) -> str:
        matched = {engine: self.index.matched(engine, blocks) for engine in loads}
        return longest_within_balance(matched, loads, blocks, self.balance)

    def sent(self, engine: str, blocks: Sequence[int]) -> None:
        self.index.sent(engine, blocks)

    def answered(self, engine: str, blocks: Sequence[int]) -> None:
        if self.answers:
            self.index.sent(engine, blocks)


class HeldBlocks(Protocol):
    def matched(self, engine: str, blocks: Sequence[int]) -> int:
        """How many of ``blocks``, from the first, ``engine`` is known to hold."""
        ...


class PrecisePrefix:
    """The longest prefix each engine holds as its own KV events tell (``held``: an ``EngineCaches`` of
    front/engine_caches.py, fed by front/kv_events.py), within the load balance. What the front sends or
    relays changes nothing here: only the engines' events do, the same for every front replica."""

    def __init__(self, held: HeldBlocks, balance: float = BALANCE) -> None:
        self.held = held
        self.balance = balance

    def choose(self, blocks: Sequence[int], loads: Mapping[str, int]) -> str:
        matched = {engine: self.held.matched(engine, blocks) for engine in loads}
        return longest_within_balance(matched, loads, blocks, self.balance)

    def sent(self, engine: str, blocks: Sequence[int]) -> None:
        pass

    def answered(self, engine: str, blocks: Sequence[int]) -> None:
        pass
