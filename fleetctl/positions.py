"""Where a problem's config path is in its stack file: line and column, for editors and people.

ruamel's round-trip loader keeps the line and column of every mapping key and sequence item;
a problem's dotted path (``endpoints.chat.nod_group``) is walked down that tree. A path that
ends in a key the file does not have (``is required: add it``) is placed at its parent; a path
further from the file than that gets no position. Positions are best effort: a file that no
longer parses leaves its problems as they were.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from components.spec import NAMESPACE
from components.spec.errors import Problem, undotted


def locate(problems: Sequence[Problem], path: Path, data: bytes | None = None) -> tuple[Problem, ...]:
    """``problems`` with the file, line and column of each config path found in ``path``
    (whose bytes are ``data``, read from ``path`` when not given)."""
    wanted = [problem for problem in problems if problem.position == "" and problem.path != str(path)]
    if not wanted:
        return tuple(problems)
    try:
        text = (path.read_bytes() if data is None else data).decode("utf-8")
        root = YAML(typ="rt", pure=True).load(text)
    except (OSError, UnicodeDecodeError, YAMLError, RecursionError, ValueError):
        return tuple(problems)
    config = root.get("config") if isinstance(root, CommentedMap) else None
    if not isinstance(config, CommentedMap):
        return tuple(problems)
    located = []
    for problem in problems:
        parts = undotted(problem.path) if problem in wanted else None
        place = position_of(config, parts) if parts else None
        if place is None:
            located.append(problem)
        else:
            located.append(dataclasses.replace(problem, file=str(path), line=place[0], column=place[1]))
    return tuple(located)


def position_of(config: CommentedMap, parts: Sequence[str | int]) -> tuple[int, int] | None:
    """The 1-based line and column of the key or item at ``parts`` below ``config:`` (the first
    part is a project key, written with or without the namespace), or of its parent when the
    last part is missing."""
    node: Any = config
    found: tuple[int, int] | None = None
    depth = 0
    for depth, part in enumerate(parts):
        step = _step(node, part, namespaced=depth == 0)
        if step is None:
            break
        node, found = step
    else:
        depth = len(parts)
    return found if found is not None and depth >= len(parts) - 1 else None


def _step(node: Any, part: str | int, *, namespaced: bool) -> tuple[Any, tuple[int, int]] | None:
    if isinstance(node, CommentedMap):
        names = [f"{NAMESPACE}:{part}", str(part)] if namespaced else [str(part)]
        for name in names:
            for key in node:
                if str(key) == name:
                    line, column = node.lc.key(key)
                    return node[key], (line + 1, column + 1)
        return None
    if isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
        line, column = node.lc.item(part)
        return node[part], (line + 1, column + 1)
    return None
