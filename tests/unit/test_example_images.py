"""The example stacks (stacks/*.yaml) and the docs name only vLLM images that exist: vLLM's own repository
(``vllm/vllm-openai``) at a release no later than the pinned one (config/pins.yaml ``vllm.release``), in
a variant the pins use (plain or ``-efa``), or an image in the account's own registry (ECR). dev's canary
was ``vllm/vllm-openai:v0.34.0``, which vLLM never published (PyPI's newest is 0.33.0): the canary would
have sat in ImagePullBackOff and its share of chat-pd's traffic answered 503 (issue 29, item 8)."""

from __future__ import annotations

import re
from pathlib import Path

from components.catalog import pins

ROOT = Path(__file__).resolve().parents[2]
VLLM_IMAGE = re.compile(r"(?<![\w./:-])((?:[\w.-]+(?::\d+)?/)+[\w.-]*vllm[\w.-]*):([\w][\w.-]{0,127})")
"""A reference to an image whose name holds "vllm" (a path before it, so metric names like
``vllm:num_requests_running`` are not one), and its tag."""
VLLM_REPOSITORY = re.compile(r"(?:docker\.io/)?vllm/vllm-openai")
OWN_REGISTRY = re.compile(r"\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/.+")
"""An account's ECR registry (docs/operations.md pushes a patched image there)."""
RELEASE_TAG = re.compile(r"v(\d+)\.(\d+)\.(\d+)(.*)")


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def unreleased(text: str) -> list[str]:
    """The vLLM image references in ``text`` that name no image vLLM released (nor the account's own)."""
    pinned = pins().vllm
    variants = {tag.split(pinned.release, 1)[1] for tag in (pinned.image, pinned.efa_image)}
    wrong = []
    for match in VLLM_IMAGE.finditer(text):
        name, tag = match.groups()
        if OWN_REGISTRY.fullmatch(name):
            continue
        release = RELEASE_TAG.fullmatch(tag)
        if VLLM_REPOSITORY.fullmatch(name) and release:
            number = version(".".join(release.groups()[:3]))
            if number <= version(pinned.release) and release.group(4) in variants:
                continue
        wrong.append(match.group(0))
    return wrong


def examples() -> list[Path]:
    return sorted([*ROOT.glob("stacks/*.yaml"), *ROOT.glob("docs/**/*.md"), ROOT / "README.md"])


def test_the_example_stacks_and_docs_name_only_released_vllm_images() -> None:
    found = {str(path.relative_to(ROOT)): unreleased(path.read_text()) for path in examples()}
    assert {path: images for path, images in found.items() if images} == {}


def test_the_check_reads_the_stacks_and_the_docs_that_name_vllm_images() -> None:
    """Not a check of nothing: the files it reads hold vLLM images (the pin in each example stack)."""
    named = {str(path.relative_to(ROOT)) for path in examples() if VLLM_IMAGE.search(path.read_text())}
    assert {"stacks/Pulumi.dev.yaml", "stacks/Pulumi.existing.yaml", "README.md"} <= named
    assert "docs/operations.md" in named


def test_an_unreleased_canary_in_the_dev_stack_is_found() -> None:
    dev = (ROOT / "stacks/Pulumi.dev.yaml").read_text()
    assert "vllm/vllm-openai:v0.33.0" in dev
    assert unreleased(dev.replace("vllm/vllm-openai:v0.33.0", "vllm/vllm-openai:v0.34.0", 1)) == [
        "vllm/vllm-openai:v0.34.0"
    ]


def test_released_pinned_and_own_registry_images_pass_and_the_rest_is_named() -> None:
    good = [
        "image: vllm/vllm-openai:v0.33.0",
        "image: docker.io/vllm/vllm-openai:v0.32.1",
        "image: vllm/vllm-openai:v0.33.0-efa",
        "image: 123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm-openai:v0.33.0-patch1",
        "rate(vllm:num_requests_running[1m])",
        "vllm/v1/engine/core.py:1785",
    ]
    assert [line for line in good if unreleased(line)] == []
    bad = {
        "vllm/vllm-openai:v0.34.0": "a later release than the pin",
        "vllm/vllm-openai:v1.0.0": "a later major",
        "vllm/vllm-openai:latest": "no release",
        "vllm/vllm-openai:nightly": "no release",
        "vllm/vllm-openai:v0.33.0-rc1": "a variant the pins do not use",
        "ghcr.io/someone/vllm-openai:v0.33.0": "another repository",
    }
    assert {image: unreleased(f"image: {image}") for image in bad} == {image: [image] for image in bad}
