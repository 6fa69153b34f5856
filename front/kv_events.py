"""vLLM 0.33.0's KV events off the wire: the decoder of its event batches into front/engine_caches.py's
terms, and the subscriber that follows one engine's publisher into an ``EngineCaches``.

The only module of the package beyond the standard library and aiohttp: it needs msgspec (vLLM encodes
with it) and pyzmq (the transport), both in vLLM's own requirements (requirements/common.txt:
``pyzmq >= 25.0.0``, ``msgspec``), so in its image, where the front runs. Only the precise routing
mode imports it; the proxy and the gate start without it (tests/front/test_package.py).

The wire, from vllm/distributed/kv_events.py at 0.33.0:

- ``ZmqEventPublisher`` binds a PUB socket at ``KVEventsConfig.endpoint`` (``tcp://*:5557`` by default)
  and sends each batch as three frames: the topic (``KVEventsConfig.topic``, "" by default), the batch
  number as 8 bytes big-endian (``itertools.count`` from 0, per publisher) and the payload, the batch
  as ``msgspec.msgpack.Encoder().encode`` writes it;
- the payload: ``KVEventBatch`` is ``array_like``, an array of ``ts``, ``events`` and
  ``data_parallel_rank`` (which ``publish`` sets to the publisher's rank); each event a map
  (``KVCacheEvent`` is ``tag=True``, not ``array_like``) whose ``type`` is its class name,
  ``BlockStored``, ``BlockRemoved`` or ``AllBlocksCleared``, its fields by name, those at their
  default left out (``omit_defaults``);
- with ``KVEventsConfig.replay_endpoint`` a ROUTER socket answers a request of one frame, the first
  batch number wanted as 8 bytes big-endian, with every batch it still keeps from there (the last
  ``buffer_steps``, 10,000 by default) as (topic, number, payload) and then an end marker
  (b"", -1 as 8 signed bytes, b""): ``_service_replay``;
- under data parallelism each rank runs a publisher of its own, its port the configured one plus the
  rank (``offset_endpoint_port``), its batches carrying the rank.

The scheduler publishes one batch per engine step that changed the cache, once the step's output is
processed (v1/core/sched/scheduler.py ``update_from_output``: ``KVEventBatch(ts=time.time(), ...)``);
the publisher's thread sends it as soon as it takes it from its queue (its 0.1 s timeout only bounds
an idle wait). So the events of a step's blocks leave about one step after the scheduler cached them.
"""

from __future__ import annotations

from typing import Any

import msgspec
import zmq
import zmq.asyncio

from front.engine_caches import Batch, Cleared, EngineCaches, Event, Gap, Removed, Stored

END_OF_REPLAY = -1
"""``ZmqEventPublisher.END_SEQ``: the number on the replay's last message."""
REPLAY_TIMEOUT_SECONDS = 1.0
"""How long the replay may stay silent before the front gives up on it (and drops the engine's state)."""


class KVEventsError(ValueError):
    """A payload that is not a vLLM 0.33.0 event batch."""


class _BlockStored(msgspec.Struct, tag="BlockStored", gc=False):
    """The fields of vLLM's ``BlockStored`` the front reads; the others (``lora_id``, ``lora_name``,
    ``session_id``...) are skipped by name."""

    block_hashes: list[int | bytes]
    parent_block_hash: int | bytes | None
    token_ids: list[int]
    block_size: int
    medium: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None


class _BlockRemoved(msgspec.Struct, tag="BlockRemoved", gc=False):
    block_hashes: list[int | bytes]
    medium: str | None
    group_idx: int | None = None


class _AllBlocksCleared(msgspec.Struct, tag="AllBlocksCleared", gc=False):
    pass


class _KVEventBatch(msgspec.Struct, array_like=True, gc=False):
    ts: float
    events: list[_BlockStored | _BlockRemoved | _AllBlocksCleared]
    data_parallel_rank: int | None = None


_DECODER = msgspec.msgpack.Decoder(_KVEventBatch)


def decode(payload: bytes) -> Batch:
    """A batch's payload frame in the front's terms."""
    try:
        batch = _DECODER.decode(payload)
    except msgspec.DecodeError as error:  # ValidationError is one
        raise KVEventsError(f"not a vLLM KV event batch: {error}") from error
    return Batch(batch.ts, tuple(_event(event) for event in batch.events), batch.data_parallel_rank)


def _event(event: _BlockStored | _BlockRemoved | _AllBlocksCleared) -> Event:
    if isinstance(event, _BlockStored):
        return Stored(
            hashes=tuple(event.block_hashes),
            parent=event.parent_block_hash,
            tokens=tuple(event.token_ids),
            block_size=event.block_size,
            medium=event.medium,
            group=event.group_idx,
            extra_keys=None if event.extra_keys is None else tuple(event.extra_keys),
        )
    if isinstance(event, _BlockRemoved):
        return Removed(tuple(event.block_hashes), event.medium, event.group_idx)
    return Cleared()


def _apply(caches: EngineCaches, engine: str, seq: int, payload: bytes, replayed: bool = False) -> Gap | None:
    """``receive`` the batch; one the front cannot read loses the engine's state (its events unknown)."""
    try:
        batch = decode(payload)
    except KVEventsError:
        caches.lost(engine, seq + 1)
        return None
    return caches.receive(engine, seq, batch, replayed)


async def follow(
    engine: str,
    endpoint: str,
    caches: EngineCaches,
    replay_endpoint: str | None = None,
    topic: str = "",
    context: zmq.asyncio.Context | None = None,
    replay_timeout: float = REPLAY_TIMEOUT_SECONDS,
) -> None:
    """Follow ``engine``'s publisher at ``endpoint`` (its pod's address and the configured port:
    ``tcp://10.0.3.7:5557``) into ``caches`` until cancelled. A gap is filled from ``replay_endpoint``
    when there is one; what the replay cannot give is ``lost``, and the stream goes on."""
    context = context or zmq.asyncio.Context.instance()
    socket = context.socket(zmq.SUB)
    socket.setsockopt(zmq.SUBSCRIBE, topic.encode())
    socket.connect(endpoint)
    try:
        while True:
            frames = await socket.recv_multipart()
            if len(frames) != 3:
                continue  # not the publisher's (topic, number, payload)
            seq = int.from_bytes(frames[1], "big")
            gap = _apply(caches, engine, seq, frames[2])
            if gap is None:
                continue
            if replay_endpoint is not None:
                await replay(context, replay_endpoint, caches, gap, replay_timeout)
            if _apply(caches, engine, seq, frames[2]) is not None:
                caches.lost(engine, seq)
                _apply(caches, engine, seq, frames[2])
    finally:
        socket.close(linger=0)


async def replay(
    context: zmq.asyncio.Context,
    endpoint: str,
    caches: EngineCaches,
    gap: Gap,
    timeout: float = REPLAY_TIMEOUT_SECONDS,
) -> None:
    """Ask the publisher's ROUTER at ``endpoint`` for the batches from ``gap.first`` and apply those
    before ``gap.seen`` (the live stream brings the rest). A DEALER, not a REQ: one request, many
    answers. If the publisher no longer keeps the first ones, the engine's state is ``lost`` up to the
    first it sends and goes on from there."""
    socket = context.socket(zmq.DEALER)
    socket.connect(endpoint)
    try:
        await socket.send_multipart([b"", gap.first.to_bytes(8, "big")])
        while await socket.poll(int(timeout * 1000)):
            frames = await socket.recv_multipart()
            if len(frames) != 4:
                return
            seq = int.from_bytes(frames[2], "big", signed=True)
            if seq == END_OF_REPLAY:
                return
            if seq >= gap.seen:
                continue
            if _apply(caches, gap.engine, seq, frames[3], replayed=True) is not None:
                caches.lost(gap.engine, seq)
                _apply(caches, gap.engine, seq, frames[3], replayed=True)
    finally:
        socket.close(linger=0)
