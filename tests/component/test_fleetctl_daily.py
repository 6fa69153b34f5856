"""fleetctl as a daily tool: no traceback for any input, one output flag with JSON everywhere,
idempotent repeats, the user's own spelling kept, and the small comforts (version, help for
every option, shell completion, progress, autoscaling edits)."""

from __future__ import annotations

import argparse
import difflib
import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleetctl import cli
from fleetctl import progress as progress_module
from fleetctl.cli import main
from fleetctl.stackfile import stack_path
from tests.component.test_global_front import REGIONAL, regional_prod_text


def copy_stack(directory: Path, stack: str = "dev") -> Path:
    path = directory / f"Pulumi.{stack}.yaml"
    if stack == REGIONAL:
        path.write_text(regional_prod_text())
    else:
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

    monkeypatch.setattr("fleetctl.stackfile.load_stack", interrupted)
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


def test_an_edit_of_a_stack_that_is_not_there_is_a_json_error_document_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scale", "assistant", "2", "--stack", "no-such-stack", "--output", "json"]) == 1
    out, err = capsys.readouterr()
    assert err == ""
    record = json.loads(out)
    assert (record["file"], record["stack"], record["written"]) == (None, "no-such-stack", False)
    assert record["problems"]
    assert all(set(problem) >= {"path", "message"} for problem in record["problems"])


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
    assert "--output {json,markdown,table,text}" in help_text
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
    "region remove": (REGIONAL, ["region", "remove", "summarize", "eu-west-1"]),
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


# validate and plan speak JSON too.


def test_validate_with_json_output_describes_the_stack(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--stack-file", str(stack_path("dev")), "--output", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["command"], record["stack"], record["valid"], record["problems"]) == ("validate", "dev", True, [])
    assert record["endpoints"] == ["assistant", "chat-pd", "kv-cache"]
    assert {"endpoint": "assistant", "region": "us-west-2", "node_group": "gpu"}.items() <= record["placements"][
        0
    ].items()


def test_validate_with_json_output_lists_the_problems_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(
        stack_path("dev")
        .read_text()
        .replace("      gpu_count: 1\n      replicas: 1\n", "      gpu_count: 1\n      replica: 1\n")
    )
    assert main(["validate", "--stack-file", str(stack), "--output", "json"]) == 1
    out, err = capsys.readouterr()
    assert err == ""
    record = json.loads(out)
    assert record["valid"] is False
    [problem] = record["problems"]
    assert problem["path"] == "endpoints.assistant.replica"
    assert problem["message"] == "unknown key; did you mean 'replicas'?"
    assert (problem["file"], problem["line"], problem["column"]) == (str(stack), 37, 7)


def test_plan_with_json_output_counts_the_resources_and_names_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan"
    argv = ["plan", "--stack-file", str(stack_path("dev")), "--out", str(out), "--output", "json", "--policy"]
    assert main(argv) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["command"], record["stack"], record["problems"]) == ("plan", "dev", [])
    assert record["policy"] == {"violations": []}
    assert Path(record["plan"]).resolve() == (out / "plan.json").resolve()
    assert record["resources"] == sum(sum(kinds.values()) for kinds in record["regions"].values())
    assert record["regions"]["us-west-2"]["kubernetes:apps/v1:Deployment"] >= 3
    assert record["manifests"] == len(list((out / "manifests").rglob("*.yaml")))


# The small comforts.


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import metadata

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"fleetctl {metadata.version('inference-fleet')}\n"


@pytest.mark.parametrize("words", [["--help"], ["--version"], ["scale", "--help"]])
def test_help_and_version_import_neither_the_sdks_nor_the_models(words: list[str]) -> None:
    """Nothing heavy is imported before a command needs it: `fleetctl --help` answers at once."""
    program = (
        "import sys\nfrom fleetctl.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(name for name in sys.modules if name.split('.')[0] in "
        "('pulumi', 'pulumi_aws', 'pulumi_kubernetes', 'pydantic', 'grpc', 'components'))), file=sys.stderr)"
    )
    result = subprocess.run([sys.executable, "-c", program, *words], capture_output=True, text=True, check=True)
    assert result.stdout  # the help or the version was printed
    assert result.stderr.split() == []


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    from fleetctl.cli import _parser
    from fleetctl.diff.command import _parser as diff_parser
    from fleetctl.verify.command import parser as verify_parser

    found = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        found.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for word, child in action.choices.items():
                    walk(f"{name} {word}", child)

    walk("fleetctl", _parser())
    walk("fleetctl diff", diff_parser())
    walk("fleetctl verify", verify_parser())
    return found


def test_every_option_and_argument_of_every_command_has_help() -> None:
    missing = [
        f"{name} {'/'.join(action.option_strings) or action.dest}"
        for name, parser in _parsers()
        for action in parser._actions
        if action.help is None and not isinstance(action, argparse._SubParsersAction)  # its commands have help
    ]
    missing += [
        f"{name} {command.dest}"
        for name, parser in _parsers()
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for command in action._choices_actions
        if not command.help
    ]
    assert missing == []


def test_the_bash_completion_script_is_valid_bash_and_completes_commands_options_and_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion", "bash"]) == 0
    script = tmp_path / "fleetctl.bash"
    script.write_text(capsys.readouterr().out)
    subprocess.run(["bash", "-n", str(script)], check=True)
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.staging.yaml").write_text("config: {}\n")
    cases = {
        "fleetctl ca": "canary",
        "fleetctl canary ": "start weight promote rollback",
        "fleetctl --stack dev autoscaling ": "set",
        "fleetctl autoscaling set chat --ro": "--role",
        "fleetctl autoscaling set chat --role ": "prefill decode",
        "fleetctl verify --triton-i": "--triton-input",
        "fleetctl diff --out": "--output",
        "fleetctl diff --output ": "json markdown table text",
        "fleetctl plan --output j": "json",
        "fleetctl scale --stack ": "staging",
        "fleetctl completion ": "bash",
    }
    lines = [f"source {script}"]
    for line in cases:
        words = line.split(" ")
        lines.append(
            f"COMP_WORDS=({' '.join(repr(word) for word in words)}); COMP_CWORD={len(words) - 1}; "
            'COMPREPLY=(); _fleetctl; echo "${COMPREPLY[*]}"'
        )
    result = subprocess.run(
        ["bash", "-c", "\n".join(lines)], cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60
    )
    assert dict(zip(cases, result.stdout.splitlines(), strict=True)) == cases


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_on_a_terminal_once_the_work_is_slow_and_is_erased(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "DELAY_SECONDS", 0.05)
    monkeypatch.setattr(progress_module, "INTERVAL_SECONDS", 0.05)
    terminal = _Terminal()
    with progress_module.progress("fleetctl: planning", terminal):
        time.sleep(0.3)
    text = terminal.getvalue()
    assert text.startswith(f"{progress_module.ERASE_LINE}fleetctl: planning: 0 s")
    assert text.endswith(progress_module.ERASE_LINE)
    quick = _Terminal()
    monkeypatch.setattr(progress_module, "DELAY_SECONDS", 5.0)
    with progress_module.progress("fleetctl: planning", quick):
        pass
    assert quick.getvalue() == ""


def test_progress_never_writes_to_a_pipe_or_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "DELAY_SECONDS", 0.0)
    stream = io.StringIO()
    with progress_module.progress("fleetctl: planning", stream):
        time.sleep(0.1)
    assert stream.getvalue() == ""


def test_a_plan_on_a_terminal_shows_its_progress_on_stderr_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(progress_module, "DELAY_SECONDS", 0.0)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["plan", "--stack-file", str(stack_path("dev")), "--out", str(tmp_path / "plan")]) == 0
    assert "fleetctl: planning " in terminal.getvalue()
    assert terminal.getvalue().endswith(progress_module.ERASE_LINE)
    assert "planning" not in capsys.readouterr().out


# autoscaling set: the min/max/metrics that scale's refusal tells users to change.


def test_scale_of_an_autoscaled_endpoint_names_the_command_that_changes_its_bounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path, "prod")
    assert main(["scale", "summarize", "4", "--stack-file", str(path)]) == 1
    assert "fleetctl autoscaling set summarize --min N --max M, or --disable" in capsys.readouterr().err


AUTOSCALING_EDITS = {
    "bounds and metrics in place": (
        "prod",
        ["autoscaling", "set", "summarize", "--min", "3", "--max", "6", "--metric", "gpu:60", "--metric", "cpu:80"],
        [
            "-        min_replicas: 2",
            "-        max_replicas: 8",
            '-        metrics: ["gpu:70"]',
            "+        min_replicas: 3",
            "+        max_replicas: 6",
            '+        metrics: ["gpu:60", "cpu:80"]',
        ],
    ),
    "disable keeps the bounds": ("prod", ["autoscaling", "set", "summarize", "--disable"], ["+        enabled: false"]),
    "a classic endpoint starts autoscaling": (
        "dev",
        ["autoscaling", "set", "assistant", "--min", "1", "--max", "2"],
        # replicas: 1 goes: the autoscaler sets the count (fleetctl/edit/autoscaling_edits.py)
        ["-      replicas: 1", "+      autoscaling:", "+        min_replicas: 1", "+        max_replicas: 2"],
    ),
    "a Mooncake role": (
        "dev",
        ["autoscaling", "set", "chat-pd", "--role", "decode", "--max", "2", "--enable"],
        ["+        autoscaling:", "+          enabled: true", "+          decode:", "+            max_replicas: 2"],
    ),
    # A classic vLLM endpoint to zero: accepted, its server gets a gate (a TGI or Triton one is refused:
    # tests/unit/test_gate.py; neither stack has one).
    "a classic endpoint to zero": (
        "dev",
        ["autoscaling", "set", "assistant", "--min", "0", "--max", "2"],
        # replicas: 1 goes: the autoscaler sets the count (fleetctl/edit/autoscaling_edits.py)
        ["-      replicas: 1", "+      autoscaling:", "+        min_replicas: 0", "+        max_replicas: 2"],
    ),
    "a split Mooncake role to zero": (
        "dev",
        ["autoscaling", "set", "chat-pd", "--role", "prefill", "--min", "0", "--max", "2", "--enable"],
        [
            "+        autoscaling:",
            "+          enabled: true",
            "+          prefill:",
            "+            min_replicas: 0",
            "+            max_replicas: 2",
        ],
    ),
}


@pytest.mark.parametrize(("stack", "argv", "expected"), AUTOSCALING_EDITS.values(), ids=AUTOSCALING_EDITS.keys())
def test_autoscaling_set_changes_exactly_the_autoscaler_lines(
    stack: str, argv: list[str], expected: list[str], tmp_path: Path
) -> None:
    path = copy_stack(tmp_path, stack)
    before = path.read_text()
    assert main([*argv, "--stack-file", str(path)]) == 0
    diff = difflib.unified_diff(before.splitlines(), path.read_text().splitlines(), lineterm="", n=0)
    assert [line for line in list(diff)[2:] if not line.startswith("@@")] == expected


def test_autoscaling_disable_then_enable_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = copy_stack(tmp_path, "prod")
    before = path.read_bytes()
    assert main(["autoscaling", "set", "summarize", "--disable", "--stack-file", str(path)]) == 0
    assert main(["autoscaling", "set", "summarize", "--enable", "--stack-file", str(path)]) == 0
    assert path.read_bytes() == before


AUTOSCALING_REFUSED = {
    "nothing to set": ("prod", ["autoscaling", "set", "summarize"], "nothing to set"),
    "max below min": (
        "prod",
        ["autoscaling", "set", "summarize", "--max", "1"],
        "max_replicas must be >= min_replicas",
    ),
    "a metric that is none": (
        "prod",
        ["autoscaling", "set", "summarize", "--metric", "cpu:170"],
        "metrics[0]: must be",
    ),
    "a role of a classic endpoint": (
        "prod",
        ["autoscaling", "set", "summarize", "--role", "decode", "--max", "3"],
        "--role is for",
    ),
    "a Mooncake endpoint without a role": ("dev", ["autoscaling", "set", "chat-pd", "--max", "2"], "--role prefill"),
    "a role without max_replicas": (
        "dev",
        ["autoscaling", "set", "chat-pd", "--role", "prefill", "--min", "1", "--enable"],
        "mooncake.autoscaling.prefill.max_replicas: is required",
    ),
    "a store-mode endpoint to zero": (
        "dev",
        ["autoscaling", "set", "kv-cache", "--role", "decode", "--min", "0", "--max", "2", "--enable"],
        "kv-cache.mooncake.autoscaling.decode.min_replicas: 0 would leave the decode role without a pod",
    ),
}


@pytest.mark.parametrize(("stack", "argv", "message"), AUTOSCALING_REFUSED.values(), ids=AUTOSCALING_REFUSED.keys())
def test_autoscaling_set_refuses_what_would_not_validate(
    stack: str, argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path, stack)
    before = path.read_bytes()
    assert main([*argv, "--stack-file", str(path)]) == 1
    assert message in capsys.readouterr().err
    assert path.read_bytes() == before
