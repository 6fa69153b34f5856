"""The BASE side of ``fleetctl diff --base-ref``: the stack file as a commit had it, planned by
that commit's own program.

A pull request can change the program, ``components/``, ``config/`` (pins, the instance
catalog) or the requirements without touching a stack file; planning the old stack file with
today's program would show none of it. So the commit is exported (``git archive``) to a
temporary directory and its own ``fleetctl plan`` runs there, with its own code first on the
import path. Its interpreter is the one running now when the commit pins the same packages
(``requirements.txt`` and ``constraints.txt`` byte for byte as this checkout's); otherwise a
virtualenv built once for those pins under the cache directory, or a clear refusal when it
cannot be built.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from components.spec.errors import Problem, ProblemsError
from fleetctl import interrupt, plancache
from fleetctl.plancache import cache_dir
from fleetctl.project import find_project
from fleetctl.stackfile import PROJECT_ROOT

REQUIREMENT_FILES = ("requirements.txt", "constraints.txt")
"""What the program's interpreter is built from (the Makefile's venv, less the test tools)."""
PLAN_TIMEOUT_SECONDS = 600
BUILD_TIMEOUT_SECONDS = 1800
_COMPLETE = ".fleetctl-complete"


class BaseRefError(ProblemsError):
    """The base commit could not be read, set up or planned; nothing is left behind."""


def _refuse(label: str, message: str) -> BaseRefError:
    return BaseRefError([Problem(label, message)])


def _run(command: Sequence[str], *, timeout: float, **options: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run(..., capture_output=True)``, the child stopped if Ctrl-C ends fleetctl meanwhile
    (fleetctl/interrupt.py ends the process without unwinding, so no ``with`` would stop it)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **options)
    with process, interrupt.cleanup(process.kill):
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _removed_on_interrupt(directory: str | Path) -> contextlib.AbstractContextManager[None]:
    return interrupt.cleanup(lambda: shutil.rmtree(directory, ignore_errors=True))


def git(arguments: Sequence[str], cwd: Path) -> bytes:
    try:
        result = _run(["git", *arguments], cwd=cwd, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise _refuse("", f"cannot run git: {error}") from None
    if result.returncode != 0:
        message = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise _refuse("", f"git {' '.join(arguments)}: {message[-1] if message else 'failed'}")
    output: bytes = result.stdout
    return output


def export_commit(top: Path, commit: str, into: Path) -> None:
    """The commit's tracked files, as ``git archive`` gives them, under ``into``."""
    archive = git(["archive", "--format=tar", commit], top)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def _requirements(root: Path) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for name in REQUIREMENT_FILES:
        try:
            found[name] = (root / name).read_bytes()
        except OSError:
            found[name] = None
    return found


def interpreter_for(root: Path, label: str) -> str:
    """The Python to run the checkout at ``root`` with: this one when it pins what this checkout
    pins, else a cached virtualenv with its pins (built on first use)."""
    wanted = _requirements(root)
    if wanted == _requirements(PROJECT_ROOT):
        return sys.executable
    if wanted["requirements.txt"] is None:
        raise _refuse(label, "the commit has no requirements.txt to build its interpreter from")
    digest = hashlib.sha256(sys.version.encode())
    for name in REQUIREMENT_FILES:
        digest.update(b"\0" + name.encode() + b"\0" + (wanted[name] or b""))
    venv = cache_dir() / "base-venvs" / digest.hexdigest()[:16]
    python = venv / "bin" / "python"
    if (venv / _COMPLETE).is_file():
        return str(python)
    _build_venv(root, venv, label)
    return str(python)


def _build_venv(root: Path, venv: Path, label: str) -> None:
    """pip-install the commit's pins into a new virtualenv, renamed into place only when complete."""
    try:
        venv.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{venv.name}.", dir=venv.parent))
    except OSError as error:
        raise _refuse(label, f"cannot create a virtualenv under {venv.parent}: {error.strerror or error}") from None
    install = ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(root / "requirements.txt")]
    if (root / "constraints.txt").is_file():
        install += ["-c", str(root / "constraints.txt")]
    try:
        for command in ([sys.executable, "-m", "venv", str(staging)], [str(staging / "bin" / "python"), *install]):
            try:
                with _removed_on_interrupt(staging):
                    result = _run(command, text=True, timeout=BUILD_TIMEOUT_SECONDS)
            except (OSError, subprocess.TimeoutExpired) as error:
                raise _refuse(label, f"cannot build its virtualenv: {error}") from None
            if result.returncode != 0:
                said = [line for line in (result.stderr or result.stdout).splitlines() if line.strip()]
                raise _refuse(
                    label,
                    "the commit pins other packages than this checkout (requirements.txt or constraints.txt), and "
                    f"building a virtualenv with them failed: {said[-1].strip() if said else 'no output'}",
                )
        (staging / _COMPLETE).write_text("built by fleetctl diff --base-ref\n", encoding="utf-8")
        try:
            os.rename(staging, venv)
        except OSError:  # another run built it meanwhile
            if not (venv / _COMPLETE).is_file():
                raise
    except OSError as error:
        raise _refuse(label, f"cannot build its virtualenv: {error.strerror or error}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def plan_with_own_program(root: Path, stack_file: Path, label: str) -> dict[str, Any]:
    """Run ``fleetctl plan`` of the checkout at ``root`` (its code before any installed one) on
    ``stack_file``; the plan document, or the checkout's own error lines."""
    if not (root / "fleetctl" / "__main__.py").is_file():
        raise _refuse(label, "the commit has no fleetctl/__main__.py to plan with")
    python = interpreter_for(root, label)
    # Kept by the commit's sources, the stack file and the interpreter (fleetctl/plancache.py): a base
    # planned before (the same commit, or one that changed none of them) is read back, not planned again.
    inputs = plancache.stack_file_inputs(root, stack_file.name, stack_file.read_bytes(), python)
    kept = plancache.lookup(inputs)
    if kept is not None:
        reused: dict[str, Any] = json.loads(kept)
        return reused
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), environment.get("PYTHONPATH")]))
    environment.pop("PYTHONSAFEPATH", None)
    with tempfile.TemporaryDirectory(prefix="fleetctl-base-plan-") as directory, _removed_on_interrupt(directory):
        out = Path(directory) / "plan"
        command = [python, "-m", "fleetctl", "plan", "--stack-file", str(stack_file), "--out", str(out)]
        try:
            result = _run(command, cwd=root, env=environment, text=True, timeout=PLAN_TIMEOUT_SECONDS)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise _refuse(label, f"cannot run the commit's fleetctl plan: {error}") from None
        if result.returncode != 0:
            lines = [line.removeprefix("error: ") for line in result.stderr.splitlines() if line.strip()]
            raise BaseRefError(
                [Problem(label, "the commit's own fleetctl plan refused it:"), *(Problem("", line) for line in lines)]
            )
        try:
            text = (out / "plan.json").read_text(encoding="utf-8")
            document: dict[str, Any] = json.loads(text)
        except (OSError, ValueError) as error:
            raise _refuse(label, f"the commit's fleetctl plan wrote no readable plan.json: {error}") from None
    plancache.store(inputs, text)
    return document


def plan_at(ref: str, stack_path: Path, stack_name: str | None = None) -> tuple[str, dict[str, Any]]:
    """(label, plan) of the stack file at ``stack_path`` as commit ``ref`` had it, planned by that
    commit's program (as stack ``stack_name`` when given, else the one its file name says)."""
    top = Path(git(["rev-parse", "--show-toplevel"], stack_path.parent).decode().strip()).resolve()
    relative = stack_path.relative_to(top)
    label = f"{ref}:{relative.as_posix()}"
    git(["show", label], top)  # the file is there at the commit, or git says why not
    commit = git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], top).decode().strip()
    with tempfile.TemporaryDirectory(prefix="fleetctl-base-") as directory, _removed_on_interrupt(directory):
        tree = Path(directory) / "tree"
        export_commit(top, commit, tree)
        old_stack = tree / relative
        root: Path | None
        try:
            root = find_project(old_stack.parent).file.parent
        except ProblemsError:
            root = None
        if root is None or not root.is_relative_to(tree):
            raise _refuse(label, "the commit has no inference-fleet Pulumi.yaml above the stack file to plan it with")
        if stack_name is not None:
            renamed = Path(directory) / "renamed" / f"Pulumi.{stack_name}{old_stack.suffix}"
            renamed.parent.mkdir()
            shutil.copyfile(old_stack, renamed)
            old_stack = renamed
        return label, plan_with_own_program(root, old_stack, label)
