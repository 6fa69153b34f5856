"""The table writer of the benchmark: benchmarks/RESULTS.md from the cases benchmarks/run.py measured
(the machine, the tables, the fits, the goals and the profile)."""

from __future__ import annotations

import itertools
import os
import platform
import statistics
from collections.abc import Mapping, Sequence
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Final

from benchmarks import prod_edit
from benchmarks.records import (
    BARE_UP_TO,
    EDIT_ENDPOINT,
    LINEAR_BAND,
    MODE_ENDPOINTS,
    ONE_RUN_FROM,
    PROFILE_CASE,
    Case,
    ModeCounts,
)
from benchmarks.stacks import mode_counts


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
    preview: prod_edit.Preview | None = None,
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
        *prod_edit.section(preview),
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
