"""fleetctl diff: what a stack edit does, resource by resource, before anyone runs it.

Compares two offline plans (DESIGN decision 13) and reports, per region, the resources
to create, update, replace and delete, the input paths that changed (old -> new), and
a verdict on what each change does to the running fleet. Replacements come from the
table in ``fleetctl/replacements.py``; a stateful or protected resource that would be
replaced or deleted is flagged with ``!!``. Secrets are already ``[secret]`` in a plan;
a value that is secret on either side is shown as ``[secret]`` on both.

Exit status: 0 no change, 2 changes, 1 error.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from components.spec import SpecError, parse_stack_config
from components.spec.errors import Problem, dotted
from fleetctl.plan import SECRET, ProgramError, region_of, run_program
from fleetctl.replacements import (
    NEW_GENERATION,
    NEW_GENERATION_EXEMPT,
    PROVIDER_PREFIX,
    ROLLING_RESTART,
    STATEFUL_TYPES,
    TRAFFIC_ONLY,
    replacement_rules,
)
from fleetctl.stackfile import StackFile, StackFileError, read_stack_file

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
    """The leaves where ``old`` and ``new`` differ; lists compared index by index."""
    if old == SECRET or new == SECRET:
        if not (old == SECRET and new == SECRET):
            yield Change(path, _masked(old), _masked(new))
        return
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in sorted(set(old) | set(new)):
            yield from diff_values(old.get(key, ABSENT), new.get(key, ABSENT), (*path, key))
        return
    if isinstance(old, list) and isinstance(new, list):
        for index in range(max(len(old), len(new))):
            yield from diff_values(
                old[index] if index < len(old) else ABSENT,
                new[index] if index < len(new) else ABSENT,
                (*path, index),
            )
        return
    if _equal(old, new):
        return
    if isinstance(old, str) and isinstance(new, str):
        old_document, new_document = _json_document(old), _json_document(new)
        if old_document is not None and new_document is not None:
            yield from diff_values(old_document, new_document, (*path, JSON_TEXT))
            return
    yield Change(path, old, new)


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


def _overlaps(pattern: Sequence[str | int], path: PropertyPath) -> bool:
    """True when a change at ``path`` changes something at or under ``pattern`` (or above it)."""
    for wanted, step in zip(pattern, path, strict=False):
        if isinstance(step, _JsonText):
            return True  # the pattern names a part of this JSON string
        if wanted != "*" and wanted != step:
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


def _verdict(action: str, resource_type: str, changes: Sequence[Change], stateful: bool) -> str:
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
        return ROLLING_RESTART_VERDICT
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


def diff_plans(base_plan: Mapping[str, Any], head_plan: Mapping[str, Any]) -> PlanDiff:
    """Every resource that a move from ``base_plan`` to ``head_plan`` creates, updates,
    replaces, renames or deletes. Same URN, same resource; a HEAD resource whose
    ``aliases`` name a BASE URN is that resource renamed."""
    base_by_urn = {str(r["urn"]): _with_defaults(r) for r in base_plan.get("resources", [])}
    head_by_urn = {str(r["urn"]): _with_defaults(r) for r in head_plan.get("resources", [])}
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
                verdict=_verdict(action, pair.head["type"], pair.changes, stateful),
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
    results += [_created_or_deleted(DELETE, base_by_urn[urn], base_by_urn) for urn in gone]
    return PlanDiff(tuple(sorted(results, key=_order)))


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


# Rendering.


def format_value(value: Any, limit: int | None = 160) -> str:
    if value is ABSENT:
        return "(none)"
    if value == SECRET:
        return SECRET
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if limit is not None and len(text) > limit:
        return text[: limit - 3] + "..."
    return text


def _action_counts(counts: Mapping[str, int]) -> str:
    words = {CREATE: "to create", UPDATE: "to update", REPLACE: "to replace", DELETE: "to delete", RENAME: "renamed"}
    parts = [f"{counts.get(action, 0)} {words[action]}" for action in (CREATE, UPDATE, REPLACE, DELETE)]
    if counts.get(RENAME):
        parts.append(f"{counts[RENAME]} {words[RENAME]}")
    return ", ".join(parts)


def _kind_summary(actions: Counter[str]) -> str:
    return ", ".join(f"{actions[action]} {action}" for action in ACTIONS if actions[action])


def kind_line(kind: str, verdict: str, actions: Counter[str]) -> str:
    """``eks:index:ManagedNodeGroup: in place (1 update)``; ``aws:iam/role:Role: 3 create``."""
    if set(actions) == {verdict}:
        return f"{kind}: {_kind_summary(actions)}"
    return f"{kind}: {verdict} ({_kind_summary(actions)})"


def _loud_line(loud: Sequence[ResourceChange], shown: int = 5) -> str:
    names = ", ".join(f"{resource.name} ({resource.type}, {resource.action})" for resource in loud[:shown])
    more = f" and {len(loud) - shown} more" if len(loud) > shown else ""
    return f"!! {len(loud)} stateful resource(s) would be replaced or deleted: {names}{more}"


def render_text(diff: PlanDiff, base_label: str, head_label: str) -> str:
    lines = [f"diff {base_label} -> {head_label}"]
    if not diff.changed:
        lines.append("no changes")
        return "\n".join(lines) + "\n"
    if diff.loud:
        lines.append(_loud_line(diff.loud))
    for region, resources in diff.regions().items():
        lines += ["", f"{region}: {_action_counts(Counter(r.action for r in resources))}"]
        for resource in resources:
            flag = "!!" if resource.loud else "  "
            lines.append(
                f"{flag}{SYMBOLS[resource.action]:>2} {resource.action:<7} {resource.type}  {resource.name}"
                f"  [{resource.verdict}]"
            )
            if resource.renamed_from:
                lines.append(f"        renamed from {resource.renamed_from}")
            for change in resource.changes:
                forced = "  (forces replacement)" if change.forces_replacement else ""
                lines.append(
                    f"        {change.dotted}: {format_value(change.old)} -> {format_value(change.new)}{forced}"
                )
            lines += [f"        replaced because {reason}" for reason in resource.reasons]
            lines += [f"        {'!! ' if resource.loud else ''}{note}" for note in resource.notes]
        lines.append("  verdicts:")
        for kind, (verdict, actions) in kind_verdicts(resources).items():
            lines.append(f"    {'!! ' if verdict in LOUD else '   '}{kind_line(kind, verdict, actions)}")
    lines += ["", f"total: {_action_counts(diff.counts())}"]
    if diff.loud:
        lines.append(_loud_line(diff.loud))
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return html.escape(text, quote=False).replace("|", "&#124;").replace("\n", "<br>")


def _code(text: str) -> str:
    return f"<code>{_cell(text)}</code>"


def render_markdown(diff: PlanDiff, base_label: str, head_label: str) -> str:
    lines = [f"### `fleetctl diff`: {_code(base_label)} → {_code(head_label)}", ""]
    if not diff.changed:
        lines.append("No changes.")
        return "\n".join(lines) + "\n"
    if diff.loud:
        lines += [f"> **{_cell(_loud_line(diff.loud))}**", ""]
    for region, resources in diff.regions().items():
        lines += [f"#### {_cell(region)}: {_action_counts(Counter(r.action for r in resources))}", ""]
        lines += ["| | action | type | name | verdict | changes |", "|---|---|---|---|---|---|"]
        for resource in resources:
            details = [
                f"{_code(change.dotted)}: {_code(format_value(change.old))} → {_code(format_value(change.new))}"
                + (" **(forces replacement)**" if change.forces_replacement else "")
                for change in resource.changes
            ]
            if resource.renamed_from:
                details.insert(0, f"renamed from {_code(resource.renamed_from)}")
            details += [f"replaced because {_cell(reason)}" for reason in resource.reasons]
            details += [_cell(note) for note in resource.notes]
            verdict = f"**!! {resource.verdict}**" if resource.loud else resource.verdict
            lines.append(
                f"| {'**!!**' if resource.loud else ''} {SYMBOLS[resource.action]} | {resource.action} | "
                f"{_code(resource.type)} | {_code(resource.name)} | {verdict} | {'<br>'.join(details)} |"
            )
        lines.append("")
        verdicts = [
            f"- {'**!!** ' if verdict in LOUD else ''}{_cell(kind_line(kind, verdict, actions))}"
            for kind, (verdict, actions) in kind_verdicts(resources).items()
        ]
        lines += ["Verdicts:", "", *verdicts, ""]
    lines.append(f"**Total:** {_action_counts(diff.counts())}")
    return "\n".join(lines) + "\n"


def _change_json(change: Change) -> dict[str, Any]:
    document: dict[str, Any] = {"path": change.dotted, "forces_replacement": change.forces_replacement}
    if change.old is not ABSENT:
        document["old"] = change.old
    if change.new is not ABSENT:
        document["new"] = change.new
    return document


def render_json(diff: PlanDiff, base_label: str, head_label: str) -> str:
    regions: dict[str, Any] = {}
    for region, resources in diff.regions().items():
        regions[region] = {
            "resources": [
                {
                    "action": resource.action,
                    "urn": resource.urn,
                    "type": resource.type,
                    "name": resource.name,
                    "verdict": resource.verdict,
                    "loud": resource.loud,
                    "renamed_from": resource.renamed_from,
                    "changes": [_change_json(change) for change in resource.changes],
                    "reasons": list(resource.reasons),
                    "notes": list(resource.notes),
                }
                for resource in resources
            ],
            "verdicts": {
                kind: {"verdict": verdict, "actions": dict(sorted(actions.items()))}
                for kind, (verdict, actions) in kind_verdicts(resources).items()
            },
        }
    document = {
        "base": base_label,
        "head": head_label,
        "changed": diff.changed,
        "summary": {**diff.counts(), "loud": len(diff.loud)},
        "regions": regions,
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}


# Reading the two sides.


class InputError(Exception):
    """A side could not be read or planned; the problems are in the validate format."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


@dataclass(frozen=True)
class Side:
    label: str
    plan: dict[str, Any]


def _plan_problems(document: Any) -> list[str]:
    if not isinstance(document, Mapping):
        return [f"must be a JSON object with resources, got {type(document).__name__}"]
    resources = document.get("resources")
    if not isinstance(resources, list):
        return ["has no resources list: is it a plan.json written by fleetctl plan?"]
    problems = []
    for index, resource in enumerate(resources):
        if not isinstance(resource, Mapping):
            problems.append(f"resources[{index}] must be an object, got {type(resource).__name__}")
            continue
        for key in ("urn", "type", "name"):
            if not isinstance(resource.get(key), str):
                problems.append(f"resources[{index}].{key} must be a string")
        for key in ("inputs", "options"):
            if not isinstance(resource.get(key, {}), Mapping):
                problems.append(f"resources[{index}].{key} must be an object")
    return problems


def read_plan(path: Path, label: str) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise InputError([Problem(label, f"cannot read the plan: {reason}")]) from None
    try:
        document = json.loads(text)
    except ValueError as error:
        raise InputError([Problem(label, f"is not valid JSON: {error}")]) from None
    problems = _plan_problems(document)
    if problems:
        raise InputError([Problem(label, problem) for problem in problems])
    return dict(document)


def plan_stack_file(stack_file: StackFile, label: str) -> dict[str, Any]:
    """Validate the stack file as ``fleetctl validate`` does, then plan it in-process."""
    try:
        parse_stack_config(stack_file.project_config, stack=stack_file.stack)
    except SpecError as error:
        raise InputError([Problem(label, "the stack config is invalid:"), *error.problems]) from None
    try:
        plan = run_program(stack_file)
    except ProgramError as error:
        raise InputError([Problem(label, f"the program failed under the offline plan: {error}")]) from None
    document: dict[str, Any] = json.loads(plan.to_json())
    return document


def _read_stack_file(path: Path, label: str) -> StackFile:
    try:
        return read_stack_file(path)
    except StackFileError as error:
        where = str(path)
        raise InputError(
            [Problem(label if problem.path == where else problem.path, problem.message) for problem in error.problems]
        ) from None


def load_side(text: str) -> Side:
    """A plan directory (or its plan.json), or a stack file planned on the fly."""
    path = Path(text)
    if path.is_dir():
        if not (path / "plan.json").is_file():
            raise InputError([Problem(text, "is a directory without plan.json: give a plan directory or a stack file")])
        return Side(text, read_plan(path / "plan.json", text))
    if path.suffix == ".json":
        return Side(text, read_plan(path, text))
    if not path.exists():
        raise InputError([Problem(text, "no such plan directory or stack file")])
    return Side(text, plan_stack_file(_read_stack_file(path, text), text))


def _git(arguments: Sequence[str], cwd: Path) -> bytes:
    try:
        result = subprocess.run(["git", *arguments], cwd=cwd, capture_output=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InputError([Problem("", f"cannot run git: {error}")]) from None
    if result.returncode != 0:
        message = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise InputError([Problem("", f"git {' '.join(arguments)}: {message[-1] if message else 'failed'}")])
    return result.stdout


def load_side_at(ref: str, text: str) -> Side:
    """The stack file at ``text`` as it was at git commit ``ref``, planned on the fly.

    The old text goes to a temporary file of the same name, so the stack name matches.
    """
    path = Path(text).resolve()
    if not path.is_file():
        raise InputError([Problem(text, "--base-ref needs HEAD to be a stack file in a git work tree")])
    top = Path(_git(["rev-parse", "--show-toplevel"], path.parent).decode().strip()).resolve()
    relative = path.relative_to(top).as_posix()
    label = f"{ref}:{relative}"
    blob = _git(["show", label], top)
    with tempfile.TemporaryDirectory(prefix="fleetctl-diff-") as directory:
        copy = Path(directory) / path.name
        copy.write_bytes(blob)
        stack_file = _read_stack_file(copy, label)
    return Side(label, plan_stack_file(stack_file, label))


# The command.


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit 2, which means "changes" here
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fleetctl diff",
        usage="%(prog)s [--format {text,markdown,json}] (BASE HEAD | --base-ref GIT_REF HEAD)",
        description="Compare two offline plans: per region, what a stack edit creates, updates, replaces, deletes.",
        epilog="BASE and HEAD are plan directories (fleetctl plan --out) or stack files, planned on the fly. "
        "Exit status: 0 no change, 2 changes, 1 error.",
    )
    parser.add_argument("sides", nargs="+", metavar="SIDE", help="BASE HEAD, or HEAD alone with --base-ref")
    parser.add_argument("--base-ref", metavar="GIT_REF", help="BASE is HEAD's stack file as it was at this commit")
    parser.add_argument("--format", choices=sorted(RENDERERS), default="text", help="output format (default: text)")
    return parser


def _sides(arguments: argparse.Namespace) -> tuple[Side, Side]:
    sides: list[str] = arguments.sides
    if arguments.base_ref is not None:
        if len(sides) != 1:
            raise _UsageError("with --base-ref, give only HEAD (a stack file)")
        return load_side_at(arguments.base_ref, sides[0]), load_side(sides[0])
    if len(sides) != 2:
        raise _UsageError(f"give BASE and HEAD (got {len(sides)} argument(s)), or --base-ref GIT_REF HEAD")
    return load_side(sides[0]), load_side(sides[1])


def main(argv: Sequence[str] | None = None) -> int:
    try:
        arguments = _parser().parse_args(argv)
        base, head = _sides(arguments)
    except _UsageError as error:
        print(f"error: {error} (see fleetctl diff --help)", file=sys.stderr)
        return 1
    except InputError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return 1
    if base.plan.get("stack") != head.plan.get("stack"):
        print(
            f"note: BASE plans stack {base.plan.get('stack')!r} and HEAD stack {head.plan.get('stack')!r}; "
            "their URNs differ, so every resource is created or deleted",
            file=sys.stderr,
        )
    result = diff_plans(base.plan, head.plan)
    sys.stdout.write(RENDERERS[arguments.format](result, base.label, head.label))
    return 2 if result.changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
