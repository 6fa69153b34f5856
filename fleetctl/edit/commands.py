"""The fleetctl edit commands: arguments, one edit each, and what they print.

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
from typing import TYPE_CHECKING, Any

from components.spec.errors import Problem, ProblemsError
from fleetctl import diff, stackfile
from fleetctl.edit import front, operations
from fleetctl.edit.document import ABSENT, Edit, Operation, prepare_edit
from fleetctl.positions import locate
from fleetctl.progress import progress
from fleetctl.project import resolve_stack
from fleetctl.stackfile import display_path, parse_stack_bytes

COMMANDS = ("endpoint", "scale", "topology", "store", "stop", "start", "image", "region", "canary", "autoscaling")
"""Top-level fleetctl commands that edit a stack file."""

Builder = Callable[[argparse.Namespace], Operation]
if TYPE_CHECKING:
    Subcommands = argparse._SubParsersAction[argparse.ArgumentParser]


def _options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    which = options.add_mutually_exclusive_group(required=True)
    which.add_argument("--stack", metavar="NAME", help="edit the stack file of stack NAME in the Pulumi project here")
    which.add_argument("--stack-file", metavar="PATH", type=Path, help="edit this stack file")
    options.add_argument("--dry-run", action="store_true", help="print the diff of the stack file; write nothing")
    options.add_argument(
        "--plan",
        action="store_true",
        help="also plan the stack before and after the edit offline and print the infrastructure change",
    )
    options.add_argument(
        "--output", choices=("table", "json"), default="table", help="table for people (default), json for scripts"
    )
    return options


def add_commands(commands: Subcommands) -> None:
    """Register the edit commands on fleetctl's subcommand parser."""
    options = _options()

    def leaf(group: Subcommands, name: str, label: str, build: Builder, help_text: str) -> argparse.ArgumentParser:
        parser = group.add_parser(name, parents=[options], help=help_text, description=help_text)
        parser.set_defaults(edit=build, edit_label=label)
        parser.add_argument("name", metavar="NAME", help="the endpoint")
        return parser

    def group(name: str, help_text: str) -> Subcommands:
        parser = commands.add_parser(name, help=help_text, description=help_text)
        return parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    endpoint = group("endpoint", "add or remove an endpoint")
    add = leaf(endpoint, "add", "endpoint add", _add_endpoint, "add an endpoint (deploy)")
    add.add_argument("--image", help="server image; optional with --mooncake-mode (the pinned vLLM image)")
    add.add_argument(
        "--framework", choices=("vllm", "sglang", "tgi", "triton"), help="the server's framework (default vllm)"
    )
    add.add_argument("--region", action="append", default=[], metavar="REGION", help="serve only here (repeatable)")
    add.add_argument("--replicas", type=int, help="pods of a classic endpoint")
    add.add_argument("--gpu-count", type=int, help="GPUs per pod")
    add.add_argument("--node-group", help="node group to schedule on")
    add.add_argument(
        "--model",
        metavar="NAME",
        help="Hugging Face Hub id the server downloads (org/name); with --model-source the name it serves under",
    )
    add.add_argument("--model-source", metavar="S3_URI", help="s3:// URI of the weights, synced into the pod")
    add.add_argument(
        "--mooncake-mode",
        choices=("disaggregated", "store", "both"),
        help="a Mooncake endpoint: prefill/decode split, a shared KV-cache store, or both",
    )
    add.add_argument("--prefill", type=int, help="prefill instances (with --mooncake-mode; default 1)")
    add.add_argument("--decode", type=int, help="decode instances (with --mooncake-mode; default 1)")
    add.add_argument("--protocol", choices=("rdma", "tcp"), help="KV transfer protocol (default rdma)")
    add.add_argument("--cold-tier", action="store_true", help="write KV to the region's cold-tier bucket")
    leaf(endpoint, "remove", "endpoint remove", _simple(operations.remove_endpoint), "remove an endpoint (delete)")

    scale = leaf(commands, "scale", "scale", _scale, "set the replicas of a classic endpoint")
    scale.add_argument("replicas", metavar="N", type=int, help="pods to run")

    topology = group("topology", "the prefill/decode counts of a Mooncake endpoint")
    topology_set = leaf(topology, "set", "topology set", _topology, "set the XpYd topology")
    topology_set.add_argument("--prefill", type=int, metavar="X", help="prefill instances (kept when not given)")
    topology_set.add_argument("--decode", type=int, metavar="Y", help="decode instances (kept when not given)")
    topology_set.add_argument(
        "--canary", action="store_true", help="set the canary set's topology (canary.topology) instead"
    )

    store = group("store", "the Mooncake KV-cache store of an endpoint")
    configure = leaf(store, "configure", "store configure", _store, "configure the store")
    configure.add_argument("--global-segment-size", metavar="SIZE", help="bytes, as digits or with KiB/MiB/GiB/TiB")
    configure.add_argument("--local-buffer-size", metavar="SIZE", help="bytes, as digits or with KiB/MiB/GiB/TiB")
    configure.add_argument(
        "--offload", choices=("cpu", "disk", "none"), help="where the pool lives beyond the ranks' DRAM (default cpu)"
    )
    configure.add_argument(
        "--cold-tier", action=argparse.BooleanOptionalAction, help="opt in to the cold tier (enables the store)"
    )
    switch = configure.add_mutually_exclusive_group()
    switch.add_argument("--enable", dest="enabled", action="store_const", const=True, help="run the store")
    switch.add_argument("--disable", dest="enabled", action="store_const", const=False, help="run no store")

    leaf(commands, "stop", "stop", _state("stopped"), "keep the endpoint's config, run zero pods")
    leaf(commands, "start", "start", _state("running"), "run the configured counts again")

    image = group("image", "the image of an endpoint")
    leaf(image, "set", "image set", _image, "set the image (drops region_image_uris)").add_argument(
        "image", metavar="IMAGE", help="the image reference, e.g. vllm/vllm-openai:v0.34.0"
    )

    region = group("region", "the regions an endpoint serves; a region's traffic dial on the global address")
    leaf(region, "add", "region add", _region(operations.add_region), "serve in one more region").add_argument(
        "region", metavar="REGION", help="a region of the stack, e.g. eu-west-1"
    )
    leaf(region, "remove", "region remove", _region(operations.remove_region), "stop serving in a region").add_argument(
        "region", metavar="REGION", help="a region the endpoint serves"
    )
    for action, dial, help_text in (
        (
            "drain",
            front.drain,
            "take a region out of the global address's normal routing (its traffic dial to 0; "
            "it still takes failover traffic while no other region is healthy)",
        ),
        ("undrain", front.undrain, "put a drained region back into the global address's rotation (dial 100)"),
    ):
        parser = region.add_parser(action, parents=[options], help=help_text, description=help_text)
        parser.set_defaults(edit=_dial(dial), edit_label=f"region {action}")
        parser.add_argument("name", metavar="REGION", help="a region of the stack, e.g. eu-west-1")
        parser.add_argument(
            "--endpoint",
            metavar="NAME",
            help="only this endpoint in the region, on its own listener (global.endpoints.NAME.port)",
        )

    canary = group("canary", "a weighted canary (of a Mooncake endpoint: a whole second set, <name>-canary-*)")
    start = leaf(canary, "start", "canary start", _canary_start, "start a canary")
    start.add_argument("--image", required=True, help="the canary's image reference")
    start.add_argument("--weight", required=True, type=int, metavar="W", help="percent of traffic, 1-99")
    start.add_argument("--replicas", type=int, metavar="R", help="canary pods of a classic endpoint (default 1)")
    start.add_argument("--prefill", type=int, metavar="X", help="a Mooncake canary set's prefill instances")
    start.add_argument("--decode", type=int, metavar="Y", help="a Mooncake canary set's decode instances")
    leaf(canary, "weight", "canary weight", _canary_weight, "move the canary's weight").add_argument(
        "weight", metavar="W", type=int, help="percent of traffic, 1-99"
    )
    leaf(canary, "promote", "canary promote", _simple(operations.promote_canary), "make the canary image the image")
    leaf(canary, "rollback", "canary rollback", _simple(operations.rollback_canary), "remove the canary")

    autoscaling = group("autoscaling", "the autoscaler of a classic endpoint or of a Mooncake role")
    bounds = leaf(autoscaling, "set", "autoscaling set", _autoscaling, "set the autoscaler's bounds and metrics")
    bounds.add_argument("--min", dest="min_replicas", type=int, metavar="N", help="fewest replicas it keeps")
    bounds.add_argument("--max", dest="max_replicas", type=int, metavar="N", help="most replicas it may run")
    bounds.add_argument(
        "--metric",
        dest="metrics",
        action="append",
        default=[],
        metavar="METRIC",
        help="what it scales on: cpu:70, memory:80, queue:5, running:32, kv_cache:0.8, ttft_p90_ms:500, gpu:60, "
        "gpu_memory:80 or query:<target>:<PromQL> (repeatable; replaces the list; docs/metrics.md)",
    )
    bounds.add_argument("--role", choices=("prefill", "decode"), help="the Mooncake role (Mooncake endpoints only)")
    toggle = bounds.add_mutually_exclusive_group()
    toggle.add_argument("--enable", dest="enabled", action="store_const", const=True, help="autoscale")
    toggle.add_argument(
        "--disable", dest="enabled", action="store_const", const=False, help="stop autoscaling; the bounds stay"
    )


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
        cold_tier=arguments.cold_tier,
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


# Running one edit.


def run(arguments: argparse.Namespace) -> int:
    try:
        path: Path = arguments.stack_file or resolve_stack(arguments.stack).path
    except ProblemsError as error:  # no project here, or no such stack
        return _refused(arguments, None, error.problems)
    operation: Operation = arguments.edit(arguments)
    try:
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
