"""``validate_stack`` remembers the last config that validated (``fleetctl plan`` validates the stack file,
then ``__main__.py`` validates the same config again): only an equal config and stack are answered from
memory; anything else is validated in full."""

from __future__ import annotations

import copy
import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from components import validation
from components.spec import SpecError
from tests.unit.stack_builders import classic_endpoint, stack_config


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    validation.forget()
    yield
    validation.forget()


def test_an_equal_config_gets_the_remembered_spec() -> None:
    config = stack_config()
    first = validation.validate_stack(config, stack="dev")
    assert validation.validate_stack(copy.deepcopy(config), stack="dev") is first


def test_another_stack_name_or_any_changed_value_is_validated_again() -> None:
    config = stack_config()
    first = validation.validate_stack(config, stack="dev")
    assert validation.validate_stack(config, stack="prod") is not first
    changed = stack_config(endpoints={"other": classic_endpoint()})
    assert set(validation.validate_stack(changed, stack="prod").endpoints) == {"other"}


def test_a_bad_config_after_a_good_one_is_refused() -> None:
    config = stack_config()
    validation.validate_stack(config, stack="dev")
    bad = copy.deepcopy(config)
    bad["regions"]["us-east-1"]["node_groups"]["system"]["max_size"] = -1
    with pytest.raises(SpecError):
        validation.validate_stack(bad, stack="dev")


def test_values_json_cannot_tell_from_strings_are_never_remembered() -> None:
    """A YAML date and its string would write the same JSON; such a config is not remembered."""
    assert validation._key({"a": datetime.date(2026, 1, 1)}, "dev") is None
    assert validation._key({"a": "2026-01-01"}, "dev") is not None
    integer_key: dict[Any, Any] = {1: "x"}  # JSON would write the key as "1"
    assert validation._key(integer_key, "dev") is None
    assert validation._key({"a": 1}, "dev") != validation._key({"a": 1.0}, "dev") != validation._key({"a": True}, "dev")
