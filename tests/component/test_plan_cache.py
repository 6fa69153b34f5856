"""Plans kept by their inputs (fleetctl/plancache.py): a ``--plan`` edit plans the stack once when its
current state was planned before, ``fleetctl diff --base-ref`` reads back a base planned before, and a
change to anything a plan reads is a miss."""

from __future__ import annotations

import json
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import fleetctl.diff.command
from fleetctl import plancache
from fleetctl.cli import main
from fleetctl.diff import baseref
from fleetctl.plan import run_program
from fleetctl.stackfile import PROJECT_ROOT, read_stack_file, stack_path
from tests.component.programs import git, project_copy


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("FLEETCTL_CACHE_DIR", str(directory))
    monkeypatch.delenv("FLEETCTL_PLAN_CACHE", raising=False)
    return directory


def _source_root(directory: Path) -> Path:
    for name in plancache.SOURCE_FILES:
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(f"{name}\n")
    for name in plancache.SOURCE_DIRECTORIES:
        (directory / name / "sub").mkdir(parents=True)
        (directory / name / "sub" / "a.py").write_text("a = 1\n")
    return directory


def _key(root: Path, stack: str = "dev", stack_file: bytes = b"config: {}\n") -> str:
    return plancache.stack_file_inputs(root, stack, stack_file, sys.executable).key


CHANGES: list[tuple[str, str]] = [
    *(("changed", name) for name in plancache.SOURCE_FILES),
    *(("removed", name) for name in ("__main__.py", "constraints.txt")),
    *(("changed", f"{name}/sub/a.py") for name in plancache.SOURCE_DIRECTORIES),
    *(("added", f"{name}/sub/new.yaml") for name in plancache.SOURCE_DIRECTORIES),
]


@pytest.mark.parametrize(("change", "name"), CHANGES)
def test_a_change_to_any_source_a_plan_reads_is_another_key(change: str, name: str, tmp_path: Path) -> None:
    root = _source_root(tmp_path / "root")
    before = _key(root)
    if change == "removed":
        (root / name).unlink()
    else:
        (root / name).write_text(f"{change}\n")
    assert _key(root) != before


def test_compiled_files_are_not_sources(tmp_path: Path) -> None:
    root = _source_root(tmp_path / "root")
    before = _key(root)
    (root / "components" / "__pycache__").mkdir()
    (root / "components" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert _key(root) == before


def test_the_stack_file_its_name_and_the_interpreter_are_in_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _source_root(tmp_path / "root")
    before = _key(root)
    assert _key(root, stack_file=b"config: {a: 1}\n") != before
    assert _key(root, stack="prod") != before
    monkeypatch.setattr(plancache, "this_interpreter", lambda: ["python 3.11.7", "pulumi==3.999.0"])
    assert _key(root) != before


def test_in_process_keys_follow_the_config_the_program_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    config = {"inference-fleet:regions": "{}"}
    before = plancache.in_process_inputs("dev", config).key
    assert plancache.in_process_inputs("dev", dict(config)).key == before
    assert plancache.in_process_inputs("dev", {"inference-fleet:regions": '{"a": 1}'}).key != before
    assert plancache.in_process_inputs("prod", config).key != before
    installed = plancache.this_interpreter()
    assert any(line.startswith("pulumi-3.") for line in installed)
    assert any(line.startswith("pulumi_kubernetes-") for line in installed)
    monkeypatch.setattr(plancache, "this_interpreter", lambda: [*installed, "pydantic-9.9.9.dist-info"])
    assert plancache.in_process_inputs("dev", config).key != before


def test_a_plan_opens_no_file_of_the_checkout_outside_the_keys_sources() -> None:
    """Every file of the checkout the program opens while it plans (through an audit hook) is one
    the key digests; files outside the checkout are the interpreter's and its packages'. The SDK reads
    the source lines of every frame on the stack at each registration (``traceback.extract_stack`` in
    pulumi/runtime/resource.py ``_get_stack_trace``), this test's own file among them: a source position,
    which the plan does not record; tests/ is left out for that."""
    opened: list[str] = []
    recording = threading.Event()

    def hook(event: str, arguments: tuple[Any, ...]) -> None:
        if recording.is_set() and event == "open" and isinstance(arguments[0], str | Path):
            opened.append(str(arguments[0]))

    sys.addaudithook(hook)
    stack_file = read_stack_file(stack_path("prod"))
    recording.set()
    try:
        run_program(stack_file)
    finally:
        recording.clear()
    root = PROJECT_ROOT.resolve()
    sources = plancache.source_files(root)
    # The interpreter's own packages are outside the checkout's sources even when its virtualenv sits in
    # the checkout (.venv): the SDK reads their lines for the same stack traces.
    packages = Path(sys.prefix).resolve()
    inside = {
        Path(path).resolve()
        for path in opened
        if Path(path).resolve().is_relative_to(root) and not Path(path).resolve().is_relative_to(packages)
    }
    read = {path.relative_to(root).as_posix() for path in inside if "__pycache__" not in path.parts}
    read = {path for path in read if not path.startswith("tests/")}
    assert read, "the plan read no file of the checkout: the hook saw nothing"
    assert read <= set(sources), f"read but not in the key: {sorted(read - set(sources))}"


def test_store_and_lookup_round_trip_and_a_torn_plan_is_a_miss(cache: Path) -> None:
    inputs = plancache.in_process_inputs("dev", {})
    assert plancache.lookup(inputs) is None
    plancache.store(inputs, '{"resources": []}\n')
    assert plancache.lookup(inputs) == '{"resources": []}\n'
    entry = cache / "plans" / inputs.key
    assert sorted(path.name for path in entry.iterdir()) == ["inputs.json", "plan.json"]
    assert json.loads((entry / "inputs.json").read_text())["inputs"]["stack"] == "dev"
    (entry / "plan.json").write_text('{"resources": [1]}\n')
    assert plancache.lookup(inputs) is None


def test_off_neither_reads_nor_writes(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = plancache.in_process_inputs("dev", {})
    plancache.store(inputs, "{}\n")
    monkeypatch.setenv("FLEETCTL_PLAN_CACHE", "off")
    assert plancache.lookup(inputs) is None
    plancache.store(plancache.in_process_inputs("other", {}), "{}\n")
    assert len(list((cache / "plans").iterdir())) == 1


def test_the_cache_keeps_the_most_recently_used_entries_within_its_bounds(cache: Path) -> None:
    entries = [plancache.in_process_inputs(f"s{index}", {}) for index in range(plancache.MAX_ENTRIES + 3)]
    for inputs in entries:
        plancache.store(inputs, "{}\n")
    kept = {path.name for path in (cache / "plans").iterdir()}
    assert len(kept) == plancache.MAX_ENTRIES
    assert entries[-1].key in kept
    newest = cache / "plans" / entries[-1].key
    size = sum(path.stat().st_size for path in newest.iterdir())  # plan.json and inputs.json
    plancache.evict(cache / "plans", max_entries=100, max_bytes=3 * size + 10)
    assert len(list((cache / "plans").iterdir())) == 3
    assert newest.is_dir()


def test_concurrent_stores_of_one_plan_leave_one_whole_entry(cache: Path) -> None:
    inputs = plancache.in_process_inputs("dev", {})
    text = json.dumps({"resources": list(range(100_000))}) + "\n"
    threads = [threading.Thread(target=plancache.store, args=(inputs, text)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [path.name for path in (cache / "plans").iterdir()] == [inputs.key]
    assert plancache.lookup(inputs) == text


@pytest.fixture
def counted_plans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The stacks the in-process planner of ``fleetctl diff`` and ``--plan`` edits runs, in order."""
    calls: list[str] = []

    def counting(stack_file: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(stack_file.stack)
        return run_program(stack_file, *args, **kwargs)

    monkeypatch.setattr(fleetctl.diff.command, "run_program", counting)
    return calls


EDIT = ["endpoint", "remove", "assistant", "--dry-run", "--plan", "--output", "json"]


def test_an_edit_after_a_plan_plans_once_and_says_what_two_plans_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], counted_plans: list[str]
) -> None:
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_bytes(stack_path("dev").read_bytes())
    monkeypatch.setenv("FLEETCTL_PLAN_CACHE", "off")
    assert main([*EDIT, "--stack-file", str(stack)]) == 0
    planned_twice = capsys.readouterr().out
    assert counted_plans == ["dev", "dev"]
    monkeypatch.delenv("FLEETCTL_PLAN_CACHE")
    counted_plans.clear()
    assert main(["plan", "--stack-file", str(stack), "--out", str(tmp_path / "plan")]) == 0
    capsys.readouterr()
    assert main([*EDIT, "--stack-file", str(stack)]) == 0
    assert counted_plans == ["dev"], "the stack as it is was read back; only the edited one was planned"
    assert capsys.readouterr().out == planned_twice


def test_a_changed_stack_file_is_planned_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], counted_plans: list[str]
) -> None:
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_bytes(stack_path("dev").read_bytes())
    assert main(["plan", "--stack-file", str(stack), "--out", str(tmp_path / "plan")]) == 0
    stack.write_text(stack.read_text().replace("max_size: 4", "max_size: 5", 1))
    assert main([*EDIT, "--stack-file", str(stack)]) == 0
    capsys.readouterr()
    assert counted_plans == ["dev", "dev"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_base_ref_reads_back_a_base_planned_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repository = project_copy(tmp_path / "repo")
    git(repository, "init", "--quiet")
    git(repository, "add", ".")
    git(repository, "commit", "--quiet", "-m", "base")
    stack = repository / "stacks" / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace("max_size: 4", "max_size: 5", 1))
    runs: list[list[str]] = []
    real_run = baseref._run

    def recording(command: list[str], *args: Any, **kwargs: Any) -> Any:
        runs.append(list(command))
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(baseref, "_run", recording)  # what baseref runs the commit's plan (and git) with
    outputs = []
    for _ in range(2):
        runs.clear()
        assert fleetctl.diff.main(["--base-ref", "HEAD", str(stack), "--format", "json"]) == 2
        outputs.append(capsys.readouterr().out)
        plans = [command for command in runs if command[1:4] == ["-m", "fleetctl", "plan"]]
        assert len(plans) == (1 if len(outputs) == 1 else 0)
    assert outputs[0] == outputs[1]
    # Another commit whose program differs is planned afresh.
    route = repository / "components" / "render" / "route.py"
    route.write_text(route.read_text() + "\n# changed\n")
    git(repository, "commit", "--quiet", "-m", "a program change", "components/render/route.py")
    runs.clear()
    assert fleetctl.diff.main(["--base-ref", "HEAD", str(stack), "--format", "json"]) == 2
    capsys.readouterr()
    assert len([command for command in runs if command[1:4] == ["-m", "fleetctl", "plan"]]) == 1


def test_diff_reads_back_a_head_planned_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], counted_plans: list[str]
) -> None:
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_bytes(stack_path("dev").read_bytes())
    assert main(["plan", "--stack-file", str(stack), "--out", str(tmp_path / "plan")]) == 0
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"project": "inference-fleet", "stack": "dev", "resources": []}))
    assert fleetctl.diff.command.main([str(empty), str(stack), "--output", "json"]) == 2
    capsys.readouterr()
    assert counted_plans == [], "HEAD as it is was planned before: read back, not planned again"
