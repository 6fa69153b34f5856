"""The simulated traffic: requests as token ids, arrival times and answer lengths, from fixed seeds.

Three workloads, each a stated mix (``WORKLOADS``): chat behind a few shared system prompts of
skewed popularity; multi-turn sessions, each turn sending the whole conversation again (the
previous prompt, the engine's answer, a new user message); and a long tail of unique prompts with
a minority behind shared prefixes. Arrivals are Poisson at ``rate`` requests per second (a session's
later turns come a think time after its previous one, whatever the latency: the schedule is fixed).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

VOCABULARY = 50_000
SYSTEM_PROMPTS = 96
"""12,288 blocks of 16 tokens in all: twice what one engine holds, a quarter of what eight hold."""


@dataclass(frozen=True)
class Request:
    arrival: float
    prompt: tuple[int, ...]
    answer: tuple[int, ...]
    """The tokens the engine generates (and caches, in full blocks, as vLLM does)."""


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    requests: tuple[Request, ...]


def tokens(rng: random.Random, count: int) -> tuple[int, ...]:
    return tuple(rng.randrange(VOCABULARY) for _ in range(count))


def zipf_choice(rng: random.Random, count: int, exponent: float) -> int:
    weights = [1 / (rank + 1) ** exponent for rank in range(count)]
    return rng.choices(range(count), weights)[0]


def arrivals(rng: random.Random, count: int, rate: float) -> list[float]:
    now, times = 0.0, []
    for _ in range(count):
        now += rng.expovariate(rate)
        times.append(now)
    return times


def shared_system_prompts(seed: int, count: int, rate: float) -> Workload:
    rng = random.Random(seed)
    systems = [tokens(rng, 2048) for _ in range(SYSTEM_PROMPTS)]
    requests = [
        Request(
            at, systems[zipf_choice(rng, SYSTEM_PROMPTS, 0.8)] + tokens(rng, rng.randint(64, 512)), tokens(rng, 128)
        )
        for at in arrivals(rng, count, rate)
    ]
    return Workload(
        "shared system prompts",
        f"{SYSTEM_PROMPTS} system prompts of 2,048 tokens, Zipf popularity (s = 0.8), each request one of them "
        "and a unique user message of 64-512 tokens; answers of 128 tokens",
        tuple(requests),
    )


def multi_turn(seed: int, count: int, rate: float) -> Workload:
    rng = random.Random(seed)
    systems = [tokens(rng, 1024) for _ in range(4)]
    requests: list[Request] = []
    starts = iter(arrivals(rng, count, rate / 5))  # sessions average 5 turns
    while len(requests) < count:
        at, prompt = next(starts), systems[rng.randrange(4)]
        for _ in range(rng.randint(2, 8)):
            prompt = prompt + tokens(rng, rng.randint(32, 256))
            answer = tokens(rng, rng.randint(64, 256))
            requests.append(Request(at, prompt, answer))
            prompt, at = prompt + answer, at + rng.expovariate(1 / 20)
    requests = sorted(requests[:count], key=lambda request: request.arrival)
    return Workload(
        "multi-turn sessions",
        "sessions of 2-8 turns (Poisson starts), each behind one of 4 system prompts of 1,024 tokens; a turn "
        "adds 32-256 user tokens to the conversation and sends it whole, 20 s (mean, exponential) after the "
        "previous turn; answers of 64-256 tokens, part of the next turn's prompt",
        tuple(requests),
    )


def long_tail(seed: int, count: int, rate: float) -> Workload:
    rng = random.Random(seed)
    shared = [tokens(rng, 1024) for _ in range(4)]
    requests = []
    for at in arrivals(rng, count, rate):
        if rng.random() < 0.2:
            prompt = shared[rng.randrange(4)] + tokens(rng, 128)
        else:
            prompt = tokens(rng, rng.randint(256, 4096))
        requests.append(Request(at, prompt, tokens(rng, 128)))
    return Workload(
        "long tail",
        "80 % unique prompts of 256-4,096 tokens; 20 % one of 4 shared prefixes of 1,024 tokens and 128 unique "
        "tokens; answers of 128 tokens",
        tuple(requests),
    )


WORKLOADS = (shared_system_prompts, multi_turn, long_tail)
