"""Time and peak memory of ``fleetctl plan`` beside a bare-Pulumi floor; writes ``benchmarks/RESULTS.md``.

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
import itertools
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Final, TypeVar

from benchmarks.routing import report as routing
from benchmarks.stacks import MODES, STACK, Mode, mode_counts, stack_config, write_stack_file

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
ONE_RUN_FROM: Final = 400
"""Cases of at least this many placements (endpoints x regions) run once, not REPEATS times: one
run of N=400, R=3 takes minutes on a shared 2-core machine."""
EDIT_CASES: Final = ((10, 1), (100, 1), (100, 3))
"""Where an edit's --plan is timed against one plan."""
QUICK_EDIT_CASES: Final = ((10, 1),)
PROFILE_CASE: Final = (100, 1)
BARE_UP_TO: Final = 400
"""The bare registration runs on cases of at most this many placements: under the SDK's own wait its
cost grows faster than the plan, and larger ones would take most of the run."""
EDIT_ENDPOINT: Final = "cl-0000"
"""The classic endpoint every generated stack has first; the timed edit scales it to 2 replicas."""
MODE_ENDPOINTS: Final = (0, 1, 2, 3)
"""Endpoint counts of the per-mode resource counts (one region)."""
LINEAR_BAND: Final = (0.75, 1.33)
"""A large-N per-resource slope within this factor of the small-N slope is called linear."""
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


@dataclass(frozen=True)
class Run:
    total_s: float
    program_s: float
    write_s: float
    import_s: float
    resources: int
    custom: int
    peak_mib: float
    baseline_mib: float
    types: dict[str, int]


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


@dataclass(frozen=True)
class Case:
    endpoints: int
    regions: int
    ours: tuple[Run, ...]
    floor: tuple[Run, ...]
    bare: tuple[Run, ...] = ()
    edits: tuple[Run, ...] = ()

    @property
    def resources(self) -> int:
        return self.ours[0].resources

    def median(self, side: str, field: str) -> float:
        runs = {"ours": self.ours, "floor": self.floor, "bare": self.bare, "edit": self.edits}[side]
        return float(statistics.median(float(getattr(run, field)) for run in runs))


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


@dataclass(frozen=True)
class ModeCounts:
    mode: Mode
    resources: dict[int, int]
    """endpoints -> registered resources (one region, every endpoint of ``mode``)."""
    per_endpoint_types: dict[str, int]
    """Resource types the second endpoint adds (resources at 2 minus at 1)."""
    shared_types: dict[str, int]
    """Resource types only the first endpoint adds (its own beyond ``per_endpoint_types``): what endpoints share."""


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


def machine() -> list[str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "not installed"

    sdks = ", ".join(
        f"{package} {version(package)}"
        for package in ("pulumi-aws", "pulumi-awsx", "pulumi-eks", "pulumi-kubernetes", "pydantic")
    )
    return [
        f"- CPU: {cpu}; {os.cpu_count()} logical cores ({usable} usable by this process)",
        f"- Memory: {memory}",
        f"- OS: {platform.platform()}",
        f"- Python: {platform.python_implementation()} {platform.python_version()}",
        f"- Pulumi SDK: pulumi {version('pulumi')}; {sdks}",
    ]


def _fit(points: Sequence[tuple[float, float]]) -> tuple[float, float, float]:
    """Least squares y = a + b*x: (a, b, r squared)."""
    count = len(points)
    mean_x = sum(x for x, _ in points) / count
    mean_y = sum(y for _, y in points) / count
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in points)
    syy = sum((y - mean_y) ** 2 for _, y in points)
    slope = sxy / sxx if sxx else 0.0
    intercept = mean_y - slope * mean_x
    r2 = (sxy * sxy) / (sxx * syy) if sxx and syy else 1.0
    return intercept, slope, r2


def _ratio(ours: float, floor: float) -> str:
    return f"{ours / floor:.2f}" if floor > 0 else "n/a"


def _verdict(small: float, large: float) -> str:
    if small <= 0:
        return "cannot tell (no growth at small N)"
    factor = large / small
    if LINEAR_BAND[0] <= factor <= LINEAR_BAND[1]:
        return f"linear (large-N slope {factor:.2f}x the small-N slope)"
    if factor > LINEAR_BAND[1]:
        return f"super-linear (large-N slope {factor:.2f}x the small-N slope)"
    return f"sub-linear (large-N slope {factor:.2f}x the small-N slope)"


def growth(cases: Sequence[Case], side: str, field: str) -> list[str]:
    """Per region count: the least-squares fit against resources and the per-resource slope between successive N."""
    lines = []
    time_field = field == "total_s"
    scale, unit, base_unit = (1000.0, "ms", "s") if time_field else (1024.0, "KiB", "MiB")
    for regions in sorted({case.regions for case in cases}):
        row = sorted((case for case in cases if case.regions == regions), key=lambda case: case.endpoints)
        points = [(float(case.resources), case.median(side, field)) for case in row]
        if len(points) < 2:
            continue
        intercept, slope, r2 = _fit(points)
        steps = [
            (row[index].endpoints, row[index + 1].endpoints, (y2 - y1) / (x2 - x1) * scale if x2 != x1 else 0.0)
            for index, ((x1, y1), (x2, y2)) in enumerate(itertools.pairwise(points))
        ]
        described = "; ".join(f"N {a}->{b}: {value:.2f} {unit}/resource" for a, b, value in steps)
        fit = f"{intercept:.2f} {base_unit} + {slope * scale:.2f} {unit}/resource (r^2 {r2:.3f})"
        verdict = _verdict(steps[0][2], steps[-1][2]) if len(steps) > 1 else "one step: too few points to judge"
        lines.append(f"R={regions}: fit {fit}; successive slopes: {described}; {verdict}")
    return lines


def report(
    cases: Sequence[Case],
    modes: Sequence[ModeCounts],
    *,
    quick: bool,
    repeats: int,
    started: datetime,
    load: str,
    profile: Mapping[str, Mapping[str, float]] | None = None,
    skipped: Sequence[str] = (),
    time_budget: float | None = None,
) -> str:
    budget = f" --time-budget {time_budget:.0f}" if time_budget is not None else ""
    single = [case for case in cases if len(case.ours) == 1]
    once = (
        f" Rows marked * ran once (at least {ONE_RUN_FROM} placements: one run of each side takes minutes here)."
        if single and repeats > 1
        else ""
    )
    lines = [
        "# Benchmarks: `fleetctl plan` against a bare-Pulumi floor",
        "",
        f"Generated by `python -m benchmarks.run{' --quick' if quick else ''}{budget}` (`make bench`) on "
        f"{started.strftime('%Y-%m-%d %H:%M UTC')}. {'QUICK SMOKE RUN: not a result. ' if quick else ''}"
        f"Each figure is the median of {repeats} run(s), each in a fresh process.{once}",
        *([""] + [f"Left out: {reason}." for reason in skipped] if skipped else []),
        "",
        "## Machine",
        "",
        *machine(),
        f"- Load average (1, 5, 15 min) at start / end: {load}",
        "",
        "## What is measured",
        "",
        "- **Stacks** (`benchmarks/stacks.py`): N endpoints across R regions (us-east-1, us-west-2, eu-west-1), "
        "each region a `system` group and one `gpu` group (g6e.12xlarge, no EFA); endpoint modes dealt "
        "round-robin from classic, Mooncake disaggregated (1P1D, tcp), store (tcp), both (1P1D, tcp), one GPU "
        "per pod. Every endpoint is placed in every region.",
        "- **Ours**: `fleetctl plan --stack-file <generated> --out <tmp>` called in-process "
        "(`fleetctl.cli.main`): stack file read, validation, `__main__.py` under the recording mocks, plan.json "
        "and manifests written, summary built. *program* is `run_program` alone, *write* is `write_plan`.",
        "- **Floor**: a bare Pulumi program (no config, no spec, no rendering, no components of ours) run by the "
        "same `run_program` under the same mocks, registering the resources of our plan.json again as they are: "
        "same types, names, inputs, parents and providers (providers as providers, components as plain "
        "components, custom resources as untyped `CustomResource`s), with their options (dependsOn, aliases, "
        "customTimeouts, retainOnDelete, protect, additionalSecretOutputs); then `write_plan` and `summary` as "
        "ours. The difference is what our logic costs, and what the typed provider classes cost the SDK.",
        "- **Time**: wall time of the above (`time.perf_counter`), after imports. Both sides first import the "
        "same modules (those a plan run loads, found by a discovery run), so the provider SDKs' import cost "
        "(*import* below) is in neither time.",
        "- **Peak RSS**: `getrusage(RUSAGE_SELF).ru_maxrss` of the child at its end; it includes the imported "
        "modules (*baseline*, the RSS after the imports) on both sides.",
        "- **Bare registration** (`benchmarks/bare.py`): the floor's resources registered under plain Pulumi "
        "mocks (`pulumi.runtime.mocks.set_mocks`, inputs echoed) and the SDK's own `wait_for_rpcs`: no "
        "recording, no plan records, no files. What the SDK alone costs for these resources.",
        "- **Plan cache**: each case's runs share a plan cache in a scratch directory (fleetctl/plancache.py; "
        "`fleetctl plan` stores its plan there, as it does for users); the bare, floor and mode runs have none.",
        "",
        "## Time and peak memory",
        "",
        "*bare s* is the bare registration (benchmarks/bare.py): the same resources under plain Pulumi mocks "
        "(`set_mocks`, inputs echoed), the SDK's own wait, nothing recorded or written; measured up to "
        f"{BARE_UP_TO} placements (endpoints x regions).",
        "",
        "| N endpoints | R regions | resources | ours s | floor s | ratio | bare s | ours peak MiB "
        "| floor peak MiB | ratio | bare peak MiB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in cases:
        ours_t, floor_t = case.median("ours", "total_s"), case.median("floor", "total_s")
        ours_m, floor_m = case.median("ours", "peak_mib"), case.median("floor", "peak_mib")
        bare_t = f"{case.median('bare', 'total_s'):.2f}" if case.bare else "n/a"
        bare_m = f"{case.median('bare', 'peak_mib'):.0f}" if case.bare else "n/a"
        mark = "*" if len(case.ours) == 1 and repeats > 1 else ""
        lines.append(
            f"| {case.endpoints}{mark} | {case.regions} | {case.resources} | {ours_t:.2f} | {floor_t:.2f} | "
            f"{_ratio(ours_t, floor_t)} | {bare_t} | {ours_m:.0f} | {floor_m:.0f} | {_ratio(ours_m, floor_m)} "
            f"| {bare_m} |"
        )
    lines += [
        "",
        "### Where the time goes",
        "",
        "Medians in seconds. *other* is ours minus program and write (reading, validation, summary). "
        "*above baseline* is peak RSS minus the RSS after imports: what the run itself added.",
        "",
        "| N | R | ours program | ours write | ours other | floor program | floor write | program ratio "
        "| ours ms/resource | floor ms/resource | ours above baseline MiB | floor above baseline MiB | import s "
        "| baseline MiB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in cases:
        ours_p, ours_w = case.median("ours", "program_s"), case.median("ours", "write_s")
        ours_t = case.median("ours", "total_s")
        floor_p, floor_w = case.median("floor", "program_s"), case.median("floor", "write_s")
        floor_t = case.median("floor", "total_s")
        above_ours = statistics.median(run.peak_mib - run.baseline_mib for run in case.ours)
        above_floor = statistics.median(run.peak_mib - run.baseline_mib for run in case.floor)
        lines.append(
            f"| {case.endpoints} | {case.regions} | {ours_p:.2f} | {ours_w:.2f} | {ours_t - ours_p - ours_w:.2f} "
            f"| {floor_p:.2f} | {floor_w:.2f} | {_ratio(ours_p, floor_p)} "
            f"| {ours_t / case.resources * 1000:.2f} | {floor_t / case.resources * 1000:.2f} "
            f"| {above_ours:.0f} | {above_floor:.0f} | {case.median('ours', 'import_s'):.2f} "
            f"| {case.median('ours', 'baseline_mib'):.0f} |"
        )
    lines += [
        "",
        "## Resources per endpoint, by mode (one region)",
        "",
        "Stacks of 0, 1, 2 and 3 endpoints all of one mode in one region (the 0-endpoint stack is the region "
        "alone). *first* = resources(1) - resources(0): the first endpoint, with what endpoints of a region share. "
        "*each further* = resources(2) - resources(1), the cost per endpoint, checked equal to "
        "resources(3) - resources(2). The types are the differences of the plans' type counts. "
        "With R regions an endpoint is placed in each, so it costs R times as many.",
        "",
        "| mode | resources at 0 / 1 / 2 / 3 | first | each further | linear in k | what each further endpoint adds "
        "| what the first adds besides |",
        "|---|---|---:|---:|---|---|---|",
    ]
    for counts in modes:
        values = counts.resources
        first = values[1] - values[0]
        further = values[2] - values[1]
        linear = "yes" if values[3] - values[2] == further else f"no ({values[3] - values[2]} for the third)"
        added = ", ".join(f"{count} {kind}" for kind, count in counts.per_endpoint_types.items())
        shared = ", ".join(f"{count} {kind}" for kind, count in counts.shared_types.items()) or "nothing"
        lines.append(
            f"| {counts.mode} | {' / '.join(str(values[k]) for k in MODE_ENDPOINTS)} | {first} | {further} "
            f"| {linear} | {added} | {shared} |"
        )
    mix_note = ", ".join(
        f"N={n}: " + " ".join(f"{count} {mode}" for mode, count in mode_counts(n).items() if count)
        for n in sorted({case.endpoints for case in cases})
    )
    lines += [
        "",
        f"The mixed stacks above deal modes round-robin: {mix_note}.",
        "",
        "## How cost grows",
        "",
        "Least-squares fit of median time against resources per region count, and the per-resource slope "
        "between successive N (cost is linear when the slope stays flat as N grows; "
        f"called linear within {LINEAR_BAND[0]}x-{LINEAR_BAND[1]}x of the first step's slope).",
        "",
        "Time, ours:",
        "",
        *(f"- {line}" for line in growth(cases, "ours", "total_s")),
        "",
        "Time, floor:",
        "",
        *(f"- {line}" for line in growth(cases, "floor", "total_s")),
        "",
        "Peak RSS, ours:",
        "",
        *(f"- {line}" for line in growth(cases, "ours", "peak_mib")),
        "",
        "Peak RSS, floor:",
        "",
        *(f"- {line}" for line in growth(cases, "floor", "peak_mib")),
        "",
        *summary_paragraph(cases),
        "",
        *per_extra_resource(cases),
        *edit_section(cases),
        *profile_section(profile),
        *goals(cases),
    ]
    return "\n".join(lines) + "\n"


def _step(first: Case, second: Case, side: str) -> float:
    """Seconds per added resource from ``first`` to ``second`` (medians)."""
    span = second.resources - first.resources
    return (second.median(side, "total_s") - first.median(side, "total_s")) / span if span else 0.0


def _steps(cases: Sequence[Case]) -> list[tuple[Case, Case]]:
    pairs = []
    for regions in sorted({case.regions for case in cases}):
        row = sorted((case for case in cases if case.regions == regions), key=lambda case: case.endpoints)
        pairs += list(itertools.pairwise(row))
    return pairs


def per_extra_resource(cases: Sequence[Case]) -> list[str]:
    """Each side's cost per resource added between successive rows, against the bare registration."""
    pairs = [(a, b) for a, b in _steps(cases) if a.bare and b.bare]
    if not pairs:
        return []
    lines = [
        "## Per extra resource, against the bare registration",
        "",
        "Between successive rows of one region count: the time each side adds per added resource "
        "(difference of medians over difference of resources).",
        "",
        "| R | N | resources | ours ms | floor ms | bare ms | ours / bare | floor / bare |",
        "|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for first, second in pairs:
        ours, floor, bare = (_step(first, second, side) * 1000 for side in ("ours", "floor", "bare"))
        lines.append(
            f"| {first.regions} | {first.endpoints} -> {second.endpoints} | {first.resources} -> {second.resources} "
            f"| {ours:.2f} | {floor:.2f} | {bare:.2f} | {_ratio(ours, bare)} | {_ratio(floor, bare)} |"
        )
    return [*lines, ""]


def edit_section(cases: Sequence[Case]) -> list[str]:
    edited = [case for case in cases if case.edits]
    if not edited:
        return []
    lines = [
        "## An edit's `--plan` against one plan",
        "",
        f"`fleetctl scale {EDIT_ENDPOINT} 2 --dry-run --plan --stack-file <stack>` after `fleetctl plan` of the "
        "same stack (the case's runs above, sharing a plan cache: fleetctl/plancache.py): the stack as it is is "
        "read back, the edited stack planned, both compared. *one plan* is the row's *ours*.",
        "",
        "| N | R | resources | one plan s | edit --plan s | ratio |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for case in edited:
        plan, edit = case.median("ours", "total_s"), case.median("edit", "total_s")
        lines.append(
            f"| {case.endpoints} | {case.regions} | {case.resources} | {plan:.2f} | {edit:.2f} | {_ratio(edit, plan)} |"
        )
    return [*lines, ""]


def profile_section(profile: Mapping[str, Mapping[str, float]] | None) -> list[str]:
    if not profile:
        return []
    from benchmarks import profiles

    endpoints, regions = PROFILE_CASE
    return [
        f"## Where the time goes, from profiles (cProfile of N={endpoints}, R={regions})",
        "",
        "Each function's own time, summed by the part of the stack its file belongs to (benchmarks/profiles.py; "
        "a built-in's time is shared among its callers' parts), in the process's CPU time. Under the profiler, "
        "so slower than the wall times above: read the parts against each other.",
        "",
        *profiles.table(profile["ours"], profile["floor"]),
        "",
        *PROFILE_NOTES,
        "",
    ]


GOAL_RATIO: Final = 1.3
GOAL_EXTRA: Final = 2.0
GOAL_SLOPE: Final = 1.15
GOAL_RSS: Final = 1.3
GOAL_EDIT: Final = 1.2


def _held(value: float, bound: float) -> str:
    return f"{value:.2f} ({'holds' if value <= bound else 'does not hold'})"


def goals(cases: Sequence[Case]) -> list[str]:
    """The issue's goals, each read from the figures above."""
    if not cases:
        return []
    lines = ["## Goals (issue 20), from the figures above", ""]
    worst = max(cases, key=lambda case: case.median("ours", "total_s") / case.median("floor", "total_s"))
    ratio = worst.median("ours", "total_s") / worst.median("floor", "total_s")
    lines.append(
        f"- ours / floor <= {GOAL_RATIO} on every row: largest {_held(ratio, GOAL_RATIO)} at "
        f"N={worst.endpoints}, R={worst.regions}."
    )
    extras = [
        (_step(a, b, "ours") / _step(a, b, "bare"), a, b)
        for a, b in _steps(cases)
        if a.bare and b.bare and _step(a, b, "bare") > 0
    ]
    if extras:
        value, a, b = max(extras, key=lambda item: item[0])
        lines.append(
            f"- per extra resource <= {GOAL_EXTRA}x the bare registration: largest {_held(value, GOAL_EXTRA)} "
            f"(R={a.regions}, N {a.endpoints} -> {b.endpoints})."
        )
    for regions in sorted({case.regions for case in cases}):
        row = {case.endpoints: case for case in cases if case.regions == regions}
        if all(n in row for n in (10, 100, 400)):
            small, large = _step(row[10], row[100], "ours"), _step(row[100], row[400], "ours")
            if small > 0:
                lines.append(
                    f"- R={regions}: per-resource slope N 100->400 against N 10->100 within {GOAL_SLOPE}x: "
                    f"{large * 1000:.2f} / {small * 1000:.2f} ms = {_held(large / small, GOAL_SLOPE)}."
                )
    heaviest = max(cases, key=lambda case: case.median("ours", "peak_mib") / case.median("floor", "peak_mib"))
    rss = heaviest.median("ours", "peak_mib") / heaviest.median("floor", "peak_mib")
    lines.append(
        f"- peak RSS <= {GOAL_RSS}x the floor: largest {_held(rss, GOAL_RSS)} at N={heaviest.endpoints}, "
        f"R={heaviest.regions}."
    )
    edited = [case for case in cases if case.edits]
    if edited:
        slowest = max(edited, key=lambda case: case.median("edit", "total_s") / case.median("ours", "total_s"))
        value = slowest.median("edit", "total_s") / slowest.median("ours", "total_s")
        lines.append(
            f"- an edit's --plan <= {GOAL_EDIT}x one plan: largest {_held(value, GOAL_EDIT)} at "
            f"N={slowest.endpoints}, R={slowest.regions}."
        )
    return [*lines, ""]


PROFILE_NOTES: Final[tuple[str, ...]] = (
    "What was ours, and is gone (issue 20):",
    "",
    "- The SDK's final wait. `pulumi.runtime.stack.wait_for_rpcs` waits for a program's outstanding Outputs "
    "with `asyncio.wait(..., FIRST_COMPLETED)` in rounds, hanging a callback on every pending Output each "
    "round: at N=100, R=1 116 rounds over about 4,400 Outputs, 508k `add_done_callback` calls, a quarter of "
    "the profiled run, growing faster than the plan. `run_program` (fleetctl/plan.py `_outputs_settled`) now "
    "waits for them first, one `asyncio.wait` per generation, and the SDK's wait finds them done. The floor "
    "runs through `run_program` too, so it gains the same; the bare registration keeps the SDK's own wait.",
    "- The collector's full passes. A plan keeps millions of objects alive to its end; Python's full "
    "collections, each a pass over all of them, came ever more often over an ever larger heap. `run_program` "
    "and `write_plan` freeze what was alive before (the imported SDKs) and defer full collections "
    "(fleetctl/plan.py `full_collections_deferred`); young generations are collected as before and the peak "
    "RSS does not grow. Both ours and the floor gain.",
    "- Validation twice: `fleetctl plan` validated the stack file and `__main__.py` validated the same config "
    "again; the second now gets the remembered spec (components/validation.py). config/ is read with "
    "ruamel's C parser. The recording mocks no longer keep every registration's stack trace (source "
    "positions, no part of a plan): less memory. A `gc.collect()` after every plan now runs after a failed "
    "one only.",
    "",
    "What remains of ours over the floor, by the table above, is mostly the SDK's, for the way a real "
    "program declares resources: the typed provider classes (`pulumi_kubernetes`, `pulumi_aws`: the SDK "
    "inspects each class's type hints with `typing.get_type_hints` and translates every output through "
    "them: *typing* and much of *Pulumi serialisation*), which the floor's untyped `CustomResource`s skip; "
    "the source position of every registration, a `pathlib` URI per frame of a deeper stack (*pathlib and "
    "traceback*); each workload object's dependsOn on the platform's components, which the SDK expands to "
    "their resources per object. A real `pulumi up` of this program runs the same SDK code. Our own "
    "code (*our components*, *recording mocks*, validation in *pydantic*) is a small part.",
)


def summary_paragraph(cases: Sequence[Case]) -> list[str]:
    """A short reading of the numbers, written from them."""
    if not cases:
        return []
    largest = max(cases, key=lambda case: case.resources)
    smallest = min(cases, key=lambda case: case.resources)
    sentences = [
        f"From {smallest.resources} to {largest.resources} resources, `fleetctl plan` took "
        f"{smallest.median('ours', 'total_s'):.2f}s to {largest.median('ours', 'total_s'):.2f}s "
        f"({_ratio(smallest.median('ours', 'total_s'), smallest.median('floor', 'total_s'))}x to "
        f"{_ratio(largest.median('ours', 'total_s'), largest.median('floor', 'total_s'))}x the floor) and peaked at "
        f"{smallest.median('ours', 'peak_mib'):.0f} to {largest.median('ours', 'peak_mib'):.0f} MiB "
        f"({_ratio(smallest.median('ours', 'peak_mib'), smallest.median('floor', 'peak_mib'))}x to "
        f"{_ratio(largest.median('ours', 'peak_mib'), largest.median('floor', 'peak_mib'))}x).",
        f"Of the largest case's {largest.median('ours', 'total_s'):.2f}s, the program under mocks took "
        f"{largest.median('ours', 'program_s'):.2f}s (the floor's {largest.median('floor', 'program_s'):.2f}s) and "
        f"writing plan.json and the manifests {largest.median('ours', 'write_s'):.2f}s.",
    ]
    for regions in sorted({case.regions for case in cases}):
        row = sorted((case for case in cases if case.regions == regions), key=lambda case: case.endpoints)
        if len(row) < 3:
            continue
        for side in ("ours", "floor"):
            small = _slope(row[0], row[1], side)
            large = _slope(row[-2], row[-1], side)
            sentences.append(
                f"R={regions}, {side}: {small * 1000:.2f} ms per added resource from N={row[0].endpoints} to "
                f"{row[1].endpoints}, {large * 1000:.2f} ms from N={row[-2].endpoints} to {row[-1].endpoints}: "
                f"{_verdict(small, large)}."
            )
    if all(sum(1 for case in cases if case.regions == regions) < 3 for regions in {case.regions for case in cases}):
        sentences.append("Too few endpoint counts in this run to judge the growth (a quick run measures two).")
    return [" ".join(sentences)]


def _slope(first: Case, second: Case, side: str) -> float:
    span = second.resources - first.resources
    return (second.median(side, "total_s") - first.median(side, "total_s")) / span if span else 0.0


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
        skipped=skipped,
        time_budget=arguments.time_budget,
    )
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    # The routing simulation's section (python -m benchmarks.routing) is its own: kept as it was.
    kept = routing.section_of(arguments.out.read_text()) if arguments.out.exists() else ""
    arguments.out.write_text(routing.spliced(text, kept) if kept else text)
    _log(f"wrote {arguments.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
