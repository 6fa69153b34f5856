"""The offline check's prediction for a region, and where the real scheduler's placement
disagrees with it. The check runs without rollout surge (``surge=False``): a static apply
creates no surge pods, so those are compared only between rollouts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.catalog import instance_catalog
from components.schedulability.check import region_placement, region_workloads
from components.schedulability.matching import untolerated, why_not
from components.schedulability.nodes import Node
from components.schedulability.packing import Placement
from components.schedulability.platform_pods import daemon_sets
from components.schedulability.quantities import PODS
from components.schedulability.workloads import Workload
from components.spec import StackSpec
from tests.cluster.region import PodState, RegionRun, nodes_of, reasons

AFFINITY_REASON = "node(s) didn't match Pod's node affinity/selector"
"""kube-scheduler's NodeAffinity filter (pkg/scheduler/framework/plugins/nodeaffinity ErrReasonPod)."""
TAINT_REASON = "node(s) had untolerated taint(s)"
"""kube-scheduler's TaintToleration filter (pkg/scheduler/framework/plugins/tainttoleration: the
taint itself is only logged)."""


@dataclass(frozen=True)
class Disagreement:
    text: str
    fragmented: bool = False
    """The known disagreement (docs/real-control-plane.md): the check places a pod the scheduler
    leaves Pending although the nodes it may run on have enough free in total, because each has
    too little. The scheduler places pods in the order they come and spreads them; the check packs
    every pod afresh, largest first."""

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Prediction:
    placement: Placement
    """The offline check's placement of the region, without surge, its nodes as it left them."""
    workloads: list[Workload]
    daemon_sets: tuple[str, ...]
    bare: Mapping[str, Mapping[str, int]]
    """Node -> what it offers before any device plugin runs."""
    requests: Mapping[str, Mapping[str, int]]
    """Workload label (DaemonSets too) -> what one of its pods requests."""

    def placed(self, label: str) -> int:
        return sum(1 for node in self.placement.nodes for pod in node.pods if pod.startswith(f"{label}#"))

    def landed(self, daemon_set: str) -> set[str]:
        return {node.name for node in self.placement.nodes if f"DaemonSet {daemon_set}" in node.pods}

    def advertised(self, node: Node) -> dict[str, int]:
        return {r: v for r, v in node.allocatable.items() if r not in self.bare[node.name]}


def predict(spec: StackSpec, region_name: str) -> Prediction:
    region = spec.regions[region_name]
    bare = nodes_of(region)
    workloads = region_workloads(spec, region_name, surge=False)
    plugins = daemon_sets(region, bare)
    return Prediction(
        placement=region_placement(spec, region_name, instance_catalog(), surge=False),
        workloads=workloads,
        daemon_sets=tuple(daemon_set.name for daemon_set in plugins),
        bare={node.name: dict(node.allocatable) for node in bare},
        requests={
            **{workload.label: workload.requests for workload in workloads},
            **{f"DaemonSet kube-system/{plugin.name}": plugin.requests for plugin in plugins},
        },
    )


def real_free(prediction: Prediction, run: RegionRun) -> dict[str, dict[str, int]]:
    """Node -> what is left on it in the real cluster: what it offers, less its bound pods' requests."""
    free = {name: {**offered, **run.advertised.get(name, {})} for name, offered in prediction.bare.items()}
    for state in run.pods:
        if state.node:
            for resource, value in prediction.requests.get(state.workload, {}).items():
                free[state.node][resource] = free[state.node].get(resource, 0) - value
            free[state.node][PODS] = free[state.node].get(PODS, 0) - 1
    return free


def _fragmented(workload: Workload, nodes: list[Node], free: Mapping[str, Mapping[str, int]]) -> bool:
    """The nodes ``workload`` may run on have room for one more of its pods in total."""
    allowed = [node.name for node in nodes if why_not(workload.pod, node.labels, node.taints) is None]
    return bool(allowed) and all(
        sum(max(0, free[name].get(resource, 0)) for name in allowed) >= value
        for resource, value in workload.requests.items()
    )


def scheduler_reasons(pod: Mapping[str, Any], requests: Mapping[str, int], nodes: list[Node]) -> Counter[str]:
    """Why kube-scheduler would find no room for ``pod`` on ``nodes`` in the state the offline
    check left them, in its own words and order: its filters run taints, then node affinity and
    selector, then resources (one reason per resource a node lacks), and stop at the first that
    fails a node (framework RunFilterPlugins)."""
    found: Counter[str] = Counter()
    for node in nodes:
        missing = untolerated(pod.get("tolerations") or [], node.taints)
        if missing:
            found[TAINT_REASON] += 1
            continue
        if why_not({**pod, "tolerations": None}, node.labels, ()) is not None:
            found[AFFINITY_REASON] += 1
            continue
        if node.free.get(PODS, 0) < 1:
            found["Too many pods"] += 1
        for resource, value in requests.items():
            if resource != PODS and value > 0 and value > node.free.get(resource, 0):
                found[f"Insufficient {resource}"] += 1
    return found


def _split(found: Counter[str]) -> tuple[Counter[str], set[str]]:
    """Reasons that do not depend on where other pods went (taints, labels), exactly; and the
    names of the resources nodes lacked, which do."""
    fixed = Counter({reason: count for reason, count in found.items() if not reason.startswith("Insufficient ")})
    fixed.pop("Too many pods", None)
    short = {reason.removeprefix("Insufficient ") for reason in found if reason.startswith("Insufficient ")}
    return fixed, short


def _reason_disagreements(
    label: str, workload: Workload, pending: list[PodState], nodes: list[Node]
) -> list[Disagreement]:
    expected = scheduler_reasons(workload.pod, workload.requests, nodes)
    expected_fixed, expected_short = _split(expected)
    found = []
    for state in pending:
        real_fixed, real_short = _split(reasons(state.unschedulable or ""))
        if real_fixed != expected_fixed or real_short - expected_short or bool(real_short) != bool(expected_short):
            found.append(
                Disagreement(
                    f"{label}: pod {state.name} is Pending because {state.unschedulable!r}; where the offline check "
                    f"leaves the nodes, the scheduler would say {dict(expected)}"
                )
            )
    return found


def disagreements(prediction: Prediction, run: RegionRun) -> list[Disagreement]:
    """Every way the real control plane's placement differs from the prediction; none when they agree.

    Per workload, the pods placed must agree, except among the workloads of a node group the
    check finds short: there pods must be Pending too, but which and how many depends on the order
    they arrive (two one-GPU pods wait, or one two-GPU pod), and the check names the group, not
    the pods (the tests apply the size its error asks for instead). Every Pending pod's reasons must be
    the ones the scheduler would give where the check leaves the nodes: the same taints and
    selectors exactly, and resources the check also finds short. A pod the check places but the
    scheduler does not, for want of room on the nodes it may run on that they have in total, is
    marked ``fragmented`` (its reasons are then not compared: they describe other nodes' states)."""
    found: list[Disagreement] = []
    free = real_free(prediction, run)
    for name in prediction.daemon_sets:
        offline, real = prediction.landed(name), run.landed.get(name, set())
        if offline != real:
            found.append(
                Disagreement(
                    f"DaemonSet {name}: the offline check runs it on {sorted(offline)}, the scheduler bound it to "
                    f"{sorted(real)}"
                )
            )
    for node in prediction.placement.nodes:
        offline_devices = prediction.advertised(node)
        real_devices = run.advertised.get(node.name, {})
        if offline_devices != real_devices:
            found.append(
                Disagreement(f"node {node.name}: offline it advertises {offline_devices}, for real {real_devices}")
            )
    states: dict[str, list[PodState]] = {}
    for state in run.pods:
        states.setdefault(state.workload, []).append(state)
    short_group = {
        workload.label: shortage.group
        for shortage in prediction.placement.shortages
        for workload, _ in shortage.contributors
    }
    short_pending: dict[str, int] = {}  # group the check finds short -> pods Pending there for real
    for workload in prediction.workloads:
        label = workload.label
        mine = states.get(label, [])
        replicas = run.replicas.get(label)
        if replicas != workload.replicas:
            found.append(
                Disagreement(
                    f"{label}: the offline check counts {workload.replicas} pods, the controller makes {replicas}"
                )
            )
            continue
        placed, bound = prediction.placed(label), sum(1 for state in mine if state.node)
        if label in short_group:
            short_pending[short_group[label]] = short_pending.get(short_group[label], 0) + workload.replicas - bound
        elif placed != bound:
            fragmented = placed > bound and _fragmented(workload, prediction.placement.nodes, free)
            found.append(
                Disagreement(
                    f"{label}: the offline check places {placed} of {workload.replicas} pods, the scheduler bound "
                    f"{bound}" + (" (the room is there, spread over nodes)" if fragmented else ""),
                    fragmented,
                )
            )
            if fragmented:
                continue
        pending = [state for state in mine if not state.node]
        found += _reason_disagreements(label, workload, pending, prediction.placement.nodes)
    for group, pending_count in sorted(short_pending.items()):
        if not pending_count:
            found.append(
                Disagreement(f"node group {group}: the offline check finds it short, the scheduler placed every pod")
            )
    known = {workload.label for workload in prediction.workloads}
    for label, mine in sorted(states.items()):
        if label not in known and not label.startswith("DaemonSet "):
            found.append(Disagreement(f"{label}: {len(mine)} pods the offline check does not know"))
    return found
