"""The test cluster itself: the Kubernetes minor the stacks pin, the etcd release that minor is
tested with, built by `make test` and never by `make plan`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from components.catalog import pins
from tests.cluster.conftest import BUILD, binaries
from tests.cluster.kube import Kube
from tests.unit.test_makefile import planned_commands

MODULE = BUILD.parent


def _required(go_mod: Path, module: str) -> str:
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)$", go_mod.read_text(), re.MULTILINE)
    assert found, f"{go_mod} requires no {module}"
    return found.group(1)


def test_make_test_builds_the_control_plane_and_make_plan_never_does() -> None:
    assert "tools/kube/build.sh" in planned_commands("test")
    assert "tools/kube/build.sh" not in planned_commands("plan")


def test_the_modules_pin_the_kubernetes_minor_of_the_stacks() -> None:
    version = _required(MODULE / "go.mod", "k8s.io/kubernetes")
    assert version.startswith(f"v{pins().kubernetes.default_version}.")
    # Every staging module is the published one of the same release: v1.M.P -> v0.M.P.
    staging = f"v0{version.removeprefix('v1')}"
    replaced = re.findall(r"^\s*(k8s\.io/\S+) => (k8s\.io/\S+) (v\S+)$", (MODULE / "go.mod").read_text(), re.MULTILINE)
    assert replaced
    assert {(old, new, pinned) for old, new, pinned in replaced if old != new or pinned != staging} == set()


def test_the_cluster_runs_the_pinned_release(control_plane: Kube) -> None:
    version = control_plane.request("GET", "/version")
    assert version["gitVersion"] == _required(MODULE / "go.mod", "k8s.io/kubernetes")
    assert f"{version['major']}.{version['minor']}" == pins().kubernetes.default_version


def test_etcd_is_the_release_of_its_module() -> None:
    printed = subprocess.run([str(binaries() / "etcd"), "--version"], capture_output=True, text=True, check=True).stdout
    assert (
        f"etcd Version: {_required(MODULE / 'etcd' / 'go.mod', 'go.etcd.io/etcd/server/v3').removeprefix('v')}\n"
        in printed
    )
