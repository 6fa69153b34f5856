"""Custom resources of the rendered manifests (KEDA's ScaledObjects) checked against the
vendored CustomResourceDefinitions of the chart that serves them (config/pins.yaml charts.keda),
as strictly as the API server's field validation (tests/crd_schema.py)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from components.catalog import chart_crds, pins
from tests.crd_schema import schema_problems


@cache
def _crds() -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for crd in chart_crds(pins().charts.keda):
        spec = crd["spec"]
        for version in spec["versions"]:
            found[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = crd
    return found


def is_custom(document: Mapping[str, Any]) -> bool:
    return (document["apiVersion"], document["kind"]) in _crds()


def problems(document: Mapping[str, Any]) -> list[str]:
    """Why the API server would refuse ``document`` (empty: it accepts it)."""
    return schema_problems(_crds()[(document["apiVersion"], document["kind"])], document)
