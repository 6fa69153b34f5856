"""Where fleetctl plan writes: a new, empty or plan directory only; never a user's file; no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetctl.cli import main
from fleetctl.plan import PLAN_MARKER
from fleetctl.stackfile import stack_path

PLAN = ["plan", "--stack", "dev", "--out"]


def files_under(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file()
    }


def test_a_directory_holding_other_files_is_refused_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "work"
    (out / "src").mkdir(parents=True)
    (out / "src" / "main.py").write_text("print('mine')\n")
    (out / "NOTES.md").write_text("my notes\n")
    before = files_under(out)
    assert main([*PLAN, str(out)]) == 1
    out_text, err = capsys.readouterr()
    assert out_text == ""
    assert err.splitlines() == [
        f"error: {out}: holds files that are not a plan (NOTES.md, src); fleetctl plan writes only into a new or "
        "empty directory or a plan directory it wrote: give another --out"
    ]
    assert files_under(out) == before
    assert sorted(path.name for path in out.iterdir()) == ["NOTES.md", "src"]


def test_the_working_directory_is_refused_when_it_holds_files_and_written_when_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    busy, empty = tmp_path / "busy", tmp_path / "empty"
    busy.mkdir()
    (busy / "keep.txt").write_text("x")
    empty.mkdir()
    dev = ["plan", "--stack-file", str(stack_path("dev")), "--out", "."]
    monkeypatch.chdir(busy)
    assert main(dev) == 1
    assert capsys.readouterr().err.startswith("error: .: holds files that are not a plan (keep.txt);")
    assert [path.name for path in busy.iterdir()] == ["keep.txt"]
    monkeypatch.chdir(empty)
    assert main(dev) == 0
    wrote = [line for line in capsys.readouterr().out.splitlines() if line.startswith("wrote ")]
    assert wrote[0].startswith("wrote plan.json and ")  # notes may follow it
    assert sorted(path.name for path in empty.iterdir()) == [PLAN_MARKER, "manifests", "plan.json"]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("root", "holds files that are not a plan"),
        ("a file", "is not a directory"),
        ("below a file", "cannot be made: "),
        ("unwritable", "cannot write the plan: "),
    ],
)
def test_an_impossible_output_is_one_error_line_and_no_traceback(
    case: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("data")
    out = {
        "root": Path("/"),
        "a file": a_file,
        "below a file": a_file / "plan",
        "unwritable": Path("/sys/fleetctl-plan"),  # sysfs refuses new directories, even to root
    }[case]
    assert main([*PLAN, str(out)]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {out}: {message}")
    assert a_file.read_text() == "data"


def test_a_plan_directory_is_replaced_whole_by_the_next_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan"
    assert main(["plan", "--stack", "prod", "--out", str(out)]) == 0
    assert (out / "manifests" / "eu-west-1").is_dir()
    assert main([*PLAN, str(out)]) == 0  # dev has no eu-west-1: its manifests must go
    assert sorted(path.name for path in (out / "manifests").iterdir()) == ["us-west-2"]
    assert json.loads((out / "plan.json").read_text())["stack"] == "dev"
    assert sorted(path.name for path in out.iterdir()) == [PLAN_MARKER, "manifests", "plan.json"]
    assert [path.name for path in tmp_path.iterdir()] == ["plan"]
    capsys.readouterr()


def test_a_plan_directory_written_before_the_marker_is_replaced_too(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    (out / "manifests" / "us-west-2").mkdir(parents=True)
    (out / "plan.json").write_text("{}")
    assert main([*PLAN, str(out)]) == 0
    assert (out / PLAN_MARKER).is_file()
    assert json.loads((out / "plan.json").read_text())["stack"] == "dev"


def test_a_directory_with_only_a_manifests_directory_is_not_taken_for_a_plan(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    (out / "manifests").mkdir(parents=True)
    (out / "manifests" / "app.yaml").write_text("kind: Deployment\n")
    assert main([*PLAN, str(out)]) == 1
    assert (out / "manifests" / "app.yaml").read_text() == "kind: Deployment\n"


def test_the_summary_counts_every_resource_of_plan_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan"
    assert main(["plan", "--stack", "prod", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    resources = json.loads((out / "plan.json").read_text())["resources"]
    assert lines[0] == f"plan of stack prod from stacks/Pulumi.prod.yaml: {len(resources)} resources"
    notes = [line for line in lines if line.startswith("note: ")]  # huge pages no pod requests (docs/efa.md)
    assert lines[-len(notes) - 1].startswith("wrote ")
    rows = [line.split() for line in lines[1 : -len(notes) - 1]]
    assert sum(int(row[1]) for row in rows) == len(resources)
    assert ["global", "1", "pulumi:pulumi:Stack"] in rows
    assert notes[0] == (  # the components whose children the offline plan does not model
        "note: awsx:ec2:Vpc (2), eks:index:Cluster (2), eks:index:ManagedNodeGroup (8) are counted as one "
        "resource each: their providers create their children during `pulumi up`, which the offline plan does not "
        "model (`pulumi preview` lists them)"
    )
