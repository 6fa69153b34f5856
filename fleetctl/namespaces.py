"""Stack config keys that are not the project's but look as if they were meant to be.

Pulumi hands a program every key of its stack file, and the program reads only its own
``inference-fleet:<key>``. A key under a misspelled namespace (``inference_fleet:endpoints``)
is therefore not an error anywhere: the fleet is planned without it, and with the endpoints
missing that is a plan that deletes every endpoint. These checks refuse such keys instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from components.spec import CONFIG_KEYS, NAMESPACE
from components.spec.errors import Problem

NAMESPACE_DISTANCE = 3
"""Edits (insertions, deletions, substitutions) within which a namespace is taken for a misspelling of ours."""


def edit_distance(first: str, second: str) -> int:
    """Levenshtein distance."""
    previous = list(range(len(second) + 1))
    for row, a in enumerate(first, start=1):
        current = [row]
        for column, b in enumerate(second, start=1):
            current.append(min(previous[column] + 1, current[column - 1] + 1, previous[column - 1] + (a != b)))
        previous = current
    return previous[-1]


def is_ours(key: str) -> bool:
    """``inference-fleet:<key>``, or a key without a namespace (Pulumi puts it in the project's)."""
    namespace, _, _ = key.rpartition(":")
    return namespace in ("", NAMESPACE)


def foreign_key_problems(keys: Iterable[str]) -> list[Problem]:
    """One problem per key that is not ours but looks like ours: a namespace within
    NAMESPACE_DISTANCE edits of ours (any case), or one of our key names under another namespace."""
    problems = []
    for key in keys:
        if is_ours(key):
            continue
        namespace, _, name = key.rpartition(":")
        meant = f"{NAMESPACE}:{name}"
        if edit_distance(namespace.lower(), NAMESPACE) <= NAMESPACE_DISTANCE:
            problems.append(
                Problem(
                    key,
                    f"the namespace {namespace!r} is not this project's {NAMESPACE!r}, so the program would never "
                    f"read this key; did you mean {meant!r}?",
                )
            )
        elif name.lower() in CONFIG_KEYS:
            problems.append(
                Problem(
                    key,
                    f"{name!r} is a key of this project, but under the namespace {namespace!r} the program never "
                    f"reads it; write it as {f'{NAMESPACE}:{name.lower()}'!r}",
                )
            )
    return problems


def missing_keys_problem(keys: Iterable[str], where: str) -> Problem | None:
    """A stack file with none of our keys is a mistake (a wrong namespace, a wrong file), never an empty fleet."""
    if any(is_ours(key) for key in keys):
        return None
    wanted = ", ".join(f"{NAMESPACE}:{key}" for key in CONFIG_KEYS)
    return Problem(where, f"sets none of the project's keys ({wanted}): is it this project's stack file?")
