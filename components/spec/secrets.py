"""Kubernetes Secrets the stack creates from Pulumi secrets (``inference-fleet:secrets``, docs/deploying.md).

Each value is set with ``pulumi config set --secret --path 'inference-fleet:secrets.<name>.<key>'``:
Pulumi stores it encrypted in the stack file (``{secure: v1:...}``) and hands the program the
plaintext, marked secret. The spec sees only which Secrets and keys there are: the stack file's
ciphertext as fleetctl reads it, or a placeholder where the program read the plaintext
(:func:`redacted`); the values go straight from Pulumi's config to the Secret objects
(components/workloads/regional.py), secret all the way, so plan.json and the state show
``[secret]`` in their place.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

from components.render.mooncake_env import ADMIN_KEY_IN_SECRET
from components.spec.base import ObjectName, SpecModel, fail
from components.spec.endpoint import Endpoint

SECRETS_KEY = "secrets"
"""The config key (``inference-fleet:secrets``)."""
SECURE = "secure"
"""The key Pulumi writes an encrypted config value under."""
REDACTED = "[secret]"
"""What the program puts in place of a value before validating: the spec never holds one."""

_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _secret_key(value: str) -> str:
    """A key of a Secret's data: letters, digits, '-', '_' and '.' (k8s.io/apimachinery
    pkg/util/validation IsConfigMapKey, which the API server applies to Secret keys)."""
    if not value or len(value) > 253 or not _SECRET_KEY.match(value):
        raise fail(
            "secret_key",
            "must be a Secret key (at most 253 letters, digits, '-', '_' and '.'), got {value!r}",
            value=value,
        )
    return value


SecretKey = Annotated[str, AfterValidator(_secret_key)]


class SecureValue(SpecModel):
    secure: str = Field(
        min_length=1,
        description="The value, encrypted by Pulumi: write it with `pulumi config set --secret --path "
        "'inference-fleet:secrets.<name>.<key>' <value>`, never by hand.",
    )


def _encrypted(value: Any) -> Any:
    """Refuse anything but ``{secure: ...}`` without echoing it: it may be the plaintext."""
    if isinstance(value, Mapping) and list(value) == [SECURE] and isinstance(value[SECURE], str):
        return value
    raise fail(
        "secret_value",
        "must be an encrypted value ({{secure: ...}}), never plaintext: set it with pulumi config set --secret "
        "--path 'inference-fleet:secrets.<name>.<key>' <value>",
    )


SecretData = dict[SecretKey, Annotated[SecureValue, BeforeValidator(_encrypted)]]


class SecretsConfig(SpecModel):
    """``inference-fleet:secrets`` on its own, validated apart from the rest of the config."""

    secrets: dict[ObjectName, SecretData]


def set_command(name: str, key: str) -> str:
    return f"pulumi config set --secret --path 'inference-fleet:secrets.{name}.{key}' <value>"


def references(endpoint: Endpoint) -> Iterator[tuple[list[str | int], str, str]]:
    """Every Secret key ``endpoint`` reads: (its field's path under the endpoint, Secret, key)."""
    for variable, ref in endpoint.secret_env.items():
        yield ["secret_env", variable, "secret"], ref.secret, ref.key
    proxy = endpoint.mooncake.proxy if endpoint.mooncake is not None else None
    if proxy is not None and proxy.admin_api_key_secret is not None:
        yield ["mooncake", "proxy", "admin_api_key_secret"], proxy.admin_api_key_secret, ADMIN_KEY_IN_SECRET


def secret_names(endpoints: Iterable[Endpoint]) -> tuple[str, ...]:
    """The Secrets the endpoints read, sorted."""
    return tuple(sorted({name for endpoint in endpoints for _, name, _ in references(endpoint)}))


def check_secrets(
    secrets: Mapping[ObjectName, SecretData], endpoints: Mapping[str, Endpoint], *, unread: bool = True
) -> Iterator[tuple[list[str | int], str]]:
    """(path, message) for every Secret key an endpoint reads that the stack does not create, and
    with ``unread`` every Secret the stack would create that no endpoint reads (config that would
    do nothing)."""
    read: set[str] = set()
    for endpoint_name, endpoint in endpoints.items():
        for path, name, key in references(endpoint):
            read.add(name)
            if name in secrets and key in secrets[name]:
                continue
            what = f"key {key!r} of Secret {name!r}" if name in secrets else f"Secret {name!r}"
            yield (
                ["endpoints", endpoint_name, *path],
                f"reads {what} (key {key!r}), which the stack does not create and its namespace would not have "
                f"before the pods start: set it with {set_command(name, key)}",
            )
    for name in secrets if unread else ():
        if name not in read:
            yield (
                ["secrets", name],
                "is read by no endpoint, so it would be created nowhere: remove it "
                f"(pulumi config rm --path 'inference-fleet:secrets.{name}') or name it in an endpoint's "
                "secret_env or mooncake.proxy.admin_api_key_secret",
            )


def _leaves(value: Any, leaf: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            name: ({key: leaf for key in data} if isinstance(data, Mapping) else data) for name, data in value.items()
        }
    return value


def redacted(value: Any) -> Any:
    """The ``secrets`` config as the program reads it (plaintext leaves) shaped as the stack file
    holds it, each value replaced by a placeholder: what the spec validates."""
    return _leaves(value, {SECURE: REDACTED})


def stand_ins(value: Any) -> Any:
    """The ``secrets`` config as the engine would hand it to the program, a placeholder for each
    decrypted value: what the offline plan runs the program with (fleetctl never decrypts)."""
    return _leaves(value, REDACTED)


def _paths(value: Any, wrong: Callable[[Any], bool]) -> list[list[str | int]]:
    """Paths ``secrets.<name>.<key>`` of the values under ``secrets`` that are ``wrong``."""
    found: list[list[str | int]] = []
    if isinstance(value, Mapping):
        for name, data in value.items():
            if isinstance(data, Mapping):
                found += [["secrets", str(name), str(key)] for key, item in data.items() if wrong(item)]
    return found


def _secure(item: Any) -> bool:
    return isinstance(item, Mapping) and list(item) == [SECURE]


def plaintext_paths(value: Any) -> list[list[str | int]]:
    """Paths of values the stack file holds in plaintext under ``secrets`` (each must be secure)."""
    return _paths(value, lambda item: not _secure(item))


NONCE_BYTES = 12
TAG_BYTES = 16
"""AES-256-GCM's nonce and authentication tag, as Pulumi seals a value."""


def _standard_base64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def decryptable(ciphertext: str) -> bool:
    """Whether some Pulumi secrets provider could decrypt ``ciphertext``, judged by its shape alone.

    The passphrase and cloud KMS providers write ``v1:<nonce>:<sealed>``, both standard base64, a
    12-byte nonce and AES-256-GCM's output with its 16-byte tag (pulumi/pulumi
    sdk/go/common/resource/config/crypt.go, symmetricCrypter.EncryptValue and DecryptValue, which
    refuses any other shape); Pulumi Cloud writes its ciphertext in standard base64 alone
    (pkg/secrets/service/manager.go, serviceCrypter). A value of neither shape was never written by
    ``pulumi config set --secret``: the example's placeholders, or an edit by hand."""
    if ciphertext.startswith("v1:"):
        parts = ciphertext.split(":")
        if len(parts) != 3:
            return False
        nonce, sealed = _standard_base64(parts[1]), _standard_base64(parts[2])
        return nonce is not None and len(nonce) == NONCE_BYTES and sealed is not None and len(sealed) >= TAG_BYTES
    return bool(_standard_base64(ciphertext))


def unset_secret_paths(value: Any) -> list[list[str | int]]:
    """Paths of ``secure`` values under ``secrets`` that no secrets provider could decrypt."""
    return _paths(value, lambda item: _secure(item) and isinstance(item[SECURE], str) and not decryptable(item[SECURE]))
