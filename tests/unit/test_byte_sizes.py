"""Byte sizes are canonical base-10 digit strings (docs/config-reference.md)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import PydanticCustomError

from components.spec import SpecError, parse_stack_config
from components.spec.sizes import MAX_BYTES, canonical_byte_size

from .stack_builders import DELETE, with_mooncake

IEC_SHIFTS = {"KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}

sizes = st.integers(min_value=0, max_value=MAX_BYTES)
blanks = st.text(alphabet=" \t\r\n", max_size=3)
fast = settings(max_examples=200, deadline=None)


def digit_strings() -> st.SearchStrategy[tuple[int, str]]:
    """A size and a way of writing it: leading zeros and surrounding whitespace."""
    return st.tuples(sizes, st.integers(min_value=0, max_value=5), blanks, blanks).map(
        lambda parts: (parts[0], f"{parts[2]}{'0' * parts[1]}{parts[0]}{parts[3]}")
    )


def rejection(value: Any) -> str:
    with pytest.raises(PydanticCustomError) as caught:
        canonical_byte_size(value)
    return caught.value.message()


def test_max_bytes_is_the_signed_64_bit_maximum() -> None:
    assert MAX_BYTES == 2**63 - 1 == 9223372036854775807


@fast
@given(sizes)
def test_any_int_in_range_canonicalises_to_its_digits(size: int) -> None:
    assert canonical_byte_size(size) == str(size)


@fast
@given(digit_strings())
def test_digit_strings_with_leading_zeros_and_whitespace_canonicalise_to_the_int(written: tuple[int, str]) -> None:
    size, text = written
    assert canonical_byte_size(text) == str(size)


@fast
@given(st.one_of(sizes, digit_strings().map(lambda written: written[1])))
def test_canonical_form_is_a_fixed_point(value: int | str) -> None:
    canonical = canonical_byte_size(value)
    assert canonical_byte_size(canonical) == canonical
    assert canonical_byte_size(int(canonical)) == canonical
    assert canonical == str(int(canonical))


@fast
@given(st.sampled_from(sorted(IEC_SHIFTS)), st.data())
def test_iec_units_convert_exactly(unit: str, data: st.DataObject) -> None:
    shift = IEC_SHIFTS[unit]
    count = data.draw(st.integers(min_value=0, max_value=MAX_BYTES >> shift))
    assert canonical_byte_size(f"{count}{unit}") == str(count * 2**shift)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [("4GiB", "4294967296"), (" 4 GiB ", "4294967296"), ("512MiB", "536870912"), ("1KiB", "1024"), ("0TiB", "0")],
    ids=["gib", "gib_with_spaces", "mib", "kib", "zero_tib"],
)
def test_iec_examples(text: str, canonical: str) -> None:
    assert canonical_byte_size(text) == canonical


@fast
@given(st.sampled_from(sorted(IEC_SHIFTS)), st.data())
def test_iec_sizes_beyond_the_range_are_rejected(unit: str, data: st.DataObject) -> None:
    first_too_big = (MAX_BYTES >> IEC_SHIFTS[unit]) + 1
    count = data.draw(st.integers(min_value=first_too_big, max_value=first_too_big * 4))
    assert "in [0, 9223372036854775807]" in rejection(f"{count}{unit}")


@fast
@given(st.text(max_size=24))
def test_any_text_is_either_canonical_digits_or_a_user_facing_error(text: str) -> None:
    try:
        canonical = canonical_byte_size(text)
    except PydanticCustomError:
        return
    assert canonical.isascii()
    assert canonical.isdigit()
    assert 0 <= int(canonical) <= MAX_BYTES
    assert canonical == str(int(canonical))


@fast
@given(
    st.one_of(
        st.none(),
        st.booleans(),
        st.floats(),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
        st.binary(max_size=4),
    )
)
def test_values_that_are_neither_int_nor_str_are_rejected_with_a_user_facing_error(value: Any) -> None:
    rejection(value)


@fast
@given(st.integers(max_value=-1))
def test_negative_ints_are_rejected(size: int) -> None:
    assert "in [0, 9223372036854775807]" in rejection(size)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (True, "a boolean is not a size"),
        (False, "a boolean is not a size"),
        ("-1", "no sign"),
        ("+1", "no sign"),
        ("1.5", "decimal point"),
        ("4.0", "decimal point"),
        ("1e3", "exponent"),
        ("4GB", "is ambiguous (Mooncake reads GB as 2^30, SI as 10^9); write digits or an IEC unit such as '4GiB'"),
        ("512MB", "an IEC unit such as '512MiB'"),
        ("", "must be a whole number of bytes"),
        ("   ", "must be a whole number of bytes"),
        ("4 XiB", "must be a whole number of bytes"),
        ("0x10", "must be a whole number of bytes"),
        ("1_000", "must be a whole number of bytes"),
        ("\u0661\u0662", "must be a whole number of bytes"),
        ("\u0661\u0662GiB", "must be a whole number of bytes"),
        (2**63, "in [0, 9223372036854775807]"),
        (str(2**63), "in [0, 9223372036854775807]"),
        (-1, "in [0, 9223372036854775807]"),
        (4.0, "(float)"),
        (None, "(NoneType)"),
        ([4], "(list)"),
    ],
    ids=[
        "true",
        "false",
        "minus_sign",
        "plus_sign",
        "decimal_point",
        "decimal_point_on_a_whole_number",
        "exponent",
        "si_gigabytes",
        "si_megabytes",
        "empty_string",
        "only_whitespace",
        "unknown_unit",
        "hexadecimal",
        "digit_separator",
        "arabic_indic_digits",
        "arabic_indic_digits_with_a_unit",
        "int_2_to_the_63",
        "digits_of_2_to_the_63",
        "negative_int",
        "float_even_when_whole",
        "none",
        "list",
    ],
)
def test_rejects(value: Any, fragment: str) -> None:
    assert fragment in rejection(value)


@pytest.mark.parametrize("value", ["1.5", "-1", "4GB", str(2**63)], ids=["decimal", "sign", "si_unit", "too_big"])
def test_rejection_message_quotes_the_value_received(value: str) -> None:
    assert repr(value) in rejection(value)


def store_with(field: str, value: Any) -> dict[str, Any]:
    return with_mooncake({"mooncake": {"mode": "store", "topology": DELETE, "store": {field: value}}}, name="x")


@pytest.mark.parametrize("field", ["local_buffer_size", "global_segment_size"])
@pytest.mark.parametrize("value", ["4GB", 4.0, True, "-1"], ids=["si_unit", "float", "boolean", "sign"])
def test_error_through_the_models_names_the_field(field: str, value: Any) -> None:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(store_with(field, value))
    assert [problem.path for problem in caught.value.problems] == [f"endpoints.x.mooncake.store.{field}"]


@pytest.mark.parametrize("field", ["local_buffer_size", "global_segment_size"])
def test_models_store_the_canonical_digits(field: str) -> None:
    spec = parse_stack_config(store_with(field, "0002GiB"))
    mooncake = spec.endpoints["x"].mooncake
    assert mooncake is not None
    assert getattr(mooncake.store, field) == str(2 * 2**30)
