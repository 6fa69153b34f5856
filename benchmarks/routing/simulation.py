"""Routing quality measured as users measure it: a deterministic simulation of fronts routing a workload
over stand-in engines (no network, no clock: simulated time, fixed seeds).

A stand-in engine is a classic server (prefill and decode in one engine): a bounded prefix cache in
blocks, least recently used evicted first, holding every full block of each prompt and of the answer
it generated (as vLLM's prefix cache does); one prefill at a time, first come first served, at
``prefill_tokens_per_second`` over the uncached part of the prompt; then the answer at
``seconds_per_output_token``, the request in flight until its last token. TTFT is the wait for the
engine's earlier prefills, a fixed overhead and the request's own uncached prefill.

``fronts`` front replicas share the traffic (the load balancer picks one at random per request), each
with its own policy and knowing only its own requests in flight; only the oracle sees every engine's
cache and every request in flight.

The precise mode's front sees each engine's cache through its KV events (front/engine_caches.py), as
vLLM 0.33.0 publishes them (vllm/distributed/kv_events.py): what a request's store cached and evicted,
one batch per store, numbered per engine, applied ``event_lag_seconds`` after the engine's prefill of
that request ends. vLLM publishes one batch per engine step once the step's output is processed
(v1/core/sched/scheduler.py ``update_from_output``), and its publisher's thread sends it as soon as it
has it (no batching interval), so a block is seen about one step after the scheduler cached it: here
the step is the request's prefill (the stand-in's one prefill at a time), and the lag what the pod
network and the front's decoding add. Every replica subscribes to every engine and so holds the same
state: one ``EngineCaches`` serves them all.
"""

from __future__ import annotations

import heapq
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from benchmarks.routing.workloads import Workload
from front.engine_caches import Batch, EngineCaches, Event, Removed, Stored
from front.routing import (
    ApproximatePrefix,
    BlockCache,
    LeastLoad,
    Policy,
    PrecisePrefix,
    RandomChoice,
    RoundRobin,
    block_hashes,
    longest_within_balance,
)


@dataclass(frozen=True)
class Parameters:
    engines: int = 8
    fronts: int = 2
    block_size: int = 16
    cache_blocks: int = 6_144
    """Per engine: 98,304 tokens, a few system prompts and a few dozen conversations."""
    prefill_tokens_per_second: float = 10_000.0
    overhead_seconds: float = 0.010
    seconds_per_output_token: float = 0.030
    requests: int = 4_000
    utilisation: float = 0.6
    """Of the engines' prefill capacity, were nothing cached: sets the arrival rate of each workload."""
    warmup: float = 0.1
    """The first share of the requests, while caches fill, left out of every figure."""
    seed: int = 30
    event_lag_seconds: float = 0.010
    """Precise mode: from the end of the step that cached a block (here the prefill) to the front
    having its event applied."""


@dataclass
class Engine:
    cache: BlockCache
    prefill_free: float = 0.0
    batches: int = 0
    """The KV event batches it published: the next one's number."""


@dataclass
class Events:
    """The KV event batches on their way to the precise front: (when applied, order, engine, number, batch)."""

    caches: EngineCaches = field(default_factory=EngineCaches)
    pending: list[tuple[float, int, str, int, Batch]] = field(default_factory=list)
    published: int = 0

    def publish(self, at: float, name: str, engine: Engine, tokens: Sequence[int], size: int) -> None:
        """``engine`` caches the full blocks of ``tokens`` now, and the batch telling it (each run of
        blocks it did not hold, chained to the block before; what it evicted) is applied at ``at``."""
        blocks = block_hashes(tokens, size)
        stored: list[Event] = []
        start = None
        for index, block in enumerate([*blocks, None]):
            new = block is not None and block not in engine.cache.blocks
            if new and start is None:
                start = index
            elif not new and start is not None:
                parent = blocks[start - 1] if start else None
                run = tuple(tokens[start * size : index * size])
                stored.append(Stored(tuple(blocks[start:index]), parent, run, size))
                start = None
        evicted = engine.cache.store(blocks)
        events = (*stored, Removed(tuple(evicted))) if evicted else (*stored,)
        heapq.heappush(self.pending, (at, self.published, name, engine.batches, Batch(at, events)))
        engine.batches += 1
        self.published += 1

    def deliver(self, now: float) -> None:
        while self.pending and self.pending[0][0] <= now:
            _, _, name, number, batch = heapq.heappop(self.pending)
            gap = self.caches.receive(name, number, batch)
            assert gap is None, gap  # delivered in order, none lost


class Oracle:
    """Knows every engine's cache and every request in flight: the longest real prefix within the balance."""

    def __init__(self, engines: Mapping[str, Engine], loads: Mapping[str, int]) -> None:
        self.engines = engines
        self.loads = loads

    def choose(self, blocks: Sequence[int], loads: Mapping[str, int]) -> str:
        matched = {name: engine.cache.cached(blocks) for name, engine in self.engines.items()}
        return longest_within_balance(matched, self.loads, blocks)

    def sent(self, engine: str, blocks: Sequence[int]) -> None:
        pass

    def answered(self, engine: str, blocks: Sequence[int]) -> None:
        pass


class AllInFlight(PrecisePrefix):
    """A diagnostic: the precise view, with every request in flight counted (every front's, as the
    oracle counts them) instead of the front's own."""

    def __init__(self, held: EngineCaches, loads: Mapping[str, int]) -> None:
        super().__init__(held)
        self.loads = loads

    def choose(self, blocks: Sequence[int], loads: Mapping[str, int]) -> str:
        return super().choose(blocks, self.loads)


APPROXIMATE = ("approximate prefix", "approximate prefix + answers")
PRECISE = "precise (KV events)"
PRECISE_LATE = "precise, events 100 ms late"
"""A diagnostic: the precise mode with ``LATE_SECONDS`` for ``event_lag_seconds`` (a long step)."""
PRECISE_ALL = "precise, every request in flight known"
"""A diagnostic: ``AllInFlight``."""
LATE_SECONDS = 0.100
POLICIES = ("random", "round robin", "least load", *APPROXIMATE, PRECISE, PRECISE_LATE, PRECISE_ALL, "oracle")
GUESSING = (*APPROXIMATE, PRECISE, PRECISE_LATE, PRECISE_ALL)
"""The policies whose view of the caches may be wrong: the index's guess, the events' lagging view."""


def policy(
    name: str,
    parameters: Parameters,
    front: int,
    engines: Mapping[str, Engine],
    loads: Mapping[str, int],
    events: Events | None = None,
) -> Policy:
    if name == "random":
        return RandomChoice(parameters.seed * 100 + front)
    if name == "round robin":
        return RoundRobin()
    if name == "least load":
        return LeastLoad()
    if name in APPROXIMATE:
        return ApproximatePrefix(parameters.cache_blocks, answers=name != APPROXIMATE[0])
    if name in (PRECISE, PRECISE_LATE):
        assert events is not None
        return PrecisePrefix(events.caches)
    if name == PRECISE_ALL:
        assert events is not None
        return AllInFlight(events.caches, loads)
    if name == "oracle":
        return Oracle(engines, loads)
    raise ValueError(f"unknown policy {name!r}: one of {', '.join(POLICIES)}")


@dataclass(frozen=True)
class Result:
    workload: str
    policy: str
    hit_rate: float
    """Prompt tokens served from the engines' caches, of every prompt token."""
    mean_ttft: float
    p90_ttft: float
    mean_imbalance: float
    """Max over mean of the requests in flight per engine, just after each arrival, averaged."""
    p90_imbalance: float
    index_misses: float | None
    """Approximate and precise only: the share of requests whose cached prefix on the chosen engine the
    front's view (the index, the events applied so far) had wrong (longer or shorter than it was)."""


def simulate(workload: Workload, name: str, parameters: Parameters) -> Result:
    engines = {f"engine-{i}": Engine(BlockCache(parameters.cache_blocks)) for i in range(parameters.engines)}
    loads = dict.fromkeys(engines, 0)
    front_loads = [dict.fromkeys(engines, 0) for _ in range(parameters.fronts)]
    events = Events() if name in (PRECISE, PRECISE_LATE, PRECISE_ALL) else None
    lag = LATE_SECONDS if name == PRECISE_LATE else parameters.event_lag_seconds
    fronts = [policy(name, parameters, front, engines, loads, events) for front in range(parameters.fronts)]
    balancer = random.Random(parameters.seed)
    departures: list[tuple[float, int, str, int, tuple[int, ...]]] = []
    warm = int(len(workload.requests) * parameters.warmup)
    cached_tokens = prompt_tokens = misses = 0
    ttfts: list[float] = []
    imbalances: list[float] = []
    size = parameters.block_size
    for number, request in enumerate(workload.requests):
        while departures and departures[0][0] <= request.arrival:
            _, _, gone, front, whole = heapq.heappop(departures)
            loads[gone] -= 1
            front_loads[front][gone] -= 1
            fronts[front].answered(gone, block_hashes(whole, size))
        if events is not None:
            events.deliver(request.arrival)
        front = balancer.randrange(parameters.fronts)
        blocks = block_hashes(request.prompt, size)
        chosen = fronts[front].choose(blocks, front_loads[front])
        engine = engines[chosen]
        cached = engine.cache.cached(blocks)
        chooser = fronts[front]
        guessed = cached
        if isinstance(chooser, ApproximatePrefix):
            guessed = chooser.index.matched(chosen, blocks)
        elif isinstance(chooser, PrecisePrefix):
            guessed = chooser.held.matched(chosen, blocks)
        prefill = (len(request.prompt) - cached * size) / parameters.prefill_tokens_per_second
        start = max(request.arrival, engine.prefill_free)
        engine.prefill_free = start + prefill
        ttft = start - request.arrival + parameters.overhead_seconds + prefill
        whole = request.prompt + request.answer
        if events is None:
            engine.cache.store(block_hashes(whole, size))
        else:
            events.publish(engine.prefill_free + lag, chosen, engine, whole, size)
        chooser.sent(chosen, blocks)
        done = request.arrival + ttft + len(request.answer) * parameters.seconds_per_output_token
        heapq.heappush(departures, (done, number, chosen, front, request.prompt + request.answer))
        loads[chosen] += 1
        front_loads[front][chosen] += 1
        if number < warm:
            continue
        cached_tokens += cached * size
        prompt_tokens += len(request.prompt)
        misses += guessed != cached
        ttfts.append(ttft)
        imbalances.append(max(loads.values()) / statistics.fmean(loads.values()))
    deciles = statistics.quantiles(ttfts, n=10)
    return Result(
        workload=workload.name,
        policy=name,
        hit_rate=cached_tokens / prompt_tokens,
        mean_ttft=statistics.fmean(ttfts),
        p90_ttft=deciles[-1],
        mean_imbalance=statistics.fmean(imbalances),
        p90_imbalance=statistics.quantiles(imbalances, n=10)[-1],
        index_misses=misses / len(ttfts) if name in GUESSING else None,
    )


def arrival_rate(workload: Workload, parameters: Parameters) -> float:
    """Requests per second that keep the engines' prefill ``utilisation`` busy were nothing cached."""
    mean_prompt = statistics.fmean(len(request.prompt) for request in workload.requests)
    return parameters.utilisation * parameters.engines * parameters.prefill_tokens_per_second / mean_prompt
