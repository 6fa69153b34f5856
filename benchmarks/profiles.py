"""Where the time of one plan goes: a cProfile of ours and of the floor, each function's own time
summed by the part of the stack it belongs to.

A built-in function (``isinstance``, a C method) has no file; its time is shared among its callers'
parts in proportion to the time each spent in it. Times are the process's CPU time
(``time.process_time``), not the wall clock: on a shared machine the wall clock also counts the time
other programs held the cores, and a load that swings between two profiles would tilt one against
the other. They are under the profiler, which slows function calls several times over: compare the
parts with each other, not with the wall times.
"""

from __future__ import annotations

import cProfile
import pstats
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any, Final

PARTS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("our components (components/)", ("/components/",)),
    ("our program (__main__.py)", ("/__main__.py",)),
    ("recording mocks (fleetctl/mocks.py)", ("fleetctl/mocks.py",)),
    ("plan records and writing (fleetctl/plan.py)", ("fleetctl/plan.py",)),
    ("fleetctl, other (stack file, cache)", ("/fleetctl/",)),
    ("Pulumi Outputs (pulumi/output.py)", ("pulumi/output.py",)),
    ("Pulumi serialisation (pulumi/runtime/rpc.py, _types.py)", ("pulumi/runtime/rpc.py", "pulumi/_types.py")),
    (
        "Pulumi registration (resource.py, runtime/resource.py, dependencies)",
        ("pulumi/resource.py", "pulumi/runtime/resource", "pulumi/runtime/_depends_on.py"),
    ),
    ("Pulumi, other (stack, settings, mocks, known types)", ("site-packages/pulumi/",)),
    ("provider SDK classes (pulumi_aws, pulumi_kubernetes, ...)", ("pulumi_aws/", "pulumi_kubernetes/", "pulumi_eks/")),
    ("protobuf and gRPC", ("google/protobuf", "grpc")),
    ("asyncio and threads", ("asyncio/", "concurrent/", "threading.py")),
    ("typing (the SDK's type inspection)", ("/typing.py", "typing_extensions")),
    ("pathlib and traceback (the SDK's source positions)", ("/pathlib.py", "/traceback.py", "/linecache.py")),
    ("YAML (ruamel)", ("ruamel",)),
    ("JSON", ("/json/",)),
    ("pydantic (validation)", ("pydantic",)),
)
OTHER: Final = "other"


def part_of(function: tuple[str, int, str]) -> str | None:
    """The part a profiled function's file belongs to; None for a built-in."""
    path = function[0]
    if path == "~":
        return None
    for name, markers in PARTS:
        if any(marker in path for marker in markers):
            return name
    return OTHER


def parts(stats: pstats.Stats) -> dict[str, float]:
    """Own time per part, built-ins shared among their callers' parts."""
    table: Mapping[Any, Any] = stats.stats  # type: ignore[attr-defined]
    totals: dict[str, float] = defaultdict(float)
    for function, (_, _, own, _, callers) in table.items():
        part = part_of(function)
        if part is not None:
            totals[part] += own
            continue
        weights = {caller: timing[2] for caller, timing in callers.items()}
        whole = sum(weights.values())
        if not whole:
            totals[OTHER] += own
            continue
        for caller, weight in weights.items():
            totals[part_of(caller) or OTHER] += own * weight / whole
    return dict(totals)


def profiled(function: Callable[[], object]) -> dict[str, float]:
    """Run ``function`` under cProfile; its own time per part."""
    profile = cProfile.Profile(time.process_time)
    profile.enable()
    try:
        function()
    finally:
        profile.disable()
    return parts(pstats.Stats(profile))


def table(ours: Mapping[str, float], floor: Mapping[str, float]) -> list[str]:
    """A Markdown table of both sides' parts, largest difference first."""
    names = sorted(set(ours) | set(floor), key=lambda name: -(ours.get(name, 0.0) - floor.get(name, 0.0)))
    total_ours, total_floor = sum(ours.values()), sum(floor.values())
    lines = [
        "| part | ours s | floor s | ours - floor s | share of the difference |",
        "|---|---:|---:|---:|---:|",
    ]
    difference = total_ours - total_floor
    for name in names:
        mine, theirs = ours.get(name, 0.0), floor.get(name, 0.0)
        if mine < 0.005 and theirs < 0.005:
            continue
        share = f"{(mine - theirs) / difference * 100:.0f}%" if difference > 0 else "n/a"
        lines.append(f"| {name} | {mine:.2f} | {theirs:.2f} | {mine - theirs:+.2f} | {share} |")
    lines.append(f"| **total** | {total_ours:.2f} | {total_floor:.2f} | {difference:+.2f} | 100% |")
    return lines
