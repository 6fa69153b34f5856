"""Secrets the config names (issue 28, item 10): every Secret an endpoint reads is created by the
stack from a Pulumi secret (``inference-fleet:secrets``), or the stack is refused naming the
command that sets it. The Secrets' namespace is created by the same ``pulumi up``, so nothing
could have put them there beforehand: without this, the pods wait out their rollout timeout on
CreateContainerConfigError (kubelet resolves secretKeyRef when it starts the container,
kubernetes pkg/kubelet/kubelet_pods.go makeEnvironmentVariables)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from components.spec import SpecError, parse_stack_config
from components.spec.secrets import REDACTED, redacted, stand_ins, unset_secret_paths
from fleetctl.stackfile import StackFileError, parse_stack_bytes

from .stack_builders import classic_endpoint, mooncake_endpoint, stack_config

ROOT = Path(__file__).resolve().parents[2]
HF = {"HF_TOKEN": {"secret": "hf-token", "key": "token"}}


def messages(config: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(config)
    return {problem.path: problem.message for problem in caught.value.problems}


def test_a_secret_no_config_creates_is_refused_naming_the_command_that_sets_it() -> None:
    config = stack_config(endpoints={"chat": classic_endpoint({"secret_env": HF})}, secrets=False)
    assert messages(config) == {
        "endpoints.chat.secret_env.HF_TOKEN.secret": "reads Secret 'hf-token' (key 'token'), which the stack does "
        "not create and its namespace would not have before the pods start: set it with pulumi config set "
        "--secret --path 'inference-fleet:secrets.hf-token.token' <value>"
    }


def test_the_proxy_admin_key_is_a_secret_the_stack_must_create_too() -> None:
    endpoint = mooncake_endpoint({"mooncake": {"proxy": {"admin_api_key_secret": "chat-admin"}}})
    config = stack_config(endpoints={"chat": endpoint}, secrets=False)
    config["secrets"] = {"chat-admin": {"other": {"secure": "v1:x"}}}
    (path, message), *_ = messages(config).items()
    assert path == "endpoints.chat.mooncake.proxy.admin_api_key_secret"
    assert message.startswith("reads key 'ADMIN_API_KEY' of Secret 'chat-admin'")
    assert "inference-fleet:secrets.chat-admin.ADMIN_API_KEY" in message


def test_a_secret_no_endpoint_reads_is_config_that_does_nothing() -> None:
    config = stack_config(endpoints={"chat": classic_endpoint()})
    config["secrets"] = {"stale": {"token": {"secure": "v1:x"}}}
    assert list(messages(config)) == ["secrets.stale"]


def test_the_spec_knows_the_names_and_keys_never_a_value() -> None:
    config = stack_config(endpoints={"chat": classic_endpoint({"secret_env": HF})})
    spec = parse_stack_config(config)
    assert spec.secrets == {"hf-token": ("token",)}


def test_a_value_must_be_an_encrypted_one() -> None:
    config = stack_config(endpoints={"chat": classic_endpoint({"secret_env": HF})})
    config["secrets"] = {"hf-token": {"token": "hf_plaintext"}}
    assert list(messages(config)) == ["secrets.hf-token.token"]
    assert "hf_plaintext" not in str(messages(config))


def test_the_program_validates_what_the_engine_decrypted_with_the_values_left_out() -> None:
    decrypted = {"hf-token": {"token": "hf_real"}}
    assert redacted(decrypted) == {"hf-token": {"token": {"secure": REDACTED}}}
    assert stand_ins({"hf-token": {"token": {"secure": "v1:abc"}}}) == {"hf-token": {"token": REDACTED}}


STACK = """config:
  inference-fleet:regions: {}
  inference-fleet:secrets:
    hf-token:
      token:
        secure: v1:c2FsdA==:Y2lwaGVy
"""


def test_the_stack_file_keeps_the_ciphertext_out_of_the_program_and_marks_the_key_secret() -> None:
    stack_file = parse_stack_bytes(Path("Pulumi.prod.yaml"), STACK.encode())
    assert stack_file.secret_keys == ("inference-fleet:secrets",)
    assert stack_file.engine_config["inference-fleet:secrets"] == '{"hf-token": {"token": "[secret]"}}'
    assert stack_file.project_config["secrets"] == {"hf-token": {"token": {"secure": REDACTED}}}


def test_a_plaintext_value_in_the_stack_file_is_refused() -> None:
    text = STACK.replace("      token:\n        secure: v1:c2FsdA==:Y2lwaGVy\n", "      token: hf_plain\n")
    with pytest.raises(StackFileError) as refused:
        parse_stack_bytes(Path("Pulumi.prod.yaml"), text.encode())
    (problem,) = refused.value.problems
    assert problem.path == "secrets.hf-token.token"
    assert "pulumi config set --secret --path 'inference-fleet:secrets.hf-token.token'" in problem.message
    assert "hf_plain" not in problem.message


def test_secure_values_elsewhere_are_still_refused() -> None:
    text = "config:\n  inference-fleet:regions:\n    us-east-1:\n      kubernetes_version:\n        secure: v1:x\n"
    with pytest.raises(StackFileError) as refused:
        parse_stack_bytes(Path("Pulumi.prod.yaml"), text.encode())
    (problem,) = refused.value.problems
    assert "inference-fleet:secrets" in problem.message


# A value `pulumi config set --secret` wrote: AES-256-GCM, a 12-byte nonce and the sealed text with its
# 16-byte tag, each standard base64 (pulumi/pulumi sdk/go/common/resource/config/crypt.go,
# symmetricCrypter.EncryptValue: the passphrase and cloud KMS providers), or Pulumi Cloud's ciphertext
# in standard base64 alone (pkg/secrets/service/manager.go, serviceCrypter.EncryptValue).
SEALED = "v1:" + base64.b64encode(bytes(12)).decode() + ":" + base64.b64encode(bytes(16 + 5)).decode()
SERVICE = base64.b64encode(b"\x00\x01\x02" * 20).decode()
PLACEHOLDER = "v1:cGxhY2Vob2xkZXI=:replace-with-pulumi-config-set-secret"


def secrets_with(value: str) -> dict[str, Any]:
    return {"hf-token": {"token": {"secure": value}}, "chat-proxy-admin": {"ADMIN_API_KEY": {"secure": SEALED}}}


@pytest.mark.parametrize("value", [SEALED, SERVICE])
def test_a_value_a_secrets_provider_wrote_can_be_decrypted(value: str) -> None:
    assert unset_secret_paths(secrets_with(value)) == []


@pytest.mark.parametrize(
    "value",
    [
        PLACEHOLDER,  # prod's: the nonce is 11 bytes and the rest is not base64
        "v1:" + base64.b64encode(bytes(12)).decode() + ":c2hvcnQ=",  # shorter than GCM's tag
        "v2:" + SEALED[3:],
        "replace-me",
    ],
)
def test_a_value_no_secrets_provider_could_decrypt_is_found(value: str) -> None:
    assert unset_secret_paths(secrets_with(value)) == [["secrets", "hf-token", "token"]]


def test_the_example_prod_stack_holds_its_placeholders_until_they_are_set() -> None:
    stack_file = parse_stack_bytes(Path("Pulumi.prod.yaml"), (ROOT / "stacks" / "Pulumi.prod.yaml").read_bytes())
    assert [(problem.path, problem.line) for problem in stack_file.unset_secrets] == [
        ("secrets.hf-token.token", 107),
        ("secrets.chat-proxy-admin.ADMIN_API_KEY", 110),
    ]
    (first, _) = stack_file.unset_secrets
    assert "pulumi config set --secret --path 'inference-fleet:secrets.hf-token.token' <value>" in first.message
    assert "replace-with" not in first.message
