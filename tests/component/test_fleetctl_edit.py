"""fleetctl's edit commands as a user runs them, on copies of the example stacks.

An accepted edit changes exactly the lines it must; a refused one leaves the file
byte-identical and prints the validate format on stderr; a write is atomic and
refused when the file changed underneath it.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from components.validation import validate_stack
from fleetctl.cli import main
from fleetctl.stackfile import read_stack_file, stack_path
from tests.component.test_global_front import REGIONAL, regional_prod_text

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com/summarize-vllm"
EU_IMAGE = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/summarize-vllm:2026.11.1-eu"
NEW_VLLM = "vllm/vllm-openai:v0.34.0"
MODEL = "Qwen/Qwen3-0.6B"

# A stack with comments above, beside and below entries, blank lines, three quoting
# styles and a block list: the cases where a careless round trip loses or moves lines.
TEAM_STACK = """\
# Team stack: owned by inference-platform.
config:
  aws:profile: inference-platform
  inference-fleet:regions:
    us-east-1:
      vpc: {cidr: 10.20.0.0/16, availability_zones: [us-east-1a, us-east-1b]}
      cluster_access: {public_access_cidrs: [203.0.113.0/24]}
      node_groups:
        system: {instance_types: [m7i.xlarge], min_size: 2, max_size: 3, desired_size: 2}
        gpu: {instance_types: [g6e.12xlarge], min_size: 0, max_size: 4, desired_size: 1}
    eu-west-1:
      vpc: {cidr: 10.30.0.0/16, availability_zones: [eu-west-1a, eu-west-1b]}
      cluster_access: {public_access_cidrs: [203.0.113.0/24]}
      node_groups:
        system: {instance_types: [m7i.xlarge], min_size: 2, max_size: 3, desired_size: 2}
        gpu: {instance_types: [g6e.12xlarge], min_size: 0, max_size: 4, desired_size: 1}
  inference-fleet:endpoints:
    # The public chat model; keep two replicas at least.
    alpha:
      image: vllm/vllm-openai:v0.33.0   # bump with fleetctl image set
      replicas: 2
      # weights are synced before the server starts
      model_source: s3://team-models/alpha

    # Batch summaries, off-peak.
    beta:
      image: "vllm/vllm-openai:v0.33.0"
      replicas: 1
      model: Qwen/Qwen3-8B
    # Experimental: may go any time.
    gamma:
      image: 'vllm/vllm-openai:v0.33.0'
      target_regions:
        - us-east-1   # primary
      replicas: 1
      model: Qwen/Qwen3-0.6B
# end of the team stack
"""


def copy_stack(directory: Path, stack: str) -> Path:
    """A copy of an example stack (or the team stack) to edit; stacks/ is never touched."""
    path = directory / f"Pulumi.{stack}.yaml"
    if stack == "team":
        path.write_text(TEAM_STACK)
    elif stack == REGIONAL:
        path.write_text(regional_prod_text())
    else:
        shutil.copyfile(stack_path(stack), path)
    return path


def with_region_image(path: Path) -> None:
    """Give prod's summarize an explicit eu-west-1 image, as a region rewrite would."""
    text = path.read_text()
    image_line = f"      image: {ECR}:2026.11.1\n"
    assert image_line in text
    path.write_text(text.replace(image_line, f"{image_line}      region_image_uris:\n        eu-west-1: {EU_IMAGE}\n"))


def changed_lines(before: str, after: str) -> list[str]:
    """The '-' and '+' lines of the unified diff, without headers or context."""
    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))[2:]
    return [line for line in diff if not line.startswith("@@")]


def comments(text: str) -> list[str]:
    return [line[line.index("#") :] for line in text.splitlines() if "#" in line]


def fleetctl(argv: list[str], path: Path) -> int:
    return main([*argv, "--stack-file", str(path)])


ACCEPTED = {
    "endpoint add (classic)": (
        "dev",
        ["endpoint", "add", "embed", "--image", NEW_VLLM, "--replicas", "2", "--region", "us-west-2", "--model", MODEL],
        [
            "+    embed:",
            f"+      image: {NEW_VLLM}",
            "+      target_regions: [us-west-2]",
            "+      replicas: 2",
            f"+      model: {MODEL}",
        ],
    ),
    "endpoint add (weights from s3, served under a name of its own)": (
        "dev",
        [
            "endpoint",
            "add",
            "embed",
            "--image",
            NEW_VLLM,
            "--model-source",
            "s3://dev-models/qwen3-0.6b",
            "--model",
            "embed",
        ],
        [
            "+    embed:",
            f"+      image: {NEW_VLLM}",
            "+      model: embed",
            "+      model_source: s3://dev-models/qwen3-0.6b",
        ],
    ),
    "endpoint add (mooncake)": (
        "dev",
        [
            "endpoint",
            "add",
            "pd",
            "--mooncake-mode",
            "disaggregated",
            "--prefill",
            "2",
            "--decode",
            "1",
            "--protocol",
            "tcp",
            "--gpu-count",
            "1",
            "--node-group",
            "gpu",
            "--model",
            MODEL,
        ],
        [
            "+    pd:",
            "+      gpu_count: 1",
            "+      node_group: gpu",
            f"+      model: {MODEL}",
            "+      mooncake:",
            "+        mode: disaggregated",
            "+        topology: {prefill: 2, decode: 1}",
            "+        transfer:",
            "+          protocol: tcp",
        ],
    ),
    "endpoint remove": (
        "dev",
        ["endpoint", "remove", "chat-pd"],
        [
            "-    chat-pd:                        # Mooncake prefill/decode over TCP (1P1D)",
            "-      gpu_count: 2",
            "-      model: Qwen/Qwen3-8B          # downloaded from the Hugging Face Hub by each role pod",
            "-      routing: prefix               # each prompt to the engine the proxy sent its prefix (1P1D: the "
            "canary's two decodes are a choice)",
            "-      mooncake:",
            "-        mode: disaggregated",
            "-        topology: {prefill: 1, decode: 1}",
            "-        transfer:",
            "-          protocol: tcp",
            "-        roles:                      # a shape per role; prefill keeps the endpoint's (2 GPUs, TP 2)",
            "-          decode:                   # memory-bound: one GPU (TP 1; 1 divides 2, as the connector needs)",
            "-            gpu_count: 1",
            '-            args: [--max-num-seqs, "256"]',
            "-      canary:                       # a second set, chat-pd-canary-*, with 10% of the traffic",
            "-        image: vllm/vllm-openai:v0.33.0     # the release chat-pd runs (the pin): the canary tries "
            "a topology",
            "-        weight: 10",
            "-        topology: {prefill: 1, decode: 2}   # a second decode behind one prefill; its own, so resizing "
            "chat-pd leaves it alone",
        ],
    ),
    "scale": ("dev", ["scale", "assistant", "3"], ["-      replicas: 1", "+      replicas: 3"]),
    "topology set": (
        "dev",
        ["topology", "set", "chat-pd", "--prefill", "2", "--decode", "3"],
        ["-        topology: {prefill: 1, decode: 1}", "+        topology: {prefill: 2, decode: 3}"],
    ),
    "topology set (one role)": (
        "dev",
        ["topology", "set", "chat-pd", "--decode", "3"],
        ["-        topology: {prefill: 1, decode: 1}", "+        topology: {prefill: 1, decode: 3}"],
    ),
    "store configure": (
        "prod",
        [
            "store",
            "configure",
            "chat",
            "--global-segment-size",
            "32GiB",
            "--local-buffer-size",
            "0004194304",  # whole 2 MiB pages: chat's store is rdma
            "--offload",
            "none",
            "--no-cold-tier",
        ],
        [
            "-          global_segment_size: 64GiB",
            "-          local_buffer_size: 4GiB",
            "-          offload: cpu",
            "-          cold_tier_enabled: true",
            "+          global_segment_size: 32GiB",  # as the user wrote it
            '+          local_buffer_size: "0004194304"',  # digits stay a string
            "+          offload: none",
            "+          cold_tier_enabled: false",
        ],
    ),
    "stop": ("dev", ["stop", "assistant"], ["+      desired_state: stopped"]),
    "image set": (
        "prod",
        ["image", "set", "summarize", f"{ECR}:2026.12.0"],
        [f"-      image: {ECR}:2026.11.1", f"+      image: {ECR}:2026.12.0"],
    ),
    "region remove (materialises the others)": (
        REGIONAL,
        ["region", "remove", "summarize", "eu-west-1"],
        ["+      target_regions: [us-east-1]"],
    ),
    "region add (block list)": (
        "team",
        ["region", "add", "gamma", "eu-west-1"],
        ["+        - eu-west-1"],
    ),
    "canary start": (
        "dev",
        ["canary", "start", "assistant", "--image", NEW_VLLM, "--weight", "5", "--replicas", "1"],
        ["+      canary:", f"+        image: {NEW_VLLM}", "+        weight: 5", "+        replicas: 1"],
    ),
    "canary weight": ("prod", ["canary", "weight", "summarize", "25"], ["-        weight: 10", "+        weight: 25"]),
    "canary promote": (
        "prod",
        ["canary", "promote", "summarize"],
        [
            f"-      image: {ECR}:2026.11.1",
            f"+      image: {ECR}:2026.11.2",
            "-      canary:",
            f"-        image: {ECR}:2026.11.2",
            "-        weight: 10",
            "-        replicas: 1",
        ],
    ),
    "canary rollback": (
        "prod",
        ["canary", "rollback", "summarize"],
        ["-      canary:", f"-        image: {ECR}:2026.11.2", "-        weight: 10", "-        replicas: 1"],
    ),
}


@pytest.mark.parametrize(("stack", "argv", "expected"), ACCEPTED.values(), ids=ACCEPTED.keys())
def test_an_accepted_edit_changes_exactly_the_expected_lines_and_keeps_every_other_comment(
    stack: str, argv: list[str], expected: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path, stack)
    before = path.read_text()
    assert fleetctl(argv, path) == 0
    out, err = capsys.readouterr()
    after = path.read_text()
    assert err == ""
    assert "written" in out.splitlines()[0]
    assert changed_lines(before, after) == expected
    removed = "\n".join(line for line in expected if line.startswith("-"))
    assert comments(after) == [comment for comment in comments(before) if comment not in removed]
    validate_stack(read_stack_file(path).project_config, stack=stack)
    assert sorted(tmp_path.iterdir()) == [path]


def test_start_after_stop_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = copy_stack(tmp_path, "dev")
    before = path.read_bytes()
    assert fleetctl(["stop", "assistant"], path) == 0
    assert fleetctl(["start", "assistant"], path) == 0
    assert path.read_bytes() == before


def test_starting_a_running_endpoint_writes_nothing_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path, "dev")
    before = path.read_bytes()
    assert fleetctl(["start", "assistant"], path) == 0
    assert path.read_bytes() == before
    out = capsys.readouterr().out
    assert "no change" in out
    assert "assistant is already running" in out


def test_adding_a_region_to_an_endpoint_that_serves_every_region_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path, "prod")
    before = path.read_bytes()
    assert fleetctl(["region", "add", "summarize", "eu-west-1"], path) == 0
    assert path.read_bytes() == before
    assert "already serves every region of the stack" in capsys.readouterr().out


def test_region_add_after_remove_restores_the_region_in_the_list(tmp_path: Path) -> None:
    path = copy_stack(tmp_path, REGIONAL)
    assert fleetctl(["region", "remove", "summarize", "eu-west-1"], path) == 0
    one_region = path.read_text()
    assert fleetctl(["region", "add", "summarize", "eu-west-1"], path) == 0
    assert changed_lines(one_region, path.read_text()) == [
        "-      target_regions: [us-east-1]",
        "+      target_regions: [us-east-1, eu-west-1]",
    ]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["image", "set", "summarize", f"{ECR}:2026.12.0"],
            [
                f"-      image: {ECR}:2026.11.1",
                "-      region_image_uris:",
                f"-        eu-west-1: {EU_IMAGE}",
                f"+      image: {ECR}:2026.12.0",
            ],
        ),
        (
            ["canary", "promote", "summarize"],
            [
                f"-      image: {ECR}:2026.11.1",
                "-      region_image_uris:",
                f"-        eu-west-1: {EU_IMAGE}",
                f"+      image: {ECR}:2026.11.2",
                "-      canary:",
                f"-        image: {ECR}:2026.11.2",
                "-        weight: 10",
                "-        replicas: 1",
            ],
        ),
        (
            ["region", "remove", "summarize", "eu-west-1"],
            [
                "-      region_image_uris:",
                f"-        eu-west-1: {EU_IMAGE}",
                "+      target_regions: [us-east-1]",
            ],
        ),
    ],
    ids=["image set", "canary promote", "region remove"],
)
def test_stale_per_region_images_are_dropped(argv: list[str], expected: list[str], tmp_path: Path) -> None:
    path = copy_stack(tmp_path, REGIONAL)
    with_region_image(path)
    before = path.read_text()
    assert fleetctl(argv, path) == 0
    assert changed_lines(before, path.read_text()) == expected


TEAM_EDITS = {
    "removing a middle endpoint keeps the comment above the next one": (
        ["endpoint", "remove", "beta"],
        [
            "-    # Batch summaries, off-peak.",
            "-    beta:",
            '-      image: "vllm/vllm-openai:v0.33.0"',
            "-      replicas: 1",
            "-      model: Qwen/Qwen3-8B",
        ],
    ),
    "removing the first endpoint keeps the comment above the second": (
        ["endpoint", "remove", "alpha"],
        [
            "-    # The public chat model; keep two replicas at least.",
            "-    alpha:",
            "-      image: vllm/vllm-openai:v0.33.0   # bump with fleetctl image set",
            "-      replicas: 2",
            "-      # weights are synced before the server starts",
            "-      model_source: s3://team-models/alpha",
            "-",
        ],
    ),
    "removing the last endpoint keeps the comment that ends the file": (
        ["endpoint", "remove", "gamma"],
        [
            "-    # Experimental: may go any time.",
            "-    gamma:",
            "-      image: 'vllm/vllm-openai:v0.33.0'",
            "-      target_regions:",
            "-        - us-east-1   # primary",
            "-      replicas: 1",
            "-      model: Qwen/Qwen3-0.6B",
        ],
    ),
    "a new key goes above the blank line and comment of the next endpoint": (
        ["stop", "alpha"],
        ["+      desired_state: stopped"],
    ),
    "a new endpoint goes above the comment that ends the file": (
        ["endpoint", "add", "delta", "--image", NEW_VLLM, "--model", "Qwen/Qwen3-8B"],
        ["+    delta:", f"+      image: {NEW_VLLM}", "+      model: Qwen/Qwen3-8B"],
    ),
    "double quotes are kept": (
        ["image", "set", "beta", NEW_VLLM],
        ['-      image: "vllm/vllm-openai:v0.33.0"', f'+      image: "{NEW_VLLM}"'],
    ),
    "single quotes are kept": (
        ["image", "set", "gamma", NEW_VLLM],
        ["-      image: 'vllm/vllm-openai:v0.33.0'", f"+      image: '{NEW_VLLM}'"],
    ),
    "an end-of-line comment stays on its line": (
        ["image", "set", "alpha", NEW_VLLM],
        [
            "-      image: vllm/vllm-openai:v0.33.0   # bump with fleetctl image set",
            f"+      image: {NEW_VLLM}   # bump with fleetctl image set",
        ],
    ),
}


@pytest.mark.parametrize(("argv", "expected"), TEAM_EDITS.values(), ids=TEAM_EDITS.keys())
def test_comments_blank_lines_and_quoting_survive_edits(argv: list[str], expected: list[str], tmp_path: Path) -> None:
    path = copy_stack(tmp_path, "team")
    assert fleetctl(argv, path) == 0
    assert changed_lines(TEAM_STACK, path.read_text()) == expected


def test_removing_a_block_list_item_keeps_the_other_items_and_their_comments(tmp_path: Path) -> None:
    path = copy_stack(tmp_path, "team")
    assert fleetctl(["region", "add", "gamma", "eu-west-1"], path) == 0
    two_regions = path.read_text()
    assert fleetctl(["region", "remove", "gamma", "eu-west-1"], path) == 0
    assert changed_lines(two_regions, path.read_text()) == ["-        - eu-west-1"]
    assert path.read_text() == TEAM_STACK


def test_an_indentation_of_four_and_flush_list_items_is_kept(tmp_path: Path) -> None:
    text = (
        stack_path("dev")
        .read_text()
        .replace('args: ["--model", "/models/qwen3-8b"]', "args:\n      - --model\n      - /models/qwen3-8b")
    )
    four = "\n".join(" " * (2 * (len(line) - len(line.lstrip(" ")))) + line.lstrip(" ") for line in text.split("\n"))
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(four)
    assert fleetctl(["canary", "start", "assistant", "--image", NEW_VLLM, "--weight", "5"], path) == 0
    assert changed_lines(four, path.read_text()) == [
        "+            canary:",
        f"+                image: {NEW_VLLM}",
        "+                weight: 5",
    ]


# Refusals: the file is left byte for byte, the errors are in the validate format.

REFUSED = {
    "scale a Mooncake endpoint": ("dev", ["scale", "chat-pd", "2"], "use topology"),
    "scale an autoscaled endpoint": ("prod", ["scale", "summarize", "2"], "change min/max or disable autoscaling"),
    "scale below zero": ("dev", ["scale", "assistant", "-1"], "replicas: must be an integer >= 0, got -1"),
    "scale beyond the node group": (
        "dev",
        ["scale", "assistant", "13"],
        "regions.us-west-2.node_groups.gpu: cannot hold the 25 pods that can only run on it",
    ),
    "scale an unknown endpoint": ("dev", ["scale", "nope", "1"], "endpoints.nope: no such endpoint"),
    "topology of an autoscaled role": (
        "prod",
        ["topology", "set", "chat", "--decode", "1"],
        "chat's decode role is autoscaled (1 to 2 replicas), so its autoscaler owns its count",
    ),
    "topology of a classic endpoint": ("dev", ["topology", "set", "assistant", "--prefill", "2"], "classic endpoint"),
    "topology of zero": (
        "dev",
        ["topology", "set", "chat-pd", "--prefill", "0"],
        # Placed where the file on disk holds the count (the refused edit leaves it there).
        "Pulumi.dev.yaml:49:20: endpoints.chat-pd.mooncake.topology.prefill: must be an integer in [1, 1000], "
        "got 0 (a number)",
    ),
    "topology that makes the canary set its primary": (
        "dev",
        ["topology", "set", "chat-pd", "--decode", "2"],  # the canary set is 1P2D on the same image
        "endpoints.chat-pd.canary.image: is the endpoint's own image (vllm/vllm-openai:v0.33.0) and the canary "
        "set's topology is the endpoint's",
    ),
    "topology over 1000": ("dev", ["topology", "set", "chat-pd", "--decode", "1001"], "in [1, 1000], got 1001"),
    "topology with no counts": ("dev", ["topology", "set", "chat-pd"], "nothing to set"),
    "store sizes in SI units": (
        "prod",
        ["store", "configure", "chat", "--global-segment-size", "4GB"],
        "store.global_segment_size: '4GB' is ambiguous",
    ),
    "negative store size": ("prod", ["store", "configure", "chat", "--local-buffer-size", "-1"], "local_buffer_size"),
    "store disabled in mode both": (
        "prod",
        ["store", "configure", "chat", "--disable"],
        "must be true for mode 'both'",
    ),
    "store disabled in mode store": (
        "dev",
        ["store", "configure", "kv-cache", "--disable"],
        "store.enabled: must be true for mode 'store'",
    ),
    "store enabled in mode disaggregated": (
        "dev",
        ["store", "configure", "chat-pd", "--enable"],
        "mode 'disaggregated' runs no store",
    ),
    "cold tier without the store": (
        "prod",
        ["store", "configure", "chat", "--cold-tier", "--disable"],
        "--cold-tier needs the store enabled",
    ),
    "store of a classic endpoint": (
        "dev",
        ["store", "configure", "assistant", "--offload", "disk"],
        "classic endpoint",
    ),
    "store with nothing to configure": ("prod", ["store", "configure", "chat"], "nothing to configure"),
    "stop with a canary": ("prod", ["stop", "summarize"], "canary: is allowed only while desired_state is 'running'"),
    "image set to blank": ("dev", ["image", "set", "assistant", " "], "image: must not be empty"),
    "image set to no image reference": (
        "dev",
        ["image", "set", "assistant", "not an image!!"],
        "image: must be an image reference [registry[:port]/]repository[:tag][@digest]",
    ),
    "canary of no image reference": (
        "dev",
        ["canary", "start", "assistant", "--image", "Summarize:2026", "--weight", "5"],
        "canary.image: must be an image reference",
    ),
    "region add of an undeclared region": (
        "dev",
        ["region", "add", "assistant", "eu-west-1"],
        "'eu-west-1' is not a region of this stack",
    ),
    "region remove of the only region": ("dev", ["region", "remove", "assistant", "us-west-2"], "is the last region"),
    "region remove of the last listed region": (
        "team",
        ["region", "remove", "gamma", "us-east-1"],
        "remove the endpoint instead",
    ),
    "canary replicas on a Mooncake endpoint": (
        "dev",
        ["canary", "start", "kv-cache", "--image", NEW_VLLM, "--weight", "5", "--replicas", "2"],
        "endpoints.kv-cache.canary.replicas: is for a classic endpoint's canary; a Mooncake canary is a whole "
        "prefill/decode/proxy set",
    ),
    "canary topology of a store endpoint": (
        "dev",
        ["topology", "set", "kv-cache", "--canary", "--prefill", "2"],
        "mode 'store' has no prefill/decode topology",
    ),
    "a second canary": (
        "prod",
        ["canary", "start", "summarize", "--image", NEW_VLLM, "--weight", "5"],
        "canary: already exists",
    ),
    "canary weight of 100": (
        "dev",
        ["canary", "start", "assistant", "--image", NEW_VLLM, "--weight", "100"],
        "canary.weight: must be an integer in [1, 99], got 100",
    ),
    "canary weight of 0": ("prod", ["canary", "weight", "summarize", "0"], "in [1, 99], got 0"),
    "canary weight without a canary": ("dev", ["canary", "weight", "assistant", "5"], "has no canary"),
    "endpoint add of an existing name": (
        "dev",
        ["endpoint", "add", "assistant", "--image", NEW_VLLM],
        "already exists",
    ),
    "endpoint add without an image": ("dev", ["endpoint", "add", "embed"], "image: is required for a classic endpoint"),
    "endpoint add without a model": (
        "dev",
        ["endpoint", "add", "embed", "--image", NEW_VLLM],
        "error: endpoints.embed.model: is required: say what the endpoint serves with model",
    ),
    "endpoint add of a model that is no Hub id": (
        "dev",
        ["endpoint", "add", "embed", "--image", NEW_VLLM, "--model", "qwen3"],
        "error: endpoints.embed.model: without model_source or model_path the server downloads the model from the "
        "Hugging Face Hub, so it must be a Hub id org/name",
    ),
    "endpoint add with an invalid name": (
        "dev",
        ["endpoint", "add", "Embed_1", "--image", NEW_VLLM],
        "must be a DNS-1035 label",
    ),
    "endpoint add of topology without a mode": (
        "dev",
        ["endpoint", "add", "pd", "--prefill", "2"],
        "--prefill needs --mooncake-mode",
    ),
    "endpoint add of rdma without EFA": (
        "dev",
        [
            "endpoint",
            "add",
            "pd",
            "--mooncake-mode",
            "both",
            "--protocol",
            "rdma",
            "--node-group",
            "gpu",
            "--model",
            MODEL,
        ],
        "'rdma' needs an EFA node group",
    ),
}


@pytest.mark.parametrize(("stack", "argv", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_a_refused_edit_leaves_the_file_byte_identical(
    stack: str, argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path, stack)
    before = path.read_bytes()
    assert fleetctl(argv, path) == 1
    out, err = capsys.readouterr()
    assert path.read_bytes() == before
    assert sorted(tmp_path.iterdir()) == [path]
    assert out == ""
    assert message in err
    assert all(line.startswith("error: ") for line in err.splitlines())


def test_a_rejected_edit_prints_what_validate_would_print_for_the_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path, "dev")
    assert fleetctl(["topology", "set", "chat-pd", "--prefill", "0"], path) == 1
    refused = capsys.readouterr().err
    path.write_text(path.read_text().replace("{prefill: 1, decode: 1}", "{prefill: 0, decode: 1}", 1))
    assert main(["validate", "--stack-file", str(path)]) == 1
    assert capsys.readouterr().err == refused


REFORMATTED = {
    # A round trip re-indents the odd block out, or gives every line the same line end.
    "two indentation steps": (
        "      ingress:\n        scheme: internal",
        "      ingress:\n            scheme: internal",
    ),
    "mixed line ends": ("      cold_tier:\n", "      cold_tier:\r\n"),
}


@pytest.mark.parametrize(("old", "new"), REFORMATTED.values(), ids=REFORMATTED.keys())
def test_a_file_that_would_be_reformatted_is_refused(
    old: str, new: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "Pulumi.dev.yaml"
    data = stack_path("dev").read_bytes().replace(old.encode(), new.encode())
    path.write_bytes(data)
    assert fleetctl(["scale", "assistant", "2"], path) == 1
    assert path.read_bytes() == data
    assert "cannot be edited without reformatting lines the edit does not touch" in capsys.readouterr().err


def test_an_unreadable_stack_file_is_reported_like_validate_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fleetctl(["scale", "assistant", "2"], tmp_path / "Pulumi.missing.yaml") == 1
    assert capsys.readouterr().err.startswith("error: ")


# Dry runs and output.


def test_dry_run_prints_the_diff_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = copy_stack(tmp_path, "dev")
    before = path.read_bytes()
    assert fleetctl(["scale", "assistant", "3", "--dry-run"], path) == 0
    out = capsys.readouterr().out
    assert path.read_bytes() == before
    assert sorted(tmp_path.iterdir()) == [path]
    assert "dry run, nothing written" in out.splitlines()[0]
    assert "-      replicas: 1\n+      replicas: 3\n" in out


def test_dry_run_of_a_named_stack_leaves_stacks_untouched(capsys: pytest.CaptureFixture[str]) -> None:
    before = stack_path("dev").read_bytes()
    assert (
        main(["canary", "start", "assistant", "--image", NEW_VLLM, "--weight", "5", "--stack", "dev", "--dry-run"]) == 0
    )
    assert stack_path("dev").read_bytes() == before
    out = capsys.readouterr().out
    assert "--- a/" in out
    assert "+      canary:" in out


def test_json_output_lists_each_change_for_scripts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = copy_stack(tmp_path, "prod")
    assert fleetctl(["canary", "promote", "summarize", "--output", "json"], path) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["stack"] == "prod"
    assert record["command"] == "canary promote"
    assert record["written"] is True
    assert record["dry_run"] is False
    assert record["changes"] == [
        {
            "path": "endpoints.summarize.image",
            "action": "changed",
            "before": f"{ECR}:2026.11.1",
            "after": f"{ECR}:2026.11.2",
        },
        {
            "path": "endpoints.summarize.canary",
            "action": "removed",
            "before": {"image": f"{ECR}:2026.11.2", "weight": 10, "replicas": 1},
        },
    ]


def test_table_output_shows_each_change_before_and_after(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = copy_stack(tmp_path, "prod")
    assert fleetctl(["canary", "weight", "summarize", "25"], path) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("Pulumi.prod.yaml: canary weight summarize: written")
    assert lines[1].split() == ["path", "before", "after"]
    assert lines[2].split() == ["endpoints.summarize.canary.weight", "10", "25"]


def test_an_edit_without_a_stack_outside_a_project_refuses_and_says_how_to_choose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PWD", str(tmp_path))
    assert main(["scale", "assistant", "2"]) == 1
    assert "--stack-file PATH" in capsys.readouterr().err


# Writing: atomic, mode kept, refused on a concurrent change.


def test_the_file_mode_is_kept(tmp_path: Path) -> None:
    path = copy_stack(tmp_path, "dev")
    path.chmod(0o640)
    assert fleetctl(["scale", "assistant", "2"], path) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


@pytest.mark.parametrize("mode", [0o444, 0o400], ids=["0444", "0400"])
def test_a_read_only_stack_file_is_refused_and_left_as_it_was(
    tmp_path: Path, mode: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """As an editor or the shell would (root included: a file without any write bit is not overwritten)."""
    path = copy_stack(tmp_path, "dev")
    before = path.read_bytes()
    path.chmod(mode)
    assert fleetctl(["scale", "assistant", "2"], path) == 1
    err = capsys.readouterr().err
    assert f"is read-only (mode {mode:04o}); nothing was written" in err
    assert path.read_bytes() == before
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert sorted(tmp_path.iterdir()) == [path]
    assert fleetctl(["scale", "assistant", "2", "--dry-run"], path) == 0  # reading it is fine


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another owner needs root")
def test_the_owner_and_group_are_kept(tmp_path: Path) -> None:
    path = copy_stack(tmp_path, "dev")
    os.chown(path, 4321, 8765)
    assert fleetctl(["scale", "assistant", "2"], path) == 0
    assert (path.stat().st_uid, path.stat().st_gid) == (4321, 8765)
    assert "replicas: 2" in path.read_text()


def test_a_file_whose_owner_cannot_be_given_is_rewritten_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user who may write a file of another owner or group: the file's own inode is rewritten."""
    path = copy_stack(tmp_path, "dev")
    inode = path.stat().st_ino
    monkeypatch.setattr("fleetctl.edit.document._same_owner", lambda temporary, status: False)
    assert fleetctl(["scale", "assistant", "2"], path) == 0
    assert path.stat().st_ino == inode
    assert "replicas: 2" in path.read_text()
    assert sorted(tmp_path.iterdir()) == [path]


def test_a_symlinked_stack_file_stays_a_symlink(tmp_path: Path) -> None:
    target = copy_stack(tmp_path, "dev")
    link = tmp_path / "link" / "Pulumi.dev.yaml"
    link.parent.mkdir()
    link.symlink_to(target)
    assert fleetctl(["scale", "assistant", "2"], link) == 0
    assert link.is_symlink()
    assert "replicas: 2" in target.read_text()


def test_a_failed_rename_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path, "dev")
    before = path.read_bytes()

    def failing_replace(source: str, destination: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    assert fleetctl(["scale", "assistant", "2"], path) == 1
    assert path.read_bytes() == before
    assert sorted(tmp_path.iterdir()) == [path]
    assert "cannot write the stack file, left as it was" in capsys.readouterr().err


def test_an_interrupt_between_write_and_rename_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = copy_stack(tmp_path, "dev")
    before = path.read_bytes()
    written: list[str] = []

    def interrupted_replace(source: str, destination: Path) -> None:
        written.append(Path(source).read_text())
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted_replace)
    assert fleetctl(["scale", "assistant", "2"], path) == 130  # Ctrl-C: one line and 128 + SIGINT
    assert path.read_bytes() == before
    assert sorted(tmp_path.iterdir()) == [path]
    assert "replicas: 2" in written[0]  # the new content was complete before the rename


def test_a_file_changed_during_the_edit_is_refused_and_the_other_change_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path, "dev")
    concurrent = path.read_text().replace("context_length: 32768", "context_length: 65536")

    def validation_while_someone_edits(*args: object, **kwargs: object) -> object:
        path.write_text(concurrent)  # another fleetctl, or an editor, saves meanwhile
        return validate_stack(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("fleetctl.edit.document.validate_stack", validation_while_someone_edits)
    assert fleetctl(["scale", "assistant", "2"], path) == 1
    err = capsys.readouterr().err
    assert path.read_text() == concurrent
    assert sorted(tmp_path.iterdir()) == [path]
    assert err.startswith(f"error: {path}: changed on disk")
    assert "re-run" in err


# The property: whatever sequence of edits is accepted, the file validates.

STACK_ENDPOINTS = {"dev": ["assistant", "chat-pd"], "prod": ["chat", "summarize"]}
REGIONS = st.sampled_from(["us-west-2", "us-east-1", "eu-west-1", "ap-south-1"])
COUNTS = st.integers(min_value=-1, max_value=6).map(str)
IMAGES = st.sampled_from([NEW_VLLM, f"{ECR}:2027.1.0", " "])
SIZES = st.sampled_from(["4GiB", "1073741824", "0", "4GB", "007"])
MODELS = st.sampled_from([[], ["--model", MODEL], ["--model", "qwen3"], ["--model-source", "s3://dev-models/x"]])


def _flag(name: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    return st.one_of(st.just([]), values.map(lambda value: [name, value]))


def edits(stack: str) -> st.SearchStrategy[list[str]]:
    """Every edit command, on the stack's endpoints (and one new name), valid or not."""
    names = st.sampled_from([*STACK_ENDPOINTS[stack], "embed"])
    return st.one_of(
        st.tuples(names, COUNTS).map(lambda t: ["scale", *t]),
        st.tuples(names, _flag("--prefill", COUNTS), _flag("--decode", COUNTS)).map(
            lambda t: ["topology", "set", t[0], *t[1], *t[2]]
        ),
        st.tuples(
            names,
            _flag("--global-segment-size", SIZES),
            _flag("--offload", st.sampled_from(["cpu", "disk", "none"])),
            st.sampled_from([[], ["--cold-tier"], ["--no-cold-tier"], ["--enable"], ["--disable"]]),
        ).map(lambda t: ["store", "configure", t[0], *t[1], *t[2], *t[3]]),
        st.tuples(st.sampled_from(["stop", "start"]), names).map(list),
        st.tuples(names, IMAGES).map(lambda t: ["image", "set", *t]),
        st.tuples(st.sampled_from(["add", "remove"]), names, REGIONS).map(lambda t: ["region", *t]),
        st.tuples(names, IMAGES, st.sampled_from(["0", "5", "50", "100"])).map(
            lambda t: ["canary", "start", t[0], "--image", t[1], "--weight", t[2]]
        ),
        st.tuples(names, st.sampled_from(["1", "30", "99", "100"])).map(lambda t: ["canary", "weight", *t]),
        st.tuples(st.sampled_from(["promote", "rollback"]), names).map(lambda t: ["canary", *t]),
        st.tuples(names, IMAGES, _flag("--replicas", COUNTS), MODELS).map(
            lambda t: ["endpoint", "add", t[0], "--image", t[1], *t[2], *t[3]]
        ),
        names.map(lambda name: ["endpoint", "remove", name]),
    )


STACKS_AND_EDITS = st.sampled_from(["dev", "prod"]).flatmap(
    lambda stack: st.tuples(st.just(stack), st.lists(edits(stack), min_size=1, max_size=6))
)


@given(case=STACKS_AND_EDITS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_sequence_of_accepted_edits_leaves_a_file_that_validates(case: tuple[str, list[list[str]]]) -> None:
    stack, sequence = case
    with tempfile.TemporaryDirectory() as directory:
        path = copy_stack(Path(directory), stack)
        header = path.read_text().splitlines()[0]
        for argv in sequence:
            before = path.read_bytes()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = fleetctl(argv, path)
            event(f"{argv[0]}: {'accepted' if code == 0 else 'refused'}")
            if code == 0:
                validate_stack(read_stack_file(path).project_config, stack=stack)
            else:
                assert path.read_bytes() == before, argv
            assert os.listdir(directory) == [path.name]
            assert path.read_text().splitlines()[0] == header


def test_table_output_shows_a_removed_mapping_key_by_key_never_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_stack(tmp_path, "prod")
    assert fleetctl(["canary", "promote", "summarize"], path) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert rows == [
        ["endpoints.summarize.image", f'"{ECR}:2026.11.1"', f'"{ECR}:2026.11.2"'],
        ["endpoints.summarize.canary.image", f'"{ECR}:2026.11.2"', "-"],
        ["endpoints.summarize.canary.weight", "10", "-"],
        ["endpoints.summarize.canary.replicas", "1", "-"],
    ]
