"""Time a fresh virtualenv install (the runtime and dev requirements, what ``make install`` puts in .venv) the
old way (the Makefile's plain ``pip install --quiet``) and with tools/venv_install.py (uv), each with an
empty and then a warm download cache; writes its section of benchmarks/RESULTS.md (between the markers
below, the rest of the file left as it is). Needs the package index: not part of ``make bench``.

    python -m benchmarks.venv_install [--out FILE]

Each run builds a new virtualenv in a scratch directory; the empty-cache run of each installer gets new
cache directories (PIP_CACHE_DIR, UV_CACHE_DIR) that its warm run then reuses. After each run of the
script the virtualenv's ``pip freeze`` is compared with constraints.txt (uv must keep every pin).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from benchmarks import sections

ROOT: Final = Path(__file__).resolve().parent.parent
RESULTS: Final = ROOT / "benchmarks" / "RESULTS.md"
BEGIN: Final = "<!-- virtualenv install: python -m benchmarks.venv_install -->"
END: Final = "<!-- end of virtualenv install -->"
PIP: Final = ("--quiet", "--disable-pip-version-check")


def old_way(venv: Path) -> list[list[str]]:
    """The Makefile's steps for .venv before tools/venv_install.py (runtime, the project, dev, streamer)."""
    python = str(venv / "bin" / "python")
    return [
        [sys.executable, "-m", "venv", str(venv)],
        [python, "-m", "pip", "install", *PIP, "-r", "requirements.txt", "-c", "constraints.txt"],
        [python, "-m", "pip", "install", *PIP, "--no-deps", "-e", "."],
        [python, "-m", "pip", "install", *PIP, "-r", "requirements-dev.txt", "-c", "constraints.txt"],
        [python, "-m", "pip", "install", *PIP, "--no-deps", "-r", "requirements-streamer.txt", "-c", "constraints.txt"],
    ]


def script_way(venv: Path) -> list[list[str]]:
    """The Makefile's steps for .venv now: the same four installs through tools/venv_install.py."""
    script = [sys.executable, "tools/venv_install.py", str(venv)]
    return [
        [*script, "-r", "requirements.txt", "-c", "constraints.txt"],
        [*script, "--no-deps", "-e", ".", "-c", "constraints.txt"],
        [*script, "-r", "requirements-dev.txt", "-c", "constraints.txt"],
        [*script, "--no-deps", "-r", "requirements-streamer.txt", "-c", "constraints.txt"],
    ]


@dataclass(frozen=True)
class Measured:
    installer: str
    cache: str
    seconds: float
    load: tuple[float, float]
    pins_kept: str
    plans: tuple[float, float] = (0.0, 0.0)
    """``fleetctl plan --stack dev`` right after the install, then again (each with a plan cache of its own)."""


def plan_seconds(venv: Path, scratch: Path) -> float:
    """One ``fleetctl plan --stack dev`` of the new virtualenv, as `make plan` runs it, with no plan cache."""
    env = {**os.environ, "FLEETCTL_CACHE_DIR": str(scratch / "cache")}
    started = time.monotonic()
    subprocess.run(
        [str(venv / "bin" / "fleetctl"), "plan", "--stack", "dev", "--out", str(scratch / "plan")],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.monotonic() - started


def freeze_matches(venv: Path, with_uv: bool) -> bool:
    """Whether the virtualenv's ``pip freeze`` (the editable project aside) is constraints.txt's pins (without
    uv's for the old way, which installs no uv)."""
    frozen = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "freeze", "--exclude-editable", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    pinned = [
        line
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#") and (with_uv or not line.startswith("uv=="))
    ]
    return sorted(frozen, key=str.lower) == sorted(pinned, key=str.lower)


def measure(installer: str, cache: str, steps: list[list[str]], env: dict[str, str], venv: Path) -> Measured:
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    for step in steps:
        subprocess.run(step, cwd=ROOT, env=env, check=True)
    seconds = time.monotonic() - started
    load = (load_before, os.getloadavg()[0])
    kept = "yes" if freeze_matches(venv, with_uv="uv" in installer) else "NO"
    plans = (
        plan_seconds(venv, venv.parent / f"{venv.name}-plan-1"),
        plan_seconds(venv, venv.parent / f"{venv.name}-plan-2"),
    )
    print(
        f"{installer}, {cache} cache: {seconds:.1f} s (load {load[0]:.1f} -> {load[1]:.1f}; pins {kept}); "
        f"plans {plans[0]:.1f} s, {plans[1]:.1f} s",
        flush=True,
    )
    return Measured(installer, cache, seconds, load, kept, plans)


def run(scratch: Path) -> list[Measured]:
    results = []
    for installer, way in (("pip (the old Makefile)", old_way), ("tools/venv_install.py (uv)", script_way)):
        caches = scratch / way.__name__
        env = {**os.environ, "PIP_CACHE_DIR": str(caches / "pip"), "UV_CACHE_DIR": str(caches / "uv")}
        for cache in ("empty", "warm"):
            venv = scratch / f"{way.__name__}-{cache}"
            results.append(measure(installer, cache, way(venv), env, venv))
    return results


def report(results: Sequence[Measured], started: datetime) -> str:
    rows = [
        f"| {m.installer} | {m.cache} | {m.seconds:.1f} | {m.plans[0]:.1f} | {m.plans[1]:.1f} "
        f"| {m.load[0]:.1f} -> {m.load[1]:.1f} | {m.pins_kept} |"
        for m in results
    ]
    by = {(m.installer, m.cache): m.seconds for m in results}
    ratios = [
        f"{cache} cache: {by[('pip (the old Makefile)', cache)] / by[('tools/venv_install.py (uv)', cache)]:.1f}x"
        for cache in ("empty", "warm")
    ]
    return "\n".join(
        [
            BEGIN,
            "# Virtualenv install: pip against tools/venv_install.py",
            "",
            f"Generated by `python -m benchmarks.venv_install` on {started:%Y-%m-%d %H:%M} UTC, one run of each "
            f"(Python {platform.python_version()}, {os.cpu_count()} logical cores, at niceness {os.nice(0)}). "
            "A fresh .venv with the runtime "
            "and dev requirements (requirements.txt, the project editable, requirements-dev.txt, "
            "requirements-streamer.txt), as `make install` builds it: the Makefile's former `pip install --quiet` "
            "steps, then the same steps through tools/venv_install.py (uv from a wheel, then `uv pip install` "
            "under constraints.txt, wheels only). *empty*: new PIP_CACHE_DIR and UV_CACHE_DIR; *warm*: the same "
            "again into another new virtualenv. *install s*: wall time of the steps, downloads from the package "
            "index included. *first plan s*, *second plan s*: `fleetctl plan --stack dev` (what `make plan` runs "
            "next) right after the install and once more, each with a plan cache of its own (both installers "
            "byte-compile what they install: pip by default, uv with `--compile-bytecode`, which the script "
            "passes). *pins kept*: the virtualenv's `pip freeze` is "
            "constraints.txt line for line (but uv's line, for pip). The machine was shared while this "
            "ran (load averages in the table: 1-minute, at start and end), so read the figures against each "
            "other, not as absolutes.",
            "",
            "| installer | cache | install s | first plan s | second plan s | load | pins kept |",
            "|---|---|---:|---:|---:|---|---|",
            *rows,
            "",
            f"pip over the script: {', '.join(ratios)}.",
            END,
            "",
        ]
    )


def spliced(existing: str, section: str) -> str:
    """``existing`` with its virtualenv-install section replaced by ``section`` (appended when it has none)."""
    return sections.spliced(existing, section, BEGIN, END)


def section_of(existing: str) -> str:
    """The virtualenv-install section of ``existing`` (empty when it has none), for benchmarks/run.py to keep."""
    return sections.section_of(existing, BEGIN, END)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    arguments = parser.parse_args(argv)
    started = datetime.now(UTC)
    with tempfile.TemporaryDirectory(prefix="venv-install-bench-") as scratch:
        results = run(Path(scratch))
    existing = arguments.out.read_text() if arguments.out.exists() else ""
    arguments.out.write_text(spliced(existing, report(results, started)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
