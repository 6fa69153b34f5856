"""What a user waits for when previewing one edit of prod: ``fleetctl canary weight summarize 20
--dry-run --plan`` on a copy of stacks/Pulumi.prod.yaml, as a whole process (start-up and imports
included), with an empty plan cache (cold: both sides planned) and again with the cache that run
filled (warm: the stack as it is read back, only the edited one planned); then the cold run under
cProfile, its functions with the most own time: what remains between the figure and the goal.
"""

from __future__ import annotations

import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
EDIT: Final = ("canary", "weight", "summarize", "20", "--dry-run", "--plan")
"""A single-endpoint edit of prod: the canary's weight moves (the route and nothing else)."""
GOAL_COLD_S: Final = 10.0
"""Any single-endpoint edit of prod previewed in under 10 s cold on a 2-core machine (issue 33)."""
PROFILE_ROWS: Final = 12


@dataclass(frozen=True)
class Preview:
    cold_s: float
    warm_s: float
    profile: tuple[tuple[str, float, int], ...] = ()
    """(function, own seconds, calls) of the cold run, most own time first."""


def _run(stack_file: Path, cache: Path, profile: Path | None = None) -> float:
    environment = {**os.environ, "FLEETCTL_CACHE_DIR": str(cache)}
    environment.pop("FLEETCTL_PLAN_CACHE", None)
    prefix = [sys.executable, "-m", "cProfile", "-o", str(profile)] if profile else [sys.executable]
    command = [*prefix, "-m", "fleetctl", *EDIT, "--stack-file", str(stack_file)]
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if completed.returncode != 0:
        raise SystemExit(f"the prod edit preview failed (exit {completed.returncode}):\n{completed.stderr[-2000:]}")
    return elapsed


def measure(scratch: Path) -> Preview:
    """Cold, warm, then a profiled cold run (its time is not reported: the profiler slows it)."""
    work = Path(tempfile.mkdtemp(prefix="prod-edit-", dir=scratch))
    try:
        stack_file = work / "Pulumi.prod.yaml"
        shutil.copyfile(ROOT / "stacks" / "Pulumi.prod.yaml", stack_file)
        cold = _run(stack_file, work / "cache")
        warm = _run(stack_file, work / "cache")
        profile_path = work / "cold.prof"
        _run(stack_file, work / "profile-cache", profile_path)
        return Preview(cold, warm, top_functions(profile_path))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def top_functions(path: Path, rows: int = PROFILE_ROWS) -> tuple[tuple[str, float, int], ...]:
    stats = pstats.Stats(str(path))
    entries = []
    for (filename, line, name), (_, calls, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = filename.split("site-packages/")[-1].removeprefix(str(ROOT) + "/")
        entries.append((f"{where}:{line}({name})", float(own), int(calls)))
    return tuple(sorted(entries, key=lambda entry: -entry[1])[:rows])


def section(preview: Preview | None) -> list[str]:
    """The RESULTS.md section: the two times against the goal, and the cold run's profile."""
    if preview is None:
        return []
    held = "held" if preview.cold_s <= GOAL_COLD_S else "missed"
    lines = [
        "## A prod edit's preview, as a user waits for it",
        "",
        f"`fleetctl {' '.join(EDIT)} --stack-file <copy of stacks/Pulumi.prod.yaml>`, the whole process "
        "(start-up, imports, validation, both plans, the diff). Goal: under "
        f"{GOAL_COLD_S:.0f} s cold on a 2-core machine.",
        "",
        "| plan cache | s |",
        "|---|---:|",
        f"| cold (both sides planned) | {preview.cold_s:.1f} |",
        f"| warm (the stack as it is read back) | {preview.warm_s:.1f} |",
        "",
        f"Cold: {preview.cold_s:.1f} s, goal {GOAL_COLD_S:.0f} s: {held}.",
    ]
    if preview.profile:
        lines += [
            "",
            "What remains, by own time in the cold run under cProfile (slower than the figure above):",
            "",
            "| function | own s | calls |",
            "|---|---:|---:|",
            *(f"| `{name}` | {own:.2f} | {calls} |" for name, own, calls in preview.profile),
        ]
    return [*lines, ""]
