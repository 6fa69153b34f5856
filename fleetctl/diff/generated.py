"""Generated objects in a diff: one line each saying what changed, instead of every leaf.

The program writes some objects from the whole stack rather than from one setting: a region's
Grafana dashboard (components/render/dashboard.py) holds a row of panels per endpoint and role, so
adding an endpoint adds its row and moves every later panel down (``gridPos.y``: Grafana orders
panels by position). Listed leaf by leaf that is hundreds of lines around a few real creates; the
reviewer needs to know which rows came and went and whether any panel changed its query. So such a
resource keeps every change (``--output json`` lists them) and gets a summary the text and markdown
show in their place. Panels are paired by ``id``, which the dashboard derives from what a panel
shows, not from where it sits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from components.naming import DASHBOARD_LABEL
from fleetctl.diff.values import diff_values, render_path

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
LAYOUT = "gridPos"
"""Where a panel sits: moved by any row added or removed above it."""


def is_generated(resource: Mapping[str, Any]) -> bool:
    """A ConfigMap labelled for Grafana's dashboard sidecar: the region's generated dashboard."""
    if resource.get("type") != CONFIG_MAP:
        return False
    labels = (resource.get("inputs") or {}).get("metadata", {}).get("labels") or {}
    key, value = DASHBOARD_LABEL
    return isinstance(labels, Mapping) and labels.get(key) == value


def _document(text: Any) -> dict[str, Any] | None:
    if not isinstance(text, str):
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def _panels(document: Mapping[str, Any]) -> dict[Any, Mapping[str, Any]]:
    panels = document.get("panels")
    if not isinstance(panels, list):
        return {}
    return {panel.get("id"): panel for panel in panels if isinstance(panel, Mapping)}


def _count(number: int, word: str) -> str:
    return f"{number} {word}{'' if number == 1 else 's'}"


def _titles(panels: list[Mapping[str, Any]]) -> str:
    rows = [str(panel.get("title", "")) for panel in panels if panel.get("type") == "row"]
    return f" (row{'s' if len(rows) > 1 else ''} {', '.join(repr(row) for row in rows)})" if rows else ""


def dashboard_line(key: str, old_text: Any, new_text: Any) -> str:
    """One line for one dashboard document of the ConfigMap's ``data``."""
    where = render_path(("data", key))
    old, new = _document(old_text), _document(new_text)
    if old is None or new is None:
        return f"{where}: generated Grafana dashboard {'added' if old is None else 'removed'}"
    before, after = _panels(old), _panels(new)
    added = [panel for number, panel in after.items() if number not in before]
    removed = [panel for number, panel in before.items() if number not in after]
    changed = moved = 0
    for number in before.keys() & after.keys():
        paths = [change.path for change in diff_values(before[number], after[number])]
        if any(path[:1] != (LAYOUT,) for path in paths):
            changed += 1
        elif paths:
            moved += 1
    settings = sorted(name for name in set(old) | set(new) if name != "panels" and old.get(name) != new.get(name))
    parts = []
    if added:
        parts.append(f"{_count(len(added), 'panel')} added{_titles(added)}")
    if removed:
        parts.append(f"{_count(len(removed), 'panel')} removed{_titles(removed)}")
    if changed:
        parts.append(f"{_count(changed, 'panel')} changed")
    if moved:
        parts.append(f"{_count(moved, 'panel')} moved (position only)")
    if settings:
        parts.append(f"dashboard {', '.join(settings)} changed")
    return f"{where}: generated Grafana dashboard: {'; '.join(parts) or 'changed'}"


SUMMARISED = "data"
"""The inputs a summary stands for; the ConfigMap's other changes (its labels) are shown as they are."""


def summary(base: Mapping[str, Any], head: Mapping[str, Any]) -> tuple[str, ...]:
    """One line per dashboard document that differs between the two sides' ConfigMaps."""
    old_data = base.get("inputs", {}).get("data") or {}
    new_data = head.get("inputs", {}).get("data") or {}
    lines = [
        dashboard_line(key, old_data.get(key), new_data.get(key))
        for key in sorted(set(old_data) | set(new_data))
        if old_data.get(key) != new_data.get(key)
    ]
    return tuple(lines)
