"""Comparing two resources' inputs: the leaves that differ, as property paths (pure).

Lists are aligned item by item (an insertion is one change, not a shift of every later item); a
string holding a JSON document is compared inside; secrets stay secrets. Also the property-path
language of Pulumi's ``ignoreChanges`` and ``replaceOnChanges`` options, and what ``ignoreChanges``
does to the inputs before the engine diffs them."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from components.spec.errors import dotted
from fleetctl.plan import SECRET


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


def equal(old: Any, new: Any) -> bool:
    """Equality that tells ``True`` from ``1``."""
    if type(old) is not type(new):
        return False
    if isinstance(old, Mapping):
        return old.keys() == new.keys() and all(equal(old[key], new[key]) for key in old)
    if isinstance(old, list):
        return len(old) == len(new) and all(equal(a, b) for a, b in zip(old, new, strict=True))
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
    if equal(old, new):
        return
    if isinstance(old, str) and isinstance(new, str):
        old_document, new_document = _json_document(old), _json_document(new)
        if old_document is not None and new_document is not None:
            yield from diff_values(old_document, new_document, (*path, JSON_TEXT))
            return
    yield Change(path, old, new)


KEY_FIELD: Final = "id"
"""A list whose items are all objects with distinct ``id`` values (a Grafana dashboard's panels, which
Grafana itself tells apart by ``id``: DashboardModel.ensurePanelsHaveUniqueIds) is aligned by ``id``."""


def _keys(items: list[Any]) -> list[Any] | None:
    keys = [item.get(KEY_FIELD) if isinstance(item, Mapping) else None for item in items]
    if any(isinstance(key, bool) or not isinstance(key, int | str) for key in keys) or len(set(keys)) < len(keys):
        return None
    return keys


def _list_changes(old: list[Any], new: list[Any], path: PropertyPath) -> Iterator[Change]:
    """An item inserted or removed is one change at its own index (BASE's for a removed item,
    HEAD's for an inserted one), not every later item shifted by one; items replaced in place
    are compared inside, at HEAD's index. Items keyed by ``id`` on both sides are paired by it
    (an item that changed and moved is still one item); other lists by difflib's longest matching runs."""
    old_keys, new_keys = _keys(old), _keys(new)
    if old and new and old_keys is not None and new_keys is not None:
        new_index = {key: index for index, key in enumerate(new_keys)}
        for index, key in enumerate(old_keys):
            if key not in new_index:
                yield Change((*path, index), old[index], ABSENT)
        old_index = {key: index for index, key in enumerate(old_keys)}
        for index, key in enumerate(new_keys):
            if key in old_index:
                yield from diff_values(old[old_index[key]], new[index], (*path, index))
            else:
                yield Change((*path, index), ABSENT, new[index])
        return
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


def overlaps(pattern: Sequence[str | int], path: PropertyPath) -> bool:
    """True when a change at ``path`` changes something at or under ``pattern`` (or above it)."""
    for wanted, step in zip(pattern, path, strict=False):
        if isinstance(step, _JsonText):
            return True  # the pattern names a part of this JSON string
        if not _step_matches(wanted, step):
            return False
    return True


def within(path: PropertyPath, prefix: Sequence[str | int]) -> bool:
    return len(path) >= len(prefix) and overlaps(prefix, path)


def value_at(document: Any, steps: Sequence[str | int]) -> Any:
    for step in steps:
        if isinstance(document, Mapping) and isinstance(step, str):
            document = document.get(step, ABSENT)
        elif isinstance(document, list) and isinstance(step, int) and step < len(document):
            document = document[step]
        else:
            return ABSENT
    return document


def keep_old(old: Any, new: Any, pattern: Sequence[str | int]) -> Any:
    """``new`` with the old value at ``pattern``: what Pulumi's ``ignoreChanges`` does before diffing."""
    if not pattern:
        return old
    step, rest = pattern[0], pattern[1:]
    if new is ABSENT and isinstance(old, Mapping):
        kept = keep_old(old, {}, pattern)
        return kept if kept else ABSENT
    if isinstance(new, Mapping):
        result = dict(new)
        old_map = old if isinstance(old, Mapping) else {}
        keys = sorted(set(new) | set(old_map)) if step == "*" else [step] if isinstance(step, str) else []
        for key in keys:
            value = keep_old(old_map.get(key, ABSENT), new.get(key, ABSENT), rest)
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
            value = keep_old(old_list[index] if index < len(old_list) else ABSENT, items[index], rest)
            if value is not ABSENT:
                items[index] = value
        return items
    return new


# Matching resources.
