"""Byte sizes authored as canonical base-10 integer strings (docs/config-reference.md).

A byte size survives YAML, JSON and any database as a string of digits, never as a
float. Accepted input: a non-negative int, a string of ASCII digits (surrounding
whitespace stripped), or digits followed by an IEC binary unit (``KiB``, ``MiB``,
``GiB``, ``TiB``), which is converted exactly and written back as digits.

SI units (``KB``, ``MB``, ``GB``, ``TB``) are refused on purpose: Mooncake's own
size parsers read ``GB`` as 2**30 while SI reads it as 10**9, so "4GB" would mean two
different sizes depending on who reads it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator

from components.spec.base import fail

MAX_BYTES = 2**63 - 1
_BINARY_UNITS = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SI_UNITS = {"kb", "mb", "gb", "tb"}
_WITH_UNIT = re.compile(r"^([0-9]+)\s*([A-Za-z]+)$")


def canonical_byte_size(value: Any) -> str:
    """Return the canonical digits of a byte size, or raise a user-facing error."""
    if isinstance(value, bool):
        raise fail("byte_size", "must be a byte size, got {value} (a boolean is not a size)", value=value)
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        number = _parse_text(value)
    else:
        raise fail(
            "byte_size",
            'must be a byte size written as digits (e.g. "4294967296" or "4GiB"), got {value!r} ({kind})',
            value=value,
            kind=type(value).__name__,
        )
    if number < 0 or number > MAX_BYTES:
        raise fail(
            "byte_size",
            "must be a byte size in [0, 9223372036854775807], got {value!r}",
            value=value,
        )
    return str(number)


def _parse_text(value: str) -> int:
    text = value.strip()
    if text.isascii() and text.isdigit():
        return int(text)
    match = _WITH_UNIT.match(text) if text.isascii() else None
    if match:
        digits, unit = match.groups()
        if unit.lower() in _BINARY_UNITS:
            return int(digits) * _BINARY_UNITS[unit.lower()]
        if unit.lower() in _SI_UNITS:
            raise fail(
                "byte_size",
                "{value!r} is ambiguous (Mooncake reads GB as 2^30, SI as 10^9); write digits or "
                "an IEC unit such as '{digits}{iec}'",
                value=value,
                digits=digits,
                iec=unit[0].upper() + "iB",
            )
    raise fail(
        "byte_size",
        "must be a whole number of bytes written as digits, optionally with KiB/MiB/GiB/TiB "
        "(no sign, decimal point or exponent), got {value!r}",
        value=value,
    )


ByteSize = Annotated[str, BeforeValidator(canonical_byte_size, json_schema_input_type=int | str)]
"""A byte size; the validated value is always the canonical digit string."""
