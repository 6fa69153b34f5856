#!/usr/bin/env python3
"""One install step of a project virtualenv, with a line of progress per step.

    python3 tools/venv_install.py VENV [-c CONSTRAINTS]... [-r REQUIREMENTS]... [-e PATH]... [--no-deps]

Creates VENV (``python -m venv``) when it has no interpreter yet, then installs the requirement files
(and editable paths) under the constraint files with uv (``uv pip install``), wheels only. uv itself is
installed into VENV first, with the VENV's pip, wheels only, at the exact version the constraint files
pin (``uv==X.Y.Z``: a constraints file is the whole ``pip freeze`` of its virtualenv, uv included). If
no constraint file pins uv, or pip cannot install it (no wheel for this platform, say), the step runs
with plain pip instead, under the same constraints; ``VENV_INSTALL_WITH=pip`` asks for pip outright.

Every step prints one line when it is done: what it installed and how long it took. The installers'
own output is kept back and printed only when they fail. Standard library only: it runs with the
system python3 before any virtualenv exists (the Makefile's bootstrap; docs/testing.md).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

# Packages allowed to come as a source distribution (every other pinned package installs from a wheel).
# None needs it today: each pin of constraints.txt, policy/constraints.txt and tools/checkov/constraints.txt
# has a wheel for CPython 3.11 on Linux x86-64.
SDIST_ALLOWED: tuple[str, ...] = ()

UV_PIN = re.compile(r"^uv==(\S+?)\s*(?:#.*)?$")
PREFIX = "venv_install:"


def say(message: str) -> None:
    print(f"{PREFIX} {message}", flush=True)


def uv_pin(constraint_files: Sequence[Path]) -> str | None:
    """The uv version the first constraint file that pins uv exactly (``uv==X``) names, else None."""
    for path in constraint_files:
        for line in path.read_text().splitlines():
            found = UV_PIN.match(line.strip())
            if found:
                return found.group(1)
    return None


def installed_uv(venv: Path) -> str | None:
    """The version of the uv distribution installed in ``venv`` (its dist-info), if any."""
    if not (venv / "bin" / "uv").exists():
        return None
    for info in venv.glob("lib/python*/site-packages/uv-*.dist-info"):
        return info.name.removeprefix("uv-").removesuffix(".dist-info")
    return None


def binary_options() -> list[str]:
    """Wheels only, except for the packages SDIST_ALLOWED names (the same spelling for pip and uv)."""
    options = ["--only-binary", ":all:"]
    for name in SDIST_ALLOWED:
        options += ["--no-binary", name]
    return options


def install_arguments(args: argparse.Namespace) -> list[str]:
    """The part of the install command both installers share: what to install, under which constraints."""
    arguments: list[str] = []
    if args.no_deps:
        arguments.append("--no-deps")
    for requirements in args.requirement:
        arguments += ["-r", requirements]
    for path in args.editable:
        arguments += ["-e", path]
    for constraints in args.constraint:
        arguments += ["-c", constraints]
    return arguments


def uv_command(venv: Path, arguments: Sequence[str]) -> list[str]:
    # --system-certs: the system's CA store, as pip's configuration here uses it (uv's own bundle alone does
    # not know a TLS-inspecting proxy's CA; SSL_CERT_FILE, where set, still counts). --compile-bytecode: as pip
    # does on install; without it, where PYTHONDONTWRITEBYTECODE is set (as on this machine), Python never writes
    # the .pyc files and every run compiles what it imports again (fleetctl plan 16 s instead of 9.5 s here).
    python = str(venv / "bin" / "python")
    options = ["--system-certs", "--compile-bytecode", "--python", python]
    return [str(venv / "bin" / "uv"), "pip", "install", *options, *arguments]


def pip_command(venv: Path, arguments: Sequence[str]) -> list[str]:
    return [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", *arguments]


def what(args: argparse.Namespace) -> str:
    """The step in a few words, as the progress line names it."""
    parts = [*args.requirement, *(f"-e {path}" for path in args.editable)]
    named = " ".join(parts) or "nothing"
    if args.no_deps:
        named += " (no dependencies)"
    return named


def run(command: Sequence[str]) -> tuple[bool, str]:
    """Run ``command`` with its output kept; True when it succeeded, and what it printed."""
    completed = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    return completed.returncode == 0, completed.stdout


def fail(step: str, output: str) -> int:
    sys.stderr.write(output)
    say(f"FAILED: {step} (its output is above)")
    return 1


def ensure_venv(venv: Path) -> None:
    if (venv / "bin" / "python").exists():
        return
    started = time.monotonic()
    ok, output = run([sys.executable, "-m", "venv", str(venv)])
    if not ok:
        sys.stderr.write(output)
        raise SystemExit(f"{PREFIX} FAILED: creating the virtualenv {venv}")
    say(f"created {venv} (Python {platform.python_version()}) in {time.monotonic() - started:.1f} s")


def ensure_uv(venv: Path, pin: str) -> bool:
    """uv ``pin`` in ``venv`` (pip, wheels only); False, said, when pip cannot install it."""
    if installed_uv(venv) == pin:
        return True
    started = time.monotonic()
    ok, output = run(pip_command(venv, ["--quiet", "--only-binary", ":all:", f"uv=={pin}"]))
    if not ok:
        sys.stderr.write(output)
        say(f"pip could not install uv {pin} into {venv}: installing with pip instead")
        return False
    say(f"uv {pin} into {venv} with pip (wheel) in {time.monotonic() - started:.1f} s")
    return True


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="venv_install.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", type=Path, help="the virtualenv (created if it has no interpreter)")
    parser.add_argument("-r", dest="requirement", action="append", default=[], metavar="FILE")
    parser.add_argument("-c", dest="constraint", action="append", default=[], metavar="FILE")
    parser.add_argument("-e", dest="editable", action="append", default=[], metavar="PATH")
    parser.add_argument("--no-deps", action="store_true", help="install only what is named, not its dependencies")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    venv: Path = args.venv
    ensure_venv(venv)
    arguments = install_arguments(args)
    # A local path installs from its own source whatever the format options say; only index packages need them.
    if args.requirement:
        arguments = [*binary_options(), *arguments]
    pin = uv_pin([Path(path) for path in args.constraint])
    wanted = os.environ.get("VENV_INSTALL_WITH", "uv")
    use_uv = wanted != "pip" and pin is not None and ensure_uv(venv, pin)
    if wanted != "pip" and pin is None:
        say("no constraint file pins uv (uv==X): installing with pip")
    step = what(args)
    installer = f"uv {pin}" if use_uv else "pip"
    command = uv_command(venv, arguments) if use_uv else pip_command(venv, ["--quiet", *arguments])
    started = time.monotonic()
    ok, output = run(command)
    if not ok:
        return fail(f"{step} with {installer}", output)
    say(f"{step} into {venv} with {installer} in {time.monotonic() - started:.1f} s{counted(output)}")
    return 0


def counted(output: str) -> str:
    """uv's own count of what it installed (``Installed 31 packages in 1.2s``), as a suffix; pip says none."""
    found = re.search(r"^(Installed \d+ packages?|Audited \d+ packages?)", output, re.MULTILINE)
    return f" ({found.group(1).lower()})" if found else ""


if __name__ == "__main__":
    sys.exit(main())
