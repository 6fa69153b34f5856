"""Problems with a stack config, written for the person who edits it.

One line each: ``error: <dotted.path>: <what is wrong, the value received, what to do>``.
Paths start at the key after the project namespace (``regions.`` or ``endpoints.``).
A problem whose place in the stack file is known leads with it, as compilers do:
``error: <file>:<line>:<column>: <dotted.path>: <message>``.
"""

from __future__ import annotations

import ast
import difflib
import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails


@dataclass(frozen=True, order=True)
class Problem:
    path: str
    message: str
    file: str | None = field(default=None, compare=False)
    """The stack file holding ``path``, with ``line`` and ``column`` (1-based) when known."""
    line: int | None = field(default=None, compare=False)
    column: int | None = field(default=None, compare=False)
    follows_from: tuple[str, ...] = field(default=(), compare=False)
    """Config paths this problem's check took to be valid: a problem at or below one of them is
    its cause, and this one is not reported (see :func:`root_causes`)."""

    @property
    def position(self) -> str:
        """``file:line:column``, or "" when the place in the file is not known."""
        if self.file is None or self.line is None:
            return ""
        return f"{self.file}:{self.line}:{self.column or 1}"

    def __str__(self) -> str:
        return self.line_as("error")

    def line_as(self, kind: str) -> str:
        """The one line ``kind: file:line:column: path: message`` (``error``, or ``warning``)."""
        path = "" if self.path == self.file else self.path  # a problem of the file itself names it once
        return f"{kind}: " + ": ".join(part for part in (self.position, path, self.message) if part)

    def as_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"path": self.path, "message": self.message}
        if self.position:
            record.update(file=self.file, line=self.line, column=self.column or 1)
        return record


def root_causes(problems: Iterable[Problem]) -> list[Problem]:
    """The problems that do not follow from another one: a problem is dropped when another
    problem lies at or below a path it ``follows_from`` (fixing that one may well fix it)."""
    found = list(problems)
    return [
        problem
        for problem in found
        if not any(other != problem and within(other.path, cause) for cause in problem.follows_from for other in found)
    ]


def within(path: str, prefix: str) -> bool:
    """``path`` is ``prefix`` or lies below it (``a.b`` is within ``a``, ``a.bc`` is not)."""
    return path == prefix or path.startswith((f"{prefix}.", f"{prefix}["))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``did you mean 'x'?`` for the closest of ``choices``, or "" when none is close.

    difflib finds the close ones; of those, the fewest typing mistakes away wins (difflib alone
    ranks ``us-west-1`` with ``us-east-1`` for ``us-esat-1``, two swapped letters)."""
    matches = difflib.get_close_matches(word, list(choices), n=5, cutoff=0.6)
    if not matches:
        return ""
    return f"did you mean {min(matches, key=lambda match: _typos(word, match))!r}?"


def _typos(first: str, second: str) -> int:
    """Edits from one to the other: insert, delete, replace, or swap two neighbours."""
    previous: list[int] = []
    row = list(range(len(second) + 1))
    for i, left in enumerate(first, start=1):
        before, previous, row = previous, row, [i] + [0] * len(second)
        for j, right in enumerate(second, start=1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (left != right))
            if i > 1 and j > 1 and left == second[j - 2] and first[i - 2] == right:
                row[j] = min(row[j], before[j - 2] + 1)
    return row[-1]


class ProblemsError(Exception):
    """Problems to report to the user, one ``error:`` line each."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


class SpecError(ProblemsError):
    """Raised with every problem found, before anything is registered or written."""


def dotted(parts: Iterable[str | int]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif any(character in part for character in ". []\"'") or not part or not part.isprintable():
            text += f"[{part!r}]"  # quoted and escaped: control and bidi characters never reach a terminal raw
        else:
            text += f".{part}" if text else part
    return text


def undotted(text: str) -> list[str | int] | None:
    """The parts :func:`dotted` joined, or None when ``text`` is not such a path."""
    parts: list[str | int] = []
    position = 0
    while position < len(text):
        character = text[position]
        if character == "[":
            end, part = _bracketed(text, position + 1)
            if end is None:
                return None
            parts.append(part)
            position = end
            continue
        if character == ".":
            if not parts:
                return None
            position += 1
        elif parts:
            return None  # a name follows the path's start, a dot or nothing else
        end = position
        while end < len(text) and text[end] not in ".[":
            end += 1
        if end == position:
            return None
        parts.append(text[position:end])
        position = end
    return parts


def _bracketed(text: str, start: int) -> tuple[int | None, str | int]:
    """After ``[``: an index or a quoted key, and the position after the closing ``]``."""
    if start < len(text) and text[start] in "'\"":
        quote, index = text[start], start + 1
        while index < len(text) and text[index] != quote:
            index += 2 if text[index] == "\\" else 1
        if index + 1 >= len(text) or text[index + 1] != "]":
            return None, ""
        try:
            key = ast.literal_eval(text[start : index + 1])
        except (ValueError, SyntaxError):
            return None, ""
        return (index + 2, key) if isinstance(key, str) else (None, "")
    close = text.find("]", start)
    digits = text[start:close] if close != -1 else ""
    if not (digits.isascii() and digits.isdigit()):
        return None, ""
    return close + 1, int(digits)


def problems_from(error: ValidationError, prefix: Sequence[str | int], model: Any) -> list[Problem]:
    """Translate pydantic's errors for ``model`` (validated at ``prefix``) into problems."""
    problems = []
    details = error.errors(include_url=False)
    for detail in details:
        location = list(detail["loc"])
        if detail["type"] == "too_short" and _has_inner_error(detail, details):
            continue  # pydantic's echo of an invalid item ("0 items after validation"), not a second problem
        context = detail.get("ctx") or {}
        if "at" in context:
            location += _split_at(str(context["at"]))
        if location and location[-1] == "[key]":
            location.pop()
            message = f"key {detail['input']!r}: {_message(detail, model, location)}"
        else:
            message = _message(detail, model, location)
        problems.append(Problem(dotted([*prefix, *location]), message))
    return problems


def _has_inner_error(detail: ErrorDetails, details: list[ErrorDetails]) -> bool:
    prefix = detail["loc"]
    return any(other["loc"][: len(prefix)] == prefix and len(other["loc"]) > len(prefix) for other in details)


def _split_at(at: str) -> list[str | int]:
    parts: list[str | int] = []
    for piece in at.split("."):
        name, _, index = piece.partition("[")
        parts.append(name)
        if index:
            parts.append(int(index.rstrip("]")))
    return parts


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"{value} (a boolean)"
    if isinstance(value, (int, float)):
        return f"{value!r} (a number)"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if value is None:
        return "nothing (null)"
    return f"a {type(value).__name__}"


def _message(detail: ErrorDetails, model: Any, location: list[str | int]) -> str:
    kind = detail["type"]
    value = detail["input"]
    context = detail.get("ctx") or {}
    got = _describe(value)
    if kind == "missing":
        return "is required: add it"
    if kind == "extra_forbidden":
        allowed = _allowed_keys(model, location[:-1])
        suggestion = did_you_mean(str(location[-1]), allowed) if location else ""
        if suggestion:
            return f"unknown key; {suggestion}"
        return f"unknown key; allowed keys: {', '.join(allowed)}" if allowed else "unknown key"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be an integer{_range(model, location)}, got {got}"
    if kind in ("float_type", "float_parsing"):
        return f"must be a number, got {got}"
    if kind == "string_type":
        hint = "; quote it" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
        return f"must be a string, got {got}{hint}"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false, got {got}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a mapping, got {got}"
    if kind in ("list_type", "tuple_type"):
        return f"must be a list, got {got}"
    if kind == "literal_error":
        return f"must be one of {{{_choices(context.get('expected', ''))}}}, got {got}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        return _bound_message(model, location, got, kind, context)
    if kind == "too_short":
        minimum = context.get("min_length")
        units = ("entry", "entries") if isinstance(value, dict) else ("item", "items")
        return f"needs at least {minimum} {units[minimum != 1]}, got {context.get('actual_length')}"
    if kind == "too_long":
        maximum = context.get("max_length")
        units = ("entry", "entries") if isinstance(value, dict) else ("item", "items")
        return f"allows at most {maximum} {units[maximum != 1]}, got {context.get('actual_length')}"
    if kind == "frozen_instance":
        return "cannot be changed"
    # Our own validators (PydanticCustomError) already speak the user's language.
    return str(detail["msg"])


def _choices(expected: str) -> str:
    names = sorted(part.strip().strip("'") for part in expected.replace(" or ", ",").split(",") if part.strip())
    return ", ".join(names)


def _bound_message(model: Any, location: list[str | int], got: str, kind: str, context: dict[str, Any]) -> str:
    bounds = _range(model, location)
    if bounds:
        return f"must be an integer{bounds}, got {got}"
    bound = next(iter(context.values()), "?")
    relation = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
    return f"must be {relation} {bound}, got {got}"


def _range(model: Any, location: list[str | int]) -> str:
    field = _field_info(model, location)
    return field_bounds(field) if field is not None else ""


def field_bounds(field: FieldInfo) -> str:
    """' in [low, high]' or ' >= low' from a field's declared bounds; '' when it has none."""
    low = high = None
    for constraint in field.metadata:
        if getattr(constraint, "ge", None) is not None:
            low = constraint.ge
        if getattr(constraint, "gt", None) is not None:
            low = constraint.gt + 1
        if getattr(constraint, "le", None) is not None:
            high = constraint.le
    if low is not None and high is not None:
        return f" in [{low}, {high}]"
    if low is not None:
        return f" >= {low}"
    return ""


def _unwrap(annotation: Any) -> Any:
    """Strip Optional, containers and Annotated down to the model a location walks into."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        candidates = [arg for arg in get_args(annotation) if arg is not type(None)]
        return _unwrap(candidates[0]) if len(candidates) == 1 else annotation
    if origin is not None and hasattr(annotation, "__metadata__"):
        return _unwrap(get_args(annotation)[0])
    return annotation


def _step(annotation: Any, part: str | int) -> Any:
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(str(part))
        return field.annotation if field is not None else None
    origin = get_origin(annotation)
    if origin is dict:
        return get_args(annotation)[1]
    if origin is tuple:
        return get_args(annotation)[0]
    return None


def _walk(model: Any, location: Sequence[str | int]) -> Any:
    annotation = model
    for part in location:
        annotation = _step(annotation, part)
        if annotation is None:
            return None
    return _unwrap(annotation)


def _allowed_keys(model: Any, location: Sequence[str | int]) -> list[str]:
    target = _walk(model, location)
    if isinstance(target, type) and issubclass(target, BaseModel):
        return list(target.model_fields)
    return []


def _field_info(model: Any, location: Sequence[str | int]) -> Any:
    if not location:
        return None
    parent = _walk(model, location[:-1])
    if isinstance(parent, type) and issubclass(parent, BaseModel):
        return parent.model_fields.get(str(location[-1]))
    return None
