"""The canary edits of a Mooncake endpoint (docs/mooncake-canary.md), planned offline before and after on
the dev example, whose disaggregated endpoint chat-pd runs a canary set chat-pd-canary-*: each changes
exactly what it should and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.component.test_minimal_changes import (
    DEPLOYMENT,
    ROUTE,
    SERVICE,
    base_plans,
    paths,
    planned_edit,
    summary,
)

__all__ = ["base_plans"]  # the module's plans of the example stacks, shared

REGION = "us-west-2"
STATEFUL_SET = "kubernetes:apps/v1:StatefulSet"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
BUDGET = "kubernetes:policy/v1:PodDisruptionBudget"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
ACTION = "metadata.annotations['alb.ingress.kubernetes.io/actions.chat-pd-proxy'](json)"
CANARY = "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm-openai:v0.33.0-patch1"


def canary_set(action: str, verdict: str) -> list[tuple[str, str, str, str]]:
    """Every object of chat-pd's canary set (disaggregated: prefill, decode and the headless Service of the
    decode pods its routing proxy chooses between, proxy, their policies)."""
    name = f"{REGION}-chat-pd-canary"
    return [
        (action, DEPLOYMENT, f"{name}-prefill", verdict),
        (action, SERVICE, f"{name}-prefill", verdict),
        (action, BUDGET, f"{name}-prefill", verdict),
        (action, DEPLOYMENT, f"{name}-decode", verdict),
        (action, SERVICE, f"{name}-decode", verdict),
        (action, BUDGET, f"{name}-decode", verdict),
        (action, SERVICE, f"{name}-decode-pods", verdict),
        (action, CONFIG_MAP, f"{name}-proxy", verdict),
        (action, DEPLOYMENT, f"{name}-proxy", verdict),
        (action, SERVICE, f"{name}-proxy", verdict),
        (action, BUDGET, f"{name}-proxy", verdict),
        (action, POLICY, f"{name}-proxy", verdict),
        (action, POLICY, f"{name}-roles", verdict),
    ]


def route(entries: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [entry for entry in entries if entry["type"] == ROUTE]
    return found


def test_a_mooncake_canarys_weight_move_changes_only_the_route(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = planned_edit(base_plans, tmp_path, capsys, "dev", "canary", "weight", "chat-pd", "40")
    assert summary(entries) == [("update", ROUTE, f"{REGION}-chat-pd", "traffic only")]
    assert paths(entries[0]) == {f"{ACTION}.forwardConfig.targetGroups[{index}].weight" for index in (0, 1)}


def test_promoting_a_mooncake_canary_of_the_same_image_removes_the_canary_set_and_leaves_the_primary_alone(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dev's canary runs the primary's (pinned) release and tries a topology; promotion takes the canary's
    image, not its topology (a canary is sized for its share, not for all of it), so the primary's roles
    and proxy keep every field, and only the canary set and its target group go."""
    entries = planned_edit(base_plans, tmp_path, capsys, "dev", "canary", "promote", "chat-pd")
    assert summary(entries) == sorted(
        [*canary_set("delete", "delete"), ("update", ROUTE, f"{REGION}-chat-pd", "traffic only")]
    )
    # The primary's weight back to 100, the canary's target group gone.
    groups = f"{ACTION}.forwardConfig.targetGroups"
    assert paths(route(entries)) == {f"{groups}[0].weight", f"{groups}[1]"}


def test_rolling_back_a_mooncake_canary_removes_its_set_and_leaves_the_primary_alone(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = planned_edit(base_plans, tmp_path, capsys, "dev", "canary", "rollback", "chat-pd")
    assert summary(entries) == sorted(
        [*canary_set("delete", "delete"), ("update", ROUTE, f"{REGION}-chat-pd", "traffic only")]
    )


def test_a_canary_topology_change_touches_only_the_canary_set(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = planned_edit(
        base_plans, tmp_path, capsys, "dev", "topology", "set", "chat-pd", "--canary", "--prefill", "2"
    )
    assert summary(entries) == [("update", DEPLOYMENT, f"{REGION}-chat-pd-canary-prefill", "in place")]
    assert entries[0]["changes"] == [{"path": "spec.replicas", "old": 1, "new": 2, "forces_replacement": False}]


def test_starting_a_store_canary_creates_its_set_and_moves_the_route(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Mode store: one server and a master of its own, nothing of the endpoint's changes but the route."""
    entries = planned_edit(
        base_plans, tmp_path, capsys, "dev", "canary", "start", "kv-cache", "--image", CANARY, "--weight", "5"
    )
    name = f"{REGION}-kv-cache-canary"
    assert summary(entries) == sorted(
        [
            ("create", CONFIG_MAP, f"{name}-mooncake", "create"),
            ("create", STATEFUL_SET, f"{name}-store", "create"),
            ("create", SERVICE, f"{name}-store", "create"),
            ("create", DEPLOYMENT, name, "create"),
            ("create", SERVICE, name, "create"),
            ("create", BUDGET, name, "create"),
            ("create", POLICY, f"{name}-roles", "create"),
            ("create", POLICY, f"{name}-store", "create"),
            ("update", ROUTE, f"{REGION}-kv-cache", "traffic only"),
        ]
    )
