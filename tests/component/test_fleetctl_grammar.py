"""One command-line grammar for every fleetctl command (docs/fleetctl.md, "One grammar"), held
over every parser fleetctl has: a value option shows one metavar wherever it appears, a switch is
one kind of switch everywhere, every command prints table or json, a usage error is the usage of
the command that was given it and status 2, and an edit finds its stack as validate does."""

from __future__ import annotations

import argparse
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from fleetctl.cli import main
from fleetctl.stackfile import PROJECT_ROOT, stack_path
from tests.component.test_fleetctl_daily import _parsers


def _options() -> dict[str, set[tuple[str, str]]]:
    """Each option string -> the (kind of action, metavar) it has in each parser."""
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for _, parser in _parsers():
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            if action.help == argparse.SUPPRESS:
                continue  # an old spelling kept working, not part of the grammar shown
            takes_value = action.nargs != 0 and not isinstance(action, argparse.BooleanOptionalAction)
            if takes_value and action.choices is None:
                shown = str(action.metavar)
            elif takes_value:
                shown = "{choices}"
            else:
                shown = "switch"
            kind = "value" if takes_value else type(action).__name__  # repeatable or not, a value
            for option in action.option_strings:
                found[option].add((kind, shown))
    return found


def test_one_grammar_over_every_parser() -> None:
    options = _options()
    assert options  # the walk found the parsers
    # One option, one meaning: the same kind of action and the same metavar in every command.
    assert {option: kinds for option, kinds in options.items() if len(kinds) > 1} == {}
    # A value is named for what it is (NAME, N, SECONDS), never argparse's echo of the option.
    unnamed = {
        option
        for option, kinds in options.items()
        for _, shown in kinds
        if shown not in ("switch", "{choices}") and (shown == "None" or not shown.isupper())
    }
    assert unnamed == set()
    # Every command prints for people as "table" and for scripts as "json".
    for name, parser in _parsers():
        for action in parser._actions:
            if "--output" in action.option_strings:
                assert {"table", "json"} <= set(action.choices or ()), name
    # No command insists on --stack: each takes the stack `pulumi stack select` chose, as validate does.
    required = [
        name
        for name, parser in _parsers()
        for action in parser._actions
        if "--stack" in action.option_strings and action.required
    ]
    assert required == []
    required_groups = [
        name
        for name, parser in _parsers()
        for group in parser._mutually_exclusive_groups
        if group.required and any("--stack" in action.option_strings for action in group._group_actions)
    ]
    assert required_groups == []


def _leaves() -> list[tuple[str, argparse.ArgumentParser]]:
    return [
        (name, parser)
        for name, parser in _parsers()
        if name.startswith("fleetctl ")
        and not name.startswith(("fleetctl diff", "fleetctl verify"))
        and not any(isinstance(action, argparse._SubParsersAction) for action in parser._actions)
    ]


def _a_value(action: argparse.Action) -> str:
    if action.choices:
        return str(next(iter(action.choices)))
    return "1" if action.type is int else "x"


@pytest.mark.parametrize("name", [name for name, _ in _leaves()])
def test_an_unknown_option_prints_the_commands_own_usage_and_exits_2(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    [parser] = [parser for leaf, parser in _leaves() if leaf == name]
    given = [_a_value(action) for action in parser._actions if not action.option_strings]
    given += [
        option
        for action in parser._actions
        if action.required and action.option_strings
        for option in (action.option_strings[-1], _a_value(action))
    ]
    if any("--stack-file" in action.option_strings for action in parser._actions):
        given += ["--stack-file", "x"]
    with pytest.raises(SystemExit) as exit_info:
        main([*name.split()[1:], *given, "--bogus"])  # all it needs, and one option it does not know
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: {name} ")
    assert err.splitlines()[-1].startswith(f"{name}: error: ")


def test_an_edit_takes_the_selected_stack_as_validate_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "stacks").mkdir()
    shutil.copyfile(PROJECT_ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copyfile(stack_path("dev"), tmp_path / "stacks" / "Pulumi.dev.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PWD", str(tmp_path))
    monkeypatch.setenv("PULUMI_STACK", "dev")
    assert main(["scale", "assistant", "2", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert err == "fleetctl: stack dev, selected by PULUMI_STACK\n"
    assert "stacks/Pulumi.dev.yaml: scale assistant: dry run, nothing written" in out
