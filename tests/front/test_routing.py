"""The routing policies (front/routing.py): block hashes that name a whole prefix, the bounded LRU cache,
the front's approximate index, and the balance rule that caps what a prefix may pile on one engine."""

from __future__ import annotations

import pytest

from front.engine_caches import Batch, EngineCaches, Stored
from front.routing import (
    ApproximatePrefix,
    BlockCache,
    LeastLoad,
    PrecisePrefix,
    PrefixIndex,
    RandomChoice,
    RoundRobin,
    block_hashes,
    leading_run,
    longest_within_balance,
    within_balance,
)


def test_a_block_hash_names_the_whole_prefix_before_it_and_a_partial_block_is_not_cached() -> None:
    one = block_hashes([1, 2, 3, 4, 5, 6, 7], 2)
    assert len(one) == 3
    assert block_hashes([1, 2, 3, 4], 2) == one[:2]
    # The same second block after another first one is another block.
    assert block_hashes([9, 9, 3, 4], 2)[1] != one[1]


def test_a_block_size_below_one_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="block_size"):
        block_hashes([1], 0)


def test_the_cached_prefix_is_the_leading_run_only() -> None:
    assert leading_run([1, 2, 3], {1, 2}) == 2
    assert leading_run([1, 2, 3], {2, 3}) == 0


def test_the_cache_evicts_the_least_recently_used_block_beyond_its_capacity() -> None:
    cache = BlockCache(3)
    cache.store([1, 2, 3])
    cache.store([1])  # 1 used again: 2 is now the oldest
    assert cache.store([4]) == [2]
    assert list(cache.blocks) == [3, 1, 4]
    assert cache.cached([1, 2]) == 1


def test_the_index_holds_what_the_front_sent_each_engine_and_forgets_a_restarted_one() -> None:
    index = PrefixIndex(capacity=10)
    index.sent("a", [1, 2, 3])
    assert (index.matched("a", [1, 2, 7]), index.matched("b", [1, 2, 7])) == (2, 0)
    index.forget("a")
    assert index.matched("a", [1, 2]) == 0


@pytest.mark.parametrize(
    ("loads", "allowed"),
    [
        ({"a": 0, "b": 0, "c": 0, "d": 0}, ["a", "b", "c", "d"]),  # idle: one each always allowed
        ({"a": 10, "b": 8, "c": 8, "d": 8}, ["b", "c", "d"]),  # 11 would be above 1.25 x 35/4
        ({"a": 12, "b": 8, "c": 8, "d": 8}, ["b", "c", "d"]),
        ({"a": 9, "b": 8, "c": 8, "d": 8}, ["a", "b", "c", "d"]),  # 10 <= 1.25 x 34/4 = 10.6
        ({"a": 1, "b": 1, "c": 1, "d": 1}, ["a", "b", "c", "d"]),  # 2 > 1.25 x 5/4, but all are least loaded
        ({"a": 2, "b": 1, "c": 1, "d": 1}, ["b", "c", "d"]),
    ],
)
def test_an_engine_may_take_a_request_only_within_a_quarter_above_the_mean(
    loads: dict[str, int], allowed: list[str]
) -> None:
    assert within_balance(loads) == allowed


def test_the_longest_prefix_wins_within_the_balance_and_the_least_loaded_among_equals_without_blocks() -> None:
    loads = {"a": 10, "b": 8, "c": 8, "d": 8}
    assert longest_within_balance({"a": 50, "c": 5}, loads, [7]) == "c"  # a holds more but is too busy
    assert longest_within_balance({"a": 50, "c": 5}, {**loads, "a": 8}, [7]) == "a"
    assert longest_within_balance({}, {"a": 3, "b": 1, "c": 1}) == "b"


def test_the_approximate_policy_sends_a_repeated_prefix_where_it_sent_it_before() -> None:
    policy = ApproximatePrefix(capacity=100)
    loads = {"a": 0, "b": 0, "c": 0}
    system = block_hashes(list(range(64)), 16)
    first = policy.choose(system, loads)
    policy.sent(first, system)
    other = block_hashes(list(range(100, 164)), 16)
    policy.sent("c", other)
    assert policy.choose([*system, 12345], loads) == first
    assert policy.choose(other, loads) == "c"


def test_round_robin_takes_each_engine_in_turn_and_random_is_seeded() -> None:
    loads = {"b": 0, "a": 0}
    turns = RoundRobin()
    assert [turns.choose([], loads) for _ in range(3)] == ["a", "b", "a"]
    first, again = RandomChoice(7), RandomChoice(7)
    assert [first.choose([], loads) for _ in range(8)] == [again.choose([], loads) for _ in range(8)]
    assert LeastLoad().choose([], {"a": 2, "b": 1}) == "b"


def test_front_replicas_that_know_nothing_of_a_prefix_place_it_on_the_same_engine() -> None:
    """Each replica's index holds only what it sent; a new prefix goes where its first block hashes,
    not wherever each replica's own counts are lowest (the two would split it over two engines)."""
    system = block_hashes(list(range(64)), 16)
    one, other = ApproximatePrefix(capacity=100), ApproximatePrefix(capacity=100)
    chosen = one.choose(system, {"a": 0, "b": 0, "c": 0, "d": 0})
    assert other.choose(system, {"a": 1, "b": 1, "c": 1, "d": 1}) == chosen
    others = {one.choose(block_hashes(list(range(k, k + 16)), 16), dict.fromkeys("abcd", 0)) for k in range(40)}
    assert others == set("abcd")  # prefixes spread over every engine


def test_an_engine_answering_adds_its_answer_to_the_index_only_when_asked() -> None:
    prompt, whole = [1, 2], [1, 2, 3]
    plain, answers = ApproximatePrefix(capacity=10), ApproximatePrefix(capacity=10, answers=True)
    for policy in (plain, answers):
        policy.sent("a", prompt)
        policy.answered("a", whole)
    assert (plain.index.matched("a", whole), answers.index.matched("a", whole)) == (2, 3)


def test_a_block_hash_chains_from_the_parent_given() -> None:
    whole = block_hashes(list(range(6)), 2)
    assert block_hashes([2, 3, 4, 5], 2, parent=whole[0]) == whole[1:]


def test_the_precise_policy_sends_a_prefix_where_the_engines_events_say_it_is_within_the_balance() -> None:
    caches = EngineCaches()
    held = Stored(hashes=(901, 902), parent=None, tokens=tuple(range(32)), block_size=16)
    caches.receive("b", 0, Batch(0.0, (held,)))
    policy = PrecisePrefix(caches)
    blocks = block_hashes(list(range(48)), 16)
    assert policy.choose(blocks, {"a": 0, "b": 0, "c": 0}) == "b"
    policy.sent("a", blocks)
    policy.answered("a", blocks)
    assert policy.choose(blocks, {"a": 0, "b": 0, "c": 0}) == "b"  # what the front sent changes nothing
    assert policy.choose(blocks, {"a": 1, "b": 3, "c": 1}) != "b"  # 4 in flight: above 1.25 x the mean
