"""A plan diff for people (text, markdown for PR comments) and for tools (json)."""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from fleetctl.diff.engine import (
    ABSENT,
    ACTIONS,
    CREATE,
    DELETE,
    LOUD,
    RENAME,
    REPLACE,
    SYMBOLS,
    UPDATE,
    Change,
    PlanDiff,
    ResourceChange,
    kind_verdicts,
)
from fleetctl.diff.verdicts import SEVERITY, KindVerdict
from fleetctl.plan import SECRET

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


def kind_line(kind: str, judged: KindVerdict) -> str:
    """``eks:index:ManagedNodeGroup: in place (1 update)``; ``aws:iam/role:Role: 3 create``; a type
    whose resources were judged apart names each verdict: ``Deployment: delete (1 delete, 1 update:
    rolling restart)``."""
    verdict, actions, outcomes = judged
    if set(actions) == {verdict}:
        return f"{kind}: {_kind_summary(actions)}"
    if len(outcomes) == 1:
        return f"{kind}: {verdict} ({_kind_summary(actions)})"
    ordered = sorted(outcomes, key=lambda pair: (-SEVERITY.index(pair[1]), ACTIONS.index(pair[0])))
    parts = [
        f"{outcomes[(action, judgement)]} {action}" + ("" if judgement == action else f": {judgement}")
        for action, judgement in ordered
    ]
    return f"{kind}: {verdict} ({', '.join(parts)})"


def _loud_line(loud: Sequence[ResourceChange], shown: int = 5) -> str:
    names = ", ".join(f"{resource.name} ({resource.type}, {resource.action})" for resource in loud[:shown])
    more = f" and {len(loud) - shown} more" if len(loud) > shown else ""
    return f"!! {len(loud)} stateful resource(s) would be replaced or deleted: {names}{more}"


def render_text(diff: PlanDiff, base_label: str, head_label: str) -> str:
    lines = [f"diff {base_label} -> {head_label}", *(f"note: {note}" for note in diff.notes)]
    lines += [f"!! refused: {refusal}" for refusal in diff.refusals]
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
            for change in resource.shown:
                forced = "  (forces replacement)" if change.forces_replacement else ""
                lines.append(
                    f"        {change.dotted}: {format_value(change.old)} -> {format_value(change.new)}{forced}"
                )
            lines += [f"        {line}" for line in resource.summary]
            lines += [f"        replaced because {reason}" for reason in resource.reasons]
            lines += [f"        {'!! ' if resource.loud else ''}{note}" for note in resource.notes]
        lines.append("  verdicts:")
        for kind, judged in kind_verdicts(resources).items():
            lines.append(f"    {'!! ' if judged.verdict in LOUD else '   '}{kind_line(kind, judged)}")
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
    lines += [*(f"> Note: {_cell(note)}" for note in diff.notes), *([""] if diff.notes else [])]
    lines += [*(f"> **!! Refused:** {_cell(refusal)}" for refusal in diff.refusals), *([""] if diff.refusals else [])]
    if not diff.changed:
        lines.append("No changes.")
        return "\n".join(lines) + "\n"
    if diff.loud:
        lines += [f"> **{_cell(_loud_line(diff.loud))}**", ""]
    # The real change first: the totals, then per region its own resources before what the program
    # generated from them (the dashboard's one-line summary, last in its table).
    lines += [f"**Total:** {_action_counts(diff.counts())}", ""]
    for region, resources in diff.regions().items():
        lines += [f"#### {_cell(region)}: {_action_counts(Counter(r.action for r in resources))}", ""]
        lines += ["| | action | type | name | verdict | changes |", "|---|---|---|---|---|---|"]
        for resource in resources:
            details = [
                f"{_code(change.dotted)}: {_code(format_value(change.old))} → {_code(format_value(change.new))}"
                + (" **(forces replacement)**" if change.forces_replacement else "")
                for change in resource.shown
            ]
            details += [_cell(line) for line in resource.summary]
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
            f"- {'**!!** ' if judged.verdict in LOUD else ''}{_cell(kind_line(kind, judged))}"
            for kind, judged in kind_verdicts(resources).items()
        ]
        lines += ["Verdicts:", "", *verdicts, ""]
    return "\n".join(lines).rstrip("\n") + "\n"


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
                    "summary": list(resource.summary),
                    "reasons": list(resource.reasons),
                    "notes": list(resource.notes),
                }
                for resource in resources
            ],
            "verdicts": {
                kind: {
                    "verdict": judged.verdict,
                    "actions": dict(sorted(judged.actions.items())),
                    "verdicts": dict(sorted(Counter(verdict for _, verdict in judged.outcomes.elements()).items())),
                }
                for kind, judged in kind_verdicts(resources).items()
            },
        }
    document = {
        "base": base_label,
        "head": head_label,
        "changed": diff.changed,
        "notes": list(diff.notes),
        "refusals": list(diff.refusals),
        "summary": {**diff.counts(), "loud": len(diff.loud)},
        "regions": regions,
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}
