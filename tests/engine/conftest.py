"""The real-engine tests' session: the local cluster (tests/cluster/local_cluster.py serve:
the control plane and kwok in a private network namespace, no nodes until a test makes its
stack's) and the engine built by tools/engine/build.sh (docs/real-engine.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.conftest import START_SECONDS, _logs, binaries
from tests.cluster.kube import Kube
from tests.cluster.local_cluster import replace_nodes
from tests.cluster.namespace import ROOT, serving
from tests.cluster.stacks import spec_of
from tests.engine.engine import Engine
from tests.engine.stacks import KUBECONFIG_VARIABLE

BUILD = ROOT / "tools" / "engine" / "build.sh"


def engine_build() -> Path:
    """The directory tools/engine/build.sh built for the pinned modules; `make test` builds it first."""
    checked = subprocess.run([str(BUILD), "--check"], capture_output=True, text=True, check=False)
    if checked.returncode != 0:
        pytest.fail(checked.stderr.strip() or "tools/engine/build.sh --check failed")
    return Path(checked.stdout.strip())


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kube, Engine]]:
    """A client of the local cluster (from this process, as tests/cluster/kube.py connects) and the
    engine that runs inside its namespace."""
    if os.geteuid() != 0:
        pytest.fail("the real-engine tests make a private network namespace: run them as root")
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        pytest.fail("the real-engine tests need util-linux unshare and nsenter")
    build = engine_build()
    work = tmp_path_factory.mktemp("engine")
    arguments = ["tests.cluster.local_cluster", "serve", str(binaries()), str(build), str(work)]
    with serving(arguments, work / "driver.log", START_SECONDS, lambda: _logs(work)) as started:
        kube = Kube(started["server"], work / "pki", int(started["pid"]))
        # What stacks moved onto the local cluster name (tests/engine/stacks.py), here and in the driver.
        os.environ[KUBECONFIG_VARIABLE] = Path(started["kubeconfig"]).read_text()
        yield kube, Engine(build, int(started["pid"]), Path(started["kubeconfig"]), work)
        kube.close()


@pytest.fixture(scope="module")
def dev_nodes(local_cluster: tuple[Kube, Engine]) -> None:
    """The dev stack's one region's nodes, in place of whatever nodes the cluster had."""
    kube, _ = local_cluster
    spec = spec_of(ROOT / "stacks" / "Pulumi.dev.yaml")
    replace_nodes(kube, spec.regions["us-west-2"])
