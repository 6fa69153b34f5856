"""Huge pages a node group reserves that no pod on its nodes requests (docs/efa.md).

An EFA group's nodes reserve ``hugepages_2mi`` at boot, one amount for every node of the group
(components/platform/user_data.py). Kubernetes accounts huge pages apart from memory: kubelet
takes the pre-allocated pages out of the node's memory capacity and offers them only as
``hugepages-<size>``, which a pod gets only by requesting it, and a page no pod requested is
memory no pod can use (kubernetes pkg/kubelet/nodestatus/setters.go ``MachineInfo``: "for every
huge page reservation, we need to remove it from allocatable memory"). A group shared by an
endpoint whose store lives in huge pages and one that asks for libfabric's share only therefore
locks the store's reservation on every node of the other. The report places the region's pods as
the schedulability check does, between rollouts, and sums what each node that runs a pod leaves
of its reservation.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.catalog import InstanceCatalog, instance_catalog
from components.schedulability.check import region_placement
from components.scheduling import HUGEPAGES_2MI_RESOURCE
from components.spec import StackSpec
from components.spec.errors import dotted

GIB = 2**30


@dataclass(frozen=True)
class UnrequestedHugepages:
    region: str
    group: str
    reserved: int
    """Bytes of 2 MiB pages each node of the group reserves."""
    nodes: int
    """Nodes of the group running a pod that leave part of their reservation unrequested."""
    unrequested: int
    """Bytes reserved on those nodes and requested by none of their pods."""
    requested: bool
    """Whether any pod of the group's nodes requests huge pages at all (an rdma pod)."""

    @property
    def path(self) -> str:
        return dotted(["regions", self.region, "node_groups", self.group, "hugepages_2mi"])

    def message(self) -> str:
        fix = (
            "give the pods that request less a node group of their own, whose hugepages_2mi is theirs"
            if self.requested
            else "no pod there uses EFA: set efa to false, or place an rdma endpoint on the group"
        )
        return (
            f"{self.path}: {_gib(self.unrequested)} of 2 MiB huge pages reserved and requested by no pod, on "
            f"{self.nodes} node(s) ({_gib(self.reserved)} reserved on each; memory no pod can use): {fix}"
        )


def _gib(size: int) -> str:
    return f"{size / GIB:g}GiB"


def _runs_pods(pods: list[str]) -> bool:
    return any(not pod.startswith("DaemonSet ") for pod in pods)


def unrequested_hugepages(spec: StackSpec, catalog: InstanceCatalog | None = None) -> list[UnrequestedHugepages]:
    """Per region and node group with a reservation, what the nodes running its pods leave unrequested;
    groups whose pods request all of it are left out. Nodes that run no pod are not counted: the
    Cluster Autoscaler does not keep them."""
    catalog = catalog or instance_catalog()
    found = []
    for region_name, region in spec.regions.items():
        reserving = {name for name, group in region.node_groups.items() if group.hugepages_bytes}
        if not reserving:
            continue
        placement = region_placement(spec, region_name, catalog, surge=False)
        for group_name in sorted(reserving):
            reserved = region.node_groups[group_name].hugepages_bytes
            left = [
                node.free.get(HUGEPAGES_2MI_RESOURCE, 0)
                for node in placement.nodes
                if node.group == group_name and _runs_pods(node.pods)
            ]
            wasted = [free for free in left if free > 0]
            if wasted:
                requested = any(free < reserved for free in left)
                found.append(
                    UnrequestedHugepages(region_name, group_name, reserved, len(wasted), sum(wasted), requested)
                )
    return found
