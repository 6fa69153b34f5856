"""The routing simulation (benchmarks/routing): deterministic, its stand-in engines' TTFT grows with the
uncached part, and it writes its own section of benchmarks/RESULTS.md, nothing else."""

from __future__ import annotations

import dataclasses

from benchmarks.routing.report import BEGIN, END, section_of, spliced
from benchmarks.routing.simulation import PRECISE, Engine, Events, Parameters, simulate
from benchmarks.routing.workloads import Request, Workload, shared_system_prompts
from front.engine_caches import Removed, Stored
from front.routing import BlockCache, block_hashes

SMALL = Parameters(requests=300, engines=4)


def test_the_same_parameters_give_the_same_figures() -> None:
    workload = shared_system_prompts(SMALL.seed, SMALL.requests, 10.0)
    again = shared_system_prompts(SMALL.seed, SMALL.requests, 10.0)
    assert workload == again
    assert simulate(workload, "approximate prefix", SMALL) == simulate(again, "approximate prefix", SMALL)


def test_a_cached_prefix_shortens_the_ttft_by_its_prefill() -> None:
    """Two identical prompts far apart on one engine: the second prefills only its partial last block."""
    prompt = tuple(range(1000))
    requests = tuple(Request(at, prompt, (1,)) for at in (0.0, 100.0, 200.0))
    one = dataclasses.replace(SMALL, engines=1, fronts=1, warmup=0.0)
    result = simulate(Workload("same", "", requests), "round robin", one)
    full = one.overhead_seconds + 1000 / one.prefill_tokens_per_second
    cached = one.overhead_seconds + (1000 % one.block_size) / one.prefill_tokens_per_second
    assert result.mean_ttft == (full + 2 * cached) / 3
    assert result.hit_rate == 2 * (1000 - 1000 % one.block_size) / 3000


def test_the_oracle_and_the_approximate_index_find_more_cache_than_random_on_shared_prompts() -> None:
    workload = shared_system_prompts(SMALL.seed, SMALL.requests, 10.0)
    rates = {name: simulate(workload, name, SMALL).hit_rate for name in ("random", "approximate prefix", "oracle")}
    assert rates["oracle"] > rates["random"]
    assert rates["approximate prefix"] > rates["random"]


def test_an_engines_store_publishes_the_runs_it_did_not_hold_and_what_it_evicted_numbered_in_turn() -> None:
    engine, events = Engine(BlockCache(4)), Events()
    first = block_hashes(range(1, 9), 2)
    events.publish(1.0, "e", engine, tuple(range(1, 9)), 2)
    events.publish(2.0, "e", engine, (1, 2, 9, 10), 2)
    (_, _, _, zero, one), (_, _, _, number, two) = sorted(events.pending)
    assert (zero, number) == (0, 1)
    assert one.events == (Stored(tuple(first), None, tuple(range(1, 9)), 2),)
    (_, new) = block_hashes((1, 2, 9, 10), 2)
    assert two.events == (Stored((new,), first[0], (9, 10), 2), Removed((first[1],)))
    events.deliver(1.5)
    assert set(events.caches.engines["e"].held) == set(first)
    events.deliver(2.0)
    assert set(events.caches.engines["e"].held) == set(engine.cache.blocks)


def test_the_precise_front_sees_a_prefill_only_once_its_events_arrive() -> None:
    """The same prompt at 0, 1 ms and 10 s on one engine: the second comes before the first's prefill
    (0.1 s) and its events' lag have passed, so the front's view of it is wrong; the third's is right."""
    prompt = tuple(range(1000))
    requests = tuple(Request(at, prompt, (1,)) for at in (0.0, 0.001, 10.0))
    one = dataclasses.replace(SMALL, engines=1, fronts=1, warmup=0.0)
    result = simulate(Workload("same", "", requests), PRECISE, one)
    assert result.index_misses == 1 / 3


def test_the_precise_view_is_rarely_wrong_and_finds_more_cache_than_the_index_on_shared_prompts() -> None:
    workload = shared_system_prompts(SMALL.seed, SMALL.requests, 10.0)
    precise, approximate = (simulate(workload, name, SMALL) for name in (PRECISE, "approximate prefix"))
    assert precise.index_misses is not None
    assert approximate.index_misses is not None
    assert precise.index_misses < approximate.index_misses
    assert precise.hit_rate >= approximate.hit_rate


def test_the_section_replaces_its_own_markers_only() -> None:
    plan = "# Benchmarks\n\nplan tables\n"
    first = spliced(plan, f"{BEGIN}\nold\n{END}\n")
    assert first == f"{plan}\n{BEGIN}\nold\n{END}\n"
    assert spliced(first + "\n## later\n", f"{BEGIN}\nnew\n{END}\n") == f"{plan}\n{BEGIN}\nnew\n{END}\n\n## later\n"


def test_the_plan_benchmark_keeps_the_routing_section_it_finds() -> None:
    """benchmarks/run.py rewrites RESULTS.md whole but for this section, which it passes on."""
    section = f"{BEGIN}\nrouting tables\n{END}\n"
    assert section_of(f"# old plan tables\n\n{section}") == section
    assert section_of("# no routing yet\n") == ""
