"""``fleetctl region drain`` / ``undrain`` (docs/global.md): the region's traffic dial as a reviewed
edit, refused byte for byte where it would take the last region out, and planned as one endpoint
group's traffic dial, labelled ``traffic only``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleetctl.cli import main as fleetctl
from fleetctl.diff import main as diff
from fleetctl.stackfile import stack_path
from tests.component.programs import plan_directory
from tests.component.test_global_front import ENDPOINT_GROUP, front_stack_file


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = fleetctl(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_drain_writes_a_zero_dial_and_undrain_restores_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = front_stack_file(tmp_path)
    before = stack.read_bytes()
    code, out, err = run(capsys, "region", "drain", "eu-west-1", "--stack-file", str(stack), "--output", "json")
    assert code == 0, err
    record = json.loads(out)
    assert record["command"] == "region drain"
    assert [(change["path"], change["after"]) for change in record["changes"]] == [
        ("global.regions", {"eu-west-1": {"traffic_dial": 0}})
    ]
    assert "eu-west-1: {traffic_dial: 0}" in stack.read_text()
    code, _, err = run(capsys, "region", "undrain", "eu-west-1", "--stack-file", str(stack))
    assert code == 0, err
    assert stack.read_bytes() == before


def test_draining_the_last_serving_region_is_refused_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = front_stack_file(tmp_path)
    assert run(capsys, "region", "drain", "eu-west-1", "--stack-file", str(stack))[0] == 0
    drained = stack.read_bytes()
    code, _, err = run(capsys, "region", "drain", "us-east-1", "--stack-file", str(stack))
    assert code == 1
    assert "global.regions.us-east-1.traffic_dial: us-east-1 is the last region serving" in err
    assert stack.read_bytes() == drained


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("region", "drain", "us-west-2"), "global.regions.us-west-2: is not a region of this stack"),
        (("region", "undrain", "ap-south-1"), "global.regions.ap-south-1: is not a region of this stack"),
    ],
)
def test_a_region_not_of_the_stack_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    stack = front_stack_file(tmp_path)
    before = stack.read_bytes()
    code, _, err = run(capsys, *argv, "--stack-file", str(stack))
    assert code == 1
    assert message in err
    assert stack.read_bytes() == before


def test_without_the_front_there_is_no_dial_to_move(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_bytes(stack_path("dev").read_bytes())
    before = stack.read_bytes()
    code, _, err = run(capsys, "region", "drain", "us-west-2", "--stack-file", str(stack))
    assert code == 1
    assert "global.enabled: is not true" in err
    assert stack.read_bytes() == before


def test_repeats_are_no_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = front_stack_file(tmp_path)
    code, out, _ = run(capsys, "region", "undrain", "eu-west-1", "--stack-file", str(stack))
    assert code == 0
    assert "no change" in out
    assert "already serves at traffic_dial 100" in out
    assert run(capsys, "region", "drain", "eu-west-1", "--stack-file", str(stack))[0] == 0
    drained = stack.read_bytes()
    code, out, _ = run(capsys, "region", "drain", "eu-west-1", "--stack-file", str(stack))
    assert code == 0
    assert "already drained" in out
    assert stack.read_bytes() == drained


def changes(capsys: pytest.CaptureFixture[str], base: Path, head: Path) -> list[dict[str, Any]]:
    code = diff([str(base), str(head), "--output", "json"])
    out, err = capsys.readouterr()
    assert code == 2, err
    document = json.loads(out)
    return [{**entry, "region": name} for name, region in document["regions"].items() for entry in region["resources"]]


def test_a_dial_move_changes_one_endpoint_group_only_as_traffic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = front_stack_file(tmp_path / "edit")
    base = plan_directory(stack, tmp_path / "base")
    assert run(capsys, "region", "drain", "eu-west-1", "--stack-file", str(stack))[0] == 0
    head = plan_directory(stack, tmp_path / "head")
    (entry,) = changes(capsys, base, head)
    assert (entry["action"], entry["type"], entry["name"], entry["verdict"]) == (
        "update",
        ENDPOINT_GROUP,
        "global-front-eu-west-1",
        "traffic only",
    )
    assert entry["region"] == "global front"  # not us-west-2, where only the accelerator's API answers
    assert [(change["path"], change["old"], change["new"]) for change in entry["changes"]] == [
        ("trafficDialPercentage", 100, 0)
    ]


def test_a_drain_says_the_region_still_takes_failover_traffic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Global Accelerator ignores the traffic dial when it fails over from a region with no healthy
    endpoint (Developer Guide, "How failover works for unhealthy endpoints"): a drain never promises
    a region that takes nothing, and names the weight that keeps it out of failover."""
    stack = front_stack_file(tmp_path)
    code, out, err = run(capsys, "region", "drain", "eu-west-1", "--stack-file", str(stack), "--output", "json")
    assert code == 0, err
    (note,) = json.loads(out)["notes"]
    assert note.startswith("eu-west-1 still takes failover traffic")
    assert "global.regions.eu-west-1.weight: 0" in note
