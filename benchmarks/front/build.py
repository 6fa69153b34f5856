"""The benchmark's two Go programs (go/standin, go/load), built with ``go build`` into a cache outside the
checkout, once per source: the cache's directory is named by the sha256 of every file under go/ and of
``go version``, so a change of either builds again and an unchanged source never does. Go's standard library
only, so the build needs no network (GOPROXY=off, GOTOOLCHAIN=local)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "go"
CACHE = Path.home() / ".cache" / "inference-fleet" / "bench"
PROGRAMS = ("standin", "load")


class GoMissingError(RuntimeError):
    """No ``go`` on the PATH: the benchmark (and its test) cannot build its programs."""


def go() -> str:
    found = shutil.which("go") or next((p for p in ("/usr/local/go/bin/go",) if os.access(p, os.X_OK)), None)
    if found is None:
        raise GoMissingError("go is not installed (https://go.dev/dl/)")
    return found


def environment() -> dict[str, str]:
    return {**os.environ, "GOTOOLCHAIN": "local", "GOPROXY": "off", "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}


def source_key(compiler: str) -> str:
    digest = hashlib.sha256()
    for path in sorted(SOURCE.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(SOURCE)).encode() + b"\0" + path.read_bytes() + b"\0")
    version = subprocess.run([compiler, "version"], capture_output=True, text=True, check=True).stdout
    digest.update(version.encode())
    return digest.hexdigest()[:16]


def binaries(cache: Path = CACHE) -> dict[str, Path]:
    """Each program's binary, built first if this source has none in the cache."""
    compiler = go()
    target = cache / f"go-{source_key(compiler)}"
    paths = {name: target / name for name in PROGRAMS}
    if all(path.exists() for path in paths.values()):
        return paths
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=cache, prefix=".build-"))
    try:
        for name in PROGRAMS:
            subprocess.run(
                [compiler, "build", "-trimpath", "-o", str(partial / name), f"./{name}"],
                cwd=SOURCE,
                env=environment(),
                check=True,
            )
        if target.exists():  # built meanwhile by another run
            shutil.rmtree(partial)
        else:
            partial.rename(target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return paths
