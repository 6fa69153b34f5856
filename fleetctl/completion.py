"""``fleetctl completion bash``: a bash completion script made from fleetctl's own parsers.

Every command path (``canary start``), its options, the choices of an option that has them,
and files for options that take a path come from argparse, so the script cannot fall behind
the commands. ``--stack`` completes the stack names of the ``Pulumi.NAME.yaml`` files in the
current directory and in ``stacks/``.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator
from pathlib import Path

from fleetctl.diff.command import _parser as diff_parser
from fleetctl.verify.command import parser as verify_parser

_STANDALONE = {"diff": diff_parser, "verify": verify_parser}
"""Commands with a parser of their own, listed on fleetctl's only for --help."""


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Each command path below ``parser`` with the parser that reads it (the path's last word)."""
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name in action.choices:
                yield from _commands(action.choices[name], (*path, name))


def _parser_at(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> argparse.ArgumentParser:
    if path and path[0] in _STANDALONE:
        parser, path = _STANDALONE[path[0]](), path[1:]
    for word in path:
        subcommands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
        parser = subcommands.choices[word]
    return parser


def _visible(action: argparse.Action) -> bool:
    return action.help is not argparse.SUPPRESS


def _words(words: list[str]) -> str:
    return shlex.quote(" ".join(words))


def bash_script(parser: argparse.ArgumentParser) -> str:
    paths = list(_commands(parser))
    known = [f"/{'/'.join(path)}" for path in paths if path]
    cases: list[str] = []
    values: list[str] = []
    for path in paths:
        here = _parser_at(parser, path)
        options: list[str] = []
        subcommands: list[str] = []
        for action in here._actions:
            if isinstance(action, argparse._SubParsersAction):
                subcommands += list(action.choices)
            elif _visible(action):
                options += action.option_strings
            if not action.option_strings or not _visible(action) or action.nargs == 0:
                continue
            key = f"/{'/'.join(path)} {{}}"
            for option in action.option_strings:
                if action.choices is not None:
                    reply = f'compgen -W {_words([str(choice) for choice in action.choices])} -- "$cur"'
                elif action.dest == "stack":
                    reply = 'compgen -W "$(_fleetctl_stacks)" -- "$cur"'
                elif action.type is Path:
                    reply = 'compgen -f -- "$cur"'
                else:
                    reply = ""  # a value of the user's own: nothing to offer (bash offers files)
                completion = f"COMPREPLY=($({reply}))" if reply else "COMPREPLY=()"
                values.append(f"        {shlex.quote(key.format(option))}) {completion}; return ;;")
        for action in here._actions:  # positional choices (completion SHELL)
            if (
                not action.option_strings
                and action.choices is not None
                and not isinstance(action, argparse._SubParsersAction)
            ):
                subcommands += [str(choice) for choice in action.choices]
        name = shlex.quote(f"/{'/'.join(path)}") if path else '""'
        cases.append(f"        {name}) options={_words(options)}; subcommands={_words(subcommands)} ;;")
    return _TEMPLATE.format(
        known="|".join(shlex.quote(path) for path in known),
        values="\n".join(values),
        cases="\n".join(cases),
    )


_TEMPLATE = """\
# bash completion for fleetctl; load it with: source <(fleetctl completion bash)

_fleetctl_stacks() {{
    local file name
    for file in Pulumi.*.yaml Pulumi.*.yml stacks/Pulumi.*.yaml stacks/Pulumi.*.yml; do
        [[ -e "$file" ]] || continue
        name="${{file##*/Pulumi.}}"
        echo "${{name%.*}}"
    done
}}

_fleetctl() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}"
    local prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    local path="" word index options="" subcommands=""
    for ((index = 1; index < COMP_CWORD; index++)); do
        word="${{COMP_WORDS[index]}}"
        case "$path/$word" in
            {known}) path="$path/$word" ;;
        esac
    done
    case "$path $prev" in
{values}
    esac
    case "$path" in
{cases}
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$options" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$subcommands" -- "$cur"))
    fi
}}

complete -o default -F _fleetctl fleetctl
"""
