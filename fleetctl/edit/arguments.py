"""The grammar of fleetctl's edit commands: their parsers, and nothing the edits need to run, so
``fleetctl --help`` builds them without importing the models or the SDKs (fleetctl/edit/commands.py
runs an edit)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

COMMANDS = ("endpoint", "scale", "topology", "store", "stop", "start", "image", "region", "canary", "autoscaling")
"""Top-level fleetctl commands that edit a stack file."""

if TYPE_CHECKING:
    Subcommands = argparse._SubParsersAction[argparse.ArgumentParser]


def _options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    which = options.add_mutually_exclusive_group()
    which.add_argument(
        "--stack",
        metavar="NAME",
        help="edit the stack file of stack NAME in the Pulumi project here "
        "(default: the stack `pulumi stack select` chose, or PULUMI_STACK)",
    )
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

    def leaf(group: Subcommands, name: str, label: str, help_text: str) -> argparse.ArgumentParser:
        parser = group.add_parser(name, parents=[options], help=help_text, description=help_text)
        parser.set_defaults(edit_label=label)
        parser.add_argument("name", metavar="NAME", help="the endpoint")
        return parser

    def group(name: str, help_text: str) -> Subcommands:
        parser = commands.add_parser(name, help=help_text, description=help_text)
        return parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    endpoint = group("endpoint", "add or remove an endpoint")
    add = leaf(endpoint, "add", "endpoint add", "add an endpoint (deploy)")
    add.add_argument(
        "--image", metavar="IMAGE", help="server image; optional with --mooncake-mode (the pinned vLLM image)"
    )
    add.add_argument(
        "--framework", choices=("vllm", "sglang", "tgi", "triton"), help="the server's framework (default vllm)"
    )
    add.add_argument("--region", action="append", default=[], metavar="REGION", help="serve only here (repeatable)")
    add.add_argument("--replicas", type=int, metavar="N", help="pods of a classic endpoint")
    add.add_argument("--gpu-count", type=int, metavar="N", help="GPUs per pod")
    add.add_argument("--node-group", metavar="GROUP", help="node group to schedule on")
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
    add.add_argument("--prefill", type=int, metavar="X", help="prefill instances (with --mooncake-mode; default 1)")
    add.add_argument("--decode", type=int, metavar="Y", help="decode instances (with --mooncake-mode; default 1)")
    add.add_argument("--protocol", choices=("rdma", "tcp"), help="KV transfer protocol (default rdma)")
    add.add_argument(
        "--cold-tier", action=argparse.BooleanOptionalAction, help="write KV to the region's cold-tier bucket"
    )
    leaf(endpoint, "remove", "endpoint remove", "remove an endpoint (delete)")

    scale = leaf(commands, "scale", "scale", "set the replicas of a classic endpoint")
    scale.add_argument("replicas", metavar="N", type=int, help="pods to run")

    topology = group("topology", "the prefill/decode counts of a Mooncake endpoint")
    topology_set = leaf(topology, "set", "topology set", "set the XpYd topology")
    topology_set.add_argument("--prefill", type=int, metavar="X", help="prefill instances (kept when not given)")
    topology_set.add_argument("--decode", type=int, metavar="Y", help="decode instances (kept when not given)")
    topology_set.add_argument(
        "--canary", action="store_true", help="set the canary set's topology (canary.topology) instead"
    )

    store = group("store", "the Mooncake KV-cache store of an endpoint")
    configure = leaf(store, "configure", "store configure", "configure the store")
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

    leaf(commands, "stop", "stop", "keep the endpoint's config, run zero pods")
    leaf(commands, "start", "start", "run the configured counts again")

    image = group("image", "the image of an endpoint")
    leaf(image, "set", "image set", "set the image (drops region_image_uris)").add_argument(
        "image", metavar="IMAGE", help="the image reference, e.g. vllm/vllm-openai:v0.34.0"
    )

    region = group("region", "the regions an endpoint serves; a region's traffic dial on the global address")
    leaf(region, "add", "region add", "serve in one more region").add_argument(
        "region", metavar="REGION", help="a region of the stack, e.g. eu-west-1"
    )
    leaf(region, "remove", "region remove", "stop serving in a region").add_argument(
        "region", metavar="REGION", help="a region the endpoint serves"
    )
    for action, help_text in (
        (
            "drain",
            "take a region out of the global address's normal routing (its traffic dial to 0; "
            "it still takes failover traffic while no other region is healthy)",
        ),
        ("undrain", "put a drained region back into the global address's rotation (dial 100)"),
    ):
        parser = region.add_parser(action, parents=[options], help=help_text, description=help_text)
        parser.set_defaults(edit_label=f"region {action}")
        parser.add_argument("name", metavar="REGION", help="a region of the stack, e.g. eu-west-1")
        parser.add_argument(
            "--endpoint",
            metavar="NAME",
            help="only this endpoint in the region, on its own listener (global.endpoints.NAME.port)",
        )

    canary = group("canary", "a weighted canary (of a Mooncake endpoint: a whole second set, <name>-canary-*)")
    start = leaf(canary, "start", "canary start", "start a canary")
    start.add_argument("--image", required=True, metavar="IMAGE", help="the canary's image reference")
    start.add_argument("--weight", required=True, type=int, metavar="W", help="percent of traffic, 1-99")
    start.add_argument("--replicas", type=int, metavar="N", help="canary pods of a classic endpoint (default 1)")
    start.add_argument("--prefill", type=int, metavar="X", help="a Mooncake canary set's prefill instances")
    start.add_argument("--decode", type=int, metavar="Y", help="a Mooncake canary set's decode instances")
    leaf(canary, "weight", "canary weight", "move the canary's weight").add_argument(
        "weight", metavar="W", type=int, help="percent of traffic, 1-99"
    )
    leaf(canary, "promote", "canary promote", "make the canary image the image")
    leaf(canary, "rollback", "canary rollback", "remove the canary")

    autoscaling = group("autoscaling", "the autoscaler of a classic endpoint or of a Mooncake role")
    bounds = leaf(autoscaling, "set", "autoscaling set", "set the autoscaler's bounds and metrics")
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
