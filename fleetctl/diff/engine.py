"""The diff engine: two plans in, per-resource changes and verdicts out (pure)."""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from components.spec.errors import dotted
from fleetctl.diff.eks_changes import upgrade_refusals, with_scaling_notes
from fleetctl.mocks import STACK_TYPE
from fleetctl.plan import SECRET, region_of
from fleetctl.replacements import (
    NEW_GENERATION,
    NEW_GENERATION_EXEMPT,
    NO_SURGE,
    PROVIDER_PREFIX,
    ROLLING_RESTART,
    STATEFUL_TYPES,
    TRAFFIC_ONLY,
    replacement_rules,
)

GLOBAL = "global"

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


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()
"""The value of an input that one side does not have."""


class _JsonText:
    """A path step into a string holding a JSON document (an IAM policy, an annotation)."""

    def __repr__(self) -> str:
        return "JSON_TEXT"


JSON_TEXT: Final = _JsonText()

Step = str | int | _JsonText
PropertyPath = tuple[Step, ...]


def render_path(path: PropertyPath) -> str:
    """``spec.template.spec.containers[0].image``; keys with dots quoted as validate does;
    ``policy(json).Statement[1]`` for a step into a JSON string."""
    text = ""
    segment: list[str | int] = []
    for step in path:
        if isinstance(step, _JsonText):
            text = _join(text, dotted(segment)) + "(json)"
            segment = []
        else:
            segment.append(step)
    return _join(text, dotted(segment))


def _join(prefix: str, rest: str) -> str:
    if not prefix or not rest or rest.startswith("["):
        return prefix + rest
    return f"{prefix}.{rest}"


@dataclass(frozen=True)
class Change:
    path: PropertyPath
    old: Any
    new: Any
    forces_replacement: bool = False

    @property
    def dotted(self) -> str:
        return render_path(self.path)


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

    @property
    def loud(self) -> bool:
        return self.verdict in LOUD


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


def _equal(old: Any, new: Any) -> bool:
    """Equality that tells ``True`` from ``1``."""
    if type(old) is not type(new):
        return False
    if isinstance(old, Mapping):
        return old.keys() == new.keys() and all(_equal(old[key], new[key]) for key in old)
    if isinstance(old, list):
        return len(old) == len(new) and all(_equal(a, b) for a, b in zip(old, new, strict=True))
    return bool(old == new)


def _json_document(text: str) -> Any:
    if text.lstrip()[:1] not in ("{", "["):
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, dict | list) else None


def _masked(value: Any) -> Any:
    return value if value is ABSENT else SECRET


def diff_values(old: Any, new: Any, path: PropertyPath = ()) -> Iterator[Change]:
    """The leaves where ``old`` and ``new`` differ; lists item by item (:func:`_list_changes`)."""
    if old == SECRET or new == SECRET:
        if not (old == SECRET and new == SECRET):
            yield Change(path, _masked(old), _masked(new))
        return
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in sorted(set(old) | set(new)):
            yield from diff_values(old.get(key, ABSENT), new.get(key, ABSENT), (*path, key))
        return
    if isinstance(old, list) and isinstance(new, list):
        yield from _list_changes(old, new, path)
        return
    if _equal(old, new):
        return
    if isinstance(old, str) and isinstance(new, str):
        old_document, new_document = _json_document(old), _json_document(new)
        if old_document is not None and new_document is not None:
            yield from diff_values(old_document, new_document, (*path, JSON_TEXT))
            return
    yield Change(path, old, new)


def _list_changes(old: list[Any], new: list[Any], path: PropertyPath) -> Iterator[Change]:
    """An item inserted or removed is one change at its own index (BASE's for a removed item,
    HEAD's for an inserted one), not every later item shifted by one; items replaced in place
    are compared inside, at HEAD's index. The alignment is difflib's longest matching runs."""
    matcher = difflib.SequenceMatcher(None, [_identity(item) for item in old], [_identity(item) for item in new], False)
    for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
        if tag == "equal":
            continue
        paired = min(old_end - old_start, new_end - new_start) if tag == "replace" else 0
        for offset in range(paired):
            yield from diff_values(old[old_start + offset], new[new_start + offset], (*path, new_start + offset))
        for index in range(old_start + paired, old_end):
            yield Change((*path, index), old[index], ABSENT)
        for index in range(new_start + paired, new_end):
            yield Change((*path, index), ABSENT, new[index])


def _identity(item: Any) -> str:
    """What makes two list items the same item: their whole value (``True`` is not ``1``)."""
    return json.dumps(item, sort_keys=True, default=repr)


_STEP = re.compile(r'\[(?P<index>\d+|\*)\]|\["(?P<quoted>(?:[^"\\]|\\.)*)"\]|(?P<key>[^.\[\]]+)|\.')


def parse_property_path(text: str) -> tuple[str | int, ...]:
    """A Pulumi property path (``spec.template``, ``a["b.c"][0]``, ``metadata.*``); ``*`` is any step."""
    steps: list[str | int] = []
    position = 0
    while position < len(text):
        match = _STEP.match(text, position)
        if match is None:
            return (text,)
        position = match.end()
        if match["index"] is not None:
            steps.append("*" if match["index"] == "*" else int(match["index"]))
        elif match["quoted"] is not None:
            steps.append(str(json.loads(f'"{match["quoted"]}"')))
        elif match["key"] is not None:
            steps.append(match["key"])
    return tuple(steps)


def _step_matches(wanted: str | int, step: str | int) -> bool:
    """``*`` matches any step; a key ending in ``*`` (``"actions.*"``) matches keys starting with the rest."""
    if wanted == "*" or wanted == step:
        return True
    return isinstance(wanted, str) and wanted.endswith("*") and isinstance(step, str) and step.startswith(wanted[:-1])


def _overlaps(pattern: Sequence[str | int], path: PropertyPath) -> bool:
    """True when a change at ``path`` changes something at or under ``pattern`` (or above it)."""
    for wanted, step in zip(pattern, path, strict=False):
        if isinstance(step, _JsonText):
            return True  # the pattern names a part of this JSON string
        if not _step_matches(wanted, step):
            return False
    return True


def _within(path: PropertyPath, prefix: Sequence[str | int]) -> bool:
    return len(path) >= len(prefix) and _overlaps(prefix, path)


def _value_at(document: Any, steps: Sequence[str | int]) -> Any:
    for step in steps:
        if isinstance(document, Mapping) and isinstance(step, str):
            document = document.get(step, ABSENT)
        elif isinstance(document, list) and isinstance(step, int) and step < len(document):
            document = document[step]
        else:
            return ABSENT
    return document


def _keep_old(old: Any, new: Any, pattern: Sequence[str | int]) -> Any:
    """``new`` with the old value at ``pattern``: what Pulumi's ``ignoreChanges`` does before diffing."""
    if not pattern:
        return old
    step, rest = pattern[0], pattern[1:]
    if new is ABSENT and isinstance(old, Mapping):
        kept = _keep_old(old, {}, pattern)
        return kept if kept else ABSENT
    if isinstance(new, Mapping):
        result = dict(new)
        old_map = old if isinstance(old, Mapping) else {}
        keys = sorted(set(new) | set(old_map)) if step == "*" else [step] if isinstance(step, str) else []
        for key in keys:
            value = _keep_old(old_map.get(key, ABSENT), new.get(key, ABSENT), rest)
            if value is ABSENT:
                result.pop(key, None)
            else:
                result[key] = value
        return result
    if isinstance(new, list):
        items = list(new)
        old_list = old if isinstance(old, list) else []
        indices = range(len(items)) if step == "*" else [step] if isinstance(step, int) and step < len(items) else []
        for index in indices:
            value = _keep_old(old_list[index] if index < len(old_list) else ABSENT, items[index], rest)
            if value is not ABSENT:
                items[index] = value
        return items
    return new


# Matching resources.


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
        new_inputs = _keep_old(old_inputs, new_inputs, parse_property_path(str(pattern)))
    changes = list(diff_values(old_inputs, new_inputs))
    forcing: list[tuple[Sequence[str | int], str]] = []
    for rule in replacement_rules(head["type"]):
        if rule.unless_provider_flag and _provider_flag(head, head_by_urn, rule.unless_provider_flag):
            continue
        steps = tuple(rule.path.split("."))
        if not _equal(_value_at(old_inputs, steps), _value_at(new_inputs, steps)):
            forcing.append((steps, f"{rule.path}: {rule.source}"))
    for text in head["options"].get("replaceOnChanges", []):
        pattern = parse_property_path(str(text))
        if any(_overlaps(pattern, change.path) for change in changes):
            forcing.append((pattern, f"{text}: the resource's replaceOnChanges option"))
    marked = [
        Change(change.path, change.old, change.new, any(_overlaps(steps, change.path) for steps, _ in forcing))
        for change in changes
    ]
    return _Pair(base, head, marked, [reason for _, reason in forcing])


def _single_pod(inputs: Mapping[str, Any] | None) -> bool:
    """A workload whose inputs set one replica (an autoscaled one leaves ``spec.replicas`` unset)."""
    spec = inputs.get("spec") if inputs is not None else None
    return isinstance(spec, Mapping) and spec.get("replicas") == 1


def _verdict(
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
    if traffic and paths and all(any(_within(path, prefix) for prefix in traffic) for path in paths):
        return TRAFFIC
    rolling = [parse_property_path(path) for path in ROLLING_RESTART.get(resource_type, ())]
    if any(_overlaps(prefix, path) for prefix in rolling for path in paths):
        return OUTAGE_VERDICT if resource_type in NO_SURGE and _single_pod(inputs) else ROLLING_RESTART_VERDICT
    generation = [parse_property_path(path) for path in NEW_GENERATION.get(resource_type, ())]
    exempt = [parse_property_path(path) for path in NEW_GENERATION_EXEMPT.get(resource_type, ())]
    if any(
        _overlaps(prefix, path) and not any(_within(path, free) for free in exempt)
        for prefix in generation
        for path in paths
    ):
        return NEW_GENERATION_VERDICT
    return IN_PLACE


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
                region=region_of(pair.head, head_by_urn) or GLOBAL,
                verdict=_verdict(action, pair.head["type"], pair.changes, stateful, pair.head["inputs"]),
                changes=tuple(pair.changes),
                reasons=tuple(dict.fromkeys(pair.reasons)),
                notes=notes,
                renamed_from=renamed_from,
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
    results = with_scaling_notes(results)
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
        region=region_of(resource, by_urn) or GLOBAL,
        verdict=_verdict(action, str(resource["type"]), (), stateful),
        notes=_protection_notes(resource, "delete") if action == DELETE else (),
    )


def _order(resource: ResourceChange) -> tuple[Any, ...]:
    return (
        resource.region == GLOBAL,
        resource.region,
        not resource.loud,
        ACTIONS.index(resource.action),
        not resource.type.startswith(PROVIDER_PREFIX),  # a provider's change explains the ones below it
        resource.type,
        resource.name,
        resource.urn,
    )


def kind_verdicts(resources: Sequence[ResourceChange]) -> dict[str, tuple[str, Counter[str]]]:
    """Per resource type: the worst verdict among its resources, and how many of each action."""
    kinds: dict[str, tuple[str, Counter[str]]] = {}
    for resource in resources:
        verdict, actions = kinds.get(resource.type, (SEVERITY[0], Counter()))
        actions[resource.action] += 1
        worst = max(verdict, resource.verdict, key=SEVERITY.index)
        kinds[resource.type] = (worst, actions)
    return dict(sorted(kinds.items()))
