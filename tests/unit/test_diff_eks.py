"""What fleetctl diff says about EKS changes: Kubernetes minor jumps, refused with the steps to take
(EKS updates a control plane one minor version at a time, never back: "Update existing cluster to new
Kubernetes version", Amazon EKS User Guide), and node group scaling updates, which send the whole
scaling config (terraform-provider-aws resourceNodeGroupUpdate, internal/service/eks/node_group.go)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.spec.upgrades import upgrade_problem
from fleetctl.diff import diff_plans, main, render_json, render_text
from fleetctl.whole_components import diff_note
from tests.unit.test_diff import only, plan, resource

CLUSTER = "eks:index:Cluster"
NODE_GROUP = "eks:index:ManagedNodeGroup"


def cluster(version: str) -> dict[str, Any]:
    return resource(CLUSTER, "us-east-1-eks", {"name": "inference-fleet-test-us-east-1", "version": version})


def group(min_size: int = 2, max_size: int = 9, desired: int = 2) -> dict[str, Any]:
    scaling = {"minSize": min_size, "maxSize": max_size, "desiredSize": desired}
    return resource(NODE_GROUP, "us-east-1-p5", {"version": "1.34", "scalingConfig": scaling})


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("1.34", "1.35", None),
        ("1.34", "1.34", None),
        (
            "1.34",
            "1.36",
            "us-east-1: kubernetes_version 1.34 -> 1.36 skips 1.35; EKS upgrades one minor version per update: "
            "set 1.35, run `pulumi up`, then 1.36",
        ),
        (
            "1.32",
            "1.35",
            "us-east-1: kubernetes_version 1.32 -> 1.35 skips 1.33, 1.34; EKS upgrades one minor version per update: "
            "set 1.33, run `pulumi up`, then 1.34, then 1.35",
        ),
        (
            "1.35",
            "1.34",
            "us-east-1: kubernetes_version 1.35 -> 1.34 goes back; EKS never downgrades a cluster: keep 1.35 "
            "(or replace the cluster)",
        ),
    ],
)
def test_only_one_minor_forward_is_an_upgrade(old: str, new: str, expected: str | None) -> None:
    assert upgrade_problem(old, new, "us-east-1") == expected


def test_a_two_minor_jump_is_refused_naming_the_version_between() -> None:
    diff = diff_plans(plan(cluster("1.34")), plan(cluster("1.36")))
    assert diff.refusals == (
        "us-east-1 (us-east-1-eks): kubernetes_version 1.34 -> 1.36 skips 1.35; EKS upgrades one minor version "
        "per update: set 1.35, run `pulumi up`, then 1.36",
    )
    assert "!! refused: us-east-1 (us-east-1-eks): kubernetes_version 1.34 -> 1.36 skips 1.35" in render_text(
        diff, "a", "b"
    )
    assert json.loads(render_json(diff, "a", "b"))["refusals"] == list(diff.refusals)


def test_a_one_minor_upgrade_is_an_ordinary_update() -> None:
    diff = diff_plans(plan(cluster("1.34")), plan(cluster("1.35")))
    assert diff.refusals == ()
    assert only(diff).action == "update"


def test_the_command_shows_the_diff_and_exits_1_on_a_refused_jump(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(json.dumps(plan(cluster("1.34"))))
    head.write_text(json.dumps(plan(cluster("1.36"))))
    assert main([str(base), str(head)]) == 1
    captured = capsys.readouterr()
    assert "us-east-1-eks  [in place]" in captured.out
    assert "error: us-east-1 (us-east-1-eks): kubernetes_version 1.34 -> 1.36 skips 1.35" in captured.err


def test_a_min_or_max_edit_says_the_whole_scaling_config_goes_with_the_live_size() -> None:
    note, whole = only(diff_plans(plan(group(min_size=2)), plan(group(min_size=4, desired=4)))).notes
    assert whole == diff_note("eks:index:ManagedNodeGroup")
    assert note.startswith("scaling: minSize 2 -> 4, desiredSize 2 -> 4: EKS receives min, max and desired together")
    assert "live size" in note


def test_a_desired_size_edit_alone_says_a_deployed_group_keeps_its_size() -> None:
    note, _ = only(diff_plans(plan(group(desired=2)), plan(group(desired=5)))).notes
    assert note.startswith("scaling: desiredSize 2 -> 5: desired_size is the size at creation only")


def test_other_node_group_changes_carry_no_scaling_note() -> None:
    changed = group()
    changed["inputs"]["version"] = "1.35"
    assert only(diff_plans(plan(group()), plan(changed))).notes == (diff_note("eks:index:ManagedNodeGroup"),)
