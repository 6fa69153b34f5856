"""Image references: framework recognition and per-region ECR rewriting."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator

from components.spec.base import NonEmptyStr, fail

Framework = Literal["vllm", "sglang", "tgi", "triton"]

# The OCI distribution reference grammar (distribution/reference v0.6.0 reference.go, the grammar
# in its package comment, and regexp.go):
#   reference        := name [ ":" tag ] [ "@" digest ]
#   name             := [domain '/'] remote-name
#   domain           := host [':' port-number]; host := domain-name | '[' IPv6 ']'
#   domain-name      := domain-component ['.' domain-component]*
#   domain-component := /([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])/
#   remote-name      := path-component ['/' path-component]*
#   path-component   := alpha-numeric [separator alpha-numeric]*; alpha-numeric := /[a-z0-9]+/
#   separator        := /[_.]|__|[-]+/
#   tag              := /[\w][\w.-]{0,127}/
#   digest           := algorithm ":" hex; algorithm := /[A-Za-z][A-Za-z0-9]*/ joined by [-_+.]
#   hex              := /[0-9a-fA-F]{32,}/
# and the name (domain and path) at most 255 characters (NameTotalLengthMax).
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?", re.ASCII)
NAME_MAX_LENGTH = 255


def is_image_reference(value: str) -> bool:
    """Whether ``value`` is an image reference a registry client can pull (``vllm/vllm-openai:v0.33.0``,
    ``registry:5000/team/model@sha256:<hex>``)."""
    match = _REFERENCE.fullmatch(value)
    return match is not None and len(match.group("name")) <= NAME_MAX_LENGTH


def _image_reference(value: str) -> str:
    if not is_image_reference(value):
        raise fail(
            "image_reference",
            "must be an image reference [registry[:port]/]repository[:tag][@digest] such as "
            "vllm/vllm-openai:v0.33.0 (a lowercase repository path of letters, digits and '.', '_', '-' "
            "separators; a tag of at most 128 letters, digits, '_', '.' and '-'; a digest such as "
            "sha256:<64 hex digits>), got {value!r}",
            value=value,
        )
    return value


ImageRef = Annotated[NonEmptyStr, AfterValidator(_image_reference)]
"""An image reference (surrounding whitespace dropped), held to the OCI distribution reference grammar."""

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


def repository_and_tag(image: str) -> tuple[str, str | None]:
    """``image``'s repository (its registry and port included) and its tag, None when it has none; a digest
    is dropped."""
    name = image.split("@", 1)[0]
    slash, colon = name.rfind("/"), name.rfind(":")
    return (name[:colon], name[colon + 1 :]) if colon > slash else (name, None)


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
