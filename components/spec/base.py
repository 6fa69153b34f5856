"""Shared building blocks of the stack-config models.

Every model is frozen, forbids unknown keys and is strict: YAML's ``true`` is not
the integer 1, ``"8"`` is not a number, and ``1.33`` is not the string "1.33".
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def fail(error_type: str, message: str, /, at: str | None = None, **values: Any) -> PydanticCustomError:
    """A validation error whose message is already written for the user.

    ``message`` is a ``str.format`` template over ``values`` (so ``{value!r}`` quotes the
    value received). ``at`` names the field (dotted, relative to the model raising it)
    that the error is about, for rules a model checks across its fields.
    """
    return PydanticCustomError(error_type, message.format(**values), {"at": at} if at is not None else None)


_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def is_dns_1035_label(value: str, max_length: int = 63) -> bool:
    return len(value) <= max_length and bool(_DNS_1035.match(value))


def _non_empty(value: str) -> str:
    stripped = value.strip()
    if not stripped:
        raise fail("empty", "must not be empty")
    return stripped


def _dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_1123_LABEL.match(value):
        raise fail(
            "dns_label",
            "must be a DNS-1123 label (lowercase letters, digits and '-', starting and ending "
            "with a letter or digit, at most 63 characters), got {value!r}",
            value=value,
        )
    return value


def _dns_subdomain(value: str) -> str:
    if len(value) > 253 or not _DNS_1123_SUBDOMAIN.match(value):
        raise fail(
            "dns_subdomain",
            "must be a Kubernetes object name (lowercase letters, digits, '-' and '.', "
            "at most 253 characters), got {value!r}",
            value=value,
        )
    return value


def _env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise fail(
            "env_name",
            "must be an environment variable name (letters, digits and '_', not starting with a digit), got {value!r}",
            value=value,
        )
    return value


def _label_key(value: str) -> str:
    prefix, _, name = value.rpartition("/")
    if (prefix and (len(prefix) > 253 or not _DNS_1123_SUBDOMAIN.match(prefix))) or (
        len(name) > 63 or not _LABEL_NAME.match(name)
    ):
        raise fail(
            "label_key",
            "must be a Kubernetes label key ([prefix/]name, name at most 63 characters of "
            "letters, digits, '-', '_' and '.'), got {value!r}",
            value=value,
        )
    return value


def _label_value(value: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise fail(
            "label_value",
            "must be a Kubernetes label value (at most 63 letters, digits, '-', '_' and '.', "
            "starting and ending with a letter or digit), got {value!r}",
            value=value,
        )
    return value


NonEmptyStr = Annotated[str, AfterValidator(_non_empty)]
DnsLabel = Annotated[str, AfterValidator(_dns_label)]
ObjectName = Annotated[str, AfterValidator(_dns_subdomain)]
EnvName = Annotated[str, AfterValidator(_env_name)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]
Port = Annotated[int, Field(ge=1, le=65535)]


def items(description: str, **kwargs: Any) -> Any:
    """A list field: YAML lists become tuples, the items themselves stay strict."""
    return Field(strict=False, description=description, **kwargs)
