"""Pulumi.yaml's config declarations agree with what fleetctl requires.

The Pulumi CLI (v3.274, pulumi/pulumi sdk/go/common/workspace/config.go mergeConfig) refuses a stack
that lacks a key of the project's namespace declared with neither ``default`` nor ``value``: "Stack
'<name>' is missing configuration value '<key>'". A declared default is set on the stack when the key
is absent (createConfigValue, an object value for a mapping). So a key fleetctl lets a stack leave out
must carry a default there, and a key fleetctl requires must not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from components.spec import NAMESPACE, parse_stack_config
from components.spec.stack import CONFIG_KEYS, StackConfig
from tests.unit.stack_builders import region

PROJECT_FILE = Path(__file__).resolve().parents[2] / "Pulumi.yaml"


def declarations() -> dict[str, Any]:
    document = YAML(typ="safe", pure=True).load(PROJECT_FILE.read_text())
    return dict(document["config"])


def required_by_pulumi(declaration: Any) -> bool:
    return not (isinstance(declaration, dict) and ("default" in declaration or "value" in declaration))


def required_by_fleetctl(key: str) -> bool:
    (field,) = (field for name, field in StackConfig.model_fields.items() if (field.alias or name) == key)
    return field.is_required()


def test_every_key_the_program_reads_is_declared_and_nothing_else() -> None:
    assert sorted(declarations()) == sorted(f"{NAMESPACE}:{key}" for key in CONFIG_KEYS)


def test_pulumi_requires_exactly_the_keys_fleetctl_requires() -> None:
    declared = declarations()
    for key in CONFIG_KEYS:
        assert required_by_pulumi(declared[f"{NAMESPACE}:{key}"]) == required_by_fleetctl(key), key


def test_a_stack_without_endpoints_validates_with_what_pulumi_fills_in() -> None:
    """fleetctl accepts a platform-only stack; the CLI then sets each absent key to its default,
    which the program must read as it reads the key left out."""
    regions = {"us-east-1": region({"cluster_access": {"public_access_cidrs": ["203.0.113.0/24"]}})}
    assert parse_stack_config({"regions": regions}).endpoints == {}
    filled = {
        key.removeprefix(f"{NAMESPACE}:"): json.loads(json.dumps(declaration["default"]))
        for key, declaration in declarations().items()
        if not required_by_pulumi(declaration)
    }
    spec = parse_stack_config({"regions": regions, **filled})
    assert spec.endpoints == {}
    assert spec.global_front.enabled is False
