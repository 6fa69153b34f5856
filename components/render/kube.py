"""Small helpers shared by the renderers: object metadata and Kubernetes quantities."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_IEC_UNITS = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def quantity(size: int | str) -> str:
    """Bytes as a Kubernetes quantity, in the largest IEC unit that keeps it exact (``12Gi``)."""
    size = int(size)
    for unit, factor in _IEC_UNITS:
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def metadata(name: str, namespace: str | None, labels: Mapping[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    return meta
