"""Image references are held to the OCI distribution reference grammar wherever config takes one
(endpoint image, canary image, region_image_uris, the Mooncake proxy image), and so are the pins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.catalog import pins
from components.render.mooncake_store import master_stateful_set
from components.spec import Problem, SpecError, parse_stack_config
from components.spec.images import is_image_reference

from .stack_builders import REGION, placed_endpoint, with_classic, with_mooncake

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "0123456789abcdef" * 4

GOOD = [
    "nginx",
    "vllm/vllm-openai:v0.33.0",
    "vllm/vllm-openai:v0.33.0-efa",
    "docker.io/kvcacheai/mooncake:0.3.13.post1",
    "public.ecr.aws/aws-cli/aws-cli:2.36.26",
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/summarize-vllm:2026.11.1",
    "localhost:5000/team/model:latest",
    "registry.example.com:443/a/b/c/d:tag",
    "[fd00::1]:5000/model:1",
    "ghcr.io/org__team/model--server/v1.x_y:TAG_1.2-rc3",
    f"registry.k8s.io/autoscaling/cluster-autoscaler@{DIGEST}",
    f"vllm/vllm-openai:v0.33.0@{DIGEST}",
    "Registry.Example.COM/model",  # the domain may be upper case, the path may not
    "x:" + "t" * 128,
    "a" * 255,
]
BAD = [
    "not an image!!",
    "vllm/vllm-openai:",
    "vllm/vllm-openai:-rc",
    "vllm/vllm-openai:v1:v2",
    "vllm//vllm-openai",
    "/vllm/vllm-openai",
    "vllm/vllm-openai/",
    "library/Nginx",
    "Nginx",
    "-nginx",
    "nginx-",
    "ng..inx",
    "ng___inx",
    "https://registry.example.com/model",
    "registry.example.com:port/model",
    "vllm/vllm openai",
    "x:" + "t" * 129,
    "x@sha256:abc",
    "x@md5",
    "x@sha256",
    "a" * 256,
    "vllm/vllm-openai:v0.33.0\n--privileged",
]


@pytest.mark.parametrize("reference", GOOD)
def test_references_of_the_grammar_are_accepted(reference: str) -> None:
    assert is_image_reference(reference)


@pytest.mark.parametrize("reference", BAD)
def test_anything_else_is_refused(reference: str) -> None:
    assert not is_image_reference(reference)


def problems(config: dict[str, Any]) -> tuple[Problem, ...]:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(config)
    return caught.value.problems


@pytest.mark.parametrize(
    ("config", "path"),
    [
        (with_classic({"image": "not an image!!"}), "endpoints.chat.image"),
        (with_classic({"canary": {"image": "Summarize:2026"}}), "endpoints.chat.canary.image"),
        (
            with_classic({"region_image_uris": {REGION: "registry.example.com:port/model"}}),
            f"endpoints.chat.region_image_uris.{REGION}",
        ),
        (with_mooncake({"image": "vllm/vllm-openai:"}), "endpoints.chat.image"),
        (with_mooncake({"mooncake": {"proxy": {"image": "proxy image"}}}), "endpoints.chat.mooncake.proxy.image"),
    ],
    ids=["endpoint", "canary", "region_image_uris", "mooncake", "proxy"],
)
def test_every_image_field_refuses_what_is_no_reference_naming_the_grammar(config: dict[str, Any], path: str) -> None:
    (problem,) = problems(config)
    assert problem.path == path
    assert "must be an image reference [registry[:port]/]repository[:tag][@digest]" in problem.message


def test_a_reference_keeps_being_trimmed_as_before() -> None:
    spec = parse_stack_config(with_classic({"image": "  vllm/vllm-openai:v0.34.0\n"}))
    assert spec.endpoints["chat"].image == "vllm/vllm-openai:v0.34.0"


def test_every_pinned_image_is_a_reference() -> None:
    pinned = pins()
    images = [pinned.vllm.image, pinned.vllm.efa_image, pinned.tools.aws_cli, pinned.mooncake.master_image]
    autoscaler = pinned.charts.cluster_autoscaler.images.values()
    images += [f"registry.k8s.io/autoscaling/cluster-autoscaler:{tag}" for tag in autoscaler]
    assert [image for image in images if not is_image_reference(image)] == []


def test_the_store_master_runs_the_mooncake_release_the_tests_run() -> None:
    """The master image's tag is the wheel the end-to-end tests start as the master."""
    constraints = (ROOT / "constraints.txt").read_text().splitlines()
    (pin,) = [line for line in constraints if line.startswith("mooncake-transfer-engine-non-cuda==")]
    assert pins().mooncake.master_image == f"docker.io/kvcacheai/mooncake:{pin.split('==')[1]}"


def master(config: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = master_stateful_set(placed_endpoint(config), 1)["spec"]["template"]["spec"][
        "containers"
    ][0]
    return container


@pytest.mark.parametrize("image", [None, "vllm/vllm-openai:v0.33.0-efa"])
def test_beside_a_pinned_vllm_image_the_master_runs_mooncakes_own_image_as_its_user(image: str | None) -> None:
    config = with_mooncake({"mooncake": {"mode": "both"}, **({"image": image} if image else {})})
    container = master(config)
    assert container["image"] == pins().mooncake.master_image
    assert container["command"] == ["mooncake_master"]
    assert container["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["runAsUser"] == 65532


def test_beside_another_image_the_master_keeps_that_images_mooncake() -> None:
    """Master and store clients stay one Mooncake release."""
    container = master(with_mooncake({"image": "vllm/vllm-openai:v0.34.0-efa", "mooncake": {"mode": "both"}}))
    assert container["image"] == "vllm/vllm-openai:v0.34.0-efa"
    assert "runAsNonRoot" not in container["securityContext"]
