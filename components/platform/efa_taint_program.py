"""Take an EFA node's startup taint off once the node advertises its EFA devices (docs/efa.md).

This file is a program, not part of the Pulumi program: ``components/platform/efa_ready.py`` puts
its text into a ConfigMap, and a DaemonSet on every EFA node runs it with ``python3`` (standard
library only). Every ``--period`` seconds it reads its own node (``NODE_NAME``, from the downward
API); while ``status.allocatable`` holds none of the EFA resource, the taint stays. Once the
device plugin registered the node's devices (kubelet then advertises them), the program removes
the taint, and only it, with a JSON patch that first tests the taints it read, so a concurrent
change to the node's taints makes the patch fail and the next round read again. It keeps running,
so a taint put back (EKS applies a node group's taints to its nodes again when they change) goes
as well.

Why: Cluster Autoscaler takes a node with a taint of the prefix
``startup-taint.cluster-autoscaler.kubernetes.io/`` for not ready yet, and counts it as a node
still coming up for the first 15 minutes (kubernetes/autoscaler cluster-autoscaler-1.34.5
utils/taints/taints.go ``FilterOutNodesWithStartupTaints``, clusterstate/clusterstate.go
``MaxNodeStartupTime``), instead of a ready node on which the pending rdma pod does not fit.
Nothing else removes it: the EFA device plugin's chart runs it without API credentials
(aws/eks-charts stable/aws-efa-k8s-device-plugin v0.5.30 templates/daemonset.yaml,
``automountServiceAccountToken: false``), and a kubelet may not change its own node's taints
(the NodeRestriction admission plugin).
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from typing import Any

ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--taint", help="the startup taint's key")
    parser.add_argument("--resource", help="the extended resource the device plugin advertises")
    parser.add_argument("--period", type=float, default=5.0, help="seconds between reads of the node")
    parser.add_argument(
        "--server",
        default=None,
        help="the API server (default: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)",
    )
    parser.add_argument("--heartbeat", default=None, help="a file touched after every round (the probes read it)")
    parser.add_argument(
        "--check", default=None, metavar="FILE", help="exit 0 if FILE was touched in the last --max-age seconds"
    )
    parser.add_argument("--max-age", type=float, default=60.0, help="with --check: seconds")
    parser.add_argument("--once", action="store_true", help="one round, then exit (tests)")
    return parser.parse_args(argv)


def fresh(path: str, max_age: float) -> bool:
    """The probes' question: has the loop completed a round lately?"""
    try:
        return time.time() - os.path.getmtime(path) <= max_age
    except OSError:
        return False


def beat(path: str | None) -> None:
    if path is not None:
        with open(path, "w", encoding="utf-8") as file:
            file.write(str(time.time()))


class Api:
    def __init__(self, server: str, token: str | None, context: ssl.SSLContext | None) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.context = context

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, timeout=10, context=self.context) as answer:
            return json.loads(answer.read() or b"null")


def in_cluster(server: str | None) -> Api:
    if server is None:
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    token = None
    context = None
    if os.path.exists(f"{ACCOUNT}/token"):
        with open(f"{ACCOUNT}/token", encoding="utf-8") as file:
            token = file.read().strip()  # re-read each round: kubelet rotates the projected token
    if server.startswith("https://"):
        context = ssl.create_default_context(cafile=f"{ACCOUNT}/ca.crt")
    return Api(server, token, context)


def advertised(node: dict[str, Any], resource: str) -> bool:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    try:
        return int(str(allocatable.get(resource, "0"))) > 0
    except ValueError:
        return False


def removal(node: dict[str, Any], taint: str) -> list[dict[str, Any]] | None:
    """The JSON patch that removes ``taint`` from ``node``, or None when it has none."""
    taints = (node.get("spec") or {}).get("taints") or []
    kept = [item for item in taints if item.get("key") != taint]
    if len(kept) == len(taints):
        return None
    return [
        {"op": "test", "path": "/spec/taints", "value": taints},
        {"op": "replace", "path": "/spec/taints", "value": kept},
    ]


def round_once(api: Api, name: str, taint: str, resource: str) -> str:
    """One look at the node; returns what it saw or did, for the log."""
    node = api.call("GET", f"/api/v1/nodes/{name}")
    patch = removal(node, taint)
    if patch is None:
        return "untainted"
    if not advertised(node, resource):
        return f"waiting: no {resource} advertised yet"
    api.call("PATCH", f"/api/v1/nodes/{name}", patch, content_type="application/json-patch+json")
    return f"removed {taint}: {resource} advertised"


def main(argv: list[str]) -> int:
    arguments = parse_args(argv)
    if arguments.check is not None:
        return 0 if fresh(arguments.check, arguments.max_age) else 1
    if not (arguments.taint and arguments.resource):
        print("--taint and --resource are required", file=sys.stderr)
        return 2
    name = os.environ.get("NODE_NAME")
    if not name:
        print("NODE_NAME is not set (the DaemonSet passes spec.nodeName)", file=sys.stderr)
        return 2
    last = None
    while True:
        try:
            seen = round_once(in_cluster(arguments.server), name, arguments.taint, arguments.resource)
        except (urllib.error.URLError, OSError, ValueError) as error:
            seen = f"retrying: {error}"  # a 422 from a failed test op lands here too: read again
        if seen != last:
            print(f"node {name}: {seen}", flush=True)
            last = seen
        beat(arguments.heartbeat)
        if arguments.once:
            return 0
        time.sleep(arguments.period)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
