"""Placing a region's pods on its nodes, and saying why a pod or DaemonSet found no room.

DaemonSets come first: each takes its requests on every node it may run on, and a device
plugin that runs on a node makes that node advertise its hardware (a GPU node whose plugin
never lands advertises no GPUs). Then every pod of every workload, rollout surge included,
goes first-fit onto the nodes it may run on, largest pods first. First-fit decreasing is a
heuristic, as kube-scheduler is: it can call a tight packing full where a cleverer one
exists, never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from components.schedulability.matching import why_not
from components.schedulability.nodes import Node
from components.schedulability.platform_pods import DaemonSet
from components.schedulability.quantities import CPU, MEMORY, PODS, describe
from components.schedulability.workloads import Workload
from components.scheduling import DEVICE_RESOURCES, EFA_RESOURCE

SCARCE = (*DEVICE_RESOURCES.values(), EFA_RESOURCE)
"""Resources that decide packing first: a node has few of them."""
SHOWN = (*SCARCE, CPU, MEMORY)


@dataclass(frozen=True)
class DaemonSetGap:
    """A DaemonSet that does not run on a group whose hardware it serves, or finds no room."""

    daemon_set: str
    group: str
    reason: str
    resource: str | None


@dataclass(frozen=True)
class Misfit:
    """A workload whose pods can run on no node of the region at all."""

    workload: Workload
    reasons: tuple[tuple[str, str], ...]
    """(node group, why not): the groups whose selectors and taints admit it, when any do;
    otherwise every group."""
    consequential: bool = False
    """It fails only for want of a resource a device plugin that does not run there would
    advertise: the DaemonSet's problem is the root cause, reported instead."""


@dataclass(frozen=True)
class Shortage:
    """A node group that cannot hold every pod that can only run there."""

    group: str
    nodes: int
    needed: int | None
    """Nodes of the group that would hold them all; None when no count would."""
    contributors: tuple[tuple[Workload, int], ...]
    """Each workload with pods bound for the group, and how many (rollout surge included)."""
    template: Node
    """One of the group's nodes, with what its device plugins advertise."""


@dataclass
class Placement:
    gaps: list[DaemonSetGap] = field(default_factory=list)
    misfits: list[Misfit] = field(default_factory=list)
    shortages: list[Shortage] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    """The region's nodes as placed: what each runs (``Node.pods``) and has left (``Node.free``)."""

    @property
    def complete(self) -> bool:
        return not (self.gaps or self.misfits or self.shortages)


def fits(requests: Mapping[str, int], free: Mapping[str, int]) -> bool:
    return (
        all(value <= free.get(resource, 0) for resource, value in requests.items() if value > 0)
        and free.get(PODS, 0) >= 1
    )


def _take(node: Node, requests: Mapping[str, int], owner: str) -> None:
    for resource, value in requests.items():
        node.free[resource] = node.free.get(resource, 0) - value
    node.free[PODS] = node.free.get(PODS, 0) - 1
    node.pods.append(owner)


def run_daemon_sets(nodes: Sequence[Node], daemon_sets: Sequence[DaemonSet]) -> list[DaemonSetGap]:
    gaps: dict[tuple[str, str], DaemonSetGap] = {}
    for daemon_set in daemon_sets:
        for node in nodes:
            reason = why_not(daemon_set.pod, node.labels, node.taints)
            supply = daemon_set.supply(node)
            if reason is None and not fits(daemon_set.requests, node.free):
                reason = "no room for its requests"
            if reason is not None:
                if supply > 0:
                    gaps.setdefault(
                        (daemon_set.name, node.group),
                        DaemonSetGap(
                            daemon_set.name,
                            node.group,
                            f"{reason}; so no node there advertises {daemon_set.resource}",
                            daemon_set.resource,
                        ),
                    )
                continue
            _take(node, daemon_set.requests, f"DaemonSet {daemon_set.name}")
            if daemon_set.resource is not None and supply > 0:
                node.allocatable[daemon_set.resource] = supply
                node.free[daemon_set.resource] = node.free.get(daemon_set.resource, 0) + supply
    return list(gaps.values())


def _weight(workload: Workload) -> tuple[int, ...]:
    return tuple(-workload.requests.get(resource, 0) for resource in SHOWN)


def shortfall(requests: Mapping[str, int], node: Node) -> list[tuple[str, str]]:
    """What an otherwise empty node of the group lacks for one pod: (resource, in the user's terms)."""
    short = []
    for resource, value in requests.items():
        offered = node.free.get(resource, 0)
        if value > offered:
            if resource not in node.allocatable:
                text = f"it requests {describe(resource, value)} but the node advertises no {resource}"
            else:
                text = f"it requests {describe(resource, value)} but a node has {describe(resource, offered)} free"
            short.append((resource, text))
    return short


NodeFactory = Callable[[str, int], list[Node]]
"""``count`` fresh nodes of a group, DaemonSets already running on them."""


def place(
    nodes: Sequence[Node], daemon_sets: Sequence[DaemonSet], workloads: Sequence[Workload], grow: NodeFactory
) -> Placement:
    result = Placement(gaps=run_daemon_sets(nodes, daemon_sets), nodes=list(nodes))
    groups: dict[str, list[Node]] = {}
    for node in nodes:
        groups.setdefault(node.group, []).append(node)
    gapped = {(gap.group, gap.resource) for gap in result.gaps}
    candidates: dict[Workload, list[Node]] = {}
    for workload in workloads:
        if workload.replicas + workload.surge == 0:
            continue
        barred: list[tuple[str, str]] = []
        short: list[tuple[str, str]] = []
        consequential = True
        for group, members in groups.items():
            allowed = [node for node in members if why_not(workload.pod, node.labels, node.taints) is None]
            if not allowed:
                barred.append((group, why_not(workload.pod, members[0].labels, members[0].taints) or ""))
            elif not any(fits(workload.requests, node.free) for node in allowed):
                missing = shortfall(workload.requests, allowed[0])
                short.append((group, "; ".join(text for _, text in missing)))
                consequential &= all((group, resource) in gapped for resource, _ in missing)
            else:
                candidates.setdefault(workload, []).extend(allowed)
        if workload not in candidates:
            result.misfits.append(Misfit(workload, tuple(short or barred), consequential=bool(short) and consequential))
    unplaced = _pack(candidates)
    for group in sorted({candidates[workload][0].group for workload in unplaced}):
        bound = [w for w in candidates if any(n.group == group for n in candidates[w])]
        contributors = tuple((w, w.replicas + w.surge) for w in bound)
        have = len(groups[group])
        needed = _nodes_needed(group, bound, grow, have)
        result.shortages.append(Shortage(group, have, needed, contributors, groups[group][0]))
    return result


def _pack(candidates: Mapping[Workload, Sequence[Node]]) -> list[Workload]:
    """First-fit decreasing; returns the workloads whose pods did not all find a node. The pods of
    one workload are identical and a node only fills up, so each workload's search resumes at the
    first node that held its previous pod: the work is bounded by pods placed plus nodes, however
    many pods a workload asks for."""
    unplaced = []
    for workload in sorted(candidates, key=lambda workload: (_weight(workload), workload.label)):
        nodes = candidates[workload]
        position = 0
        for index in range(workload.replicas + workload.surge):
            while position < len(nodes) and not fits(workload.requests, nodes[position].free):
                position += 1
            if position == len(nodes):
                unplaced.append(workload)
                break
            _take(nodes[position], workload.requests, f"{workload.label}#{index}")
    return unplaced


SEARCH_LIMIT = 1000
"""How many nodes beyond a group's size the search for the count it needs tries at most."""


def _nodes_needed(group: str, workloads: Sequence[Workload], grow: NodeFactory, have: int) -> int | None:
    """The fewest nodes of ``group`` that hold every pod of ``workloads`` (pods bound to it), or None
    when more than ``have + SEARCH_LIMIT`` would. Binary search: first-fit over more nodes of a
    group (appended after the others) never places fewer pods, and one node per pod suffices for
    pods that each fit a node."""

    def holds(count: int) -> bool:
        fresh = grow(group, count)
        chosen = {
            workload: [node for node in fresh if why_not(workload.pod, node.labels, node.taints) is None]
            for workload in workloads
        }
        return all(chosen.values()) and not _pack(chosen)

    pods = sum(workload.replicas + workload.surge for workload in workloads)
    low, high = have + 1, have + min(pods, SEARCH_LIMIT)
    if not holds(high):
        return None
    while low < high:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle + 1
    return high
