"""Values we give a pinned Helm chart, held to the chart's own values.yaml (a copy in tests/data/)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

DATA = Path(__file__).resolve().parent / "data"


def chart_defaults(name: str) -> Mapping[str, Any]:
    """tests/data/<name>: a chart's values.yaml, verbatim (tests/data/README.md names each source)."""
    with (DATA / name).open(encoding="utf-8") as handle:
        loaded = YAML(typ="safe", pure=True).load(handle)
    assert isinstance(loaded, Mapping)
    return loaded


def unknown_paths(ours: Mapping[str, Any], defaults: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Paths of ``ours`` the chart does not declare. Below a key whose default is a non-empty map
    every key must be declared too; an empty map, a list or a scalar default is free-form there
    (the templates render what they are given)."""
    for key, value in ours.items():
        path = f"{prefix}{key}"
        if key not in defaults:
            yield path
            continue
        default = defaults[key]
        if isinstance(value, Mapping) and isinstance(default, Mapping) and default:
            yield from unknown_paths(value, default, f"{path}.")
