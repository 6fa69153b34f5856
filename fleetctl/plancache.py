"""Plans kept by the digest of everything a plan reads, so a side whose inputs did not change is read back
instead of planned again: the stack before a ``--plan`` edit, the base of ``fleetctl diff --base-ref``.

An entry is a directory ``<cache>/plans/<key>/`` holding ``plan.json`` as ``fleetctl plan`` wrote it and,
beside it, ``inputs.json``: the key and what it was computed from (the stack, the digest of every source
file, the interpreter and its installed distributions) and the digest of ``plan.json``. The key covers:

* the stack: its name and the config the program is given (in-process), or the stack file's bytes
  (``--base-ref``, where the commit's own ``fleetctl plan`` reads the file);
* the program's sources under its checkout: ``__main__.py``, ``Pulumi.yaml``, ``pyproject.toml``,
  ``requirements.txt``, ``constraints.txt`` and every file under ``components/``, ``front/``, ``fleetctl/`` and
  ``config/`` (the catalog, the pins, the vendored CRDs); tests/component/test_plan_cache.py holds
  that a plan opens no other file of the checkout;
* the interpreter that plans: its version and every installed distribution with its version (the
  Pulumi SDKs, pydantic, ruamel.yaml, ...).

Any change to any of them is another key, so an entry can never answer for other inputs; a
``plan.json`` that does not match the digest beside it (a torn or altered file) is a miss.

Bounded: after each store the least recently used entries beyond :data:`MAX_ENTRIES` or
:data:`MAX_BYTES` are removed. Safe with concurrent runs: an entry is written in a private staging
directory and renamed into place whole (two runs with one key write the same plan; the second
rename fails and its copy is dropped), and a reader that loses a race with an eviction misses.
``FLEETCTL_PLAN_CACHE=off`` neither reads nor writes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from fleetctl import interrupt

FORMAT: Final = 1
"""Bumped whenever what a key covers changes: older entries are then never found."""
MAX_ENTRIES: Final = 16
MAX_BYTES: Final = 1024 * 1024 * 1024
"""The cache's plans together; a plan of 400 endpoints in 3 regions is about 60 MiB."""
SOURCE_FILES: Final = ("__main__.py", "Pulumi.yaml", "pyproject.toml", "requirements.txt", "constraints.txt")
SOURCE_DIRECTORIES: Final = ("components", "front", "fleetctl", "config")
_SKIPPED_DIRECTORIES: Final = frozenset({"__pycache__"})
_STAGING_PREFIX: Final = ".staging-"
_DISABLED: Final = ("off", "0", "no", "false")
_PIECE: Final = 1 << 20


def cache_dir() -> Path:
    """``FLEETCTL_CACHE_DIR``, else ``$XDG_CACHE_HOME/inference-fleet``, else ``~/.cache/inference-fleet``."""
    explicit = os.environ.get("FLEETCTL_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "inference-fleet"


def enabled() -> bool:
    return os.environ.get("FLEETCTL_PLAN_CACHE", "on").strip().lower() not in _DISABLED


def plans_dir() -> Path:
    return cache_dir() / "plans"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_files(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every source file a plan of the checkout at ``root`` reads; a file
    that is missing is recorded as missing."""
    found: dict[str, str] = {}
    for name in SOURCE_FILES:
        path = root / name
        found[name] = _digest(path.read_bytes()) if path.is_file() else "missing"
    for directory in SOURCE_DIRECTORIES:
        base = root / directory
        if not base.is_dir():
            found[f"{directory}/"] = "missing"
            continue
        for current, directories, files in os.walk(base):
            directories[:] = sorted(name for name in directories if name not in _SKIPPED_DIRECTORIES)
            for name in sorted(files):
                path = Path(current) / name
                found[path.relative_to(root).as_posix()] = _digest(path.read_bytes())
    return dict(sorted(found.items()))


def this_interpreter() -> list[str]:
    """The running interpreter's version and the metadata directories of its installed distributions."""
    return list(_installed())


@functools.cache
def _installed() -> tuple[str, ...]:
    """Read once per process: a plan run does not install packages. Each distribution by the name of its
    metadata directory on the import path (``pulumi-3.272.0.dist-info``: name and version, as pip
    wrote them), which reading every METADATA file would only confirm, slower."""
    found: set[str] = set()
    for entry in sys.path:
        try:
            with os.scandir(entry or ".") as listing:
                found.update(item.name for item in listing if item.name.endswith((".dist-info", ".egg-info")))
        except OSError:
            continue
    return (f"python {sys.version}", *sorted(found))


def interpreter_of(python: str) -> list[str]:
    """The interpreter at ``python`` as :func:`this_interpreter` describes it: this one asked directly,
    another (a virtualenv ``fleetctl diff --base-ref`` built for a commit's pins) by its path and the
    ``*.dist-info`` directories of its environment (those virtualenvs are never changed once built)."""
    if Path(python).absolute() == Path(sys.executable).absolute():
        return this_interpreter()
    prefix = Path(python).absolute().parent.parent
    installed = sorted(path.name for path in prefix.glob("lib/python*/site-packages/*.dist-info"))
    return [f"python at {python}", *installed]


@dataclass(frozen=True)
class Inputs:
    """What one plan read, and its key."""

    stack: str
    stack_digest: str
    """sha256 of the config the program is given, or of the stack file's bytes."""
    sources: Mapping[str, str]
    interpreter: tuple[str, ...]

    @property
    def key(self) -> str:
        return _digest(json.dumps(self.describe(), sort_keys=True).encode())

    def describe(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "stack": self.stack,
            "stack_digest": self.stack_digest,
            "sources": dict(self.sources),
            "interpreter": list(self.interpreter),
        }


def in_process_inputs(stack: str, engine_config: Mapping[str, str]) -> Inputs:
    """The inputs of ``run_program`` in this process: the stack's name and config as the program is
    given them, the checkouts the program (``__main__.py``), ``fleetctl`` and ``components`` are
    imported from (one, unless PYTHONPATH mixes two), this interpreter."""
    import components
    import fleetctl

    roots = sorted({Path(package.__file__ or "").resolve().parent.parent for package in (components, fleetctl)})
    sources: dict[str, str] = {}
    for root in roots:
        prefix = "" if len(roots) == 1 else f"{root}:"
        sources.update({f"{prefix}{name}": digest for name, digest in source_files(root).items()})
    config = json.dumps(dict(engine_config), sort_keys=True, ensure_ascii=False).encode()
    return Inputs(
        stack=stack,
        stack_digest=_digest(b"config\0" + config),
        sources=sources,
        interpreter=tuple(this_interpreter()),
    )


def stack_file_inputs(root: Path, stack: str, stack_file: bytes, python: str) -> Inputs:
    """The inputs of ``fleetctl plan --stack-file`` run by ``python`` in the checkout at ``root``."""
    return Inputs(
        stack=stack,
        stack_digest=_digest(b"file\0" + stack_file),
        sources=source_files(root),
        interpreter=tuple(interpreter_of(python)),
    )


def lookup(inputs: Inputs) -> str | None:
    """The plan.json text kept for ``inputs``, or None."""
    if not enabled():
        return None
    entry = plans_dir() / inputs.key
    try:
        recorded = json.loads((entry / "inputs.json").read_text(encoding="utf-8"))
        text = (entry / "plan.json").read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or recorded.get("key") != inputs.key:
        return None
    if recorded.get("inputs") != inputs.describe() or recorded.get("plan_sha256") != _digest(text):
        return None
    with contextlib.suppress(OSError):
        os.utime(entry)  # most recently used
    return text.decode("utf-8")


def store(inputs: Inputs, plan_json: str) -> None:
    """Keep ``plan_json`` for ``inputs``; a cache that cannot be written is skipped silently (the
    plan was made; only a later run's shortcut is lost)."""
    if not enabled():
        return
    directory = plans_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=directory))
    except OSError:
        return
    try:
        with interrupt.cleanup(lambda: shutil.rmtree(staging, ignore_errors=True)):
            digest = hashlib.sha256()
            with (staging / "plan.json").open("wb") as stream:  # by pieces: no second copy of a large plan
                for start in range(0, len(plan_json), _PIECE):
                    piece = plan_json[start : start + _PIECE].encode("utf-8")
                    digest.update(piece)
                    stream.write(piece)
            record = {"key": inputs.key, "inputs": inputs.describe(), "plan_sha256": digest.hexdigest()}
            (staging / "inputs.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            os.rename(staging, directory / inputs.key)
    except OSError:
        pass  # another run kept the same plan first, or the disk refused: nothing is half-written
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    evict(directory)


STAGING_MAX_AGE_SECONDS: Final = 3600
"""A staging directory this old was left by a run that died; a live one is renamed in seconds."""


def _entries(directory: Path) -> Iterable[tuple[float, int, Path]]:
    now = time.time()
    for entry in directory.iterdir():
        if entry.name.startswith(_STAGING_PREFIX):
            try:
                if now - entry.stat().st_mtime > STAGING_MAX_AGE_SECONDS:
                    shutil.rmtree(entry, ignore_errors=True)
            except OSError:
                pass
            continue
        if entry.name.startswith("."):
            continue
        try:
            size = sum(item.stat().st_size for item in entry.iterdir())
            yield entry.stat().st_mtime, size, entry
        except OSError:
            continue  # removed meanwhile


def evict(directory: Path, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
    """Remove the least recently used entries beyond ``max_entries`` or ``max_bytes`` in all."""
    try:
        entries = sorted(_entries(directory), key=lambda item: item[0], reverse=True)
    except OSError:
        return
    kept = total = 0
    for _, size, entry in entries:
        if kept < max_entries and total + size <= max_bytes:
            kept += 1
            total += size
            continue
        shutil.rmtree(entry, ignore_errors=True)
