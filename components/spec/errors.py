"""Problems with a stack config, written for the person who edits it.

One line each: ``error: <dotted.path>: <what is wrong, the value received, what to do>``.
Paths start at the key after the project namespace (``regions.`` or ``endpoints.``).
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails


@dataclass(frozen=True, order=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"error: {self.path}: {self.message}" if self.path else f"error: {self.message}"


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
        hint = f"; allowed keys: {', '.join(allowed)}" if allowed else ""
        return f"unknown key{hint}"
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
