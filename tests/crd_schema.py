"""Custom objects checked against the openAPIV3Schema of their vendored CustomResourceDefinition,
as strictly as the API server's strict field validation (``kubectl apply --validate=strict``,
pulumi-kubernetes' server-side apply): a field the schema does not declare is refused unless the
schema preserves unknown fields there, and every declared type, enum and required field holds."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonschema


def _strict(schema: Any) -> Any:
    """The schema with ``additionalProperties: false`` on every object that lists its properties
    and neither preserves unknown fields nor states additionalProperties (a map) itself."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {key: _strict(value) for key, value in schema.items() if key != "properties"}
    if "properties" in schema:
        strict["properties"] = {name: _strict(value) for name, value in schema["properties"].items()}
        if not schema.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in schema:
            strict["additionalProperties"] = False
    return strict


def schema_problems(crd: Mapping[str, Any], document: Mapping[str, Any]) -> list[str]:
    """Why the API server would refuse ``document`` under ``crd`` (empty: it accepts it)."""
    spec = crd["spec"]
    group_version = document.get("apiVersion", "")
    if document.get("kind") != spec["names"]["kind"] or not group_version.startswith(spec["group"] + "/"):
        return [f"{document.get('apiVersion')} {document.get('kind')} is not a kind of {crd['metadata']['name']}"]
    version = group_version.split("/", 1)[1]
    served = {entry["name"]: entry for entry in spec["versions"] if entry.get("served")}
    if version not in served:
        return [f"version {version!r} is not served (served: {', '.join(served)})"]
    schema = _strict(copy.deepcopy(served[version]["schema"]["openAPIV3Schema"]))
    validator = jsonschema.Draft7Validator(schema)
    found = []
    for error in sorted(validator.iter_errors(dict(document)), key=lambda error: list(error.absolute_path)):
        where = ".".join(str(part) for part in error.absolute_path) or "(root)"
        found.append(f"{where}: {error.message}")
    return found
