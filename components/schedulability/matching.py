"""Whether a pod may run on a node at all, as kube-scheduler's filters decide it before
resources: nodeSelector, required node affinity, and taints the pod must tolerate
(kubernetes pkg/scheduler/framework/plugins/nodeaffinity and tainttoleration; the
toleration rule is ``Toleration.ToleratesTaint`` in k8s.io/api/core/v1/toleration.go)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.scheduling import Taint

# Effects the scheduler filters on; PreferNoSchedule only scores.
FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"  # an empty key with Exists tolerates everything
    if key != taint.key:
        return False
    return operator == "Exists" or str(toleration.get("value") or "") == taint.value


def untolerated(tolerations: Sequence[Mapping[str, Any]], taints: Sequence[Taint]) -> list[Taint]:
    return [
        taint
        for taint in taints
        if taint.effect in FILTERED_EFFECTS and not any(tolerates(toleration, taint) for toleration in tolerations)
    ]


def _expression_holds(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = expression["key"]
    operator = expression["operator"]
    values = [str(value) for value in expression.get("values") or ()]
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    raise ValueError(f"unknown node selector operator {operator!r}")


def _term_holds(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    expressions = term.get("matchExpressions") or []
    if not expressions and not term.get("matchFields"):
        return False  # an empty term matches no node
    return all(_expression_holds(expression, labels) for expression in expressions)


def _describe_term(term: Mapping[str, Any]) -> str:
    parts = []
    for expression in term.get("matchExpressions") or []:
        values = expression.get("values") or []
        shown = ",".join(str(value) for value in values[:3]) + (",..." if len(values) > 3 else "")
        parts.append(
            f"{expression['key']} {expression['operator']} [{shown}]"
            if values
            else f"{expression['key']} {expression['operator']}"
        )
    return " and ".join(parts)


def why_not(pod: Mapping[str, Any], labels: Mapping[str, str], taints: Sequence[Taint]) -> str | None:
    """None when ``pod`` (a pod spec) may run on a node with ``labels`` and ``taints``; otherwise
    the first reason, in the user's terms."""
    for key, value in (pod.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            found = f"has {key}={labels[key]}" if key in labels else f"has no {key} label"
            return f"nodeSelector {key}={value} does not match (the node {found})"
    required = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if terms is not None and not any(_term_holds(term, labels) for term in terms):
        wanted = " or ".join(f"({_describe_term(term)})" for term in terms)
        return f"required node affinity {wanted} does not match the node's labels"
    missing = untolerated(pod.get("tolerations") or [], taints)
    if missing:
        shown = ", ".join(f"{taint.key}={taint.value}:{taint.effect}" for taint in missing)
        return f"taint {shown} is not tolerated"
    return None
