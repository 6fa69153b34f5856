"""fleetctl diff on edits of the example stacks: exactly the expected change set, exit codes, formats."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import fleetctl.diff.command
from components.catalog import pins
from fleetctl.diff import baseref, main
from fleetctl.stackfile import stack_path
from tests.component.programs import edited, git, plan_directory, project_copy

NEW_REGION = """\
    eu-central-1:
      vpc:
        cidr: 10.50.0.0/16
        availability_zones: [eu-central-1a, eu-central-1b]
      cluster_access: {public_access_cidrs: [203.0.113.0/24]}
      node_groups:
        system:
          instance_types: [m7i.xlarge]
          min_size: 2
          max_size: 3
          desired_size: 2
        gpu:
          instance_types: [g6e.12xlarge]
          min_size: 0
          max_size: 5
          desired_size: 1
  inference-fleet:endpoints:
"""

RAISE_GPU_MAX_SIZE = ("min_size: 0\n          max_size: 6", "min_size: 0\n          max_size: 7")


@pytest.fixture(scope="module")
def base_plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The unedited example stacks, planned once for the module."""
    root = tmp_path_factory.mktemp("base")
    return {stack: plan_directory(stack_path(stack), root / stack) for stack in ("dev", "prod")}


@pytest.fixture(scope="module")
def scaled_dev(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dev stack with the gpu node group's max_size raised from 6 to 7, planned."""
    root = tmp_path_factory.mktemp("scaled")
    return plan_directory(edited(root / "stack", "dev", RAISE_GPU_MAX_SIZE), root / "plan")


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(argument) for argument in argv])
    out, err = capsys.readouterr()
    return code, out, err


def diff_json(capsys: pytest.CaptureFixture[str], base: Path, head: Path) -> dict[str, Any]:
    code, out, err = run(capsys, base, head, "--format", "json")
    assert code == 2, err
    document: dict[str, Any] = json.loads(out)
    return document


def resources(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [entry for region in document["regions"].values() for entry in region["resources"]]


def test_same_config_twice_is_an_empty_diff(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, base_plans["dev"], edited(tmp_path, "dev"))
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == "no changes"


def test_adding_a_region_only_creates_resources_in_that_region(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = edited(tmp_path, "dev", ("  inference-fleet:endpoints:\n", NEW_REGION))
    document = diff_json(capsys, base_plans["dev"], head)
    assert list(document["regions"]) == ["eu-central-1"]
    created = resources(document)
    assert {entry["action"] for entry in created} == {"create"}
    assert document["summary"]["create"] == len(created)
    assert {"eks:index:Cluster", "awsx:ec2:Vpc", "pulumi:providers:aws"} <= {entry["type"] for entry in created}


def test_raising_a_node_groups_max_size_updates_only_its_scaling_config(
    base_plans: dict[str, Path], scaled_dev: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = diff_json(capsys, base_plans["dev"], scaled_dev)
    assert [
        (entry["action"], entry["type"], entry["name"], entry["verdict"], entry["changes"])
        for entry in resources(document)
    ] == [
        (
            "update",
            "eks:index:ManagedNodeGroup",
            "us-west-2-gpu",
            "in place",
            [{"path": "scalingConfig.maxSize", "old": 6, "new": 7, "forces_replacement": False}],
        )
    ]


def test_changing_cold_tier_expiration_updates_only_the_lifecycle_configuration(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = edited(tmp_path, "prod", ("expiration_days: 30", "expiration_days: 45"))
    document = diff_json(capsys, base_plans["prod"], head)
    assert [(entry["action"], entry["type"], entry["verdict"]) for entry in resources(document)] == [
        ("update", "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "in place")
    ]
    assert list(document["regions"]) == ["us-east-1"]
    assert resources(document)[0]["changes"] == [
        {"path": "rules[0].expiration.days", "old": 30, "new": 45, "forces_replacement": False}
    ]


def test_changing_the_kubernetes_version_updates_the_cluster_its_node_groups_and_the_autoscaler_image(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = edited(tmp_path, "dev", ('kubernetes_version: "1.34"', 'kubernetes_version: "1.35"'))
    document = diff_json(capsys, base_plans["dev"], head)
    version = [{"path": "version", "old": "1.34", "new": "1.35", "forces_replacement": False}]
    images = pins().charts.cluster_autoscaler.images
    image = [{"path": "values.image.tag", "old": images["1.34"], "new": images["1.35"], "forces_replacement": False}]
    assert [
        (entry["action"], entry["type"], entry["name"], entry["verdict"], entry["changes"])
        for entry in resources(document)
    ] == [
        ("update", "eks:index:Cluster", "us-west-2-eks", "in place", version),
        ("update", "eks:index:ManagedNodeGroup", "us-west-2-gpu", "new generation", version),
        ("update", "eks:index:ManagedNodeGroup", "us-west-2-system", "new generation", version),
        ("update", "kubernetes:helm.sh/v3:Release", "us-west-2-cluster-autoscaler", "in place", image),
    ]


def test_changing_a_node_groups_instance_type_replaces_the_managed_node_group(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = edited(tmp_path, "dev", ("[g6e.12xlarge]", "[g6e.24xlarge]"))
    code, out, _ = run(capsys, base_plans["dev"], head)
    assert code == 2
    assert "+- replace eks:index:ManagedNodeGroup  us-west-2-gpu  [new generation]" in out
    assert 'instanceTypes[0]: "g6e.12xlarge" -> "g6e.24xlarge"  (forces replacement)' in out
    assert "total: 0 to create, 0 to update, 1 to replace, 0 to delete" in out


ONE_MORE_ENDPOINT = (
    "    summarize:                      # classic, autoscaled, with a 10% canary\n",
    "    code:                           # one more classic endpoint, sorted between chat and reason\n"
    "      image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/summarize-vllm:2026.11.1\n"
    "      node_group: g6e\n"
    "      gpu_count: 1\n"
    "      model: meta-llama/Llama-3.1-8B-Instruct\n"
    "      replicas: 2\n"
    "    summarize:                      # classic, autoscaled, with a 10% canary\n",
)


def test_adding_an_endpoint_on_prod_is_its_creates_and_one_line_per_dashboard(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = plan_directory(edited(tmp_path / "stack", "prod", ONE_MORE_ENDPOINT), tmp_path / "plan")
    code, out, err = run(capsys, base_plans["prod"], head)
    assert code == 2, err
    regions = [line.split(":")[0] for line in out.splitlines() if line.endswith("0 to replace, 0 to delete")]
    assert regions == ["eu-west-1", "us-east-1", "total"]
    for region in regions[:2]:
        block = out.split(f"\n{region}: ", 1)[1].split("\n\n", 1)[0].splitlines()
        assert block[0] == "6 to create, 1 to update, 0 to replace, 0 to delete"
        creates = [line.split()[2:4] for line in block if line.startswith("   + create")]
        assert [name for _, name in creates] == [f"{region}-code"] * 6
        update = block.index(f"   ~ update  kubernetes:core/v1:ConfigMap  {region}-dashboard  [in place]")
        assert update == 7  # after the creates: the real change first
        (summary,) = [line.strip() for line in block[update + 1 :] if not line.startswith("  verdicts:")][:1]
        assert summary == (
            f"data['inference-fleet-{region}.json']: generated Grafana dashboard: "
            "9 panels added (row 'code / server (vllm, inference)'); 43 panels moved (position only)"
        )
        assert block[update + 2] == "  verdicts:"
    assert "panels[" not in out


def test_text_output_groups_by_region_with_a_verdict_per_kind(
    base_plans: dict[str, Path], scaled_dev: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, base_plans["dev"], scaled_dev)
    assert (code, err) == (2, "")
    assert out.splitlines()[2:] == [
        "us-west-2: 0 to create, 1 to update, 0 to replace, 0 to delete",
        "   ~ update  eks:index:ManagedNodeGroup  us-west-2-gpu  [in place]",
        "        scalingConfig.maxSize: 6 -> 7",
        "        scaling: maxSize 6 -> 7: EKS receives min, max and desired together; desired is the group's live "
        "size, read when `pulumi up` runs and kept within the new [minSize, maxSize], so running nodes stay unless "
        "they lie outside the new bounds",
        "        a pulumi-eks 4.4.0 component shown as one resource: its inputs are compared; what its children "
        "do is for `pulumi preview` to say",
        "  verdicts:",
        "       eks:index:ManagedNodeGroup: in place (1 update)",
        "",
        "total: 0 to create, 1 to update, 0 to replace, 0 to delete",
    ]


def test_markdown_output_has_a_table_per_region(
    base_plans: dict[str, Path], scaled_dev: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, base_plans["dev"], scaled_dev, "--format", "markdown")
    assert code == 2
    lines = out.splitlines()
    header = lines.index("| | action | type | name | verdict | changes |")
    assert lines[header - 2].startswith("#### us-west-2")
    assert lines[header + 1] == "|---|---|---|---|---|---|"
    assert "<code>scalingConfig.maxSize</code>: <code>6</code> → <code>7</code>" in lines[header + 2]


def test_json_output_parses_and_is_stable(
    base_plans: dict[str, Path], scaled_dev: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = run(capsys, base_plans["dev"], scaled_dev, "--format", "json")
    assert first == run(capsys, base_plans["dev"], scaled_dev, "--format", "json")
    document = json.loads(first[1])
    assert document["summary"] == {"create": 0, "update": 1, "replace": 0, "delete": 0, "rename": 0, "loud": 0}
    assert first[1] == json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


INVALID_DECODE = (
    "topology: {prefill: 1, decode: 1}\n        transfer:",
    "topology: {prefill: 1, decode: true}\n        transfer:",
)


def test_invalid_stack_exits_1_with_the_validate_error_lines(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = edited(tmp_path, "dev", INVALID_DECODE)
    code, out, err = run(capsys, base_plans["dev"], head)
    assert (code, out) == (1, "")
    assert all(line.startswith("error: ") for line in err.splitlines())
    assert (
        "error: endpoints.chat-pd.mooncake.topology.decode: must be an integer in [1, 1000], got True (a boolean)"
        in err.splitlines()
    )


@pytest.mark.parametrize("case", ["missing", "directory without plan", "not json", "not a plan", "not yaml"])
def test_unreadable_input_exits_1_naming_it(
    case: str, base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "side"
    if case == "directory without plan":
        target.mkdir()
    elif case == "not json":
        target.mkdir()
        (target / "plan.json").write_text("{not json")
    elif case == "not a plan":
        target = tmp_path / "plan.json"
        target.write_text('{"resources": [{"urn": 1}]}')
    elif case == "not yaml":
        target = tmp_path / "Pulumi.x.yaml"
        target.write_text("config: [unclosed\n")
    code, out, err = run(capsys, base_plans["dev"], target)
    assert (code, out) == (1, "")
    # A YAML error is placed in the file: error: FILE:LINE:COLUMN: ...
    assert err.startswith(f"error: {target}:2:1: " if case == "not yaml" else f"error: {target}: ")
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [["only-one"], ["a", "b", "c"], ["--format", "yaml", "a", "b"]])
def test_usage_errors_exit_1_not_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (1, "")
    assert err.startswith("error: ")


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A git repository holding a copy of this checkout's program and stacks, committed once."""
    root = project_copy(tmp_path / "repo")
    git(root, "init", "--quiet")
    git(root, "add", ".")
    git(root, "commit", "--quiet", "-m", "base")
    return root


IDLE_TIMEOUT = ("IDLE_TIMEOUT_SECONDS = 600\n", "IDLE_TIMEOUT_SECONDS = 300\n")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_base_ref_plans_the_stack_file_as_it_was_at_that_commit(
    repository: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = edited(repository / "stacks", "dev", RAISE_GPU_MAX_SIZE)
    code, out, err = run(capsys, "--base-ref", "HEAD", stack, "--format", "json")
    assert code == 2, err
    document = json.loads(out)
    assert document["base"] == "HEAD:stacks/Pulumi.dev.yaml"
    assert [(entry["name"], entry["changes"][0]["path"]) for entry in resources(document)] == [
        ("us-west-2-gpu", "scalingConfig.maxSize")
    ]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_base_ref_plans_the_base_with_the_base_commits_own_program(
    repository: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stack file is the same at both commits; only the base's program differs (its routes'
    idle timeout), and the diff shows what that program change does."""
    route = repository / "components" / "render" / "route.py"
    text = route.read_text()
    assert text.count(IDLE_TIMEOUT[0]) == 1
    route.write_text(text.replace(*IDLE_TIMEOUT))
    git(repository, "commit", "--quiet", "-am", "a shorter idle timeout")
    route.write_text(text)
    git(repository, "commit", "--quiet", "-am", "back to 600 s")
    code, out, err = run(capsys, "--base-ref", "HEAD~1", repository / "stacks" / "Pulumi.dev.yaml", "--format", "json")
    assert code == 2, err
    changed = {
        (entry["type"], change["path"], change["old"], change["new"])
        for entry in resources(json.loads(out))
        for change in entry["changes"]
        if entry["type"] == "kubernetes:networking.k8s.io/v1:Ingress"
    }
    attribute = "metadata.annotations['alb.ingress.kubernetes.io/load-balancer-attributes']"
    assert changed == {
        (
            "kubernetes:networking.k8s.io/v1:Ingress",
            attribute,
            "idle_timeout.timeout_seconds=300",
            "idle_timeout.timeout_seconds=600",
        )
    }


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_base_ref_whose_pins_differ_and_cannot_be_installed_is_refused_leaving_nothing(
    repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (repository / "requirements.txt").write_text("fleetctl-test-no-such-package==1.0\n")
    git(repository, "commit", "--quiet", "-am", "other pins")
    git(repository, "checkout", "--quiet", "HEAD~1", "--", "requirements.txt")
    git(repository, "commit", "--quiet", "-am", "today's pins")
    cache = tmp_path / "cache"
    monkeypatch.setenv("FLEETCTL_CACHE_DIR", str(cache))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline: the package cannot be found
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    code, out, err = run(capsys, "--base-ref", "HEAD~1", repository / "stacks" / "Pulumi.dev.yaml")
    assert (code, out) == (1, "")
    [line] = err.splitlines()
    assert line.startswith(
        "error: HEAD~1:stacks/Pulumi.dev.yaml: the commit pins other packages than this checkout "
        "(requirements.txt or constraints.txt), and building a virtualenv with them failed: "
    )
    assert list((cache / "base-venvs").iterdir()) == []


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_base_ref_whose_pins_differ_runs_in_the_virtualenv_built_for_them(
    repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A virtualenv already built for the base's pins is used as it is (here one that runs this
    interpreter, so the test needs no package index)."""
    requirements = repository / "requirements.txt"
    requirements.write_text(requirements.read_text() + "# the base's own pins\n")
    git(repository, "commit", "--quiet", "-am", "other pins")
    cache = tmp_path / "cache"
    monkeypatch.setenv("FLEETCTL_CACHE_DIR", str(cache))
    monkeypatch.setattr(baseref, "_build_venv", fake_build(sys.executable, tmp_path / "ran"))
    stack = edited(repository / "stacks", "dev", RAISE_GPU_MAX_SIZE)
    code, _, err = run(capsys, "--base-ref", "HEAD", stack)
    assert code == 2, err
    assert (tmp_path / "ran").read_text() == "built\n"
    assert len(list((cache / "base-venvs").iterdir())) == 1  # kept for the next run
    (tmp_path / "ran").unlink()
    code, _, err = run(capsys, "--base-ref", "HEAD", stack)
    assert code == 2, err
    assert not (tmp_path / "ran").exists(), "the cached virtualenv is used, not built again"


def fake_build(python: str, log: Path) -> Callable[[Path, Path, str], None]:
    """A stand-in for pip: a "virtualenv" whose python runs ``python``, complete as a built one."""

    def build(root: Path, venv: Path, label: str) -> None:
        (venv / "bin").mkdir(parents=True)
        script = venv / "bin" / "python"
        script.write_text(f'#!/bin/sh\nexec {python} "$@"\n')
        script.chmod(0o755)
        (venv / ".fleetctl-complete").write_text("")
        log.write_text("built\n")

    return build


def test_base_ref_reports_an_invalid_head_before_planning_the_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def base_planned(*_: Any) -> Any:
        raise AssertionError("BASE was planned before HEAD was validated")

    monkeypatch.setattr(fleetctl.diff.command, "load_side_at", base_planned)
    stack = edited(tmp_path, "dev", ("desired_size: 1", "desired_size: 99"))
    code, out, err = run(capsys, "--base-ref", "HEAD", stack)
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {stack}: the stack config is invalid:")


def test_both_sides_problems_are_reported_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, tmp_path / "missing-base.yaml", tmp_path / "missing-head.yaml")
    assert code == 1
    assert [line.split(": ", 2)[1] for line in err.splitlines()] == [
        str(tmp_path / "missing-base.yaml"),
        str(tmp_path / "missing-head.yaml"),
    ]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_base_ref_that_git_does_not_know_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = edited(tmp_path / "repo", "dev")
    git(tmp_path / "repo", "init", "--quiet")
    code, _, err = run(capsys, "--base-ref", "no-such-ref", stack)
    assert code == 1
    assert err.startswith("error: git show no-such-ref:Pulumi.dev.yaml: ")


def test_two_stack_files_of_different_stacks_are_matched_by_logical_identity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "Pulumi.dev-copy.yaml"
    copy.write_bytes(stack_path("dev").read_bytes())
    code, out, err = run(capsys, stack_path("dev"), copy, "--format", "json")
    assert code == 2, err
    document = json.loads(out)
    assert document["notes"][0].startswith("BASE plans stack 'dev' and HEAD stack 'dev-copy': resources are matched")
    created = [(entry["type"], entry["name"]) for entry in resources(document) if entry["action"] == "create"]
    deleted = [(entry["type"], entry["name"]) for entry in resources(document) if entry["action"] == "delete"]
    # Only the fleet component is named after the stack; everything else is the same resource.
    assert created == [("inference-fleet:fleet:Fleet", "inference-fleet-dev-copy")]
    assert deleted == [("inference-fleet:fleet:Fleet", "inference-fleet-dev")]
    code, out, err = run(capsys, stack_path("dev"), copy)
    assert out.splitlines()[1].startswith("note: BASE plans stack 'dev' and HEAD stack 'dev-copy'")


def test_stack_name_plans_both_stack_files_as_one_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "Pulumi.dev-copy.yaml"
    copy.write_bytes(stack_path("dev").read_bytes())
    code, out, err = run(capsys, stack_path("dev"), copy, "--stack-name", "dev")
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == "no changes"


def test_module_runs_as_a_process_with_exit_status_2_for_changes(base_plans: dict[str, Path], scaled_dev: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fleetctl.diff", str(base_plans["dev"]), str(scaled_dev)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == ""
    assert "scalingConfig.maxSize: 6 -> 7" in result.stdout
