"""tools/kube/local-cluster as a user runs it: a region's nodes, Ready under kwok with what the
placement check counts on them, a pod rolled out on one, COMMAND's exit status, nothing left."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.local_cluster import advertised
from tests.cluster.namespace import ROOT
from tests.cluster.region import nodes_of, quantity
from tests.cluster.stacks import spec_of
from tests.engine.conftest import engine_build

pytestmark = pytest.mark.engine

TOOL = ROOT / "tools" / "kube" / "local-cluster"
PROBE = """
import json, os, sys, time
from pathlib import Path
from tests.cluster.kube import Kube
config = Path(os.environ["KUBECONFIG"])
kube = Kube("https://127.0.0.1:6443", config.parent, os.getpid())
nodes = {
    n["metadata"]["name"]: {
        "allocatable": n["status"]["allocatable"],
        "ready": any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]),
        "kwok": n["metadata"]["annotations"].get("kwok.x-k8s.io/node"),
    }
    for n in kube.objects("v1", "Node")
}
labels = {"app": "probe"}
pod = {"containers": [{"name": "c", "image": "probe", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
       "tolerations": [{"operator": "Exists"}]}
kube.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "probe", "namespace": "default"},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}, "probe")
for _ in range(120):
    status = kube.get("apps/v1", "Deployment", "probe", "default").get("status", {})
    if status.get("readyReplicas") == 1:
        break
    time.sleep(0.5)
(placed,) = kube.objects("v1", "Pod", "default")
print(json.dumps({"nodes": nodes, "ready": status.get("readyReplicas"), "node": placed["spec"]["nodeName"],
                  "kubeconfig": str(config), "pulumi": os.environ["PATH"].split(os.pathsep)[0]}))
sys.exit(3)
"""


def test_a_region_of_a_stack_runs_on_kwok_nodes_shaped_like_its_groups() -> None:
    build = engine_build()
    stack = ROOT / "stacks" / "Pulumi.dev.yaml"
    finished = subprocess.run(
        [str(TOOL), "run", str(stack), "--", sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert finished.returncode == 3, finished.stderr  # COMMAND's own status
    seen = json.loads(finished.stdout)
    region = spec_of(stack).regions["us-west-2"]
    nodes = nodes_of(region)
    offers = advertised(region, nodes)
    assert sorted(seen["nodes"]) == sorted(node.name for node in nodes)
    for node in nodes:
        live = seen["nodes"][node.name]
        assert live["ready"], node.name
        assert live["kwok"] == "fake"
        assert live["allocatable"] == {r: quantity(r, v) for r, v in offers[node.name].items()}
    assert any("nvidia.com/gpu" in offer for offer in offers.values())
    assert seen["ready"] == 1
    assert seen["node"].startswith("gpu-")  # the one group whose nodes have a GPU
    assert seen["pulumi"] == str(build / "bin")
    assert not Path(seen["kubeconfig"]).exists()  # torn down, credentials and all


def test_a_region_the_stack_lacks_is_refused_by_name() -> None:
    engine_build()
    finished = subprocess.run(
        [str(TOOL), "run", "--region", "eu-north-9", str(ROOT / "stacks" / "Pulumi.dev.yaml"), "--", "true"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert finished.returncode == 2
    assert "has no region eu-north-9; it has us-west-2" in finished.stderr


def test_a_stack_file_with_problems_is_refused_before_anything_starts(tmp_path: Path) -> None:
    broken = tmp_path / "Pulumi.broken.yaml"
    broken.write_text("config:\n  inference-fleet:regions: {}\n  inference-fleet:endpoints: 3\n")
    finished = subprocess.run(
        [str(TOOL), "run", str(broken), "--", "true"], capture_output=True, text=True, timeout=300, check=False
    )
    assert finished.returncode == 2
    assert "error: " in finished.stderr
    assert "Traceback" not in finished.stderr
