"""vLLM's KV events off the wire (front/kv_events.py): the decoder on the bytes vLLM 0.33.0 writes
(tests/front/kv_event_batches.py, held to the release by tests/vllm/test_kv_events.py), and the
subscriber on real ZeroMQ sockets over loopback, fed as the release's publisher feeds it: three frames
(topic, number as 8 bytes big-endian, payload) on a PUB socket, and a ROUTER that replays what it kept
from the number asked, then an end marker (vllm/distributed/kv_events.py at 0.33.0, lines 507-513 and
521-539)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec
import pytest
import zmq
import zmq.asyncio

from front.engine_caches import Batch, Cleared, EngineCache, EngineCaches, Removed, Stored
from front.kv_events import KVEventsError, decode, follow
from tests.front.kv_event_batches import BIG, DIGEST, ENCODED, cases, encode, root_block, root_key

TOPIC = b"kv-events"
END = (-1).to_bytes(8, "big", signed=True)


def test_the_copied_classes_encode_the_bytes_held() -> None:
    for name, batch in cases().items():
        assert encode(batch).hex() == ENCODED[name]


def test_a_batch_decodes_into_the_fronts_terms_field_by_field() -> None:
    """The batch is an array (ts, events, rank): were the decoder to read its fields in another order,
    or an event's fields under other names, this fails."""
    assert decode(bytes.fromhex(ENCODED["int hashes"])) == Batch(
        ts=1767225600.25,
        events=(
            Stored(hashes=(BIG, 17), parent=None, tokens=tuple(range(32)), block_size=16, medium="GPU", group=0),
            Stored(hashes=(18,), parent=17, tokens=tuple(range(32, 48)), block_size=16, medium="GPU", group=0),
            Stored(
                hashes=(31, 32),
                parent=None,
                tokens=tuple(range(500, 532)),
                block_size=16,
                medium="GPU",
                group=0,
                extra_keys=(("tenant-a",), None),
            ),
            Removed(hashes=(BIG,), medium="GPU", group=0),
            Cleared(),
        ),
        rank=1,
    )


def test_hashes_as_digests_and_another_medium_decode_as_they_came() -> None:
    batch = decode(bytes.fromhex(ENCODED["bytes hashes"]))
    assert batch.rank is None
    assert batch.events == (
        Stored(hashes=(DIGEST,), parent=None, tokens=(7,) * 16, block_size=16, medium="GPU"),
        Stored(hashes=(DIGEST[::-1],), parent=None, tokens=(), block_size=16, medium="cpu", group=0),
        Removed(hashes=(DIGEST,), medium="GPU"),
    )


@pytest.mark.parametrize(
    "payload",
    [
        msgspec.msgpack.encode([[], 1.5, 0]),  # events before ts
        msgspec.msgpack.encode([1.5, [{"type": "BlockMoved", "block_hashes": [1]}], 0]),
        msgspec.msgpack.encode([1.5, [{"type": "BlockRemoved", "medium": "GPU"}], 0]),  # no hashes
        b"\xc1",  # never used in msgpack
    ],
)
def test_a_payload_that_is_no_event_batch_is_refused(payload: bytes) -> None:
    with pytest.raises(KVEventsError, match="not a vLLM KV event batch"):
        decode(payload)


def _batch(number: int) -> bytes:
    return encode(root_block(number))


def _keys(*numbers: int) -> set[int]:
    return {root_key(number) for number in numbers}


class Publisher:
    """An engine's publisher as vLLM 0.33.0 frames it, on loopback: an XPUB (a PUB that also tells
    when the front has subscribed) and the replay's ROUTER, which keeps the batches given it."""

    def __init__(self, context: zmq.asyncio.Context) -> None:
        self.events = context.socket(zmq.XPUB)
        self.events_port = self.events.bind_to_random_port("tcp://127.0.0.1")
        self.router = context.socket(zmq.ROUTER)
        self.replay_port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.kept: list[tuple[int, bytes]] = []

    async def subscribed(self) -> None:
        assert await self.events.recv() == b"\x01" + TOPIC

    async def send(self, seq: int, payload: bytes) -> None:
        await self.events.send_multipart([TOPIC, seq.to_bytes(8, "big"), payload])

    async def serve_replay(self) -> None:
        while True:
            client, empty, start = await self.router.recv_multipart()
            first = int.from_bytes(start, "big")
            for seq, payload in self.kept:
                if seq >= first:
                    await self.router.send_multipart([client, empty, TOPIC, seq.to_bytes(8, "big"), payload])
            await self.router.send_multipart([client, empty, b"", END, b""])

    def close(self) -> None:
        self.events.close(linger=0)
        self.router.close(linger=0)


async def _run(script: list[tuple[int, bytes, bool, bool]], replay: bool, upto: int) -> EngineCache:
    """Each (number, payload, sent live, kept for replay) in turn; the front's cache once it has ``upto``."""
    context = zmq.asyncio.Context()
    publisher = Publisher(context)
    caches = EngineCaches()
    replay_endpoint = f"tcp://127.0.0.1:{publisher.replay_port}" if replay else None
    tasks: list[asyncio.Task[Any]] = [asyncio.create_task(publisher.serve_replay())]
    try:
        events = f"tcp://127.0.0.1:{publisher.events_port}"
        tasks.append(asyncio.create_task(follow("e", events, caches, replay_endpoint, TOPIC.decode(), context)))
        await asyncio.wait_for(publisher.subscribed(), 5)
        for seq, payload, live, kept in script:
            if kept:
                publisher.kept.append((seq, payload))
            if live:
                await publisher.send(seq, payload)
        deadline = time.monotonic() + 5
        while caches.engines.get("e", EngineCache()).next_seq != upto:
            assert time.monotonic() < deadline, "the front did not follow the stream"
            await asyncio.sleep(0.01)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        publisher.close()
        context.destroy(linger=0)
    return caches.engines["e"]


def test_the_front_follows_the_stream_and_fills_a_gap_from_the_replay() -> None:
    script = [(0, _batch(0), True, True), (1, _batch(1), False, True), (2, _batch(2), False, True)]
    cache = asyncio.run(_run([*script, (3, _batch(3), True, True)], replay=True, upto=4))
    assert set(cache.held) == _keys(0, 1, 2, 3)
    assert cache.complete


def test_a_gap_the_replay_cannot_fill_loses_what_came_before_it() -> None:
    """The publisher no longer keeps batch 1: the front starts again from batch 2, the oldest it has."""
    script = [(0, _batch(0), True, True), (1, _batch(1), False, False), (2, _batch(2), False, True)]
    cache = asyncio.run(_run([*script, (3, _batch(3), True, True)], replay=True, upto=4))
    assert set(cache.held) == _keys(2, 3)
    assert not cache.complete


def test_without_a_replay_endpoint_a_gap_loses_the_engines_state() -> None:
    script = [(0, _batch(0), True, True), (1, _batch(1), False, True), (2, _batch(2), True, True)]
    cache = asyncio.run(_run(script, replay=False, upto=3))
    assert set(cache.held) == _keys(2)
    assert not cache.complete


def test_a_batch_the_front_cannot_read_loses_the_engines_state() -> None:
    script = [(0, _batch(0), True, True), (1, b"\xc1", True, True), (2, _batch(2), True, True)]
    cache = asyncio.run(_run(script, replay=True, upto=3))
    assert set(cache.held) == _keys(2)
    assert not cache.complete
