"""The fleetctl command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fleetctl import interrupt
from fleetctl.edit import arguments as edit_arguments

if TYPE_CHECKING:
    from components.spec import StackSpec
    from components.spec.errors import Problem
    from fleetctl.stackfile import StackFile

# Only what builds the parsers is imported above: `fleetctl --help` and `--version` import neither
# the models nor the Pulumi SDKs (tests/component/test_fleetctl_cli.py); a command imports what it runs.

STACK_HELP = (
    "the stack NAME (or ORG/NAME, ORG/PROJECT/NAME) of the Pulumi project here: its Pulumi.NAME.yaml in the "
    "project's stackConfigDir (default: the stack `pulumi stack select` chose, or PULUMI_STACK)"
)


def _stack_arguments(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--stack", metavar="NAME", help=STACK_HELP)
    which.add_argument("--stack-file", metavar="PATH", type=Path, help="read this stack file")


def _output_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output",
        choices=("table", "json"),
        default="table",
        help="table for people (default), json for scripts: one document on stdout, problems included",
    )


def version() -> str:
    """The installed package's version (pyproject.toml), as pip recorded it."""
    from importlib import metadata

    try:
        return metadata.version("inference-fleet")
    except metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


class _Version(argparse.Action):
    """argparse's version action, reading the version only when asked (importlib.metadata is slow)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(f"fleetctl {version()}")  # on stdout, as argparse's own version action prints it
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fleetctl", description="Validate, plan and edit inference-fleet stacks.")
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    validate = commands.add_parser("validate", help="check a stack file against the endpoint spec")
    _stack_arguments(validate)
    _output_argument(validate)
    plan = commands.add_parser("plan", help="run the program offline under mocks and write the plan")
    _stack_arguments(plan)
    _output_argument(plan)
    plan.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        help="a new or empty directory, or a plan directory fleetctl wrote (default: the project's build/plan/<stack>)",
    )
    plan.add_argument(
        "--policy", action="store_true", help="also check the plan against the policy pack's rules (policy/)"
    )
    # Listed for --help only: `fleetctl diff` has its own parser (its exit codes differ).
    commands.add_parser("diff", help="compare two plans or stack files (see fleetctl diff --help)", add_help=False)
    commands.add_parser("verify", help="check a deployed stack's endpoints through their routes", add_help=False)
    edit_arguments.add_commands(commands)
    completion = commands.add_parser(
        "completion",
        help="print a shell completion script (source <(fleetctl completion bash))",
        description="Print a completion script for fleetctl's commands and options; load it in ~/.bashrc with "
        "source <(fleetctl completion bash).",
    )
    completion.add_argument("shell", choices=("bash",), help="the shell to complete in")
    _name_usage_parsers(parser)
    return parser


def _name_usage_parsers(parser: argparse.ArgumentParser) -> None:
    """Let every (sub)command's parser be the one that reports an option it does not know."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.set_defaults(usage_parser=child)
                _name_usage_parsers(child)


def _report(problems: Sequence[Problem | str], arguments: argparse.Namespace | None = None) -> int:
    """Exit 1 with ``error:`` lines on stderr, or with ``--output json`` a JSON document on stdout."""
    from fleetctl.reports import failure_record

    if arguments is not None and arguments.output == "json":
        _print_json(failure_record(arguments.command, problems))
        return 1
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1


def _print_json(record: dict[str, object]) -> None:
    print(json.dumps(record, indent=2, default=str))


def _load(arguments: argparse.Namespace) -> tuple[StackFile, StackSpec]:
    from fleetctl.project import relative_to_here, resolve_stack
    from fleetctl.stackfile import load_stack

    if arguments.stack_file is not None:
        return load_stack(arguments.stack_file)
    resolved = resolve_stack(arguments.stack)
    if not resolved.explicit:
        print(f"fleetctl: stack {resolved.name}, selected by {resolved.chosen_by}", file=sys.stderr)
    return load_stack(relative_to_here(resolved.path))


def _default_out(stack: str) -> Path:
    """build/plan/<stack> in the project here, else in the checkout fleetctl runs from."""
    from fleetctl.project import find_project
    from fleetctl.stackfile import PROJECT_ROOT, StackFileError

    try:
        root = find_project().file.parent
    except StackFileError:
        root = PROJECT_ROOT
    return root / "build" / "plan" / stack


def _main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["diff"]:
        from fleetctl import diff

        return diff.main(words[1:])
    if words[:1] == ["verify"]:
        from fleetctl.verify import command as verify_command

        return verify_command.main(words[1:])
    parser = _parser()
    arguments, unknown = parser.parse_known_args(words)
    if unknown:  # the usage of the command that was given them, not the top level's
        getattr(arguments, "usage_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if arguments.command in edit_arguments.COMMANDS:
        from fleetctl.edit import commands as edit_commands

        return edit_commands.run(arguments)
    if arguments.command == "completion":
        from fleetctl.completion import bash_script

        print(bash_script(_parser()), end="")
        return 0
    return _validate_or_plan(arguments)


def _validate_or_plan(arguments: argparse.Namespace) -> int:
    from components.schedulability.hugepages import unrequested_hugepages
    from components.spec.errors import ProblemsError
    from fleetctl import plancache
    from fleetctl.plan import ProgramError, check_output, run_program, summary, write_plan
    from fleetctl.policy_check import check_plan, report
    from fleetctl.progress import progress
    from fleetctl.reports import plan_record, validate_record, with_policy
    from fleetctl.stackfile import display_path

    try:
        stack_file, spec = _load(arguments)
    except ProblemsError as error:  # the stack file, or its config
        return _report(error.problems, arguments)
    if arguments.command == "validate":
        if stack_file.unset_secrets:  # the config is sound, but `pulumi preview` would fail on decrypting them
            return _report(stack_file.unset_secrets, arguments)
        if arguments.output == "json":
            _print_json(validate_record(stack_file, spec))
            return 0
        print(
            f"{display_path(stack_file.path)}: valid ({len(spec.regions)} region(s): {', '.join(spec.regions)}; "
            f"{len(spec.endpoints)} endpoint(s); {len(spec.placements)} placement(s))"
        )
        return 0
    for problem in stack_file.unset_secrets:  # the offline plan never decrypts: it goes on, and says so
        print(problem.line_as("warning"), file=sys.stderr)
    out = arguments.out or _default_out(stack_file.stack)
    try:
        check_output(out)  # before the program runs: a refused directory is known at once
        inputs = plancache.in_process_inputs(stack_file.stack, stack_file.engine_config)  # before: as it runs
        with progress(f"fleetctl: planning {display_path(stack_file.path)} offline"):
            plan = run_program(stack_file)
        files = write_plan(plan, out)
        plancache.store(inputs, files["plan.json"])  # for the next --plan edit of this stack
    except ProgramError as error:
        return _report([f"error: the program failed under the offline plan: {error}"], arguments)
    except ProblemsError as error:
        return _report(error.problems, arguments)
    if arguments.output == "json":
        record = plan_record(plan, stack_file, out, files)
        violations = check_plan(plan.resources) if arguments.policy else []
        _print_json(with_policy(record, violations, report(violations)) if arguments.policy else record)
        return 1 if violations else 0
    print(summary(plan, Path(display_path(out)), files, source=display_path(stack_file.path)))
    for note in unrequested_hugepages(spec):
        print(f"note: {note.message()}")
    if arguments.policy:
        violations = check_plan(plan.resources)
        if violations:
            return _report(report(violations))
        print("policy: every rule of policy/ holds")
    return 0


BROKEN_PIPE_STATUS = 141
"""What a shell reports for a command stopped by SIGPIPE (128 + 13), as ``yes | head -1`` does."""
INTERRUPTED_STATUS = interrupt.INTERRUPTED_STATUS


def main(argv: Sequence[str] | None = None) -> int:
    """fleetctl's entry point: the command's exit status, and no traceback when the reader of
    stdout goes away (``fleetctl ... | head -1``) or the user presses Ctrl-C. Run as the program
    (``argv`` None: the console script, ``python -m fleetctl``), Ctrl-C is handled by
    fleetctl/interrupt.py from here on, before anything heavy is imported."""
    if argv is None:
        interrupt.install()
    try:
        status = _main(argv)
        sys.stdout.flush()  # here, not at interpreter exit, so a closed pipe is caught below
        interrupt.finish()  # all is said: a Ctrl-C during the interpreter's exit changes nothing
    except BrokenPipeError:
        # The Python documentation's recipe (signal module, "Note on SIGPIPE"): send what is still
        # buffered to devnull, so the interpreter's own flush at exit does not fail a second time.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE_STATUS
    except KeyboardInterrupt:
        print(interrupt.MESSAGE, file=sys.stderr)
        return INTERRUPTED_STATUS
    return status


if __name__ == "__main__":
    raise SystemExit(main())
