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
"""

from __future__ import annotations

import heapq
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from benchmarks.routing.workloads import Workload
from front.routing import (
    ApproximatePrefix,
    BlockCache,
    LeastLoad,
    Policy,
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


@dataclass
class Engine:
    cache: BlockCache
    prefill_free: float = 0.0


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


APPROXIMATE = ("approximate prefix", "approximate prefix + answers")
POLICIES = ("random", "round robin", "least load", *APPROXIMATE, "oracle")
PRECISE = "precise (KV events)"
"""Not simulated (benchmarks/RESULTS.md says why): a stub row, counted as not done."""


def policy(
    name: str, parameters: Parameters, front: int, engines: Mapping[str, Engine], loads: Mapping[str, int]
) -> Policy:
    if name == "random":
        return RandomChoice(parameters.seed * 100 + front)
    if name == "round robin":
        return RoundRobin()
    if name == "least load":
        return LeastLoad()
    if name in APPROXIMATE:
        return ApproximatePrefix(parameters.cache_blocks, answers=name != APPROXIMATE[0])
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
    """Approximate prefix only: the share of requests whose cached prefix on the chosen engine the index
    guessed wrong (longer or shorter than the engine held)."""


def simulate(workload: Workload, name: str, parameters: Parameters) -> Result:
    engines = {f"engine-{i}": Engine(BlockCache(parameters.cache_blocks)) for i in range(parameters.engines)}
    loads = dict.fromkeys(engines, 0)
    front_loads = [dict.fromkeys(engines, 0) for _ in range(parameters.fronts)]
    fronts = [policy(name, parameters, front, engines, loads) for front in range(parameters.fronts)]
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
        front = balancer.randrange(parameters.fronts)
        blocks = block_hashes(request.prompt, size)
        chosen = fronts[front].choose(blocks, front_loads[front])
        engine = engines[chosen]
        cached = engine.cache.cached(blocks)
        chooser = fronts[front]
        guessed = chooser.index.matched(chosen, blocks) if isinstance(chooser, ApproximatePrefix) else cached
        prefill = (len(request.prompt) - cached * size) / parameters.prefill_tokens_per_second
        start = max(request.arrival, engine.prefill_free)
        engine.prefill_free = start + prefill
        ttft = start - request.arrival + parameters.overhead_seconds + prefill
        engine.cache.store(block_hashes(request.prompt + request.answer, size))
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
        index_misses=misses / len(ttfts) if name in APPROXIMATE else None,
    )


def arrival_rate(workload: Workload, parameters: Parameters) -> float:
    """Requests per second that keep the engines' prefill ``utilisation`` busy were nothing cached."""
    mean_prompt = statistics.fmean(len(request.prompt) for request in workload.requests)
    return parameters.utilisation * parameters.engines * parameters.prefill_tokens_per_second / mean_prompt
