"""fleetctl as a daily tool: no traceback for any input, one output flag with JSON everywhere,
idempotent repeats, the user's own spelling kept, and the small comforts (version, help for
every option, shell completion, progress, autoscaling edits)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleetctl import cli
from fleetctl.cli import main
from fleetctl.stackfile import stack_path


def copy_stack(directory: Path, stack: str = "dev") -> Path:
    path = directory / f"Pulumi.{stack}.yaml"
    shutil.copyfile(stack_path(stack), path)
    return path


# No traceback for any user input.


def test_a_reader_that_goes_away_ends_fleetctl_quietly_with_the_sigpipe_status(tmp_path: Path) -> None:
    """`fleetctl scale ... --dry-run | head -1`: the reader is gone before fleetctl writes."""
    stack = copy_stack(tmp_path)
    argv = [sys.executable, "-m", "fleetctl", "scale", "assistant", "3", "--dry-run", "--stack-file", str(stack)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == cli.BROKEN_PIPE_STATUS
    assert err == ""


def test_an_interrupt_is_one_line_and_status_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr("fleetctl.cli.load_stack", interrupted)
    assert main(["validate", "--stack-file", str(copy_stack(tmp_path))]) == cli.INTERRUPTED_STATUS
    assert capsys.readouterr().err == "fleetctl: interrupted\n"


OUTPUTS = {
    "missing": (None, "cannot read it: No such file or directory"),
    "a directory": ("", "cannot read it: Is a directory"),
    "not json": ("{endpoints:", "not valid JSON"),
    "not an object": ("[1, 2]", "must be a JSON object of stack outputs, got list"),
    "endpoints as a list": ('{"endpoints": ["chat"]}', "endpoints must map each endpoint to an object"),
    "a record that is no object": ('{"endpoints": {"assistant": {"us-west-2": 7}}}', "region -> record"),
    "kubeconfigs as a string": ('{"endpoints": {}, "kubeconfigs": "x"}', "kubeconfigs must map each region"),
    "not utf-8": ("\udcff", "cannot read it"),
}


@pytest.mark.parametrize(("text", "message"), OUTPUTS.values(), ids=OUTPUTS.keys())
def test_verify_with_unusable_outputs_says_why_in_one_line(
    text: str | None, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = tmp_path / "outputs.json"
    if text == "":
        outputs.mkdir()
    elif text is not None:
        outputs.write_bytes(text.encode("utf-8", "surrogateescape"))
    assert main(["verify", "--stack-file", str(stack_path("dev")), "--outputs", str(outputs)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith(f"error: --outputs {outputs}: ")
    assert message in line


@pytest.mark.parametrize("option", ["--timeout", "--deadline", "--log-wait"])
@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "soon"])
def test_verify_refuses_seconds_that_are_not_positive_numbers_as_a_usage_error(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["verify", "--stack-file", str(stack_path("dev")), option, value])
    assert exit_info.value.code == 2
    assert option in capsys.readouterr().err


# One output flag; JSON for scripts, refusals included.

NEW_VLLM = "vllm/vllm-openai:v0.34.0"
MODEL = "Qwen/Qwen3-0.6B"


def test_a_refused_edit_with_json_output_prints_a_json_error_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = copy_stack(tmp_path)
    before = stack.read_bytes()
    argv = ["topology", "set", "chat-pd", "--prefill", "0", "--output", "json", "--stack-file", str(stack)]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert err == ""
    assert stack.read_bytes() == before
    record = json.loads(out)
    assert record["written"] is False
    assert (record["stack"], record["command"], record["endpoint"], record["changes"]) == (
        "dev",
        "topology set",
        "chat-pd",
        [],
    )
    assert record["problems"] == [
        {
            "path": "endpoints.chat-pd.mooncake.topology.prefill",
            "message": "must be an integer in [1, 1000], got 0 (a number)",
            "file": str(stack),
            "line": 49,
            "column": 20,
        }
    ]


def test_a_problem_without_a_place_in_the_file_has_only_path_and_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = copy_stack(tmp_path)
    argv = ["endpoint", "add", "embed", "--image", NEW_VLLM, "--output", "json", "--stack-file", str(stack)]
    assert main(argv) == 1
    [problem] = json.loads(capsys.readouterr().out)["problems"]
    assert set(problem) == {"path", "message"}
    assert problem["path"] == "endpoints.embed.model"


def test_an_accepted_edit_with_json_output_lists_no_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scale", "assistant", "2", "--output", "json", "--stack-file", str(copy_stack(tmp_path))]) == 0
    assert json.loads(capsys.readouterr().out)["problems"] == []


def test_diff_takes_output_and_still_its_old_format_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    from fleetctl.diff.command import _parser

    parser = _parser()
    assert parser.parse_args(["--output", "markdown", "a", "b"]).output == "markdown"
    assert parser.parse_args(["--format", "json", "a", "b"]).output == "json"
    assert parser.parse_args(["a", "b"]).output == "text"
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    help_text = capsys.readouterr().out
    assert "--output {json,markdown,text}" in help_text
    assert "--format" not in help_text


# Repeating a command is idempotent: the second run is "no change", exit 0, nothing written.

REPEATED = {
    "canary start": ("dev", ["canary", "start", "assistant", "--image", NEW_VLLM, "--weight", "5"]),
    "canary start with replicas": (
        "dev",
        ["canary", "start", "assistant", "--image", NEW_VLLM, "--weight", "5", "--replicas", "2"],
    ),
    "canary weight": ("prod", ["canary", "weight", "summarize", "25"]),
    "canary promote": ("prod", ["canary", "promote", "summarize"]),
    "canary rollback": ("prod", ["canary", "rollback", "summarize"]),
    "stop": ("dev", ["stop", "assistant"]),
    "start": ("dev", ["start", "assistant"]),
    "scale": ("dev", ["scale", "assistant", "3"]),
    "topology set": ("dev", ["topology", "set", "chat-pd", "--prefill", "2"]),
    "store configure": ("prod", ["store", "configure", "chat", "--global-segment-size", "32GiB", "--offload", "none"]),
    "image set": ("prod", ["image", "set", "summarize", f"{NEW_VLLM}"]),
    "region remove": ("prod", ["region", "remove", "summarize", "eu-west-1"]),
    "endpoint add": ("dev", ["endpoint", "add", "embed", "--image", NEW_VLLM, "--model", MODEL, "--replicas", "1"]),
    "endpoint remove": ("dev", ["endpoint", "remove", "chat-pd"]),
}


@pytest.mark.parametrize(("stack", "argv"), REPEATED.values(), ids=REPEATED.keys())
def test_a_repeated_command_is_no_change_with_exit_0(
    stack: str, argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path, stack)
    assert main([*argv, "--stack-file", str(path)]) == 0
    once = path.read_bytes()
    capsys.readouterr()
    assert main([*argv, "--stack-file", str(path)]) == 0
    out, err = capsys.readouterr()
    assert path.read_bytes() == once
    assert err == ""
    lines = out.splitlines()
    assert lines[0].endswith(": no change"), out
    assert lines[1].startswith("  note: "), out


def test_a_canary_start_that_differs_from_the_running_canary_is_still_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path, "prod")
    assert main(["canary", "start", "summarize", "--image", NEW_VLLM, "--weight", "10", "--stack-file", str(path)]) == 1
    assert "canary: already exists" in capsys.readouterr().err


def test_an_endpoint_add_that_differs_from_the_endpoint_is_still_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path)
    assert main(["endpoint", "add", "assistant", "--image", NEW_VLLM, "--stack-file", str(path)]) == 1
    assert "endpoints.assistant: already exists" in capsys.readouterr().err


def test_a_canary_that_was_never_started_is_no_change_for_rollback_and_promote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path)
    before = path.read_bytes()
    for action in ("rollback", "promote"):
        assert main(["canary", action, "assistant", "--stack-file", str(path)]) == 0
        assert "assistant has no canary" in capsys.readouterr().out
    assert path.read_bytes() == before


# Edits keep the user's spelling.


def test_a_store_size_keeps_its_unit_and_its_quotes_and_a_repeat_keeps_it_all(tmp_path: Path) -> None:
    path = copy_stack(tmp_path, "prod")
    assert main(["store", "configure", "chat", "--global-segment-size", "32GiB", "--stack-file", str(path)]) == 0
    assert "          global_segment_size: 32GiB\n" in path.read_text()
    written = path.read_bytes()
    # The same size spelled another way is the same size: the file keeps the user's spelling.
    assert main(["store", "configure", "chat", "--global-segment-size", "32768MiB", "--stack-file", str(path)]) == 0
    assert path.read_bytes() == written


def test_a_list_item_inserted_in_a_plan_is_shown_as_the_inserted_value() -> None:
    """The proxy's peer list of a 1P1D endpoint growing to 2P1D, as the image's proxy took it."""
    from fleetctl.diff import ABSENT, diff_values

    def proxy_args(prefill: int) -> list[str]:
        peers = [[f"--prefill=http://pd-prefill-{index}:8000", f"pd-prefill-{index}:8998"] for index in range(prefill)]
        return ["--port", "8000", *(word for peer in peers for word in peer), "--decode=http://pd-decode:8000"]

    changes = list(diff_values({"args": proxy_args(1)}, {"args": proxy_args(2)}))
    assert [(change.dotted, change.old, change.new) for change in changes] == [
        ("args[4]", ABSENT, "--prefill=http://pd-prefill-1:8000"),
        ("args[5]", ABSENT, "pd-prefill-1:8998"),
    ]
    removed = list(diff_values({"args": proxy_args(2)}, {"args": proxy_args(1)}))
    assert [(change.dotted, change.old, change.new) for change in removed] == [
        ("args[4]", "--prefill=http://pd-prefill-1:8000", ABSENT),
        ("args[5]", "pd-prefill-1:8998", ABSENT),
    ]


def test_a_list_item_replaced_in_place_is_still_compared_inside() -> None:
    from fleetctl.diff import diff_values

    old = {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]}
    new = {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:2"}]}
    assert [(c.dotted, c.old, c.new) for c in diff_values(old, new)] == [("containers[1].image", "y:1", "y:2")]
    assert [(c.dotted, c.old, c.new) for c in diff_values({"l": [True]}, {"l": [1]})] == [("l[0]", True, 1)]


def test_an_edit_plan_shows_the_prefix_it_adds_to_the_workload_policy_not_shifted_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = copy_stack(tmp_path)
    argv = ["endpoint", "add", "embed", "--image", NEW_VLLM, "--model-source", "s3://dev-models/aaa", "--model", "e"]
    assert main([*argv, "--replicas", "1", "--dry-run", "--plan", "--stack-file", str(stack)]) == 0
    out = capsys.readouterr().out
    policy = out[out.index("us-west-2-workload-access") :].splitlines()[1:3]
    assert [line.strip() for line in policy] == [
        'policy(json).Statement[0].Condition.StringLike.s3:prefix[0]: (none) -> "aaa/*"',
        'policy(json).Statement[1].Resource[0]: (none) -> "arn:aws:s3:::dev-models/aaa/*"',
    ]
