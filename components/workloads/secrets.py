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


def _data(values: Mapping[str, Mapping[str, Any]], *, name: str) -> dict[str, str]:
    return {key: str(value) for key, value in values[name].items()}


def create_secrets(
    region: str,
    namespace: str,
    names: Sequence[str],
    values: SecretValues | None,
    opts: pulumi.ResourceOptions,
) -> list[pulumi.Resource]:
    """One Opaque Secret per name in ``namespace``. Validation ensures every name has values."""
    if not names:
        return []
    if values is None:
        raise ValueError(f"endpoints in {region}/{namespace} read Secrets {', '.join(names)} but none were given")
    secrets: list[pulumi.Resource] = []
    for name in names:
        data: pulumi.Output[dict[str, str]] = values.apply(functools.partial(_data, name=name))
        secrets.append(
            k8s.core.v1.Secret(
                naming.workload_resource_name(region, f"{namespace}-secret-{name}"),
                metadata={"name": name, "namespace": namespace, "labels": naming.fleet_labels()},
                type="Opaque",
                string_data=data,  # secret: from require_secret_object
                opts=opts,
            )
        )
    return secrets
