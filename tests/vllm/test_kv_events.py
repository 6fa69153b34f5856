"""vLLM 0.33.0's own KV events against the front's decoder and subscriber (front/kv_events.py): the
release's vllm/distributed/kv_events.py, from its sdist (tools/vllm-cpu/build.sh caches it), encodes the
batches tests/front/ decodes to the very bytes those tests hold, and its ``ZmqEventPublisher``, made by
its ``EventPublisherFactory`` from its ``KVEventsConfig`` as the scheduler makes it
(v1/core/sched/scheduler.py), feeds ``follow`` over a real socket, the replay included.

The module runs as it is; of its imports from elsewhere in vLLM, vllm/config/kv_events.py is the sdist's
too (its ``config`` decorator as vllm/config/utils.py makes it: a pydantic dataclass forbidding extra
fields) and three are stand-ins, so that nothing else of vLLM (torch above all) is imported:
``init_logger`` (the standard library's logger), the network helpers (used only to bind ``tcp://*:0``,
which these tests do not) and ``ExternalBlockHash`` (v1/core/kv_cache_utils.py line 57's ``bytes | int``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import sys
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pydantic
import pytest
import zmq.asyncio

from front.engine_caches import EngineCaches
from front.kv_events import follow
from tests.front.kv_event_batches import ENCODED, cases, encode, root_block, root_key
from tests.vllm.test_versions import PINNED, sources


def _module(name: str, **attributes: Any) -> ModuleType:
    module = ModuleType(name)
    module.__dict__.update(attributes)
    return module


def _not_in_these_tests(*_: object) -> None:
    raise NotImplementedError("a stand-in: vllm/utils/network_utils.py is not loaded here")


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def upstream() -> ModuleType:
    """The release's vllm/distributed/kv_events.py, loaded from the sdist with the imports above."""
    package = sources(PINNED)

    def config(cls: type) -> type:
        return pydantic.dataclasses.dataclass(cls, config=pydantic.ConfigDict(extra="forbid"))

    stubs = {
        "vllm": _module("vllm"),
        "vllm.config": _module("vllm.config"),
        "vllm.config.utils": _module("vllm.config.utils", config=config),
        "vllm.logger": _module("vllm.logger", init_logger=logging.getLogger),
        "vllm.utils": _module("vllm.utils"),
        "vllm.utils.network_utils": _module(
            "vllm.utils.network_utils",
            get_ip=_not_in_these_tests,
            get_tcp_uri=_not_in_these_tests,
            is_valid_ipv6_address=_not_in_these_tests,
            split_zmq_path=_not_in_these_tests,
        ),
        "vllm.v1": _module("vllm.v1"),
        "vllm.v1.core": _module("vllm.v1.core"),
        "vllm.v1.core.kv_cache_utils": _module("vllm.v1.core.kv_cache_utils", ExternalBlockHash=bytes | int),
    }
    saved = {name: sys.modules.get(name) for name in [*stubs, "vllm.config.kv_events"]}
    sys.modules.update(stubs)
    try:
        sys.modules["vllm.config.kv_events"] = _load(package / "config" / "kv_events.py", "vllm.config.kv_events")
        return _load(package / "distributed" / "kv_events.py", "vllm_0_33_0_kv_events")
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


@pytest.mark.parametrize("name", sorted(ENCODED))
def test_the_release_encodes_each_batch_to_the_bytes_the_decoders_tests_hold(name: str) -> None:
    """A field renamed, added with a value, moved in the batch (an array) or a class option changed
    in a new release changes these bytes."""
    assert encode(cases(upstream())[name]).hex() == ENCODED[name]
    assert encode(cases()[name]).hex() == ENCODED[name]  # tests/front's copy of the classes agrees


def _publisher(directory: Path, buffer_steps: int) -> Any:
    """A ZmqEventPublisher on ipc sockets (bound, as a wildcard TCP address would be), made as the
    scheduler makes it: ``EventPublisherFactory.create(kv_events_config, data_parallel_index)``."""
    module = upstream()
    settings = module.KVEventsConfig(
        enable_kv_cache_events=True,
        endpoint=f"ipc://{directory}/events",
        replay_endpoint=f"ipc://{directory}/replay",
        buffer_steps=buffer_steps,
        topic="kv-events",
    )
    assert settings.publisher == "zmq"  # __post_init__: enabled without a publisher named means zmq
    return module.EventPublisherFactory.create(settings, 0)


async def _follow_while_publishing(directory: Path, buffer_steps: int, before: int) -> tuple[EngineCaches, int]:
    """``before`` batches published with no subscriber (gone for it, kept for replay), then one more
    every 20 ms until the front has one; returns the front's caches once it has all, and the count."""
    module = upstream()
    publisher = _publisher(directory, buffer_steps)
    context = zmq.asyncio.Context()
    caches = EngineCaches()
    published = 0

    def publish() -> None:
        nonlocal published
        publisher.publish(root_block(published, module))
        published += 1

    def caught_up() -> bool:
        cache = caches.engines.get("engine-0")
        return cache is not None and cache.next_seq == published

    try:
        for _ in range(before):
            publish()
        await asyncio.sleep(0.2)  # the publisher's thread sends them: to no one
        events, replay = publisher.get_publisher_config().endpoint, publisher.get_publisher_config().replay_endpoint
        task = asyncio.create_task(follow("engine-0", events, caches, replay, "kv-events", context))
        await _until(lambda: "engine-0" in caches.engines and caches.engines["engine-0"].next_seq is not None, publish)
        await _until(caught_up, lambda: None)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finally:
        publisher.shutdown()
        context.destroy(linger=0)
    return caches, published


async def _until(done: Callable[[], bool], meanwhile: Callable[[], None], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "the front did not catch up with the publisher"
        meanwhile()
        await asyncio.sleep(0.02)


def test_the_releases_publisher_feeds_the_front_and_its_replay_fills_what_the_front_joined_too_late_for(
    tmp_path: Path,
) -> None:
    caches, published = asyncio.run(_follow_while_publishing(tmp_path, buffer_steps=10_000, before=5))
    cache = caches.engines["engine-0"]
    assert cache.complete  # batches 0-4 came from the replay: the state follows the engine from its start
    assert set(cache.held) == {root_key(number) for number in range(published)}


def test_a_replay_that_no_longer_has_the_first_batches_leaves_the_engine_known_only_from_its_oldest_kept(
    tmp_path: Path,
) -> None:
    caches, published = asyncio.run(_follow_while_publishing(tmp_path, buffer_steps=2, before=5))
    cache = caches.engines["engine-0"]
    assert not cache.complete
    assert {root_key(number) for number in range(3)}.isdisjoint(cache.held)  # batches 0-2 are gone
    assert root_key(published - 1) in cache.held
