"""The fleetctl edit commands: the operation of each, running it, and what it prints (their parsers
are fleetctl/edit/arguments.py).

Every command edits one stack file (``--stack NAME`` or ``--stack-file PATH``),
validates the whole result and writes it atomically; ``--dry-run`` prints the diff
and writes nothing. Errors go to stderr in the format of ``fleetctl validate``.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from components.spec.errors import Problem, ProblemsError
from fleetctl import diff, stackfile
from fleetctl.edit import front, operations
from fleetctl.edit.document import ABSENT, Edit, Operation, prepare_edit, refuse_read_only
from fleetctl.positions import locate
from fleetctl.progress import progress
from fleetctl.project import relative_to_here, resolve_stack
from fleetctl.stackfile import display_path, parse_stack_bytes

Builder = Callable[[argparse.Namespace], Operation]


# Arguments to operations.


def _simple(operation: Callable[..., list[str]]) -> Builder:
    return lambda arguments: functools.partial(operation, name=arguments.name)


def _add_endpoint(arguments: argparse.Namespace) -> Operation:
    return functools.partial(
        operations.add_endpoint,
        name=arguments.name,
        image=arguments.image,
        framework=arguments.framework,
        regions=arguments.region,
        replicas=arguments.replicas,
        gpu_count=arguments.gpu_count,
        node_group=arguments.node_group,
        model=arguments.model,
        model_source=arguments.model_source,
        mooncake_mode=arguments.mooncake_mode,
        prefill=arguments.prefill,
        decode=arguments.decode,
        protocol=arguments.protocol,
        cold_tier=bool(arguments.cold_tier),
    )


def _scale(arguments: argparse.Namespace) -> Operation:
    return functools.partial(operations.scale, name=arguments.name, replicas=arguments.replicas)


def _topology(arguments: argparse.Namespace) -> Operation:
    return functools.partial(
        operations.set_topology,
        name=arguments.name,
        prefill=arguments.prefill,
        decode=arguments.decode,
        canary=arguments.canary,
    )


def _store(arguments: argparse.Namespace) -> Operation:
    return functools.partial(
        operations.configure_store,
        name=arguments.name,
        global_segment_size=arguments.global_segment_size,
        local_buffer_size=arguments.local_buffer_size,
        offload=arguments.offload,
        cold_tier=arguments.cold_tier,
        enabled=arguments.enabled,
    )


def _state(state: str) -> Builder:
    return lambda arguments: functools.partial(operations.set_desired_state, name=arguments.name, state=state)


def _image(arguments: argparse.Namespace) -> Operation:
    return functools.partial(operations.set_image, name=arguments.name, image=arguments.image)


def _region(operation: Callable[..., list[str]]) -> Builder:
    return lambda arguments: functools.partial(operation, name=arguments.name, region=arguments.region)


def _dial(operation: Callable[..., list[str]]) -> Builder:
    return lambda arguments: functools.partial(operation, region=arguments.name, endpoint=arguments.endpoint)


def _canary_start(arguments: argparse.Namespace) -> Operation:
    return functools.partial(
        operations.start_canary,
        name=arguments.name,
        image=arguments.image,
        weight=arguments.weight,
        replicas=arguments.replicas,
        prefill=arguments.prefill,
        decode=arguments.decode,
    )


def _canary_weight(arguments: argparse.Namespace) -> Operation:
    return functools.partial(operations.set_canary_weight, name=arguments.name, weight=arguments.weight)


def _autoscaling(arguments: argparse.Namespace) -> Operation:
    return functools.partial(
        operations.set_autoscaling,
        name=arguments.name,
        min_replicas=arguments.min_replicas,
        max_replicas=arguments.max_replicas,
        metrics=arguments.metrics,
        enabled=arguments.enabled,
        role=arguments.role,
    )


BUILDERS: dict[str, Builder] = {
    "endpoint add": _add_endpoint,
    "endpoint remove": _simple(operations.remove_endpoint),
    "scale": _scale,
    "topology set": _topology,
    "store configure": _store,
    "stop": _state("stopped"),
    "start": _state("running"),
    "image set": _image,
    "region add": _region(operations.add_region),
    "region remove": _region(operations.remove_region),
    "region drain": _dial(front.drain),
    "region undrain": _dial(front.undrain),
    "canary start": _canary_start,
    "canary weight": _canary_weight,
    "canary promote": _simple(operations.promote_canary),
    "canary rollback": _simple(operations.rollback_canary),
    "autoscaling set": _autoscaling,
}
"""The operation of each edit, by the label its parser sets (fleetctl/edit/arguments.py)."""


# Running one edit.


def run(arguments: argparse.Namespace) -> int:
    try:
        path: Path = arguments.stack_file or _resolved(arguments.stack)
    except ProblemsError as error:  # no project here, or no such stack
        return _refused(arguments, None, error.problems)
    operation: Operation = BUILDERS[arguments.edit_label](arguments)
    try:
        if not arguments.dry_run:
            refuse_read_only(path)  # before the edit and its plan: a read-only file is known at once
        edit = prepare_edit(path, operation)
        # Planned before anything is written: a program failure leaves the file as it was.
        infrastructure = _infrastructure_change(path, edit) if arguments.plan and edit.changed else None
        if edit.changed and not arguments.dry_run:
            edit.write()
    except ProblemsError as error:  # the file, the edit, the resulting config or its plan
        # Placed in the file as it is on disk, which a refused edit leaves as it was.
        return _refused(arguments, path, locate(error.problems, path))
    written = edit.changed and not arguments.dry_run
    if arguments.output == "json":
        record = _record(arguments, path, edit, written)
        if infrastructure is not None:
            record["infrastructure"] = json.loads(diff.render_json(infrastructure, "before", "after"))
        print(json.dumps(record, indent=2, default=str))
    else:
        print(_table(arguments, path, edit, written))
        if infrastructure is not None:
            print(diff.render_text(infrastructure, "before the edit", "after the edit"), end="")
    return 0


def _resolved(reference: str | None) -> Path:
    """The stack file of ``--stack``, or of the stack pulumi has selected, as ``fleetctl validate`` finds it."""
    resolved = resolve_stack(reference)
    if not resolved.explicit:
        print(f"fleetctl: stack {resolved.name}, selected by {resolved.chosen_by}", file=sys.stderr)
    return relative_to_here(resolved.path)


def _infrastructure_change(path: Path, edit: Edit) -> diff.PlanDiff:
    """The offline plans of the stack before and after the edit, compared (``fleetctl diff``)."""
    label = display_path(path)
    with progress(f"fleetctl: planning {label} before and after the edit"):
        # The stack as it is: usually planned already (by fleetctl plan or the edit before), then read back.
        before = diff.plan_stack_file(parse_stack_bytes(path, edit.document.original), label, reuse=True)
        after = diff.plan_stack_file(parse_stack_bytes(path, edit.after), label)
    change = diff.diff_plans(before, after)
    if change.refusals:
        raise ProblemsError([Problem(label, refusal) for refusal in change.refusals])
    return change


def _refused(arguments: argparse.Namespace, path: Path | None, problems: Sequence[Problem]) -> int:
    """Exit 1 with the problems: ``error:`` lines on stderr, or with ``--output json`` the
    edit's JSON record on stdout, nothing written and every problem in it."""
    if arguments.output != "json":
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1
    record = {
        "file": display_path(path) if path is not None else None,
        "stack": stackfile.stack_name(path) if path is not None else arguments.stack,
        "command": arguments.edit_label,
        "endpoint": arguments.name,
        "dry_run": arguments.dry_run,
        "written": False,
        "changes": [],
        "notes": [],
        "problems": [problem.as_json() for problem in problems],
    }
    print(json.dumps(record, indent=2))
    return 1


def _record(arguments: argparse.Namespace, path: Path, edit: Edit, written: bool) -> dict[str, Any]:
    return {
        "file": display_path(path),
        "stack": edit.document.stack,
        "command": arguments.edit_label,
        "endpoint": arguments.name,
        "dry_run": arguments.dry_run,
        "written": written,
        "changes": [change.as_json() for change in edit.changes],
        "notes": list(edit.notes),
        "problems": [],
        "diff": _diff(path, edit),
    }


def _table(arguments: argparse.Namespace, path: Path, edit: Edit, written: bool) -> str:
    if not edit.changed:
        outcome = "no change"
    elif written:
        outcome = "written"
    else:
        outcome = "dry run, nothing written"
    lines = [f"{display_path(path)}: {arguments.edit_label} {arguments.name}: {outcome}"]
    lines += [f"  note: {note}" for note in edit.notes]
    if arguments.dry_run:
        return "\n".join(lines) + ("\n" + _diff(path, edit).rstrip("\n") if edit.changed else "")
    rows = [row for change in edit.changes for row in _rows(change.path, change.before, change.after)]
    if rows:
        rows.insert(0, ("path", "before", "after"))
        widths = [max(len(row[column]) for row in rows) for column in range(2)]
        lines += [f"  {row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]}".rstrip() for row in rows]
    return "\n".join(lines)


def _rows(path: str, before: Any, after: Any) -> list[tuple[str, str, str]]:
    """One row per leaf: a mapping added, removed or replaced is shown key by key, each value whole
    (a value cut to fit would be neither JSON nor the value; the image tag at its end tells two apart)."""
    if isinstance(before, dict) or isinstance(after, dict):
        old = before if isinstance(before, dict) else {}
        new = after if isinstance(after, dict) else {}
        if (not old and before is not ABSENT) or (not new and after is not ABSENT):
            return [(path, _show(before), _show(after))]  # a mapping beside a scalar: each whole
        return [
            row
            for key in [*old, *(key for key in new if key not in old)]
            for row in _rows(f"{path}.{key}", old.get(key, ABSENT), new.get(key, ABSENT))
            if old.get(key, ABSENT) != new.get(key, ABSENT)
        ]
    return [(path, _show(before), _show(after))]


def _show(value: Any) -> str:
    if value is ABSENT:
        return "-"
    return json.dumps(value, default=str, separators=(", ", ": "))


def _diff(path: Path, edit: Edit) -> str:
    name = display_path(path)
    old, new = (name, name) if Path(name).is_absolute() else (f"a/{name}", f"b/{name}")
    before = edit.document.original.decode("utf-8").splitlines(keepends=True)
    after = edit.after.decode("utf-8").splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, after, fromfile=old, tofile=new))
