"""Extra EFA nodes (issue 28, item 8): an EFA node registers with a startup taint that only the
advertising of its EFA devices takes off.

Cluster Autoscaler 1.34 treats a node with a taint of the prefix
``startup-taint.cluster-autoscaler.kubernetes.io/`` as not ready, an upcoming node for its first
15 minutes, and leaves such taints out of the templates it scales from (kubernetes/autoscaler
cluster-autoscaler-1.34.5 utils/taints/taints.go ``StartupTaintPrefix``,
``FilterOutNodesWithStartupTaints``, ``SanitizeTaints``; clusterstate/clusterstate.go
``MaxNodeStartupTime``). Without it, a node whose kubelet is Ready and whose GPUs are advertised
but whose EFA device plugin has not registered is a ready node no rdma pod fits, and CA adds
another p5. Nothing upstream removes the taint: the EFA device plugin's chart runs it with
``automountServiceAccountToken: false`` (aws/eks-charts stable/aws-efa-k8s-device-plugin
v0.5.30 templates/daemonset.yaml), so our DaemonSet does. Here its program runs as the pod runs
it, against a stand-in API server on loopback that answers GET and JSON-patch PATCH of a node as
the API server does (RFC 6902: a failed ``test`` op is 422 and changes nothing)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from components import scheduling
from components.catalog import instance_catalog
from components.platform import efa_ready
from components.platform.addons import efa_plugin_values, nvidia_plugin_values
from components.schedulability.matching import why_not
from components.schedulability.platform_pods import efa_device_plugin, nvidia_device_plugin

CA_STARTUP_PREFIX = "startup-taint.cluster-autoscaler.kubernetes.io/"
GPU = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
STARTUP = {"key": scheduling.EFA_STARTUP_TAINT.key, "value": "true", "effect": "NoSchedule"}


class StandIn:
    """One node, and the requests made of it."""

    def __init__(self, node: dict[str, Any]) -> None:
        self.node = node
        self.patches: list[list[dict[str, Any]]] = []
        self.before_patch: Callable[[], None] = lambda: None
        """Runs when a PATCH arrives, before it applies: someone else's change in between."""


def _handler(state: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path != "/api/v1/nodes/node-1":
                self._answer(404, {"kind": "Status", "code": 404})
                return
            self._answer(200, state.node)

        def do_PATCH(self) -> None:
            assert self.headers["Content-Type"] == "application/json-patch+json"
            patch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.patches.append(patch)
            state.before_patch()
            updated = copy.deepcopy(state.node)
            for op in patch:
                assert op["path"] == "/spec/taints"
                if op["op"] == "test" and updated["spec"].get("taints") != op["value"]:
                    self._answer(422, {"kind": "Status", "code": 422, "reason": "Invalid"})
                    return
                if op["op"] == "replace":
                    updated["spec"]["taints"] = op["value"]
            state.node = updated
            self._answer(200, updated)

    return Handler


@pytest.fixture
def api() -> Iterator[tuple[StandIn, str]]:
    state = StandIn({"metadata": {"name": "node-1"}, "spec": {"taints": [GPU, STARTUP]}, "status": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def run_once(server: str, heartbeat: Path | None = None) -> str:
    """The program as the DaemonSet runs it, one round, its heartbeat written to ``heartbeat``."""
    command = [sys.executable, str(efa_ready.PROGRAM_SOURCE), *efa_ready.pod_spec()["containers"][0]["command"][2:]]
    with tempfile.TemporaryDirectory() as scratch:
        beat = heartbeat or Path(scratch) / "heartbeat"
        done = subprocess.run(
            [*command, "--server", server, "--heartbeat", str(beat), "--once"],
            env={"NODE_NAME": "node-1", "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    return done.stdout.strip()


def probe(heartbeat: Path) -> int:
    command = efa_ready.pod_spec()["containers"][0]["livenessProbe"]["exec"]["command"]
    arguments = [arg if arg != efa_ready.HEARTBEAT else str(heartbeat) for arg in command[2:]]
    return subprocess.run([sys.executable, str(efa_ready.PROGRAM_SOURCE), *arguments], check=False).returncode


def test_the_probes_pass_while_rounds_complete_and_fail_when_they_stop(
    api: tuple[StandIn, str], tmp_path: Path
) -> None:
    _, server = api
    heartbeat = tmp_path / "heartbeat"
    assert probe(heartbeat) == 1  # no round yet
    run_once(server, heartbeat)
    assert probe(heartbeat) == 0
    stale = heartbeat.stat().st_mtime - 13 * efa_ready.PERIOD_SECONDS
    os.utime(heartbeat, (stale, stale))
    assert probe(heartbeat) == 1


def test_the_taint_stays_while_the_node_advertises_no_efa_devices(api: tuple[StandIn, str]) -> None:
    state, server = api
    assert run_once(server) == "node node-1: waiting: no vpc.amazonaws.com/efa advertised yet"
    state.node["status"]["allocatable"] = {"vpc.amazonaws.com/efa": "0", "nvidia.com/gpu": "8"}
    assert run_once(server) == "node node-1: waiting: no vpc.amazonaws.com/efa advertised yet"
    assert state.patches == []
    assert state.node["spec"]["taints"] == [GPU, STARTUP]


def test_once_the_devices_are_advertised_only_the_startup_taint_goes(api: tuple[StandIn, str]) -> None:
    state, server = api
    state.node["status"]["allocatable"] = {"vpc.amazonaws.com/efa": "32", "nvidia.com/gpu": "8"}
    assert run_once(server) == f"node node-1: removed {STARTUP['key']}: vpc.amazonaws.com/efa advertised"
    assert state.node["spec"]["taints"] == [GPU]
    (patch,) = state.patches
    assert patch[0] == {"op": "test", "path": "/spec/taints", "value": [GPU, STARTUP]}
    assert run_once(server) == "node node-1: untainted"
    assert len(state.patches) == 1


def test_a_taint_changed_meanwhile_fails_the_patch_and_nothing_is_lost(api: tuple[StandIn, str]) -> None:
    """The program read [GPU, STARTUP]; someone added a taint before its PATCH: the test op fails
    (422), the new taint stays, and the next round reads again."""
    state, server = api
    state.node["status"]["allocatable"] = {"vpc.amazonaws.com/efa": "32"}
    extra = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}
    state.before_patch = lambda: state.node["spec"].update(taints=[GPU, STARTUP, extra])
    assert run_once(server) == "node node-1: retrying: HTTP Error 422: Unprocessable Entity"
    assert state.node["spec"]["taints"] == [GPU, STARTUP, extra]
    state.before_patch = lambda: None
    assert run_once(server).startswith("node node-1: removed")
    assert state.node["spec"]["taints"] == [GPU, extra]


def test_the_taint_is_one_cluster_autoscaler_takes_for_a_node_still_starting() -> None:
    assert scheduling.EFA_STARTUP_TAINT.key.startswith(CA_STARTUP_PREFIX)
    facts = instance_catalog().instance_types["p5.48xlarge"]
    assert scheduling.EFA_STARTUP_TAINT in scheduling.registration_taints(True, facts)
    assert scheduling.EFA_STARTUP_TAINT not in scheduling.registration_taints(False, facts)
    # Not a running node's taint: the schedulability check and the node templates leave it out.
    assert scheduling.EFA_STARTUP_TAINT not in scheduling.node_taints(True, facts)


def test_what_must_run_before_the_taint_goes_tolerates_it() -> None:
    """The device plugins register the devices, the remover removes the taint: a plugin that did not
    tolerate it would never run there, and the taint would never go."""
    facts = instance_catalog().instance_types["p5.48xlarge"]
    labels = {
        **scheduling.node_labels("p5", True, facts),
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "nvidia.com/gpu.present": "true",
    }
    taints = scheduling.registration_taints(True, facts)
    for pod in (efa_device_plugin().pod, nvidia_device_plugin().pod, efa_ready.pod_spec()):
        assert why_not(pod, labels, taints) is None
    for values in (efa_plugin_values(), nvidia_plugin_values()):
        assert scheduling.EFA_STARTUP_TAINT.toleration() in values["tolerations"]


def test_the_remover_may_read_and_patch_nodes_and_nothing_else() -> None:
    assert efa_ready.cluster_role()["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    assert efa_ready.pod_spec()["nodeSelector"] == {scheduling.EFA_LABEL: "true"}
