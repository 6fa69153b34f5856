"""Errors that name the fix, on the command line as in the file: a close name is offered, an unknown
option is named, a missing file is said to be missing, and a problem of the stack file leads with
its file:line (docs/fleetctl.md, "Error lines")."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fleetctl.cli import main
from fleetctl.stackfile import PROJECT_ROOT, stack_path


def copy_stack(directory: Path, stack: str) -> Path:
    path = directory / f"Pulumi.{stack}.yaml"
    shutil.copyfile(stack_path(stack), path)
    return path


def errors(argv: list[str], capsys: pytest.CaptureFixture[str], status: int = 1) -> str:
    assert main(argv) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_a_misspelt_region_to_drain_gets_a_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = copy_stack(tmp_path, "prod")
    err = errors(["region", "drain", "eu-west1", "--stack-file", str(stack), "--dry-run"], capsys)
    assert "did you mean 'eu-west-1'?" in err


def test_a_misspelt_region_to_serve_gets_a_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = copy_stack(tmp_path, "prod")
    err = errors(["region", "add", "chat", "eu-west1", "--stack-file", str(stack), "--dry-run"], capsys)
    assert "did you mean 'eu-west-1'?" in err


def test_a_misspelt_node_group_gets_a_did_you_mean_and_no_blame_on_target_regions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = copy_stack(tmp_path, "dev")
    argv = ["endpoint", "add", "x", "--image", "vllm/vllm-openai:v0.33.0", "--model", "org/model"]
    err = errors([*argv, "--node-group", "gpus", "--stack-file", str(stack), "--dry-run"], capsys)
    assert "did you mean 'gpu'?" in err
    assert "from target_regions" not in err  # the command set none


def test_an_unknown_diff_option_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    err = errors(["diff", "--bogus"], capsys)
    assert "unrecognized arguments: --bogus" in err
    assert "required" not in err


def test_a_missing_head_of_a_base_ref_diff_is_said_to_be_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = errors(["diff", "--base-ref", "main", str(tmp_path / "missing.yaml")], capsys)
    assert "missing.yaml: no such file" in err


def test_a_tab_in_the_indentation_says_indent_with_spaces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text("config:\n\tinference-fleet:regions: {}\n")
    err = errors(["validate", "--stack-file", str(stack)], capsys)
    assert f"{stack}:2:1: is not valid YAML" in err
    assert "indent with spaces" in err


def test_a_misspelt_config_key_gets_a_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = copy_stack(tmp_path, "dev")
    stack.write_text(stack.read_text().replace("config:", "configs:", 1))
    err = errors(["validate", "--stack-file", str(stack)], capsys)
    assert "did you mean 'config'?" in err


def test_a_foreign_namespace_is_placed_at_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = copy_stack(tmp_path, "dev")
    text = stack.read_text()
    line = text.splitlines().index("  inference-fleet:endpoints:") + 1
    stack.write_text(text.replace("  inference-fleet:endpoints:", "  inference_fleet:endpoints:", 1))
    err = errors(["validate", "--stack-file", str(stack)], capsys)
    assert f"error: {stack}:{line}:3: inference_fleet:endpoints: the namespace 'inference_fleet'" in err


def test_a_secure_value_outside_the_secrets_is_placed_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = copy_stack(tmp_path, "dev")
    text = stack.read_text()
    lines = text.splitlines()
    number = next(index for index, line in enumerate(lines) if line.strip() == "model: Qwen/Qwen3-0.6B") + 1
    indent = lines[number - 1].index("model")
    lines[number - 1] = " " * indent + "model:"
    lines.insert(number, " " * (indent + 2) + "secure: v1:AAAA")
    stack.write_text("\n".join(lines) + "\n")
    err = errors(["validate", "--stack-file", str(stack)], capsys)
    assert f"{stack}:{number}:{indent + 1}: " in err
    assert "is an encrypted (secure) value" in err


def test_errors_name_the_stack_file_as_the_success_lines_do(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Relative to the working directory, not absolute in one line and relative in the next."""
    monkeypatch.chdir(PROJECT_ROOT)
    monkeypatch.setenv("PWD", str(PROJECT_ROOT))
    assert main(["scale", "assistant", "2", "--stack", "dev", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("stacks/Pulumi.dev.yaml: scale assistant: dry run")
    err = errors(["scale", "assistant", "9", "--stack", "dev", "--dry-run"], capsys)
    assert err.startswith("error: stacks/Pulumi.dev.yaml:")
    err = errors(["validate", "--stack", "no-such-stack"], capsys)
    assert "stacks/Pulumi.no-such-stack.yaml" in err
