"""Shared building blocks of the stack-config models.

Every model is frozen, forbids unknown keys and is strict: YAML's ``true`` is not
the integer 1, ``"8"`` is not a number, and ``1.33`` is not the string "1.33".

A model is validated in three steps: its fields, then :meth:`SpecModel._defaults` (the
defaults that depend on other fields, filled in that one place), then
:meth:`SpecModel._rules` (the rules across fields, on the filled-in model). Every broken
rule is reported, not the first: a model's rules all at once, together with the rules of
the models inside it, whenever every field is valid.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

FILLED_IN: Any = None
"""The default of a field that :meth:`SpecModel._defaults` always fills in (or a rule refuses the
model): absent from the config, it is None only until then, so the field is typed as what it holds."""
Location = tuple[str | int, ...]
_RULES_LATER = "inference-fleet: rules later"
"""Validation context under which no model checks its rules (they are collected from the top)."""


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    def _defaults(self) -> Self:
        """This model with the defaults that depend on its other fields filled in.

        Runs before the rules, on fields that are each valid but may break a rule, so it never
        refuses anything: a value it cannot derive stays unset, and a rule reports why."""
        return self

    def _rules(self) -> Iterator[PydanticCustomError]:
        """Every rule across this model's fields that the filled-in model breaks, each as
        :func:`fail` makes it (``at`` naming the field)."""
        return iter(())

    @model_validator(mode="wrap")
    @classmethod
    def _fields_defaults_rules(cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo) -> Self:
        rules_later = bool(info.context and info.context.get(_RULES_LATER))
        try:
            model = handler(data)._defaults()
        except ValidationError as error:
            if rules_later:
                raise
            try:  # the same input with no model checking its rules: are the fields valid?
                model = cls.model_validate(data, context={_RULES_LATER: True})
            except ValidationError:
                raise error from None  # no: the fields' problems (and any rules already broken)
            # Yes, so the error holds rules broken inside: report them with this model's own.
            broken = list(model._every_rule(()))
            raise (_broken(cls.__name__, broken) if broken else error) from None
        if not rules_later:
            broken = [((), problem) for problem in model._rules()]
            if broken:
                raise _broken(cls.__name__, broken)
        return model

    def _every_rule(self, location: Location) -> Iterator[tuple[Location, PydanticCustomError]]:
        """The rules this model and every model inside it break, each with where that model is."""
        for problem in self._rules():
            yield location, problem
        for name, value in self:
            inner: list[tuple[Location, Any]] = [((name,), value)]
            if isinstance(value, dict):
                inner = [((name, key), item) for key, item in value.items()]
            elif isinstance(value, tuple):
                inner = [((name, index), item) for index, item in enumerate(value)]
            for where, item in inner:
                if isinstance(item, SpecModel):
                    yield from item._every_rule((*location, *where))


def _broken(title: str, problems: list[tuple[Location, PydanticCustomError]]) -> ValidationError:
    """One validation error holding every problem, each at its model's location."""
    details = [InitErrorDetails(type=problem, loc=location, input=None) for location, problem in problems]
    return ValidationError.from_exception_data(title, details)


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


def looks_like(pattern: re.Pattern[str], example: str) -> AfterValidator:
    """A check that a string matches ``pattern`` (an AWS id or ARN, say), refusing it with ``example``."""

    def check(value: str) -> str:
        if not pattern.match(value):
            raise fail("aws_id", "must look like {example}, got {value!r}", example=example, value=value)
        return value

    return AfterValidator(check)


def items(description: str, **kwargs: Any) -> Any:
    """A list field: YAML lists become tuples, the items themselves stay strict."""
    return Field(strict=False, description=description, **kwargs)
