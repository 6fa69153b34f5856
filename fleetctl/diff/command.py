"""The fleetctl diff command: read or plan the two sides, compare, print; exit 0, 2 or 1."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from components.spec import SpecError
from components.spec.errors import Problem, ProblemsError
from components.validation import validate_stack
from fleetctl import plancache
from fleetctl.diff.baseref import BaseRefError, plan_at
from fleetctl.diff.engine import diff_plans
from fleetctl.diff.render import RENDERERS
from fleetctl.plan import ProgramError, run_program
from fleetctl.project import STACK_NAME
from fleetctl.stackfile import StackFile, StackFileError, read_stack_file

# Reading the two sides.


class InputError(ProblemsError):
    """A side could not be read or planned; the problems are in the validate format."""


@dataclass(frozen=True)
class Side:
    label: str
    plan: dict[str, Any]


def _plan_problems(document: Any) -> list[str]:
    if not isinstance(document, Mapping):
        return [f"must be a JSON object with resources, got {type(document).__name__}"]
    resources = document.get("resources")
    if not isinstance(resources, list):
        return ["has no resources list: is it a plan.json written by fleetctl plan?"]
    problems = []
    for index, resource in enumerate(resources):
        if not isinstance(resource, Mapping):
            problems.append(f"resources[{index}] must be an object, got {type(resource).__name__}")
            continue
        for key in ("urn", "type", "name"):
            if not isinstance(resource.get(key), str):
                problems.append(f"resources[{index}].{key} must be a string")
        for key in ("inputs", "options"):
            if not isinstance(resource.get(key, {}), Mapping):
                problems.append(f"resources[{index}].{key} must be an object")
    return problems


def read_plan(path: Path, label: str) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise InputError([Problem(label, f"cannot read the plan: {reason}")]) from None
    try:
        document = json.loads(text)
    except ValueError as error:
        raise InputError([Problem(label, f"is not valid JSON: {error}")]) from None
    problems = _plan_problems(document)
    if problems:
        raise InputError([Problem(label, problem) for problem in problems])
    return dict(document)


def validate_stack_file(stack_file: StackFile, label: str) -> None:
    """The stack file's config as ``fleetctl validate`` judges it; its problems, labelled, or nothing."""
    try:
        validate_stack(stack_file.project_config, stack=stack_file.stack)
    except SpecError as error:
        raise InputError([Problem(label, "the stack config is invalid:"), *error.problems]) from None


def plan_stack_file(
    stack_file: StackFile, label: str, *, reuse: bool = False, validated: bool = False
) -> dict[str, Any]:
    """Validate the stack file as ``fleetctl validate`` does (unless the caller did: ``validated``), then
    plan it in-process; the plan is kept by its inputs (fleetctl/plancache.py). With ``reuse``, a plan
    kept for the same inputs is read back instead: the same program, sources and interpreter planned
    this very config, so it validated."""
    inputs = plancache.in_process_inputs(stack_file.stack, stack_file.engine_config)
    kept = plancache.lookup(inputs) if reuse else None
    if kept is not None:
        reused: dict[str, Any] = json.loads(kept)
        return reused
    if not validated:
        validate_stack_file(stack_file, label)
    try:
        plan = run_program(stack_file)
    except ProgramError as error:
        raise InputError([Problem(label, f"the program failed under the offline plan: {error}")]) from None
    text = plan.to_json()
    plancache.store(inputs, text)
    document: dict[str, Any] = json.loads(text)
    return document


def _read_stack_file(path: Path, label: str) -> StackFile:
    try:
        return read_stack_file(path)
    except StackFileError as error:
        where = str(path)
        raise InputError(
            [
                dataclasses.replace(problem, path=label, file=label if problem.file == where else problem.file)
                if problem.path == where
                else problem
                for problem in error.problems
            ]
        ) from None


@dataclass(frozen=True)
class _StackSide:
    """A side given as a stack file: read and validated, not planned yet."""

    label: str
    stack_file: StackFile


def open_side(text: str, stack_name: str | None = None) -> Side | _StackSide:
    """A plan directory (or its plan.json), read; or a stack file, read and validated (as stack
    ``stack_name`` when given), to be planned by :func:`planned` once every side is known good."""
    path = Path(text)
    if path.is_dir():
        if not (path / "plan.json").is_file():
            raise InputError([Problem(text, "is a directory without plan.json: give a plan directory or a stack file")])
        return Side(text, read_plan(path / "plan.json", text))
    if path.suffix == ".json":
        return Side(text, read_plan(path, text))
    if not path.exists():
        raise InputError([Problem(text, "no such plan directory or stack file")])
    stack_file = _read_stack_file(path, text)
    if stack_name is not None:
        stack_file = replace(stack_file, stack=stack_name)
    validate_stack_file(stack_file, text)
    return _StackSide(text, stack_file)


def planned(side: Side | _StackSide) -> Side:
    """A stack-file side planned, or read back from the plan cache when the same inputs were planned
    before (an unchanged HEAD, a side planned by an earlier diff or ``--plan`` edit)."""
    if isinstance(side, Side):
        return side
    return Side(side.label, plan_stack_file(side.stack_file, side.label, reuse=True, validated=True))


def load_side(text: str, stack_name: str | None = None) -> Side:
    """A plan directory (or its plan.json), or a stack file planned on the fly (as stack
    ``stack_name`` when given)."""
    return planned(open_side(text, stack_name))


def _base_ref_head(text: str) -> Path:
    """HEAD of a ``--base-ref`` diff: a stack file that exists."""
    path = Path(text).resolve()
    if not path.exists():
        raise InputError([Problem(text, "no such file: --base-ref needs HEAD to be a stack file in a git work tree")])
    if not path.is_file():
        raise InputError([Problem(text, "--base-ref needs HEAD to be a stack file in a git work tree")])
    return path


def load_side_at(ref: str, text: str, stack_name: str | None = None) -> Side:
    """The stack file at ``text`` as it was at git commit ``ref``, planned by that commit's own
    program (fleetctl/diff/baseref.py)."""
    try:
        label, plan = plan_at(ref, _base_ref_head(text), stack_name)
    except BaseRefError as error:
        raise InputError(error.problems) from None
    return Side(label, plan)


# The command.


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit 2, which means "changes" here
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fleetctl diff",
        usage="%(prog)s [--output {text,table,markdown,json}] [--stack-name NAME] "
        "(BASE HEAD | --base-ref GIT_REF HEAD)",
        description="Compare two offline plans: per region, what a stack edit creates, updates, replaces, deletes.",
        epilog="BASE and HEAD are plan directories (fleetctl plan --out) or stack files, planned on the fly. "
        "Exit status: 0 no change, 2 changes, 1 error (or a change AWS refuses: a Kubernetes minor jump).",
    )
    # "*", not "+": with "+" argparse reports a missing SIDE before an option it does not know (--bogus).
    parser.add_argument("sides", nargs="*", metavar="SIDE", help="BASE HEAD, or HEAD alone with --base-ref")
    parser.add_argument(
        "--base-ref",
        metavar="GIT_REF",
        help="BASE is HEAD's stack file as it was at this commit, planned by that commit's own program",
    )
    parser.add_argument(
        "--output",
        choices=sorted({*RENDERERS, "table"}),
        default="text",
        help="text (or table, as every other command calls it) for people (default), markdown for a pull "
        "request comment, json for scripts",
    )
    # The option's first spelling: kept working for the scripts that use it, not shown in --help.
    parser.add_argument(
        "--format", dest="output", choices=sorted(RENDERERS), default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--stack-name",
        metavar="NAME",
        help="plan every stack-file side as stack NAME (by default a file's stack is its name: Pulumi.NAME.yaml); "
        "plans of two different stacks are matched by URN without the stack",
    )
    return parser


def _sides(arguments: argparse.Namespace) -> tuple[Side, Side]:
    sides: list[str] = arguments.sides
    name: str | None = arguments.stack_name
    if name is not None and STACK_NAME.fullmatch(name) is None:
        raise _UsageError(f"--stack-name {name!r}: letters, digits, '_', '.' and '-' only, at most 100 characters")
    # Every side is read and validated before any is planned: a HEAD that cannot be planned is said at
    # once, not after BASE's plan.
    if arguments.base_ref is not None:
        if len(sides) != 1:
            raise _UsageError("with --base-ref, give only HEAD (a stack file)")
        _base_ref_head(sides[0])
        head = open_side(sides[0], name)
        return load_side_at(arguments.base_ref, sides[0], name), planned(head)
    if len(sides) != 2:
        raise _UsageError(f"give BASE and HEAD (got {len(sides)} argument(s)), or --base-ref GIT_REF HEAD")
    opened: list[Side | _StackSide] = []
    problems: list[Problem] = []
    for text in sides:
        try:
            opened.append(open_side(text, name))
        except InputError as error:
            problems += error.problems  # both sides' problems, together
    if problems:
        raise InputError(problems)
    return planned(opened[0]), planned(opened[1])


def main(argv: Sequence[str] | None = None) -> int:
    try:
        arguments = _parser().parse_args(argv)
        base, head = _sides(arguments)
    except _UsageError as error:
        print(f"error: {error} (see fleetctl diff --help)", file=sys.stderr)
        return 1
    except InputError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return 1
    result = diff_plans(base.plan, head.plan)
    output = "text" if arguments.output == "table" else arguments.output
    sys.stdout.write(RENDERERS[output](result, base.label, head.label))
    if result.refusals:
        for refusal in result.refusals:
            print(f"error: {refusal}", file=sys.stderr)
        return 1
    return 2 if result.changed else 0
