"""Reading a Pulumi stack file (``stacks/Pulumi.<stack>.yaml``) safely.

Any input yields either the project's config keys or problems in the validate
format; never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent, MappingEndEvent, MappingStartEvent, SequenceEndEvent, SequenceStartEvent

from components.aws_config import aws_settings
from components.spec import NAMESPACE, StackSpec
from components.spec.errors import Problem, ProblemsError, SpecError, did_you_mean, dotted
from components.spec.secrets import (
    SECRETS_KEY,
    plaintext_paths,
    redacted,
    set_command,
    stand_ins,
    unset_secret_paths,
)
from components.validation import validate_stack
from fleetctl.namespaces import foreign_key_problems, missing_keys_problem
from fleetctl.positions import locate

PROJECT_ROOT = Path(__file__).resolve().parent.parent
STACKS_DIR = PROJECT_ROOT / "stacks"
MAX_STACK_FILE_BYTES = 1024 * 1024
_SECURE = "secure"


@dataclass(frozen=True)
class StackFile:
    path: Path
    stack: str
    project_config: dict[str, Any]
    """The project's keys, namespace stripped (``regions``, ``endpoints``, ...)."""
    engine_config: dict[str, str]
    """Every config key as the Pulumi engine hands it to a program: strings, objects as JSON; a secret
    key with each value replaced by a placeholder (fleetctl never decrypts)."""
    secret_keys: tuple[str, ...] = ()
    """The keys of ``engine_config`` the engine would mark secret (``inference-fleet:secrets``)."""
    unset_secrets: tuple[Problem, ...] = ()
    """Secret values no secrets provider could decrypt (placeholders): ``fleetctl validate`` refuses them,
    the offline plan, which never decrypts, warns (components/spec/secrets.py decryptable)."""


class StackFileError(ProblemsError):
    """The stack file cannot be read as a stack file."""


def stack_path(stack: str) -> Path:
    return STACKS_DIR / f"Pulumi.{stack}.yaml"


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it, as people typed it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def stack_name(path: Path) -> str:
    """``Pulumi.dev.yaml`` -> ``dev``; any other file name is its stem."""
    name = path.name
    for suffix in (".yaml", ".yml"):
        if name.startswith("Pulumi.") and name.endswith(suffix):
            return name[len("Pulumi.") : -len(suffix)]
    return path.stem


def read_stack_file(path: Path) -> StackFile:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise StackFileError([Problem(str(path), f"cannot read the stack file: {error.strerror or error}")]) from None
    return parse_stack_bytes(path, data)


def load_stack(path: Path) -> tuple[StackFile, StackSpec]:
    """A stack file and its validated spec; raises ProblemsError listing every problem, each
    with its line and column in the file when it has one."""
    stack_file = read_stack_file(path)
    try:
        return stack_file, validate_stack(stack_file.project_config, stack=stack_file.stack)
    except SpecError as error:
        raise SpecError(locate(error.problems, path)) from None


def parse_stack_bytes(path: Path, data: bytes) -> StackFile:
    """What ``fleetctl validate`` reads from ``path`` when it holds ``data``."""
    where = str(path)
    if len(data) > MAX_STACK_FILE_BYTES:
        raise StackFileError(
            [Problem(where, f"is {len(data)} bytes; stack files over {MAX_STACK_FILE_BYTES} bytes are refused")]
        )
    try:
        text = data.decode("utf-8")
        _refuse_hostile_yaml(text)
        document = YAML(typ="safe", pure=True).load(text)
    except UnicodeDecodeError:
        raise StackFileError([Problem(where, "is not UTF-8 text")]) from None
    except MarkedYAMLError as error:
        mark = error.problem_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        message = f"is not valid YAML: {error.problem}{_yaml_fix(error.problem or '')}"
        problem = Problem(where, message, file=where, line=line, column=column)
        raise StackFileError([problem]) from None
    except (YAMLError, RecursionError, ValueError) as error:
        reason = " ".join(str(error).split()) or type(error).__name__  # one line, as every problem is
        raise StackFileError([Problem(where, f"is not valid YAML: {reason}")]) from None
    return _from_document(path, document, data)


def _yaml_fix(problem: str) -> str:
    """The fix of a parser's complaint the parser does not name: YAML forbids tabs in indentation."""
    return "; indent with spaces, not tabs" if "'\\t'" in problem else ""


class _RefusedYamlError(MarkedYAMLError):
    pass


MAX_NESTING = 64
"""A stack file's deepest value is a few levels down; far deeper is an attack on the parser."""


def _refuse_hostile_yaml(text: str) -> None:
    """Refuse ``*alias`` references: each may expand a whole subtree (the "billion laughs"
    bomb), and Pulumi never writes them into a stack file. Refuse nesting deeper than
    MAX_NESTING as well, before the parser's recursion spends seconds on it."""
    depth = 0
    for event in YAML(typ="safe", pure=True).parse(text):
        if isinstance(event, AliasEvent):
            raise _RefusedYamlError(
                problem=f"YAML aliases (*{event.anchor}) are not supported in stack files; write the value out",
                problem_mark=event.start_mark,
            )
        if isinstance(event, MappingStartEvent | SequenceStartEvent):
            depth += 1
            if depth > MAX_NESTING:
                raise _RefusedYamlError(
                    problem=f"values nest deeper than {MAX_NESTING} levels; stack files are never that deep",
                    problem_mark=event.start_mark,
                )
        elif isinstance(event, MappingEndEvent | SequenceEndEvent):
            depth -= 1


def _from_document(path: Path, document: Any, data: bytes) -> StackFile:
    where = str(path)
    if document is None:
        raise StackFileError([Problem(where, "is empty: a stack file needs a config: mapping")])
    if not isinstance(document, Mapping):
        raise StackFileError([Problem(where, f"must be a mapping with a config: key, got {type(document).__name__}")])
    config = document.get("config")
    if not isinstance(config, Mapping):
        got = "nothing" if config is None else type(config).__name__
        misspelt = [str(key) for key in document if key != "config" and did_you_mean(str(key), ["config"])]
        hint = f"; {misspelt[0]!r} is not a key of a stack file: did you mean 'config'?" if misspelt else ""
        raise StackFileError([Problem(where, f"needs a config: mapping of {NAMESPACE}:<key> entries, got {got}{hint}")])
    project: dict[str, Any] = {}
    engine: dict[str, str] = {}
    secret_keys: list[str] = []
    problems: list[Problem] = []
    unset: list[Problem] = []
    for raw_key, value in config.items():
        key = str(raw_key)
        namespace, _, name = key.rpartition(":")
        full_key = key if namespace else f"{NAMESPACE}:{key}"
        if (not namespace or namespace == NAMESPACE) and name == SECRETS_KEY:
            problems += [
                Problem(
                    dotted(path),
                    f"is plaintext in the stack file; write it encrypted: {set_command(str(path[1]), str(path[2]))}",
                )
                for path in plaintext_paths(value)
            ]
            unset += [
                Problem(
                    dotted(path),
                    "is not a value Pulumi encrypted (a placeholder?): no secrets provider can decrypt it, so "
                    f"`pulumi preview` would fail on it; set it with {set_command(str(path[1]), str(path[2]))}",
                )
                for path in unset_secret_paths(value)
            ]
            project[name] = redacted(value)  # as the program validates it: the ciphertext is no input
            engine[full_key] = json.dumps(stand_ins(value), default=str)
            secret_keys.append(full_key)
            continue
        if not namespace or namespace == NAMESPACE:
            secure = _secure_path(value, [name])
            if secure is not None:
                problems.append(
                    Problem(
                        dotted(secure),
                        "is an encrypted (secure) value; the project's only secret values are under "
                        f"{NAMESPACE}:{SECRETS_KEY} (docs/deploying.md), which become Kubernetes Secrets",
                    )
                )
                continue
            project[name] = value
        engine[full_key] = value if isinstance(value, str) else json.dumps(value, default=str)
    keys = [str(key) for key in config]
    problems += foreign_key_problems(keys)
    problems += aws_settings(engine)[1]
    missing = missing_keys_problem(keys, where)
    if missing is not None:
        problems.append(missing)
    if problems:
        raise StackFileError(locate(problems, path, data))  # each at its line, as validation errors are
    return StackFile(
        path=path,
        stack=stack_name(path),
        project_config=project,
        engine_config=engine,
        secret_keys=tuple(secret_keys),
        unset_secrets=locate(unset, path, data),
    )


def _secure_path(value: Any, path: list[str | int]) -> list[str | int] | None:
    if isinstance(value, Mapping):
        if list(value) == [_SECURE]:
            return path
        for key, item in value.items():
            found = _secure_path(item, [*path, str(key)])
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _secure_path(item, [*path, index])
            if found is not None:
                return found
    return None
