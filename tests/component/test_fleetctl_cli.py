"""fleetctl validate and plan as a user runs them: exit codes, streams, files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fleetctl.cli import main
from fleetctl.reference import main as reference_main
from fleetctl.stackfile import stack_path

INVALID_STACK = """\
config:
  inference-fleet:regions:
    us-east-1:
      vpc: {cidr: 10.0.0.0/16, availability_zones: [us-east-1a, us-east-1b]}
      cluster_access: {public_access_cidrs: [203.0.113.0/24]}
      node_groups:
        system: {instance_types: [m7i.xlarge], min_size: 1, max_size: 2, desired_size: 1}
  inference-fleet:endpoints:
    chat:
      mooncake: {mode: disaggregated, topology: {prefill: 2, decode: true}, transfer: {protocol: tcp}}
"""


@pytest.mark.parametrize("stack", ["dev", "existing"])
def test_validate_accepts_the_example_stacks_with_a_one_line_summary(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--stack", stack]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1
    assert f"Pulumi.{stack}.yaml: valid (" in out
    assert err == ""


def test_validate_refuses_prod_until_its_placeholder_secrets_are_set(capsys: pytest.CaptureFixture[str]) -> None:
    # `pulumi preview` would fail decrypting them, after `fleetctl validate` said the stack was fine.
    assert main(["validate", "--stack", "prod"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert [line.split(": ")[2] for line in err.splitlines()] == [
        "secrets.hf-token.token",
        "secrets.chat-proxy-admin.ADMIN_API_KEY",
    ]
    assert "set it with pulumi config set --secret --path 'inference-fleet:secrets.hf-token.token' <value>" in err


def test_validate_rejects_with_error_lines_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = tmp_path / "Pulumi.bad.yaml"
    stack.write_text(INVALID_STACK)
    assert main(["validate", "--stack-file", str(stack)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"error: {stack}:10:62: endpoints.chat.mooncake.topology.decode: must be an integer in [1, 1000], "
        "got True (a boolean)",
    ]


GARBAGE = {
    "yaml syntax error": "config: [unclosed\n",
    "a list": "- 1\n- 2\n",
    "a scalar": "42\n",
    "empty": "",
    "only comments": "# nothing\n",
    "config is a list": "config: [1, 2]\n",
    "regions is a string": "config:\n  inference-fleet:regions: us-east-1\n",
    "endpoints is a list": "config:\n  inference-fleet:regions: {}\n  inference-fleet:endpoints: [a]\n",
    "duplicate keys": "config:\n  inference-fleet:regions: {}\n  inference-fleet:regions: {}\n",
    "tagged value": "config:\n  inference-fleet:regions: !!python/object:os.system {}\n",
    "not utf-8": b"\xff\xfe\x00config".decode("latin-1"),
    "binary timestamp": "config:\n  inference-fleet:regions:\n    us-east-1: 2024-01-01\n",
    "billion laughs": 'a: &a ["lol", "lol"]\nb: &b [*a, *a, *a]\nconfig: {inference-fleet:regions: *b}\n',
    "integer endpoint name": "config:\n  inference-fleet:regions: {}\n  inference-fleet:endpoints: {1: {}}\n",
}


@pytest.mark.parametrize("text", GARBAGE.values(), ids=GARBAGE.keys())
def test_validate_never_raises_a_traceback(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = tmp_path / "Pulumi.x.yaml"
    stack.write_bytes(text.encode("latin-1"))
    assert main(["validate", "--stack-file", str(stack)]) == 1
    _, err = capsys.readouterr()
    assert err
    assert all(line.startswith("error: ") for line in err.splitlines())
    assert "Traceback" not in err


def test_plan_of_invalid_config_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = tmp_path / "Pulumi.bad.yaml"
    stack.write_text(INVALID_STACK)
    out = tmp_path / "plan"
    assert main(["plan", "--stack-file", str(stack), "--out", str(out)]) == 1
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [stack]
    assert "topology.decode" in capsys.readouterr().err


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_plan_is_byte_identical_for_the_same_input(stack: str, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    assert main(["plan", "--stack", stack, "--out", str(first)]) == 0
    assert main(["plan", "--stack-file", str(stack_path(stack)), "--out", str(second)]) == 0
    first_files = sorted(path.relative_to(first) for path in first.rglob("*") if path.is_file())
    second_files = sorted(path.relative_to(second) for path in second.rglob("*") if path.is_file())
    assert first_files == second_files
    assert Path("plan.json") in first_files
    for relative in first_files:
        assert (first / relative).read_bytes() == (second / relative).read_bytes()


def test_plan_summary_names_resources_by_region(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--stack", "prod", "--out", str(tmp_path / "p")]) == 0
    out, err = capsys.readouterr()
    # The offline plan never decrypts: prod's placeholder secrets are a warning there, not a refusal.
    assert [line.split(": ")[0] for line in err.splitlines()] == ["warning", "warning"]
    assert "secrets.chat-proxy-admin.ADMIN_API_KEY: is not a value Pulumi encrypted" in err
    assert "eu-west-1" in out
    assert "pulumi:providers:aws" in out
    assert "plan.json" in out
    # Huge pages reserved and requested by no pod (issue 28, item 7; docs/efa.md): prod's g6e groups
    # reserve libfabric's default on nodes that run no rdma pod; its p5 groups reserve what their pods take.
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert notes.pop(0).startswith("note: awsx:ec2:Vpc (2), eks:index:Cluster (2)")  # fleetctl/whole_components.py
    assert [note.split(":")[1].strip() for note in notes] == [
        "regions.us-east-1.node_groups.g6e.hugepages_2mi",
        "regions.eu-west-1.node_groups.g6e.hugepages_2mi",
    ]
    assert "15GiB of 2 MiB huge pages reserved and requested by no pod, on 3 node(s)" in notes[0]


def test_generated_schema_and_config_reference_are_fresh(capsys: pytest.CaptureFixture[str]) -> None:
    assert reference_main(["--check"]) == 0, capsys.readouterr().err


def test_plan_as_a_process_exits_cleanly_with_nothing_on_stderr(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fleetctl", "plan", "--stack", "dev", "--out", str(tmp_path / "plan")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert (tmp_path / "plan" / "plan.json").is_file()


def test_diff_is_a_fleetctl_command_with_its_own_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--stack", "dev", "--out", str(tmp_path / "dev")]) == 0
    capsys.readouterr()
    assert main(["diff", str(tmp_path / "dev"), str(tmp_path / "dev")]) == 0
    assert "no changes" in capsys.readouterr().out
    assert main(["diff", str(tmp_path / "dev"), str(tmp_path / "missing")]) == 1


def test_an_edit_with_plan_prints_the_infrastructure_change_before_writing_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_bytes(stack_path("dev").read_bytes())
    before = stack.read_bytes()
    # The assistant's weights are the region's only model source: its removal narrows the workload role.
    assert main(["endpoint", "remove", "assistant", "--stack-file", str(stack), "--dry-run", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "-    assistant:" in out
    assert "aws:iam/rolePolicy:RolePolicy" in out
    assert "delete  aws:iam/rolePolicy:RolePolicy  us-west-2-workload-access" in out
    assert stack.read_bytes() == before


MISSPELLED_STACK = """\
config:
  inference-fleet:regions:
    us-west-2:
      vpc: {cidr: 10.40.0.0/16, availability_zones: [us-west-2a, us-west-2b]}
      cluster_access: {public_access_cidrs: [203.0.113.0/24]}
      node_groups:
        system: {instance_types: [m7i.xlarge], min_size: 2, max_size: 3, desired_size: 2}
        gpu: {instance_types: [g6e.12xlarge], min_size: 0, max_size: 4, desired_size: 1}
  inference-fleet:endpoints:
    chat:
      image: vllm/vllm-openai:v0.33.0
      model: Qwen/Qwen3-8B
      nod_group: gpu
"""


def test_validate_places_a_problem_at_its_line_and_column_and_suggests_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(MISSPELLED_STACK)
    assert main(["validate", "--stack-file", str(stack)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: {stack}:13:7: endpoints.chat.nod_group: unknown key; did you mean 'node_group'?"
    ]


def test_a_yaml_syntax_error_is_placed_the_same_way(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text("config:\n  inference-fleet:regions: {us-west-2: [}\n")
    assert main(["validate", "--stack-file", str(stack)]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {stack}:2:")
    assert ": is not valid YAML: " in line
