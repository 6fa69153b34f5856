"""KV event batches as vLLM 0.33.0 encodes them, for the decoder's tests (tests/front/test_kv_events.py).

The classes below copy vllm/distributed/kv_events.py at 0.33.0, lines 31-149 (``EventBatch``,
``KVCacheEvent``, ``BlockStored``, ``BlockRemoved``, ``AllBlocksCleared``, ``KVEventBatch``): their
msgspec options and their fields in order, docstrings and ``__hash__`` left out; ``ExternalBlockHash``
is v1/core/kv_cache_utils.py line 57's. ``ENCODED`` holds the bytes ``msgspec.msgpack.Encoder().encode``
(the publisher's thread, kv_events.py line 486) writes for each of ``cases()``; tests/vllm/test_kv_events.py
holds both to the release itself, its kv_events.py from the sdist encoding the same cases.
"""

from __future__ import annotations

import sys
import time
from types import ModuleType
from typing import Any

import msgspec

from front.routing import block_hashes

ExternalBlockHash = bytes | int


class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    pass


class BlockStored(KVCacheEvent):
    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[list[int]] | None = None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[ExternalBlockHash]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(EventBatch):
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]


BIG = 2**64 - 6
"""A hash above 2**63: vLLM's int hashes are the digest's low 64 bits, unsigned."""
DIGEST = bytes(range(32))
"""A hash as ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0`` sends it: sha256's 32 bytes."""


def cases(classes: ModuleType | None = None) -> dict[str, Any]:
    """The test batches, built from ``classes`` (vLLM's kv_events module; this one's copy by default)."""
    module: Any = classes if classes is not None else _THIS
    stored, removed, cleared = module.BlockStored, module.BlockRemoved, module.AllBlocksCleared
    plain = {"lora_id": None, "lora_name": None}
    return {
        # What the block pool publishes (v1/core/block_pool.py): a prompt's two blocks, the next one
        # chained to them, a salted prompt (extra keys), an eviction, a reset; from data-parallel rank 1.
        "int hashes": module.KVEventBatch(
            ts=1767225600.25,
            events=[
                stored(
                    block_hashes=[BIG, 17],
                    parent_block_hash=None,
                    token_ids=list(range(32)),
                    block_size=16,
                    medium="GPU",
                    group_idx=0,
                    **plain,
                ),
                stored(
                    block_hashes=[18],
                    parent_block_hash=17,
                    token_ids=list(range(32, 48)),
                    block_size=16,
                    medium="GPU",
                    group_idx=0,
                    session_id="s-1",
                    **plain,
                ),
                stored(
                    block_hashes=[31, 32],
                    parent_block_hash=None,
                    token_ids=list(range(500, 532)),
                    block_size=16,
                    medium="GPU",
                    extra_keys=[("tenant-a",), None],
                    group_idx=0,
                    **plain,
                ),
                removed(block_hashes=[BIG], medium="GPU", group_idx=0),
                cleared(),
            ],
            data_parallel_rank=1,
        ),
        # Digests for hashes; a block the Mooncake store put (mooncake/store/worker.py: medium "cpu");
        # no rank yet (nil: the publisher sets it, kv_events.py line 403).
        "bytes hashes": module.KVEventBatch(
            ts=2.5,
            events=[
                stored(
                    block_hashes=[DIGEST],
                    parent_block_hash=None,
                    token_ids=[7] * 16,
                    block_size=16,
                    medium="GPU",
                    **plain,
                ),
                stored(
                    block_hashes=[DIGEST[::-1]],
                    parent_block_hash=None,
                    token_ids=[],
                    block_size=16,
                    medium="cpu",
                    group_idx=0,
                    **plain,
                ),
                removed(block_hashes=[DIGEST], medium="GPU"),
            ],
        ),
    }


def encode(batch: Any) -> bytes:
    return msgspec.msgpack.Encoder().encode(batch)


ROOT_BLOCK_SIZE = 4


def root_block(number: int, classes: ModuleType | None = None) -> Any:
    """A batch storing one block with no parent, its tokens (``number`` each) and vLLM hash
    (1000 + ``number``) derived from ``number``, built from ``classes`` as ``cases`` builds."""
    module: Any = classes if classes is not None else _THIS
    stored = module.BlockStored(
        block_hashes=[1000 + number],
        parent_block_hash=None,
        token_ids=[number] * ROOT_BLOCK_SIZE,
        block_size=ROOT_BLOCK_SIZE,
        lora_id=None,
        medium="GPU",
        lora_name=None,
    )
    return module.KVEventBatch(ts=time.time(), events=[stored])


def root_key(number: int) -> int:
    """The front's key of ``root_block(number)``'s block."""
    (key,) = block_hashes([number] * ROOT_BLOCK_SIZE, ROOT_BLOCK_SIZE)
    return key


_THIS = sys.modules[__name__]

ENCODED = {
    "int hashes": (
        "93cb41da556e4010000095de0009a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cfffffffffffff"
        "fffa11b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473dc0020000102030405060708090a0b0c0d0e0f10"
        "1112131415161718191a1b1c1d1e1faa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469756da3475055a96c6f7261"
        "5f6e616d65c0a967726f75705f69647800de000aa474797065ab426c6f636b53746f726564ac626c6f636b5f6861736865739112"
        "b1706172656e745f626c6f636b5f6861736811a9746f6b656e5f696473dc0010202122232425262728292a2b2c2d2e2faa626c6f"
        "636b5f73697a6510a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0a967726f75705f69647800aa73"
        "657373696f6e5f6964a3732d31de000aa474797065ab426c6f636b53746f726564ac626c6f636b5f686173686573921f20b17061"
        "72656e745f626c6f636b5f68617368c0a9746f6b656e5f696473dc0020cd01f4cd01f5cd01f6cd01f7cd01f8cd01f9cd01facd01"
        "fbcd01fccd01fdcd01fecd01ffcd0200cd0201cd0202cd0203cd0204cd0205cd0206cd0207cd0208cd0209cd020acd020bcd020c"
        "cd020dcd020ecd020fcd0210cd0211cd0212cd0213aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469756da34750"
        "55a96c6f72615f6e616d65c0aa65787472615f6b6579739291a874656e616e742d61c0a967726f75705f6964780084a474797065"
        "ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cffffffffffffffffaa66d656469756da3475055a967726f75"
        "705f6964780081a474797065b0416c6c426c6f636b73436c656172656401"
    ),
    "bytes hashes": (
        "93cb400400000000000093de0008a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391c4200001020304"
        "05060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fb1706172656e745f626c6f636b5f68617368c0a9746f6b656e"
        "5f696473dc001007070707070707070707070707070707aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469756da3"
        "475055a96c6f72615f6e616d65c0de0009a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391c4201f1e"
        "1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100b1706172656e745f626c6f636b5f68617368c0a9746f"
        "6b656e5f69647390aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469756da3637075a96c6f72615f6e616d65c0a9"
        "67726f75705f6964780083a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391c42000010203040506"
        "0708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fa66d656469756da3475055c0"
    ),
}
