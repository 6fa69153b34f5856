"""The schedulability check of a validated stack: per region, the platform's pods and every
endpoint's rendered pods placed on the nodes the region can have, each failure a problem
naming the workload or node group, why, and the fix."""

from __future__ import annotations

from dataclasses import replace

from components.catalog import InstanceCatalog, instance_catalog
from components.render.endpoint import endpoint_objects
from components.render.placement import placed
from components.schedulability.nodes import Node, allocatable, group_nodes, node_count, region_nodes
from components.schedulability.packing import (
    SCARCE,
    SEARCH_LIMIT,
    SHOWN,
    Misfit,
    Placement,
    Shortage,
    place,
    run_daemon_sets,
)
from components.schedulability.platform_pods import daemon_sets, platform_workloads
from components.schedulability.quantities import MEMORY, describe
from components.schedulability.workloads import Workload, workloads_of
from components.scheduling import HUGEPAGES_2MI_RESOURCE
from components.spec import StackSpec
from components.spec.errors import Problem, dotted
from components.spec.region import Region


def node_autoscaled(region: Region) -> bool:
    """Every region runs the Cluster Autoscaler (components/platform/autoscaler.py), which adds
    nodes up to each group's max_size; a region without one would have its desired_size only."""
    return True


def region_workloads(spec: StackSpec, region_name: str, *, surge: bool = True) -> list[Workload]:
    """The region's Deployments and StatefulSets, the platform's and every endpoint's. ``surge=False``
    leaves out the pods a rolling update adds: what a cluster runs between rollouts (the cluster
    tests compare that with a real scheduler's placement of a static apply)."""
    region = spec.regions[region_name]
    groups = any(spec.endpoints[placement.endpoint].spans_nodes for placement in spec.placements_in(region_name))
    found = platform_workloads(region_name, region, leader_worker_sets=groups)
    for placement in spec.placements_in(region_name):
        objects = endpoint_objects(placed(spec, placement))
        found += workloads_of(objects.values(), endpoint=placement.endpoint)
    return found if surge else [replace(workload, surge=0) for workload in found]


def region_placement(spec: StackSpec, region_name: str, catalog: InstanceCatalog, *, surge: bool = True) -> Placement:
    region = spec.regions[region_name]
    autoscaled = node_autoscaled(region)
    nodes = region_nodes(region, catalog, autoscaled=autoscaled)
    plugins = daemon_sets(region, nodes)

    def grow(group: str, count: int) -> list[Node]:
        fresh = group_nodes(region, group, count, catalog)
        run_daemon_sets(fresh, plugins)
        return fresh

    return place(nodes, plugins, region_workloads(spec, region_name, surge=surge), grow)


def check_schedulable(spec: StackSpec) -> list[Problem]:
    """Every problem of placing the stack's pods, region by region; none when all fit."""
    catalog = instance_catalog()
    problems: list[Problem] = []
    for region_name, region in spec.regions.items():
        reservations = _hugepage_reservations(region_name, region, catalog)
        if reservations:
            problems += reservations
            continue
        placement = region_placement(spec, region_name, catalog)
        size_field = "max_size" if node_autoscaled(region) else "desired_size"
        for gap in placement.gaps:
            problems.append(
                Problem(
                    dotted(["regions", region_name, "node_groups", gap.group]),
                    f"the {gap.daemon_set} DaemonSet would not run on these nodes: {gap.reason}",
                )
            )
        problems += [_misfit(region_name, region, misfit) for misfit in placement.misfits if not misfit.consequential]
        problems += [_shortage(region_name, region, shortage, size_field) for shortage in placement.shortages]
    return problems


def _workload_path(region_name: str, workload: Workload) -> str:
    if workload.endpoint is not None:
        return dotted(["endpoints", workload.endpoint])
    return dotted(["regions", region_name, "node_groups"])


def _hugepage_reservations(region_name: str, region: Region, catalog: InstanceCatalog) -> list[Problem]:
    """An EFA group whose huge pages leave its nodes no memory for pods (kubelet offers memory
    less the reservation)."""
    problems = []
    for group_name, group in region.node_groups.items():
        facts = catalog.instance_types.get(group.instance_types[0])
        if facts is None or not group.hugepages_bytes:
            continue
        memory = allocatable(facts, 0)[MEMORY]
        if group.hugepages_bytes >= memory:
            problems.append(
                Problem(
                    dotted(["regions", region_name, "node_groups", group_name, "hugepages_2mi"]),
                    f"reserves {describe(HUGEPAGES_2MI_RESOURCE, group.hugepages_bytes)} on each "
                    f"{group.instance_types[0]}, whose kubelet has {describe(MEMORY, memory)} for pods before "
                    "the reservation: lower it, or give the group an instance type with more memory",
                )
            )
    return problems


def _misfit(region_name: str, region: Region, misfit: Misfit) -> Problem:
    reasons = "; ".join(f"node group {group}: {reason}" for group, reason in misfit.reasons)
    return Problem(
        _workload_path(region_name, misfit.workload),
        f"{misfit.workload.label} can run on no node of {region_name} ({reasons or 'the region has no nodes'})"
        + _hugepages_fix(region_name, region, misfit),
    )


def _hugepages_fix(region_name: str, region: Region, misfit: Misfit) -> str:
    """Huge pages come from the node group's reservation: name the field and the amount."""
    wanted = misfit.workload.requests.get(HUGEPAGES_2MI_RESOURCE, 0)
    short = [
        group
        for group, _ in misfit.reasons
        if group in region.node_groups and 0 < region.node_groups[group].hugepages_bytes < wanted
    ]
    if not wanted or not short:
        return ""
    fields = " and ".join(dotted(["regions", region_name, "node_groups", group, "hugepages_2mi"]) for group in short)
    return f"; raise {fields} to at least {wanted // 2**20}MiB (each pod's hugepages-2Mi request, docs/efa.md)"


def _per_pod(workload: Workload) -> str:
    shown = [describe(resource, workload.requests[resource]) for resource in SHOWN if workload.requests.get(resource)]
    return ", ".join(shown) or "no requests"


def _contributor(workload: Workload) -> str:
    owner = f"endpoints.{workload.endpoint}: " if workload.endpoint else ""
    surge = f" + {workload.surge} rollout surge" if workload.surge else ""
    return f"{owner}{workload.label} {workload.replicas} pod(s){surge} x ({_per_pod(workload)})"


def _shortage(region_name: str, region: Region, shortage: Shortage, size_field: str) -> Problem:
    group = region.node_groups[shortage.group]
    have = node_count(group, node_autoscaled(region))
    contributors = "; ".join(_contributor(workload) for workload, _ in shortage.contributors)
    pods = sum(count for _, count in shortage.contributors)
    demand = {
        resource: sum(count * workload.requests.get(resource, 0) for workload, count in shortage.contributors)
        for resource in SCARCE
    }
    scarce = [resource for resource, total in demand.items() if total]
    totals = ", ".join(describe(resource, demand[resource]) for resource in scarce)
    if shortage.needed is None:
        need = f"they need more than {have + SEARCH_LIMIT} nodes"
        fix = "lower the replicas or move endpoints to another group"
    else:
        need = f"they need {shortage.needed} nodes"
        fix = f"raise {size_field} to {shortage.needed}, or lower the replicas"
    if scarce:
        need += f"; demand {totals}, supply {_supply(shortage, have, scarce)}"
    return Problem(
        dotted(["regions", region_name, "node_groups", shortage.group]),
        f"cannot hold the {pods} pods that can only run on it ({size_field} {have} x {group.instance_types[0]}; "
        f"{need}): {contributors}; {fix}",
    )


def _supply(shortage: Shortage, have: int, scarce: list[str]) -> str:
    per_node = shortage.template.allocatable
    return ", ".join(describe(resource, have * per_node.get(resource, 0)) for resource in scarce)
