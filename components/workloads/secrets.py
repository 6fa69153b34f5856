"""The Kubernetes Secrets of ``inference-fleet:secrets``: one per namespace that reads it, its
data a secret Output straight from Pulumi's config (components/spec/secrets.py, docs/deploying.md)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import naming
from components.render.placement import PlacedEndpoint
from components.spec import NAMESPACE
from components.spec.secrets import SECRETS_KEY, secret_names, set_command

SecretValues = pulumi.Output[Mapping[str, Mapping[str, str]]]
"""Secret name -> key -> value, marked secret."""


def secret_config(config: pulumi.Config) -> SecretValues:
    """The ``secrets`` config as a secret Output; refused when Pulumi did not hold it encrypted (a
    value written into the stack file by hand is plaintext, and would be stored so)."""
    from pulumi.runtime.config import is_config_secret

    if not is_config_secret(f"{NAMESPACE}:{SECRETS_KEY}"):
        raise pulumi.RunError(
            f"{NAMESPACE}:{SECRETS_KEY} is plaintext in the stack config; set each value encrypted: "
            f"{set_command('<name>', '<key>')}"
        )
    values: SecretValues = config.require_secret_object(SECRETS_KEY)
    return values


def namespace_secrets(endpoints: Sequence[PlacedEndpoint], namespace: str) -> tuple[str, ...]:
    """The Secrets the endpoints of ``namespace`` read."""
    return secret_names(endpoint.spec for endpoint in endpoints if endpoint.namespace == namespace)


def _value(values: Mapping[str, Mapping[str, Any]], *, name: str, key: str) -> str:
    return str(values[name][key])


def create_secrets(
    region: str,
    namespace: str,
    secrets: Mapping[str, Sequence[str]],
    values: SecretValues | None,
    opts: pulumi.ResourceOptions,
) -> list[pulumi.Resource]:
    """One Opaque Secret per name of ``secrets`` (name -> its keys) in ``namespace``, each key's value
    a secret Output of its own: the plan shows the keys, never a value. Validation ensures every name
    and key has a value."""
    if not secrets:
        return []
    if values is None:
        raise ValueError(f"endpoints in {region}/{namespace} read Secrets {', '.join(secrets)} but none were given")
    created: list[pulumi.Resource] = []
    for name, keys in secrets.items():
        data: dict[str, pulumi.Output[str]] = {
            key: values.apply(functools.partial(_value, name=name, key=key)) for key in keys
        }
        created.append(
            k8s.core.v1.Secret(
                naming.workload_resource_name(region, f"{namespace}-secret-{name}"),
                metadata={"name": name, "namespace": namespace, "labels": naming.fleet_labels()},
                type="Opaque",
                string_data=data,  # each value secret: from require_secret_object
                opts=opts,
            )
        )
    return created
