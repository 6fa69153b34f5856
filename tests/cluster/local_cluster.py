"""A local cluster for one region of a stack: the control plane of tests/cluster/control_plane.py
plus kwok (simulated kubelets, built by tools/engine/build.sh), with a Node per node the offline
placement check counts (components/schedulability/nodes.py), each managed by kwok: Ready, and
advertising the GPUs, EFA devices and huge pages the check assumes. Pods bound to them turn
Running and Ready at once, so controllers and the Pulumi provider's awaits see rollouts finish.
docs/local-cluster.md says how to use it.

Run inside a private network namespace (``unshare -n``; tools/kube/local-cluster does that):

    python -m tests.cluster.local_cluster run KUBE_DIR ENGINE_DIR [--region R] STACK_FILE -- COMMAND...
    python -m tests.cluster.local_cluster serve KUBE_DIR ENGINE_DIR WORK_DIR

``run`` starts everything, creates the region's nodes, runs COMMAND with ``KUBECONFIG`` set (and
the engine's binaries first on ``PATH``), tears everything down and exits with COMMAND's status.
``serve`` (the real-engine tests' fixture) starts the cluster without nodes, prints one JSON line
and runs until its standard input closes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from components.schedulability.nodes import Node
from components.schedulability.platform_pods import daemon_sets
from components.spec.errors import ProblemsError
from components.spec.region import Region
from tests.cluster import control_plane
from tests.cluster.kube import Kube
from tests.cluster.pki import kubeconfig, make_pki
from tests.cluster.region import node_manifest, nodes_of, quantity
from tests.cluster.stacks import spec_of

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
"""Nodes kwok manages (its --manage-nodes-with-annotation-selector): it reports them Ready and plays
the kubelet for the pods bound to them (sigs.k8s.io/kwok pkg/kwok/cmd/root.go)."""
POD_CIDR = "10.244.0.1/16"
"""kwok's pod addresses (its default, 10.0.0.1/24, runs out at 254 pods)."""
READY_SECONDS = 60


def kwok_command(engine: Path, work: Path) -> list[str]:
    return [
        str(engine / "bin" / "kwok"),
        f"--kubeconfig={kubeconfig(work / 'pki', 'admin', control_plane.SERVER)}",
        f"--config={engine / 'share' / 'kwok-stages.yaml'}",
        f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
        f"--cidr={POD_CIDR}",
        "--server-address=127.0.0.1:10247",
    ]


def advertised(region: Region, nodes: Sequence[Node]) -> dict[str, dict[str, int]]:
    """Node -> what it offers pods: kubelet's allocatable (huge pages included) and the devices
    the region's device plugins would register there (the offline check's own supply), since no
    plugin runs here."""
    offers = {node.name: dict(node.allocatable) for node in nodes}
    for daemon_set in daemon_sets(region, list(nodes)):
        if daemon_set.resource is None:
            continue
        for node in nodes:
            supply = daemon_set.supply(node)
            if supply > 0:
                offers[node.name][daemon_set.resource] = supply
    return offers


def create_nodes(kube: Kube, region: Region) -> list[Node]:
    """The region's nodes, kwok's to run; returns once kwok reports every one Ready."""
    nodes = nodes_of(region)
    offers = advertised(region, nodes)
    for node in nodes:
        manifest = node_manifest(node)
        manifest["metadata"]["annotations"] = {KWOK_ANNOTATION: "fake"}
        kube.create(manifest)
        amounts = {resource: quantity(resource, value) for resource, value in offers[node.name].items()}
        # No condition: Ready is kwok's to report (its node-initialize stage keeps these amounts).
        kube.patch_status(manifest, {"capacity": amounts, "allocatable": amounts})
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        ready = {
            item["metadata"]["name"]
            for item in kube.objects("v1", "Node")
            if any(c["type"] == "Ready" and c["status"] == "True" for c in item["status"].get("conditions", ()))
        }
        if ready >= {node.name for node in nodes}:
            # kwok's first status of a node it has just seen may land after ours, with its default
            # amounts; once Ready its node-initialize stage no longer matches, so ours now stay.
            for node in nodes:
                amounts = {resource: quantity(resource, value) for resource, value in offers[node.name].items()}
                kube.patch_status(node_manifest(node), {"capacity": amounts, "allocatable": amounts})
            return nodes
        time.sleep(0.2)
    raise RuntimeError(f"kwok did not report the nodes Ready in {READY_SECONDS} s")


def replace_nodes(kube: Kube, region: Region) -> list[Node]:
    """The cluster's nodes become the region's (a test moving from one stack to another)."""
    for node in kube.objects("v1", "Node"):
        kube.delete("v1", "Node", node["metadata"]["name"])
    deadline = time.monotonic() + READY_SECONDS
    while kube.objects("v1", "Node"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the old nodes were not gone in {READY_SECONDS} s")
        time.sleep(0.2)
    return create_nodes(kube, region)


@contextmanager
def running(kube_binaries: Path, engine: Path, work: Path) -> Iterator[Kube]:
    """The control plane and kwok up in this network namespace; a client of it."""
    make_pki(work / "pki")
    with control_plane.running(kube_binaries, work) as started:
        kwok = control_plane._start("kwok", kwok_command(engine, work), work / "logs")
        kube = Kube(started["server"], work / "pki", os.getpid())
        try:
            yield kube
        finally:
            kube.close()
            control_plane._stop({"kwok": kwok})


def _run(args: argparse.Namespace) -> int:
    try:
        spec = spec_of(Path(args.stack_file))
    except ProblemsError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return 2
    region = args.region or next(iter(spec.regions))
    if region not in spec.regions:
        print(
            f"local-cluster: {args.stack_file} has no region {region}; it has {', '.join(spec.regions)}",
            file=sys.stderr,
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="local-cluster-") as directory:
        work = Path(directory)
        with running(Path(args.kube), Path(args.engine), work) as kube:
            nodes = create_nodes(kube, spec.regions[region])
            config = kubeconfig(work / "pki", "admin", control_plane.SERVER)
            print(
                f"local-cluster: {region} of {args.stack_file}: {len(nodes)} nodes; KUBECONFIG={config}",
                file=sys.stderr,
            )
            env = {
                **os.environ,
                "KUBECONFIG": str(config),
                "PATH": f"{Path(args.engine) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            }
            return subprocess.run(args.command, env=env, check=False).returncode


def _serve(args: argparse.Namespace) -> int:
    work = Path(args.work)
    with running(Path(args.kube), Path(args.engine), work) as kube:
        config = kubeconfig(work / "pki", "admin", control_plane.SERVER)
        line: dict[str, Any] = {"pid": os.getpid(), "server": kube.server, "kubeconfig": str(config)}
        print(json.dumps(line), flush=True)
        sys.stdin.read()
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="local-cluster")
    commands = parser.add_subparsers(dest="mode", required=True)
    run = commands.add_parser("run")
    run.add_argument("kube")
    run.add_argument("engine")
    run.add_argument("--region", help="the stack's region whose node groups the nodes copy (default: its first)")
    run.add_argument("stack_file")
    run.add_argument("command", nargs=argparse.REMAINDER)
    serve = commands.add_parser("serve")
    serve.add_argument("kube")
    serve.add_argument("engine")
    serve.add_argument("work")
    args = parser.parse_args(argv)
    if args.mode == "run":
        if args.command[:1] == ["--"]:
            args.command = args.command[1:]
        if not args.command:
            parser.error("run needs a command after --")
    try:
        return _run(args) if args.mode == "run" else _serve(args)
    except RuntimeError as error:
        print(f"local-cluster: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
