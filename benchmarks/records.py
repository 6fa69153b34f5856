"""What the benchmark measured: one child's run, a case's runs, a mode's resource counts (plain data,
shared by the harness in benchmarks/run.py and the table writer in benchmarks/report.py)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Final

from benchmarks.stacks import Mode

ONE_RUN_FROM: Final = 400
"""Cases of at least this many placements (endpoints x regions) run once, not REPEATS times: one
run of N=400, R=3 takes minutes on a shared 2-core machine."""
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


@dataclass(frozen=True)
class ModeCounts:
    mode: Mode
    resources: dict[int, int]
    """endpoints -> registered resources (one region, every endpoint of ``mode``)."""
    per_endpoint_types: dict[str, int]
    """Resource types the second endpoint adds (resources at 2 minus at 1)."""
    shared_types: dict[str, int]
    """Resource types only the first endpoint adds (its own beyond ``per_endpoint_types``): what endpoints share."""
