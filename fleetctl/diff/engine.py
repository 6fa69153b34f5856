"""The diff engine's plan walk: two plans in, per-resource changes out (pure).

Resources are matched by URN (or by the aliases of a renamed one, or by logical identity across
two stacks); each pair's inputs are compared in fleetctl/diff/values.py, judged in
fleetctl/diff/verdicts.py, and a generated object's churn is summarised in fleetctl/diff/generated.py."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fleetctl import whole_components
from fleetctl.diff import generated
from fleetctl.diff.eks_changes import upgrade_refusals, with_scaling_notes
from fleetctl.diff.front_vpc import with_security_group_notes
from fleetctl.diff.values import (
    ABSENT,
    JSON_TEXT,
    Change,
    PropertyPath,
    diff_values,
    equal,
    keep_old,
    overlaps,
    parse_property_path,
    render_path,
    value_at,
)
from fleetctl.diff.verdicts import (
    ACTIONS,
    CREATE,
    DELETE,
    IN_PLACE,
    LOUD,
    OUTAGE_VERDICT,
    RENAME,
    REPLACE,
    ROLLING_RESTART_VERDICT,
    SEVERITY,
    SYMBOLS,
    TRAFFIC,
    UPDATE,
    judge,
    kind_verdicts,
)
from fleetctl.mocks import STACK_TYPE
from fleetctl.plan import region_of
from fleetctl.replacements import PROVIDER_PREFIX, STATEFUL_TYPES, replacement_rules

__all__ = [
    "ABSENT",
    "ACTIONS",
    "CREATE",
    "DELETE",
    "IN_PLACE",
    "JSON_TEXT",
    "LOUD",
    "OUTAGE_VERDICT",
    "RENAME",
    "REPLACE",
    "ROLLING_RESTART_VERDICT",
    "SEVERITY",
    "SYMBOLS",
    "TRAFFIC",
    "UPDATE",
    "Change",
    "PlanDiff",
    "PropertyPath",
    "ResourceChange",
    "diff_plans",
    "diff_values",
    "kind_verdicts",
    "parse_property_path",
    "render_path",
]

GLOBAL = "global"
GLOBAL_FRONT = "global front"
GLOBAL_FRONT_PROVIDER = "aws-global-"
"""The name of the global front's AWS provider, ``aws-global-<API region>`` (components/platform/
global_front.py provider_name; tests/unit/test_diff.py holds the two together)."""


@dataclass(frozen=True)
class ResourceChange:
    action: str
    urn: str
    type: str
    name: str
    region: str
    verdict: str
    changes: tuple[Change, ...] = ()
    reasons: tuple[str, ...] = ()
    """Why the resource is replaced: the table entry, the replaceOnChanges option, the provider."""
    notes: tuple[str, ...] = ()
    renamed_from: str | None = None
    summary: tuple[str, ...] = ()
    """A generated object's change in one line per document (fleetctl/diff/generated.py): text and
    markdown show it in place of the changes under ``data``; json keeps every change as well."""

    @property
    def loud(self) -> bool:
        return self.verdict in LOUD

    @property
    def generated(self) -> bool:
        return bool(self.summary)

    @property
    def shown(self) -> tuple[Change, ...]:
        """The changes a reader is shown one by one: all but those a summary stands for."""
        if not self.summary:
            return self.changes
        return tuple(change for change in self.changes if change.path[:1] != (generated.SUMMARISED,))


@dataclass(frozen=True)
class PlanDiff:
    resources: tuple[ResourceChange, ...]
    notes: tuple[str, ...] = ()
    """What the reader must know to read the diff (how resources were matched)."""
    refusals: tuple[str, ...] = ()
    """Changes AWS would refuse part-way through `pulumi up` (fleetctl/diff/eks_changes.py): the diff
    is shown, and the command exits 1."""

    @property
    def changed(self) -> bool:
        return bool(self.resources)

    def counts(self) -> dict[str, int]:
        counted = Counter(resource.action for resource in self.resources)
        return {action: counted[action] for action in (CREATE, UPDATE, REPLACE, DELETE, RENAME)}

    def regions(self) -> dict[str, list[ResourceChange]]:
        grouped: dict[str, list[ResourceChange]] = {}
        for resource in self.resources:
            grouped.setdefault(resource.region, []).append(resource)
        return grouped

    @property
    def loud(self) -> list[ResourceChange]:
        return [resource for resource in self.resources if resource.loud]


# Comparing inputs.


def _with_defaults(resource: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "parent": None,
        "provider": None,
        "custom": True,
        "inputs": {},
        "options": {},
        **resource,
    }


def _urn_parts(urn: str) -> tuple[str, str, str, str] | None:
    """``urn:pulumi:<stack>::<project>::<qualified type>::<name>``."""
    if not urn.startswith("urn:pulumi:"):
        return None
    pieces = urn[len("urn:pulumi:") :].split("::", 3)
    return (pieces[0], pieces[1], pieces[2], pieces[3]) if len(pieces) == 4 else None


def alias_urns(resource: Mapping[str, Any]) -> list[str]:
    """The URNs a resource's ``aliases`` option names: each URN alias as given, each alias
    spec completed from the resource itself, qualified by the parent's type both ways
    (the engine's full chain and the mock's last type) so either kind of plan matches."""
    own = _urn_parts(str(resource["urn"]))
    found: list[str] = []
    for alias in resource["options"].get("aliases", []):
        if isinstance(alias, str):
            found.append(alias)
        elif isinstance(alias, Mapping) and isinstance(alias.get("urn"), str) and alias["urn"]:
            found.append(alias["urn"])
        elif isinstance(alias, Mapping) and isinstance(alias.get("spec"), Mapping) and own is not None:
            spec = alias["spec"]
            stack, project = spec.get("stack") or own[0], spec.get("project") or own[1]
            kind, name = spec.get("type") or resource["type"], spec.get("name") or resource["name"]
            parent = None if spec.get("noParent") else spec.get("parentUrn") or resource.get("parent")
            parent_parts = _urn_parts(parent) if parent else None
            prefix = f"urn:pulumi:{stack}::{project}::"
            if parent_parts is None or parent_parts[2].endswith("pulumi:pulumi:Stack"):
                found.append(f"{prefix}{kind}::{name}")
            else:
                qualified = parent_parts[2]
                found.append(f"{prefix}{qualified}${kind}::{name}")
                found.append(f"{prefix}{qualified.rsplit('$', 1)[-1]}${kind}::{name}")
    return found


def _providers_of(resource: Mapping[str, Any], project: str) -> set[str]:
    """The providers that manage a resource; a component of our own program has none of its own."""
    if resource["type"].startswith(f"{project}:"):
        return set()
    if resource.get("custom", True):
        return {resource["provider"]} if resource.get("provider") else set()
    return {str(urn) for urn in resource["options"].get("providers", {}).values() if urn}


def _provider_configs(
    resource: Mapping[str, Any], by_urn: Mapping[str, Mapping[str, Any]], project: str
) -> list[str] | None:
    """The configuration of each provider of a resource; None when one is not in the plan."""
    configs = []
    for urn in _providers_of(resource, project):
        provider = by_urn.get(urn)
        if provider is None:
            return None
        configs.append(json.dumps([provider["type"], provider["inputs"]], sort_keys=True))
    return sorted(configs)


def _short(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _provider_flag(resource: Mapping[str, Any], by_urn: Mapping[str, Mapping[str, Any]], flag: str) -> bool:
    provider = by_urn.get(resource.get("provider") or "")
    return provider is not None and provider["inputs"].get(flag) in (True, "true")


def _stateful(*resources: Mapping[str, Any]) -> bool:
    return any(
        resource["type"] in STATEFUL_TYPES
        or resource["options"].get("protect")
        or resource["options"].get("retainOnDelete")
        for resource in resources
    )


def _protection_notes(resource: Mapping[str, Any], action: str) -> tuple[str, ...]:
    notes = []
    if resource["options"].get("protect"):
        notes.append(f"protected: `pulumi up` refuses to {action} it until `protect` is lifted")
    if resource["options"].get("retainOnDelete"):
        which = "the old one" if action == "replace" else "it"
        notes.append(f"retainOnDelete: {which} stays in the account, no longer managed by the stack")
    return tuple(notes)


@dataclass
class _Pair:
    base: dict[str, Any]
    head: dict[str, Any]
    changes: list[Change]
    reasons: list[str]


def _compare(base: dict[str, Any], head: dict[str, Any], head_by_urn: Mapping[str, Mapping[str, Any]]) -> _Pair:
    old_inputs, new_inputs = base["inputs"], head["inputs"]
    for pattern in head["options"].get("ignoreChanges", []):
        new_inputs = keep_old(old_inputs, new_inputs, parse_property_path(str(pattern)))
    changes = list(diff_values(old_inputs, new_inputs))
    forcing: list[tuple[Sequence[str | int], str]] = []
    for rule in replacement_rules(head["type"]):
        if rule.unless_provider_flag and _provider_flag(head, head_by_urn, rule.unless_provider_flag):
            continue
        steps = tuple(rule.path.split("."))
        if not equal(value_at(old_inputs, steps), value_at(new_inputs, steps)):
            forcing.append((steps, f"{rule.path}: {rule.source}"))
    for text in head["options"].get("replaceOnChanges", []):
        pattern = parse_property_path(str(text))
        if any(overlaps(pattern, change.path) for change in changes):
            forcing.append((pattern, f"{text}: the resource's replaceOnChanges option"))
    marked = [
        Change(change.path, change.old, change.new, any(overlaps(steps, change.path) for steps, _ in forcing))
        for change in changes
    ]
    return _Pair(base, head, marked, [reason for _, reason in forcing])


def _renames(base_by_urn: Mapping[str, Any], head_by_urn: Mapping[str, Any]) -> dict[str, str]:
    """HEAD URN -> BASE URN, for each new URN whose aliases name a BASE URN that HEAD no longer has."""
    renamed: dict[str, str] = {}
    for urn, resource in sorted(head_by_urn.items()):
        if urn in base_by_urn:
            continue
        for alias in alias_urns(resource):
            if alias in base_by_urn and alias not in head_by_urn and alias not in renamed.values():
                renamed[urn] = alias
                break
    return renamed


def _pair(
    base: dict[str, Any],
    head: dict[str, Any],
    plans: tuple[Mapping[str, Mapping[str, Any]], Mapping[str, Mapping[str, Any]]],
    renamed: Mapping[str, str],
    project: str,
) -> _Pair:
    base_by_urn, head_by_urn = plans
    pair = _compare(base, head, head_by_urn)
    old_providers = _providers_of(base, project)
    new_providers = {renamed.get(provider, provider) for provider in _providers_of(head, project)}
    old_configs = _provider_configs(base, base_by_urn, project)
    # The engine keeps a resource whose new provider is configured like the old one.
    if old_providers != new_providers and (
        old_configs is None or old_configs != _provider_configs(head, head_by_urn, project)
    ):
        pair.reasons.append(
            f"provider: {', '.join(sorted(map(_short, old_providers))) or 'default'} -> "
            f"{', '.join(sorted(map(_short, new_providers))) or 'default'}"
        )
    return pair


def _restacked(value: Any, renames: Mapping[str, str], prefix: tuple[str, str]) -> Any:
    """``value`` with each URN string moved to another stack: ``renames`` whole, else ``prefix`` replaced."""
    if isinstance(value, str):
        if value in renames:
            return renames[value]
        old, new = prefix
        return new + value[len(old) :] if value.startswith(old) else value
    if isinstance(value, list):
        return [_restacked(item, renames, prefix) for item in value]
    if isinstance(value, Mapping):
        return {key: _restacked(item, renames, prefix) for key, item in value.items()}
    return value


def _logical_base(
    base_plan: Mapping[str, Any], head_plan: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, str], tuple[str, ...]]:
    """BASE's resources, and for two stacks' plans, with HEAD's stack in every URN (the root
    ``pulumi:pulumi:Stack`` is named ``<project>-<stack>`` too): a resource is then matched by its
    logical identity, project, type chain and name. Also the original URN of each moved one, and
    the note saying so."""
    resources = list(base_plan.get("resources", []))
    base_stack, head_stack = str(base_plan.get("stack") or ""), str(head_plan.get("stack") or "")
    if not base_stack or not head_stack or base_stack == head_stack:
        return resources, {}, ()
    project = str(base_plan.get("project") or "")
    old, new = f"urn:pulumi:{base_stack}::", f"urn:pulumi:{head_stack}::"
    root = f"{project}::{STACK_TYPE}::{project}-"
    renames = {f"{old}{root}{base_stack}": f"{new}{root}{head_stack}"}
    moved = []
    originals = {}
    for resource in resources:
        copy = _restacked(resource, renames, (old, new))
        if copy.get("type") == STACK_TYPE and copy.get("name") == f"{project}-{base_stack}":
            copy["name"] = f"{project}-{head_stack}"
        originals[str(copy["urn"])] = str(resource["urn"])
        moved.append(copy)
    note = (
        f"BASE plans stack {base_stack!r} and HEAD stack {head_stack!r}: resources are matched by their URN "
        "without the stack name, but names derived from the stack name still differ "
        "(--stack-name NAME plans both stack files as one stack)"
    )
    return moved, originals, (note,)


def _engine_qualified(resources: Sequence[Mapping[str, Any]]) -> tuple[list[Any], dict[str, str]]:
    """The resources with each URN as the engine makes it, its type qualified by the parent's whole
    qualified type (a plan written before fleetctl's mocks did so kept only the parent's own type),
    and each new URN's URN in the plan. Every mention of a URN is renamed with it."""
    by_urn = {str(resource["urn"]): resource for resource in resources}
    qualified: dict[str, str] = {}

    def engine_urn(urn: str) -> str:
        if urn not in qualified:
            qualified[urn] = urn  # a parent cycle stops here
            resource, parts = by_urn[urn], _urn_parts(urn)
            parent = resource.get("parent")
            if parts is not None and parent in by_urn and by_urn[parent]["type"] != STACK_TYPE:
                parent_parts = _urn_parts(engine_urn(parent))
                if parent_parts is not None:
                    stack, project, _, name = parts
                    qualified[urn] = f"urn:pulumi:{stack}::{project}::{parent_parts[2]}${resource['type']}::{name}"
        return qualified[urn]

    renames = {urn: engine_urn(urn) for urn in by_urn if engine_urn(urn) != urn}
    if not renames:
        return list(resources), {}
    return [_restacked(resource, renames, ("", "")) for resource in resources], {
        new: old for old, new in renames.items()
    }


def diff_plans(base_plan: Mapping[str, Any], head_plan: Mapping[str, Any]) -> PlanDiff:
    """Every resource that a move from ``base_plan`` to ``head_plan`` creates, updates,
    replaces, renames or deletes. Same URN, same resource; a HEAD resource whose
    ``aliases`` name a BASE URN is that resource renamed. Plans of two different stacks are
    compared by logical identity (URNs without the stack), and the diff's notes say so."""
    base_resources, originals, matched_by = _logical_base(base_plan, head_plan)
    base_resources, requalified = _engine_qualified(base_resources)
    originals |= {new: originals.get(old, old) for new, old in requalified.items()}
    head_resources, _ = _engine_qualified(head_plan.get("resources", []))
    base_by_urn = {str(r["urn"]): _with_defaults(r) for r in base_resources}
    head_by_urn = {str(r["urn"]): _with_defaults(r) for r in head_resources}
    project = str(head_plan.get("project") or base_plan.get("project") or "")
    renamed = _renames(base_by_urn, head_by_urn)
    pairs = {
        urn: _pair(base_by_urn[renamed.get(urn, urn)], head, (base_by_urn, head_by_urn), renamed, project)
        for urn, head in head_by_urn.items()
        if renamed.get(urn, urn) in base_by_urn
    }

    # A replaced provider replaces every resource it manages.
    replaced_providers = {
        urn for urn, pair in pairs.items() if pair.head["type"].startswith(PROVIDER_PREFIX) and pair.reasons
    }
    managed: Counter[str] = Counter()
    for pair in pairs.values():
        for provider in sorted(_providers_of(pair.head, project) & replaced_providers):
            pair.reasons.append(f"its provider {head_by_urn[provider]['name']} is replaced")
            managed[provider] += 1

    results: list[ResourceChange] = []
    for urn, pair in pairs.items():
        renamed_from = renamed.get(urn)
        if not pair.changes and not pair.reasons and renamed_from is None:
            continue
        action = REPLACE if pair.reasons else UPDATE if pair.changes else RENAME
        stateful = action == REPLACE and _stateful(pair.base, pair.head)
        notes = _protection_notes(pair.base, "replace") if action == REPLACE else ()
        if managed[urn]:
            notes = (*notes, f"replaces the {managed[urn]} resource(s) it manages")
        results.append(
            ResourceChange(
                action=action,
                urn=urn,
                type=pair.head["type"],
                name=pair.head["name"],
                region=_region(pair.head, head_by_urn),
                verdict=judge(action, pair.head["type"], pair.changes, stateful, pair.head["inputs"]),
                changes=tuple(pair.changes),
                reasons=tuple(dict.fromkeys(pair.reasons)),
                notes=notes,
                renamed_from=renamed_from,
                summary=generated.summary(pair.base, pair.head) if generated.is_generated(pair.head) else (),
            )
        )
    results += [
        _created_or_deleted(CREATE, head, head_by_urn)
        for urn, head in head_by_urn.items()
        if renamed.get(urn, urn) not in base_by_urn
    ]
    gone = set(base_by_urn) - set(head_by_urn) - set(renamed.values())
    results += [
        replace(_created_or_deleted(DELETE, base_by_urn[urn], base_by_urn), urn=originals.get(urn, urn)) for urn in gone
    ]
    results = [_with_whole_note(result) for result in with_scaling_notes(results)]
    results = with_security_group_notes(results, base_by_urn.values())
    return PlanDiff(tuple(sorted(results, key=_order)), matched_by, upgrade_refusals(results))


def _created_or_deleted(
    action: str, resource: Mapping[str, Any], by_urn: Mapping[str, Mapping[str, Any]]
) -> ResourceChange:
    stateful = action == DELETE and _stateful(resource)
    return ResourceChange(
        action=action,
        urn=str(resource["urn"]),
        type=str(resource["type"]),
        name=str(resource["name"]),
        region=_region(resource, by_urn),
        verdict=judge(action, str(resource["type"]), (), stateful),
        notes=_protection_notes(resource, "delete") if action == DELETE else (),
    )


def _with_whole_note(result: ResourceChange) -> ResourceChange:
    """A provider component the plan holds as one resource says so (fleetctl/whole_components.py)."""
    note = whole_components.diff_note(result.type)
    return result if note is None else replace(result, notes=(*result.notes, note))


def _region(resource: Mapping[str, Any], by_urn: Mapping[str, Mapping[str, Any]]) -> str:
    """The region a resource is listed under: its AWS provider's, but the global front's own label for
    the resources of its provider, whose region is only where the Global Accelerator API answers
    (components/platform/global_front.py API_REGION), often a region the stack does not serve."""
    seen: set[str] = set()
    current: Mapping[str, Any] | None = resource
    while current is not None and current["urn"] not in seen:
        seen.add(current["urn"])
        if current["type"] == "pulumi:providers:aws" and str(current["name"]).startswith(GLOBAL_FRONT_PROVIDER):
            return GLOBAL_FRONT
        providers = current["options"].get("providers", {})
        provider = current.get("provider") or providers.get("aws") or next(iter(providers.values()), None)
        following = provider or current.get("parent")
        current = by_urn.get(following) if following else None
    return region_of(resource, by_urn) or GLOBAL


def _order(resource: ResourceChange) -> tuple[Any, ...]:
    return (
        resource.region in (GLOBAL, GLOBAL_FRONT),
        resource.region,
        not resource.loud,
        resource.generated,  # a region's real changes first, then what the program derived from them
        ACTIONS.index(resource.action),
        not resource.type.startswith(PROVIDER_PREFIX),  # a provider's change explains the ones below it
        resource.type,
        resource.name,
        resource.urn,
    )
