"""Kubernetes resource quantities as integers: CPU in millicores, everything else in units."""

from __future__ import annotations

import re
from collections.abc import Mapping

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_FACTORS = {
    None: 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"

Amounts = Mapping[str, int]


def amount(resource: str, text: str | int) -> int:
    """``text`` of ``resource`` as an integer: millicores for cpu (``"500m"`` -> 500, ``"2"`` ->
    2000), bytes or counts for the rest (``"12Gi"``), rounded up as the API server does."""
    match = _QUANTITY.match(str(text).strip())
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    number, suffix = match.groups()
    scale = 1000 if resource == CPU else 1
    value = float(number) * scale * (0.001 if suffix == "m" else _FACTORS[suffix])
    return -int(-value // 1)


def amounts(requests: Mapping[str, str | int]) -> dict[str, int]:
    return {resource: amount(resource, text) for resource, text in requests.items()}


def describe(resource: str, value: int) -> str:
    """A readable amount for messages: ``4 CPUs``, ``96.0 GiB``, ``8 nvidia.com/gpu``."""
    if resource == CPU:
        return f"{value / 1000:g} CPUs"
    if resource == MEMORY or resource.startswith("hugepages-"):
        return f"{value / 2**30:.1f} GiB {'memory' if resource == MEMORY else resource}"
    return f"{value} {resource}"
