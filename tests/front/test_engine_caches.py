"""Each engine's cache as its KV events tell (front/engine_caches.py): the front's own keys over the events'
token ids, met by a prompt's keys; what is left out; removals and resets; the batch numbers, gaps, a
replay's duplicates, a restarted publisher and a loss."""

from __future__ import annotations

from front.engine_caches import Batch, Cleared, EngineCache, EngineCaches, Gap, Removed, Stored
from front.routing import block_hashes

SIZE = 4
PROMPT = tuple(range(12))
"""Three blocks of four tokens."""


def _stored(hashes: tuple[int, ...], tokens: tuple[int, ...], parent: int | None = None, **fields: object) -> Stored:
    return Stored(hashes=hashes, parent=parent, tokens=tokens, block_size=SIZE, **fields)  # type: ignore[arg-type]


def _cache(*events: Stored | Removed | Cleared) -> EngineCache:
    cache = EngineCache()
    cache.apply(events)
    return cache


def test_a_prompts_keys_meet_the_keys_the_front_chains_over_an_events_tokens_whatever_vllms_hashes() -> None:
    """vLLM's hashes (here 901, 902, 903: any values) name the blocks; the front keys them itself."""
    cache = _cache(_stored((901, 902), PROMPT[:8]), _stored((903,), PROMPT[8:], parent=902))
    assert cache.matched(block_hashes(PROMPT, SIZE)) == 3
    assert cache.matched(block_hashes((0, 1, 2, 3, 9, 9, 9, 9), SIZE)) == 1
    assert cache.block_size == SIZE


def test_a_block_whose_parent_the_front_never_saw_stored_is_left_out() -> None:
    cache = _cache(_stored((903,), PROMPT[8:], parent=902))
    assert (cache.held, cache.ignored["parent unknown"]) == ({}, 1)


def test_a_removal_drops_the_block_unless_another_of_vllms_hashes_still_names_it() -> None:
    """The same tokens stored twice under two hashes (another algorithm's, a partial entry's) are one
    key held twice: removing one leaves it held."""
    cache = _cache(_stored((901,), PROMPT[:4]), _stored((801,), PROMPT[:4]), Removed((901,)))
    assert cache.matched(block_hashes(PROMPT, SIZE)) == 1
    cache.apply([Removed((801,)), Removed((555,))])  # 555: never stored, nothing to undo
    assert cache.held == {}


def test_other_caches_and_blocks_with_extra_keys_are_left_out() -> None:
    cache = _cache(
        _stored((901,), PROMPT[:4], medium="cpu"),  # the Mooncake store's
        _stored((902,), PROMPT[:4], group=1),  # another KV cache group
        _stored((903, 904), PROMPT[:8], extra_keys=(None, ("adapter",))),  # the second block a LoRA's
    )
    assert cache.matched(block_hashes(PROMPT, SIZE)) == 1  # 903 only
    assert cache.ignored == {"other cache": 2, "extra keys": 1}
    assert _cache(_stored((905,), PROMPT[:4], extra_keys=(("salt",),))).held == {}


def test_an_event_whose_tokens_are_not_its_blocks_whole_is_left_out() -> None:
    cache = _cache(_stored((901, 902), PROMPT[:6]))
    assert (cache.held, cache.ignored["tokens not whole blocks"]) == ({}, 1)


def test_a_clear_empties_the_cache_and_makes_it_known_whole() -> None:
    cache = _cache(_stored((901,), PROMPT[:4]), Cleared())
    assert (cache.held, cache.keys, cache.complete) == ({}, {}, True)


def _batch(*events: Stored | Removed | Cleared) -> Batch:
    return Batch(ts=0.0, events=events)


ONE = _batch(_stored((901,), PROMPT[:4]))
TWO = _batch(_stored((902,), PROMPT[4:8], parent=901))
KEYS = block_hashes(PROMPT, SIZE)


def test_batches_in_order_from_zero_give_the_whole_cache() -> None:
    caches = EngineCaches()
    assert caches.receive("a", 0, ONE) is None
    assert caches.receive("a", 1, TWO) is None
    assert (caches.matched("a", KEYS), caches.matched("b", KEYS)) == (2, 0)
    assert caches.engines["a"].complete


def test_a_first_batch_past_zero_or_a_number_skipped_is_a_gap_and_is_not_applied() -> None:
    caches = EngineCaches()
    assert caches.receive("a", 5, ONE) == Gap("a", first=0, seen=5)
    assert caches.matched("a", KEYS) == 0
    caches.receive("a", 0, ONE)
    assert caches.receive("a", 2, TWO) == Gap("a", first=1, seen=2)
    assert caches.matched("a", KEYS) == 1  # as it was: the replay fills it


def test_a_replayed_batch_already_applied_is_ignored_but_a_live_one_means_a_new_publisher() -> None:
    caches = EngineCaches()
    caches.receive("a", 0, ONE)
    caches.receive("a", 1, TWO)
    assert caches.receive("a", 0, _batch(Cleared()), replayed=True) is None
    assert caches.matched("a", KEYS) == 2
    assert caches.receive("a", 0, ONE) is None  # the engine restarted: its cache was empty
    assert (caches.matched("a", KEYS), caches.engines["a"].complete) == (1, True)


def test_a_restarted_publisher_first_seen_past_zero_is_a_gap_from_zero() -> None:
    caches = EngineCaches()
    for seq, batch in enumerate((ONE, TWO, _batch(), _batch())):
        caches.receive("a", seq, batch)
    assert caches.receive("a", 2, ONE) == Gap("a", first=0, seen=2)
    assert caches.matched("a", KEYS) == 0  # the old process's cache is gone


def test_a_loss_drops_the_state_and_goes_on_from_the_batch_given_marked_incomplete() -> None:
    caches = EngineCaches()
    caches.receive("a", 0, ONE)
    caches.lost("a", 7)
    assert caches.matched("a", KEYS) == 0
    assert caches.receive("a", 7, _batch(_stored((801,), PROMPT[:4]))) is None
    assert caches.receive("a", 8, TWO) is None  # its parent 901 was stored before the loss: unknown
    assert (caches.matched("a", KEYS), caches.engines["a"].complete) == (1, False)
    caches.forget("a")
    assert "a" not in caches.engines
