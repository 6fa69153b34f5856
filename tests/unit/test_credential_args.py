"""A credential passed in ``args`` would sit in the pod spec, the plan, the Pulumi state and every
process listing: such flags are refused, pointing to secret_env."""

from __future__ import annotations

from typing import Any

import pytest

from components.spec import Problem, SpecError, parse_stack_config
from components.spec.server_args import credential_flag

from .stack_builders import with_classic, with_mooncake


def only_problem(config: dict[str, Any]) -> Problem:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(config)
    (problem,) = caught.value.problems
    return problem


@pytest.mark.parametrize(
    ("arg", "flag"),
    [
        ("--api-key", "--api-key"),
        ("--api-key=sk-0123456789abcdefghijkl", "--api-key"),
        ("--api_key", "--api-key"),
        ("--hf-token", "--hf-token"),
        ("--token=hf_x", "--token"),
        ("--key", "--key"),
        ("--aws-secret", "--aws-secret"),
        ("--db-password=hunter2", "--db-password"),
        ("--Admin-Token", "--admin-token"),
        ("--max-num-batched-tokens", None),
        ("--tokenizer", None),
        ("--ssl-keyfile", None),
        ("--keys", None),
        ("sk-0123456789", None),
        ("8192", None),
    ],
)
def test_credential_flags_are_recognised_by_name(arg: str, flag: str | None) -> None:
    assert credential_flag(arg) == flag


def test_an_api_key_in_args_is_refused_pointing_to_secret_env() -> None:
    problem = only_problem(with_classic({"args": ["--max-model-len", "8192", "--api-key", "sk-0123456789abcdef"]}))
    assert problem.path == "endpoints.chat.args[2]"
    assert problem.message == (
        "'--api-key' passes a credential on the command line, where the pod spec, the plan, the Pulumi state and "
        "process listings show it; remove it from args: read it from a Kubernetes Secret instead: secret_env: "
        "{VLLM_API_KEY: {secret: <name>, key: <key>}} (vLLM reads VLLM_API_KEY for --api-key)"
    )


@pytest.mark.parametrize("arg", ["--hf-token=hf_0123456789", "--token"])
def test_a_hub_token_in_args_points_to_hf_token(arg: str) -> None:
    problem = only_problem(with_classic({"args": [arg]}))
    assert "secret_env: {HF_TOKEN: {secret: <name>, key: <key>}}" in problem.message


def test_other_frameworks_are_told_to_use_the_variable_their_server_reads() -> None:
    config = with_classic({"image": "ghcr.io/huggingface/text-generation-inference:3.3.4", "args": ["--api-key=x"]})
    problem = only_problem(config)
    assert problem.path == "endpoints.chat.args[0]"
    assert "with the variable the server reads for it" in problem.message


def test_a_mooncake_endpoints_key_comes_from_the_proxy_secret() -> None:
    problem = only_problem(with_mooncake({"args": ["--api-key", "sk-0123456789"]}))
    assert problem.path == "endpoints.chat.args[0]"
    assert "mooncake.proxy.admin_api_key_secret" in problem.message
