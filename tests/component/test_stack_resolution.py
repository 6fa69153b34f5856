"""--stack NAME, and no --stack, find the stack file as pulumi does: in the project of the working
directory (not the checkout fleetctl is installed from), by the stack part of an org-qualified
name, and without --stack the stack pulumi has selected, or a refusal; never a silent dev."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fleetctl.cli import main
from fleetctl.stackfile import stack_path

PROJECT = "name: inference-fleet\nruntime: python\nstackConfigDir: config/stacks\n"


@pytest.fixture
def other_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A second inference-fleet project (its stacks elsewhere, a dev whose us-west-2 VPC differs),
    entered two directories deep; PULUMI_HOME is empty and no stack is selected."""
    root = tmp_path / "checkout"
    stacks = root / "config" / "stacks"
    stacks.mkdir(parents=True)
    (root / "Pulumi.yaml").write_text(PROJECT)
    text = stack_path("dev").read_text()
    assert text.count("10.40.0.0/16") == 1
    (stacks / "Pulumi.dev.yaml").write_text(text.replace("10.40.0.0/16", "10.41.0.0/16"))
    (stacks / "Pulumi.staging.yaml").write_text(text)
    deep = root / "docs" / "notes"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    monkeypatch.setenv("PWD", str(deep))
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "pulumi-home"))
    for variable in ("PULUMI_STACK", "PULUMI_BACKEND_URL"):
        monkeypatch.delenv(variable, raising=False)
    return root


def planned_cidr(out: Path) -> str:
    resources = json.loads((out / "plan.json").read_text())["resources"]
    [vpc] = [resource for resource in resources if resource["type"] == "awsx:ec2:Vpc"]
    return str(vpc["inputs"]["cidrBlock"])


def select(home: Path, project_file: Path, document: dict[str, object]) -> Path:
    """What `pulumi stack select` writes (pkg/workspace/workspace.go settingsPath)."""
    digest = hashlib.sha1(str(project_file).encode(), usedforsecurity=False).hexdigest()
    path = home / "workspaces" / f"inference-fleet-{digest}-workspace.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(document))
    return path


def test_stack_resolves_in_the_project_of_the_working_directory(
    other_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan"
    assert main(["plan", "--stack", "dev", "--out", str(out)]) == 0
    assert planned_cidr(out) == "10.41.0.0/16"
    first_line = capsys.readouterr().out.splitlines()[0]
    assert f"from {other_checkout / 'config' / 'stacks' / 'Pulumi.dev.yaml'}: " in first_line


@pytest.mark.parametrize("name", ["dev", "acme/dev", "acme/inference-fleet/dev", "organization/inference-fleet/dev"])
def test_org_qualified_names_name_the_stack_file_of_their_last_part(
    name: str, other_checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--stack", name]) == 0
    assert capsys.readouterr().out.startswith(f"{other_checkout / 'config' / 'stacks' / 'Pulumi.dev.yaml'}: valid")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("acme/other-project/dev", "the stack 'acme/other-project/dev' belongs to project 'other-project'"),
        ("a/b/c/d", "cannot read the stack name 'a/b/c/d': give NAME, ORG/NAME or ORG/PROJECT/NAME"),
        ("acme//dev", "cannot read the stack name 'acme//dev'"),
        ("dev/", "cannot read the stack name 'dev/'"),
        ("dev yaml", "'dev yaml' is not a stack name"),
        ("prod", "no stack file for stack 'prod' (--stack); stacks here: dev, staging"),
    ],
)
def test_a_name_pulumi_would_not_take_or_that_has_no_file_is_refused(
    name: str, message: str, other_checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--stack", name]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ")
    assert message in line


def test_without_stack_and_without_a_selection_it_refuses_naming_how_to_choose(
    other_checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: {other_checkout / 'Pulumi.yaml'}: no stack given and none selected for this project: "
        "pass --stack NAME (stacks here: dev, staging), or --stack-file PATH, or select one with "
        "`pulumi stack select NAME` or PULUMI_STACK"
    ]


def test_without_stack_the_stack_pulumi_selected_is_used_and_named(
    other_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = select(
        tmp_path / "pulumi-home",
        other_checkout / "Pulumi.yaml",
        {"stacks": {"https://api.pulumi.com": "acme/inference-fleet/staging"}},
    )
    assert main(["validate"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"{other_checkout / 'config' / 'stacks' / 'Pulumi.staging.yaml'}: valid")
    assert err == f"fleetctl: stack staging, selected by {workspace}\n"


def test_the_selection_of_the_current_backend_wins_and_pulumi_stack_overrides_it(
    other_checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "pulumi-home"
    select(
        home,
        other_checkout / "Pulumi.yaml",
        {"stacks": {"https://api.pulumi.com": "acme/inference-fleet/staging", "file://~": "organization/x/dev"}},
    )
    (home / "credentials.json").write_text(json.dumps({"current": "https://api.pulumi.com"}))
    assert main(["validate"]) == 0
    assert "Pulumi.staging.yaml: valid" in capsys.readouterr().out
    monkeypatch.setenv("PULUMI_STACK", "dev")
    assert main(["validate"]) == 0
    out, err = capsys.readouterr()
    assert "Pulumi.dev.yaml: valid" in out
    assert err == "fleetctl: stack dev, selected by PULUMI_STACK\n"


def test_outside_any_project_it_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PWD", str(tmp_path))
    assert main(["plan", "--stack", "dev", "--out", str(tmp_path / "plan")]) == 1
    assert "no Pulumi.yaml here or in any directory above" in capsys.readouterr().err
    assert not (tmp_path / "plan").exists()


def test_an_edit_writes_the_stack_file_of_the_project_here(
    other_checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = stack_path("dev").read_bytes()
    assert main(["scale", "assistant", "3", "--stack", "dev"]) == 0
    assert "replicas: 3" in (other_checkout / "config" / "stacks" / "Pulumi.dev.yaml").read_text()
    assert stack_path("dev").read_bytes() == ours
    capsys.readouterr()
