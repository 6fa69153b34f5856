"""What each engine's prefix cache holds, as its KV events tell: the state behind the precise routing
mode (front/routing.py ``PrecisePrefix``). Pure: no I/O, no clock; front/kv_events.py decodes vLLM's
event batches into the terms below and feeds them in, benchmarks/routing feeds simulated ones.

The terms are vLLM 0.33.0's (vllm/distributed/kv_events.py): ``BlockStored`` names the blocks a step
cached by vLLM's own hashes, with the hash of the block before the first (``parent_block_hash``, None
at a prompt's start) and the token ids of them all; ``BlockRemoved`` names evicted blocks by the same
hashes; ``AllBlocksCleared`` empties the cache (a prefix-cache reset). vLLM's hash is of the token ids
under an algorithm and seed of its own (v1/core/kv_cache_utils.py ``hash_block_tokens``, ``NONE_HASH``),
which the front does not reproduce: each stored block gets the front's own key, chained over the
event's token ids from its parent's key as front/routing.py ``block_hashes`` chains a prompt, so a
prompt's keys (from its token ids) meet the events' keys, whatever ``--prefix-caching-hash-algo`` and
``PYTHONHASHSEED`` the engine runs with. vLLM's hash is kept only to apply the removals.

Which blocks are kept: those of the GPU cache (``medium`` "GPU", or none given) of KV cache group 0,
without extra keys. vLLM hashes a block with extra keys (a LoRA adapter, a ``cache_salt`` on the first
block, multimodal items, prompt embeddings: kv_cache_utils.py ``generate_block_hash_extra_keys``) as
another block than the same tokens without them; a front computing plain keys for a prompt must not
find them, so they, and every block chained after them, are left out. So are the Mooncake store's
blocks (``medium`` "cpu", mooncake/store/worker.py), the offloading tiers' ("CPU", "STORAGE") and the
other groups of a hybrid model. A block whose parent the front never saw stored cannot be keyed (its
chain is unknown) and is left out too. Each is counted in ``EngineCache.ignored``.

Order: the publisher numbers its batches 0, 1, 2... (``ZmqEventPublisher``, ``itertools.count``); a
number past the next expected is a gap (``Gap``): batches were lost (the subscriber joined late, the
socket's high-water mark dropped some, a reconnection). Until the replay fills it the engine's state
is left as it was (the missed batches' blocks unknown, its evictions not applied) and the batch that
showed the gap is held back by the caller; a replay that cannot fill it (the publisher keeps only its
last ``buffer_steps`` batches) ends in ``lost``: the engine's state is dropped and rebuilt from the
batches that follow, marked incomplete (it undercounts: prefixes cached before the gap stay unknown
until the engine names them again). A live batch numbered below the next expected means the publisher
started again (a restarted engine, its cache empty); a replayed one, a duplicate, ignored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from front.routing import block_hashes, leading_run

EngineHash = int | bytes
"""vLLM's ``ExternalBlockHash``: its hash's low 64 bits as an int by default, the raw digest with
``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0`` (v1/core/kv_cache_utils.py ``maybe_convert_block_hash``)."""
GPU = "GPU"
"""vLLM's ``MEDIUM_GPU``, what the block pool of the engine's own cache names its blocks."""


@dataclass(frozen=True)
class Stored:
    hashes: tuple[EngineHash, ...]
    parent: EngineHash | None
    tokens: tuple[int, ...]
    block_size: int
    medium: str | None = GPU
    group: int | None = None
    extra_keys: tuple[object, ...] | None = None
    """One entry per block (None for a plain one), or None when no block has any."""


@dataclass(frozen=True)
class Removed:
    hashes: tuple[EngineHash, ...]
    medium: str | None = GPU
    group: int | None = None


@dataclass(frozen=True)
class Cleared:
    pass


Event = Stored | Removed | Cleared


@dataclass(frozen=True)
class Batch:
    ts: float
    events: tuple[Event, ...]
    rank: int | None = None
    """The publisher's data-parallel rank (each rank publishes on a port of its own)."""


@dataclass(frozen=True)
class Gap:
    engine: str
    first: int
    """The first batch number missing: where a replay starts."""
    seen: int
    """The number of the batch that showed the gap, held back until the replay is done."""


@dataclass
class EngineCache:
    """One engine's cache as its events tell: the front's key of every block it holds."""

    keys: dict[EngineHash, int] = field(default_factory=dict)
    """vLLM's hash of each held block -> the front's key of it."""
    held: Counter[int] = field(default_factory=Counter)
    """The front's keys held, each counted once per vLLM hash naming it."""
    next_seq: int | None = None
    complete: bool = False
    """Whether the state follows the engine from an empty cache (batch 0, or a clear) without a loss."""
    block_size: int | None = None
    """The engine's block size, as its first kept ``BlockStored`` gave it: what a prompt is cut in."""
    ignored: Counter[str] = field(default_factory=Counter)

    def matched(self, blocks: Sequence[int]) -> int:
        return leading_run(blocks, self.held)

    def reset(self, complete: bool) -> None:
        self.keys.clear()
        self.held.clear()
        self.complete = complete

    def apply(self, events: Sequence[Event]) -> None:
        for event in events:
            if isinstance(event, Cleared):
                self.reset(complete=True)  # the engine's cache is empty: known whole from here
            elif not _own_cache(event.medium, event.group):
                self.ignored["other cache"] += 1
            elif isinstance(event, Removed):
                for engine_hash in event.hashes:
                    self._remove(engine_hash)
            else:
                self._store(event)

    def _store(self, event: Stored) -> None:
        if len(event.tokens) != event.block_size * len(event.hashes):
            self.ignored["tokens not whole blocks"] += 1
            return
        if event.parent is None:
            parent = 0
        elif event.parent in self.keys:
            parent = self.keys[event.parent]
        else:
            self.ignored["parent unknown"] += 1
            return
        plain = len(event.hashes)
        if event.extra_keys is not None:
            plain = next((i for i, extra in enumerate(event.extra_keys) if extra is not None), plain)
            if plain < len(event.hashes):
                self.ignored["extra keys"] += 1
        if self.block_size is None:
            self.block_size = event.block_size
        keys = block_hashes(event.tokens[: plain * event.block_size], event.block_size, parent)
        for engine_hash, key in zip(event.hashes[:plain], keys, strict=True):
            if engine_hash not in self.keys:
                self.keys[engine_hash] = key
                self.held[key] += 1

    def _remove(self, engine_hash: EngineHash) -> None:
        key = self.keys.pop(engine_hash, None)
        if key is None:
            return  # stored before the front followed the engine, or left out: nothing to undo
        self.held[key] -= 1
        if not self.held[key]:
            del self.held[key]


def _own_cache(medium: str | None, group: int | None) -> bool:
    return medium in (None, GPU) and group in (None, 0)


class EngineCaches:
    """Every engine's ``EngineCache``, by the name the front gives the engine (its pod, or pod and
    data-parallel rank). Every front replica subscribing to every engine builds the same state."""

    def __init__(self) -> None:
        self.engines: dict[str, EngineCache] = {}

    def matched(self, engine: str, blocks: Sequence[int]) -> int:
        cache = self.engines.get(engine)
        return 0 if cache is None else cache.matched(blocks)

    def receive(self, engine: str, seq: int, batch: Batch, replayed: bool = False) -> Gap | None:
        """Apply batch number ``seq`` of ``engine``, or answer the gap before it (the batch not applied)."""
        cache = self.engines.setdefault(engine, EngineCache())
        if cache.next_seq is not None and seq < cache.next_seq:
            if replayed:
                return None  # delivered at least once: already applied
            cache.reset(complete=False)  # the publisher counts from 0 again: a new engine process
            cache.next_seq = None
        if cache.next_seq is None:
            if seq != 0:
                return Gap(engine, 0, seq)
            cache.complete = True
        elif seq > cache.next_seq:
            return Gap(engine, cache.next_seq, seq)
        cache.apply(batch.events)
        cache.next_seq = seq + 1
        return None

    def lost(self, engine: str, seq: int) -> None:
        """The batches before ``seq`` cannot be had: forget the engine's state, go on from ``seq``."""
        cache = self.engines.setdefault(engine, EngineCache())
        cache.reset(complete=False)
        cache.next_seq = seq

    def forget(self, engine: str) -> None:
        """The engine left or restarted under a new id: its cache is gone."""
        self.engines.pop(engine, None)
