"""What a change does to the running fleet: one verdict per resource, the worst per type (pure).

The rules read the tables of fleetctl/replacements.py (which paths roll pods, which only move
traffic, which make a new generation); fleetctl/diff/engine.py walks the two plans and asks here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from fleetctl.diff.values import Change, overlaps, parse_property_path, within
from fleetctl.replacements import NEW_GENERATION, NEW_GENERATION_EXEMPT, NO_SURGE, ROLLING_RESTART, TRAFFIC_ONLY

if TYPE_CHECKING:
    from fleetctl.diff.engine import ResourceChange

CREATE, UPDATE, REPLACE, DELETE, RENAME = "create", "update", "replace", "delete", "rename"
ACTIONS = (REPLACE, DELETE, UPDATE, RENAME, CREATE)
"""Report order within a region: what can hurt first."""
SYMBOLS = {CREATE: "+", UPDATE: "~", REPLACE: "+-", DELETE: "-", RENAME: "~"}

RENAME_ONLY = "rename only"
TRAFFIC = "traffic only"
IN_PLACE = "in place"
CREATED = "create"
ROLLING_RESTART_VERDICT = "rolling restart"
OUTAGE_VERDICT = "outage while it rolls"
"""A roll of a workload without surge (``NO_SURGE``) at one replica: no pod serves until the new one is ready."""
NEW_GENERATION_VERDICT = "new generation"
DELETED = "delete"
REPLACEMENT = "replacement"
STATEFUL_DELETION = "deletion of stateful resource"
STATEFUL_REPLACEMENT = "replacement of stateful resource"
SEVERITY = (
    RENAME_ONLY,
    TRAFFIC,
    IN_PLACE,
    CREATED,
    ROLLING_RESTART_VERDICT,
    OUTAGE_VERDICT,
    NEW_GENERATION_VERDICT,
    DELETED,
    REPLACEMENT,
    STATEFUL_DELETION,
    STATEFUL_REPLACEMENT,
)
"""Verdicts from harmless to worst; a resource kind's verdict is the worst of its resources."""
LOUD = frozenset({STATEFUL_DELETION, STATEFUL_REPLACEMENT})


def _single_pod(inputs: Mapping[str, Any] | None) -> bool:
    """A workload whose inputs set one replica (an autoscaled one leaves ``spec.replicas`` unset)."""
    spec = inputs.get("spec") if inputs is not None else None
    return isinstance(spec, Mapping) and spec.get("replicas") == 1


def judge(
    action: str,
    resource_type: str,
    changes: Sequence[Change],
    stateful: bool,
    inputs: Mapping[str, Any] | None = None,
) -> str:
    if action == CREATE:
        return CREATED
    if action == DELETE:
        return STATEFUL_DELETION if stateful else DELETED
    if action == RENAME:
        return RENAME_ONLY
    if action == REPLACE:
        if stateful:
            return STATEFUL_REPLACEMENT
        return NEW_GENERATION_VERDICT if resource_type in NEW_GENERATION else REPLACEMENT
    paths = [change.path for change in changes]
    traffic = [parse_property_path(path) for path in TRAFFIC_ONLY.get(resource_type, ())]
    if traffic and paths and all(any(within(path, prefix) for prefix in traffic) for path in paths):
        return TRAFFIC
    rolling = [parse_property_path(path) for path in ROLLING_RESTART.get(resource_type, ())]
    if any(overlaps(prefix, path) for prefix in rolling for path in paths):
        return OUTAGE_VERDICT if resource_type in NO_SURGE and _single_pod(inputs) else ROLLING_RESTART_VERDICT
    generation = [parse_property_path(path) for path in NEW_GENERATION.get(resource_type, ())]
    exempt = [parse_property_path(path) for path in NEW_GENERATION_EXEMPT.get(resource_type, ())]
    if any(
        overlaps(prefix, path) and not any(within(path, free) for free in exempt)
        for prefix in generation
        for path in paths
    ):
        return NEW_GENERATION_VERDICT
    return IN_PLACE


class KindVerdict(NamedTuple):
    verdict: str
    """The worst verdict among the type's resources."""
    actions: Counter[str]
    """How many of each action."""
    outcomes: Counter[tuple[str, str]]
    """How many of each (action, verdict): a rolling restart beside a deletion is still said."""


def kind_verdicts(resources: Sequence[ResourceChange]) -> dict[str, KindVerdict]:
    """Per resource type: the worst verdict among its resources, and how many of each action and verdict."""
    kinds: dict[str, KindVerdict] = {}
    for resource in resources:
        kind = kinds.get(resource.type) or KindVerdict(SEVERITY[0], Counter(), Counter())
        kind.actions[resource.action] += 1
        kind.outcomes[(resource.action, resource.verdict)] += 1
        kinds[resource.type] = kind._replace(verdict=max(kind.verdict, resource.verdict, key=SEVERITY.index))
    return dict(sorted(kinds.items()))
