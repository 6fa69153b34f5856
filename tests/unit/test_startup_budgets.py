"""Startup budgets from the model: the startup probe, the Deployment's progress deadline and Pulumi's
rollout wait follow from the model's size and the path its weights take, not one constant."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.render.classic import classic_objects
from components.render.startup import (
    BYTES_PER_SECOND,
    STARTUP_PERIOD_SECONDS,
    UNKNOWN_SIZE_SECONDS,
    LoadPath,
    rollout_timeout,
    startup_seconds,
)
from tests.unit.stack_builders import DELETE, classic_endpoint, placed_endpoint, stack_config

GB = 1_000_000_000


def deployment(overrides: dict[str, Any]) -> dict[str, Any]:
    config = stack_config(endpoints={"chat": classic_endpoint(overrides)})
    manifest: dict[str, Any] = classic_objects(placed_endpoint(config))["deployment"]
    return manifest


def startup_probe(overrides: dict[str, Any]) -> dict[str, Any]:
    probe: dict[str, Any] = deployment(overrides)["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
    return probe


def budget(overrides: dict[str, Any]) -> int:
    probe = startup_probe(overrides)
    return int(probe["failureThreshold"] * probe["periodSeconds"])


def test_a_declared_model_size_sizes_the_startup_probe_and_the_progress_deadline() -> None:
    overrides = {"model": "org/private-model", "model_size": str(800 * GB)}
    expected = startup_seconds(800 * GB, "hub")
    assert budget(overrides) == expected
    assert deployment(overrides)["spec"]["progressDeadlineSeconds"] == 2 * expected
    assert expected > UNKNOWN_SIZE_SECONDS  # an 800 GB download no longer restarts at 30 minutes


def test_a_known_model_is_sized_from_the_catalog() -> None:
    assert budget({"model": "meta-llama/Llama-3.1-405B-Instruct"}) == startup_seconds(811_800_000_000, "hub")


def test_a_model_of_unknown_size_keeps_thirty_minutes() -> None:
    assert budget({"model": "org/private-model"}) == UNKNOWN_SIZE_SECONDS


@pytest.mark.parametrize(
    ("overrides", "path"),
    [
        ({"model_source": "s3://models/m"}, "stream"),
        ({"model_source": "s3://models/m", "model_loading": "sync"}, "sync"),
        ({"model_source": "s3://models/m", "model_loading": "cache"}, "cache"),
        ({"model": DELETE, "model_path": "/weights/m"}, "local"),
        ({}, "hub"),
    ],
    ids=["stream", "sync", "cache", "local", "hub"],
)
def test_the_budget_follows_the_path_the_weights_take(overrides: dict[str, Any], path: LoadPath) -> None:
    assert budget({**overrides, "model_size": str(100 * GB)}) == startup_seconds(100 * GB, path)


def test_a_faster_path_gets_a_shorter_budget() -> None:
    order = sorted(BYTES_PER_SECOND, key=lambda path: startup_seconds(100 * GB, path))
    assert order == sorted(BYTES_PER_SECOND, key=lambda path: -BYTES_PER_SECOND[path])


@given(size=st.integers(min_value=1, max_value=2_000 * GB), path=st.sampled_from(sorted(BYTES_PER_SECOND)))
def test_the_budget_covers_the_load_at_its_planning_rate_twice(size: int, path: LoadPath) -> None:
    seconds = startup_seconds(size, path)
    assert seconds % STARTUP_PERIOD_SECONDS == 0
    assert seconds >= 2 * size / BYTES_PER_SECOND[path]


def test_pulumi_waits_longer_than_the_progress_deadline() -> None:
    assert rollout_timeout(3600) == "130m"
