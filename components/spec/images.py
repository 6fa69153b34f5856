"""Image references: framework recognition and per-region ECR rewriting (spec sections 1 and 7)."""

from __future__ import annotations

import re
from typing import Literal

Framework = Literal["vllm", "sglang", "tgi", "triton"]

# Health paths each framework serves out of the box.
HEALTH_PATHS: dict[Framework, str] = {
    "vllm": "/health",
    "sglang": "/health",
    "tgi": "/health",
    "triton": "/v2/health/ready",
}

# Substrings of the repository part of an image that identify a framework.
_IMAGE_HINTS: tuple[tuple[str, Framework], ...] = (
    ("tritonserver", "triton"),
    ("triton", "triton"),
    ("text-generation-inference", "tgi"),
    ("sglang", "sglang"),
    ("vllm", "vllm"),
)

# <account>.dkr.ecr.<region>.<dns suffix>/<repository>[:tag|@digest]
_ECR = re.compile(
    r"^(?P<account>[0-9]{12})\.dkr\.ecr(?P<fips>-fips)?\.(?P<region>[a-z]{2}(-gov)?-[a-z]+-[0-9]+)"
    r"\.(?P<suffix>amazonaws\.com(\.cn)?)/(?P<rest>.+)$"
)


def framework_from_image(image: str) -> Framework:
    """The framework an image serves, recognised from its repository; vLLM when unknown."""
    repository = image.rsplit("@", 1)[0].lower()
    for hint, framework in _IMAGE_HINTS:
        if hint in repository:
            return framework
    return "vllm"


def ecr_region(image: str) -> str | None:
    match = _ECR.match(image)
    return match.group("region") if match else None


def rewrite_for_region(image: str, region: str) -> str:
    """The in-region replica of an ECR image (same account, repository and tag); other images unchanged."""
    match = _ECR.match(image)
    if match is None or "://" in image:
        return image
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    fips = match.group("fips") or ""
    return f"{match.group('account')}.dkr.ecr{fips}.{region}.{suffix}/{match.group('rest')}"
