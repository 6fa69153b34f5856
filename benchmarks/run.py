"""Time and peak memory of ``fleetctl plan`` beside a bare-Pulumi floor; writes ``benchmarks/RESULTS.md``
(the harness: what runs and how it is timed; the tables are written by benchmarks/report.py).

``python -m benchmarks.run`` (``make bench``) measures N in (1, 10, 100, 400) endpoints
across R in (1, 3) regions and N=1000 in 3 regions, each measurement three times in a
fresh process (once from ONE_RUN_FROM placements), and takes the median; beside each,
the bare registration (benchmarks/bare.py), an edit's ``--plan`` on a few rows, and a
profile of ours and the floor (benchmarks/profiles.py). ``--quick`` measures N in
(1, 10), R=1, once: a smoke check.

Each measurement is one child process (``python -m benchmarks.run --child JOB``),
so its peak RSS (``getrusage(RUSAGE_SELF).ru_maxrss``, read by the child at its
end) belongs to that run alone:

* ours: ``fleetctl.cli.main(["plan", "--stack-file", ..., "--out", ...])`` on a
  generated stack, the real command (stack file read, validation, the program
  under the recording mocks, plan.json and manifests written, summary built).
* floor: a bare Pulumi program, written to a temp file and run by the same
  ``run_program`` under the same mocks, that registers our plan's resources again as
  they are (same types, names, inputs and parents, read from our plan.json) with none
  of our logic; its plan is written and summarised the same way.

Before the clock starts, every child imports the same modules: the ones a plan run
loads (found once by a discovery child), so the provider SDKs' import cost is in
neither time, but in both peak RSS figures; it is reported on its own.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

from benchmarks import prod_edit, venv_install
from benchmarks.front import report as front
from benchmarks.records import (
    BARE_UP_TO,
    EDIT_ENDPOINT,
    MODE_ENDPOINTS,
    ONE_RUN_FROM,
    PROFILE_CASE,
    Case,
    ModeCounts,
    Run,
)
from benchmarks.report import report
from benchmarks.routing import report as routing
from benchmarks.stacks import MODES, STACK, Mode, stack_config, write_stack_file

STACK_TYPE: Final = "pulumi:pulumi:Stack"

ROOT: Final = Path(__file__).resolve().parent.parent
DEFAULT_OUT: Final = ROOT / "benchmarks" / "RESULTS.md"
FULL_ENDPOINTS: Final = (1, 10, 100, 400)
FULL_REGIONS: Final = (1, 3)
LARGE_CASES: Final = ((1000, 3),)
"""Rows beyond the grid: 1000 endpoints in 3 regions (about 33,000 resources)."""
QUICK_ENDPOINTS: Final = (1, 10)
QUICK_REGIONS: Final = (1,)
REPEATS: Final = 3
EDIT_CASES: Final = ((10, 1), (100, 1), (100, 3))
"""Where an edit's --plan is timed against one plan."""
QUICK_EDIT_CASES: Final = ((10, 1),)
PRELOAD_PACKAGES: Final = frozenset(
    {
        *("pulumi", "pulumi_aws", "pulumi_awsx", "pulumi_eks", "pulumi_kubernetes"),
        *("components", "fleetctl", "grpc", "google", "pydantic", "pydantic_core", "ruamel", "semver", "dill"),
    }
)
"""Top-level packages whose modules every child imports before its clock starts."""

T = TypeVar("T")


# The child: one measurement per process.


def _peak_kib() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux


def _preload(modules: Iterable[str]) -> None:
    """Import ``modules`` in the order a plan run first imported them, each executed at once (the provider
    SDKs register their subpackages as lazy modules; these ran in the plan run, so they run here)."""
    for name in modules:
        try:
            # An attribute other than __name__, __path__ and the like runs a lazy module's code now. Left lazy,
            # it would run when a child's ``from . import x`` touches it, amid that child's own import, and
            # miss the child's names (pulumi_awsx.ec2 without Vpc).
            getattr(importlib.import_module(name), "__benchmarks_load__", None)
        except Exception:  # a module that cannot be imported on its own is loaded by its parent, or not needed
            continue


def _loaded_modules() -> list[str]:
    """The modules of :data:`PRELOAD_PACKAGES` that ran, in the order they were first imported.

    Modules the SDKs registered lazily and nothing touched are left out: the plan never ran them.
    """
    return [
        name
        for name, module in list(sys.modules.items())
        if name.split(".", 1)[0] in PRELOAD_PACKAGES and type(module).__name__ != "_LazyModule"
    ]


def _timed(record: dict[str, float], key: str, function: Callable[..., T]) -> Callable[..., T]:
    def wrapper(*args: Any, **kwargs: Any) -> T:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            record[key] = record.get(key, 0.0) + time.perf_counter() - start

    return wrapper


def _child_ours(job: dict[str, Any], out: Path) -> dict[str, Any]:
    """``fleetctl plan`` on the job's stack file, with its program and write phases timed apart."""
    import contextlib
    import io

    from fleetctl import cli
    from fleetctl.plan import Plan, run_program, write_plan

    phases: dict[str, float] = {}
    plans: list[Plan] = []

    def keep(plan: Plan) -> Plan:
        plans.append(plan)
        return plan

    # The command's own module globals, wrapped: the command runs unchanged, its two phases timed.
    commands = vars(cli)
    commands["run_program"] = _timed(phases, "program", lambda *args, **kwargs: keep(run_program(*args, **kwargs)))
    commands["write_plan"] = _timed(phases, "write", write_plan)
    argv = ["plan", "--stack-file", str(job["stack_file"]), "--out", str(out)]
    printed = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(printed):
        code = cli.main(argv)
    total = time.perf_counter() - start
    if code != 0 or not plans:
        raise SystemExit(f"fleetctl plan failed (exit {code}) on {job['stack_file']}")
    resources = plans[0].resources
    if job.get("keep_plan"):
        shutil.copyfile(out / "plan.json", job["keep_plan"])  # what the floor registers again
    return {
        "total_s": total,
        "program_s": phases["program"],
        "write_s": phases["write"],
        "resources": len(resources),
        "custom": sum(1 for item in resources if item["custom"]),
        "types": dict(Counter(str(item["type"]) for item in resources)),
    }


FLOOR_PROGRAM: Final = '''\
"""The floor: the resources of our plan registered again as they are (same types, names, inputs,
parents, providers and options), by a program with none of our logic: no config, no spec, no rendering."""

import json

from benchmarks.bare import register

register(json.load(open({replay!r})))
'''


def replay_entries(plan_json: Path) -> list[dict[str, Any]]:
    """Our plan's resources (the stack itself left out), each after its parent, its providers and what it
    depends on."""
    resources = [entry for entry in json.loads(plan_json.read_text())["resources"] if entry["type"] != STACK_TYPE]
    by_urn = {entry["urn"]: entry for entry in resources}
    ordered: list[dict[str, Any]] = []
    placed: set[str] = set()

    def place(entry: dict[str, Any]) -> None:
        if entry["urn"] in placed:
            return
        placed.add(entry["urn"])
        options = entry["options"]
        for needed in (
            entry.get("parent"),
            entry.get("provider"),
            *options.get("providers", {}).values(),
            *options.get("dependsOn", []),
        ):
            if needed in by_urn:
                place(by_urn[needed])
        ordered.append(entry)

    for entry in sorted(resources, key=lambda item: item["urn"]):
        place(entry)
    return ordered


def floor_program(replay: Path) -> str:
    """The floor's program text, registering the entries of ``replay`` (a JSON list)."""
    return FLOOR_PROGRAM.format(replay=str(replay))


def _child_floor(job: dict[str, Any], out: Path) -> dict[str, Any]:
    """The floor program through ``run_program``, ``write_plan`` and ``summary``, as ``fleetctl plan`` does."""
    from fleetctl.plan import run_program, summary, write_plan
    from fleetctl.stackfile import StackFile

    replay = out.parent / "replay.json"
    replay.write_text(json.dumps(replay_entries(Path(job["plan_json"]))))
    program = out.parent / "floor.py"
    program.write_text(floor_program(replay))
    stack_file = StackFile(path=out.parent / f"Pulumi.{STACK}.yaml", stack=STACK, project_config={}, engine_config={})
    start = time.perf_counter()
    plan = run_program(stack_file, program=program)
    program_s = time.perf_counter() - start
    files = write_plan(plan, out)
    write_s = time.perf_counter() - start - program_s
    summary(plan, out, files)
    total = time.perf_counter() - start
    return {
        "total_s": total,
        "program_s": program_s,
        "write_s": write_s,
        "resources": len(plan.resources),
        "custom": sum(1 for item in plan.resources if item["custom"]),
        "types": dict(Counter(str(item["type"]) for item in plan.resources)),
    }


def _child_bare(job: dict[str, Any], out: Path) -> dict[str, Any]:
    """The bare registration of our plan's resources (benchmarks/bare.py)."""
    from benchmarks import bare

    replay = out.parent / "replay.json"
    replay.write_text(json.dumps(replay_entries(Path(job["plan_json"]))))
    return bare.child(replay)


def _child_edit(job: dict[str, Any], out: Path) -> dict[str, Any]:
    """``fleetctl scale <first classic endpoint> 2 --dry-run --plan`` on the job's stack file, with the
    plan cache the case's ``fleetctl plan`` runs filled (FLEETCTL_CACHE_DIR, set by the parent)."""
    import contextlib
    import io

    from fleetctl import cli

    argv = ["scale", EDIT_ENDPOINT, "2", "--dry-run", "--plan", "--stack-file", str(job["stack_file"])]
    printed = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(printed):
        code = cli.main(argv)
    total = time.perf_counter() - start
    if code != 0 or "spec.replicas: 1 -> 2" not in printed.getvalue():
        raise SystemExit(f"the timed edit failed (exit {code}) on {job['stack_file']}:\n{printed.getvalue()[-2000:]}")
    return {"total_s": total, "program_s": total, "write_s": 0.0, "resources": 0, "custom": 0, "types": {}}


def _child_profile(job: dict[str, Any], out: Path) -> dict[str, Any]:
    """cProfile of ours (``fleetctl plan``) or of the floor on the job's stack: own time per part."""
    from benchmarks import profiles

    side = job["side"]
    if side == "ours":
        parts = profiles.profiled(lambda: _child_ours(job, out))
    else:
        parts = profiles.profiled(lambda: _child_floor(job, out))
    return {"total_s": 0.0, "program_s": 0.0, "write_s": 0.0, "resources": 0, "custom": 0, "types": {}, "parts": parts}


def _child_discover(job: dict[str, Any], out: Path) -> dict[str, Any]:
    result = _child_ours(job, out)
    result["modules"] = _loaded_modules()
    return result


_CHILDREN: Final[dict[str, Callable[[dict[str, Any], Path], dict[str, Any]]]] = {
    "ours": _child_ours,
    "floor": _child_floor,
    "discover": _child_discover,
    "bare": _child_bare,
    "edit": _child_edit,
    "profile": _child_profile,
}


def child(job_path: Path) -> None:
    """Run one measurement and write its result next to the job (``<job>.result.json``)."""
    start = time.perf_counter()
    job = json.loads(job_path.read_text())
    _preload(job.get("preload", []))
    import_s = time.perf_counter() - start
    baseline_kib = _peak_kib()
    work = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    try:
        result = _CHILDREN[job["kind"]](job, work / "plan")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result.update(import_s=import_s, baseline_kib=baseline_kib, peak_kib=_peak_kib())
    job_path.with_suffix(".result.json").write_text(json.dumps(result))


# The parent.


def _measure(job: dict[str, Any], scratch: Path, cache: Path | None = None) -> tuple[Run, dict[str, Any]]:
    """One child. Its plan cache (fleetctl/plancache.py) is ``cache``, else none: a case's plans and its
    edit share one; nothing is kept in the user's cache."""
    job_path = scratch / f"job-{time.monotonic_ns()}.json"
    job_path.write_text(json.dumps(job))
    environment = dict(os.environ)
    if cache is None:
        environment["FLEETCTL_PLAN_CACHE"] = "off"
    else:
        environment.pop("FLEETCTL_PLAN_CACHE", None)
        environment["FLEETCTL_CACHE_DIR"] = str(cache)
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--child", str(job_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=environment,
    )
    result_path = job_path.with_suffix(".result.json")
    if completed.returncode != 0 or not result_path.exists():
        raise SystemExit(f"benchmark child failed ({job['kind']}):\n{completed.stderr[-4000:]}")
    data: dict[str, Any] = json.loads(result_path.read_text())
    run = Run(
        total_s=data["total_s"],
        program_s=data["program_s"],
        write_s=data["write_s"],
        import_s=data["import_s"],
        resources=data["resources"],
        custom=data["custom"],
        peak_mib=data["peak_kib"] / 1024,
        baseline_mib=data["baseline_kib"] / 1024,
        types=data["types"],
    )
    return run, data


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def discover(scratch: Path) -> list[str]:
    """The modules a plan run loads: a plan of one endpoint of each mode in one region."""
    stack_file = write_stack_file(scratch / "discover" / f"Pulumi.{STACK}.yaml", stack_config(len(MODES), 1))
    _, data = _measure({"kind": "discover", "stack_file": str(stack_file)}, scratch)
    modules: list[str] = data["modules"]
    return modules


def estimated_seconds(spent: Mapping[tuple[int, int], float], endpoints: int, regions: int) -> float:
    """One run of every side of a case, scaled from the largest case measured by placements, with a
    margin of a quarter for cost that grows faster than the plan."""
    if not spent:
        return 0.0
    largest = max(spent, key=lambda case: case[0] * case[1])
    return spent[largest] * (endpoints * regions) / (largest[0] * largest[1]) * 1.25


def repeats_for(endpoints: int, regions: int, repeats: int) -> int:
    return 1 if endpoints * regions >= ONE_RUN_FROM else repeats


def measure_case(
    endpoints: int, regions: int, repeats: int, preload: list[str], scratch: Path, *, edit: bool = False
) -> Case:
    stack_file = write_stack_file(
        scratch / f"n{endpoints}-r{regions}" / f"Pulumi.{STACK}.yaml", stack_config(endpoints, regions)
    )
    ours: list[Run] = []
    floor: list[Run] = []
    bare: list[Run] = []
    edits: list[Run] = []
    kept = stack_file.with_name("plan.json")
    cache = stack_file.parent / "cache"
    for repeat in range(repeats):
        job = {"kind": "ours", "stack_file": str(stack_file), "preload": preload, "keep_plan": str(kept)}
        run, _ = _measure(job, scratch, cache)
        if ours and run.resources != ours[0].resources:
            raise SystemExit(f"N={endpoints} R={regions}: resource count changed between runs")
        ours.append(run)
        floor_job = {"kind": "floor", "plan_json": str(kept), "preload": preload}
        floor_run, _ = _measure(floor_job, scratch)
        if floor_run.resources != ours[0].resources or floor_run.custom != ours[0].custom:
            raise SystemExit(
                f"N={endpoints} R={regions}: the floor registered {floor_run.resources} resources "
                f"({floor_run.custom} custom), ours {ours[0].resources} ({ours[0].custom} custom)"
            )
        floor.append(floor_run)
        bared = ""
        if endpoints * regions <= BARE_UP_TO:
            bare_run, _ = _measure({"kind": "bare", "plan_json": str(kept), "preload": preload}, scratch)
            if bare_run.resources != ours[0].resources:
                raise SystemExit(f"N={endpoints} R={regions}: the bare registration registered {bare_run.resources}")
            bare.append(bare_run)
            bared = f", bare {bare_run.total_s:.2f}s"
        edited = ""
        if edit:
            edit_run, _ = _measure({"kind": "edit", "stack_file": str(stack_file), "preload": preload}, scratch, cache)
            edits.append(edit_run)
            edited = f", edit --plan {edit_run.total_s:.2f}s"
        _log(
            f"  N={endpoints:>3} R={regions} run {repeat + 1}/{repeats}: {run.resources} resources, "
            f"ours {run.total_s:.2f}s {run.peak_mib:.0f} MiB, "
            f"floor {floor_run.total_s:.2f}s {floor_run.peak_mib:.0f} MiB{bared}{edited}"
        )
    shutil.rmtree(cache, ignore_errors=True)
    return Case(
        endpoints=endpoints,
        regions=regions,
        ours=tuple(ours),
        floor=tuple(floor),
        bare=tuple(bare),
        edits=tuple(edits),
    )


def measure_profile(endpoints: int, regions: int, preload: list[str], scratch: Path) -> dict[str, dict[str, float]]:
    """Own time per part of ours and of the floor, under cProfile, on one stack."""
    stack_file = write_stack_file(
        scratch / f"profile-n{endpoints}-r{regions}" / f"Pulumi.{STACK}.yaml", stack_config(endpoints, regions)
    )
    kept = stack_file.with_name("plan.json")
    found: dict[str, dict[str, float]] = {}
    for side in ("ours", "floor"):
        job = {
            "kind": "profile",
            "side": side,
            "stack_file": str(stack_file),
            "plan_json": str(kept),
            "keep_plan": str(kept),
            "preload": preload,
        }
        found[side] = _measure(job, scratch)[1]["parts"]
    return found


def _difference(more: Counter[str], fewer: Counter[str]) -> dict[str, int]:
    return {kind: more[kind] - fewer[kind] for kind in sorted(more | fewer) if more[kind] != fewer[kind]}


def measure_modes(preload: list[str], scratch: Path) -> list[ModeCounts]:
    """Resources with 0..3 endpoints of each mode, one region; one run each (counts are deterministic)."""
    cache: dict[tuple[Mode, int], Run] = {}
    results = []
    for mode in MODES:
        for count in MODE_ENDPOINTS:
            key: tuple[Mode, int] = ("classic", 0) if count == 0 else (mode, count)
            if key not in cache:
                stack_file = write_stack_file(
                    scratch / f"mode-{key[0]}-{count}" / f"Pulumi.{STACK}.yaml",
                    stack_config(count, 1, mix=(key[0],)),
                )
                cache[key] = _measure({"kind": "ours", "stack_file": str(stack_file), "preload": preload}, scratch)[0]
        none, one, two = (Counter(cache[key].types) for key in (("classic", 0), (mode, 1), (mode, 2)))
        added = _difference(two, one)
        shared = _difference(one - none, Counter(added))
        results.append(
            ModeCounts(
                mode=mode,
                resources={
                    count: cache[("classic", 0) if count == 0 else (mode, count)].resources for count in MODE_ENDPOINTS
                },
                per_endpoint_types=added,
                shared_types=shared,
            )
        )
        _log(f"  mode {mode}: resources at {list(MODE_ENDPOINTS)} endpoints = {list(results[-1].resources.values())}")
    return results


# The report.


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N in (1, 10), R=1, one run each: a smoke check")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"report path (default: {DEFAULT_OUT})")
    parser.add_argument(
        "--time-budget",
        type=float,
        metavar="SECONDS",
        help="measure the large rows (N=1000, R=3) only if, at the pace of the rows before, they end within "
        "SECONDS of the start; RESULTS.md says which were left out and why",
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.child is not None:
        child(arguments.child)
        return 0
    endpoints, regions = (QUICK_ENDPOINTS, QUICK_REGIONS) if arguments.quick else (FULL_ENDPOINTS, FULL_REGIONS)
    repeats = 1 if arguments.quick else REPEATS
    started = datetime.now(UTC)
    begun = time.monotonic()
    load_start = os.getloadavg()
    scratch = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    try:
        _log("discovering the modules a plan run loads")
        preload = discover(scratch)
        grid = [(n, r) for r in regions for n in endpoints]
        edit_cases = QUICK_EDIT_CASES if arguments.quick else EDIT_CASES
        cases = []
        spent: dict[tuple[int, int], float] = {}
        for endpoint_count, region_count in grid:
            runs = repeats_for(endpoint_count, region_count, repeats)
            edit = (endpoint_count, region_count) in edit_cases
            began = time.monotonic()
            cases.append(measure_case(endpoint_count, region_count, runs, preload, scratch, edit=edit))
            spent[(endpoint_count, region_count)] = (time.monotonic() - began) / runs
        profile = None
        if not arguments.quick:
            _log(f"profiles of N={PROFILE_CASE[0]}, R={PROFILE_CASE[1]}")
            profile = measure_profile(*PROFILE_CASE, preload, scratch)
        preview = None
        if not arguments.quick:
            _log("a prod edit's preview, cold and warm")
            preview = prod_edit.measure(scratch)
        _log("resources per endpoint by mode")
        modes = measure_modes(preload, scratch)
        skipped: list[str] = []
        for endpoint_count, region_count in [] if arguments.quick else LARGE_CASES:
            estimate = estimated_seconds(spent, endpoint_count, region_count)
            left = None if arguments.time_budget is None else arguments.time_budget - (time.monotonic() - begun)
            if left is not None and estimate > left:
                skipped.append(
                    f"N={endpoint_count}, R={region_count} was not measured: one run of it would take about "
                    f"{estimate / 60:.0f} minutes at this machine's pace (scaled from the largest row measured), "
                    f"{max(left, 0) / 60:.0f} were left of the --time-budget"
                )
                _log(skipped[-1])
                continue
            runs = repeats_for(endpoint_count, region_count, repeats)
            cases.append(measure_case(endpoint_count, region_count, runs, preload, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    load_end = os.getloadavg()
    load = " / ".join(", ".join(f"{value:.2f}" for value in sample) for sample in (load_start, load_end))
    text = report(
        cases,
        modes,
        quick=arguments.quick,
        repeats=repeats,
        started=started,
        load=load,
        profile=profile,
        preview=preview,
        skipped=skipped,
        time_budget=arguments.time_budget,
    )
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    # The routing simulation's section (python -m benchmarks.routing), the virtualenv install's
    # (python -m benchmarks.venv_install) and the front data path's (python -m benchmarks.front) are their own:
    # kept as they were.
    existing = arguments.out.read_text() if arguments.out.exists() else ""
    kept_sections = (
        (routing.section_of, routing.spliced),
        (venv_install.section_of, venv_install.spliced),
        (front.section_of, front.spliced),
    )
    for section_of, spliced in kept_sections:
        kept = section_of(existing)
        text = spliced(text, kept) if kept else text
    arguments.out.write_text(text)
    _log(f"wrote {arguments.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
