"""What a diff must say about EKS changes that look harmless in place.

* A cluster's ``version`` moving more than one minor (or back): EKS refuses it (components/spec/
  upgrades.py), after `pulumi up` has changed everything ordered before the cluster; the diff refuses
  it first, naming the intermediate versions.
* A managed node group's ``scalingConfig``: terraform-provider-aws ``resourceNodeGroupUpdate``
  (internal/service/eks/node_group.go, the provider pulumi-aws 7.51.1 bundles) sends min, max and
  desired together whenever one of them changes; the program sends the group's live size kept within
  the new bounds (components/platform/live.py). The note says so, and what a changed
  ``desired_size`` does to a group that already exists (nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from components.spec.upgrades import upgrade_problem

if TYPE_CHECKING:
    from fleetctl.diff.engine import ResourceChange

CLUSTER = "eks:index:Cluster"
MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"
SCALING = "scalingConfig"


def _change_at(resource: ResourceChange, path: Sequence[str]) -> tuple[Any, Any] | None:
    for change in resource.changes:
        if tuple(change.path) == tuple(path):
            return change.old, change.new
    return None


def upgrade_refusals(resources: Iterable[ResourceChange]) -> tuple[str, ...]:
    """One message per updated cluster whose version EKS cannot reach in one update."""
    refused = []
    for resource in resources:
        if resource.type != CLUSTER or resource.action != "update":
            continue
        moved = _change_at(resource, ("version",))
        if moved is None or not all(isinstance(value, str) for value in moved):
            continue
        problem = upgrade_problem(moved[0], moved[1], f"{resource.region} ({resource.name})")
        if problem is not None:
            refused.append(problem)
    return tuple(refused)


def _scaling_note(resource: ResourceChange) -> str | None:
    bounds = [change for change in resource.changes if change.path[:1] == (SCALING,)]
    if not bounds:
        return None
    moved = {str(change.path[1]): change for change in bounds if len(change.path) == 2}
    shown = ", ".join(
        f"{key} {moved[key].old} -> {moved[key].new}" for key in ("minSize", "maxSize", "desiredSize") if key in moved
    )
    if set(moved) <= {"desiredSize"}:
        return (
            f"scaling: {shown}: desired_size is the size at creation only; a group that exists keeps the size "
            "Cluster Autoscaler gave it (the program sends its live size), so AWS changes nothing"
        )
    return (
        f"scaling: {shown}: EKS receives min, max and desired together; desired is the group's live size, "
        "read when `pulumi up` runs and kept within the new [minSize, maxSize], so running nodes stay unless "
        "they lie outside the new bounds"
    )


def with_scaling_notes(resources: Sequence[ResourceChange]) -> list[ResourceChange]:
    """The resources, each updated managed node group whose scaling changes with a note saying what EKS does."""
    noted = []
    for resource in resources:
        note = _scaling_note(resource) if resource.type == MANAGED_NODE_GROUP and resource.action == "update" else None
        noted.append(replace(resource, notes=(*resource.notes, note)) if note else resource)
    return noted
