"""The test session's Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler of the pinned minor (tools/kube/build.sh), started once in a private network
namespace and stopped after the last test (docs/real-control-plane.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.kube import Kube
from tests.cluster.namespace import ROOT, serving
from tests.cluster.pki import make_pki

BUILD = ROOT / "tools" / "kube" / "build.sh"
START_SECONDS = 150


def binaries() -> Path:
    """The directory tools/kube/build.sh built for the pinned modules; `make test` builds it first."""
    checked = subprocess.run([str(BUILD), "--check"], capture_output=True, text=True, check=False)
    if checked.returncode != 0:
        pytest.fail(checked.stderr.strip() or "tools/kube/build.sh --check failed")
    return Path(checked.stdout.strip())


def _logs(work: Path) -> str:
    parts = []
    for log in [*sorted((work / "logs").glob("*.log")), work / "driver.log"]:
        if log.exists():
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}")
    return "\n".join(parts)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    if os.geteuid() != 0:
        pytest.fail("the cluster tests make a private network namespace: run them as root")
    if shutil.which("unshare") is None:
        pytest.fail("the cluster tests need util-linux unshare")
    directory = binaries()
    work = tmp_path_factory.mktemp("control-plane")
    make_pki(work / "pki")
    arguments = ["tests.cluster.control_plane", str(directory), str(work)]
    with serving(arguments, work / "driver.log", START_SECONDS, lambda: _logs(work)) as started:
        kube = Kube(started["server"], work / "pki", int(started["pid"]))
        yield kube
        kube.close()
