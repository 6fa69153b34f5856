"""An endpoint's server arguments: how a flag's value and a credential flag are read from them, and
the rules of what args (and env) may say beside what inference-fleet renders from the fields."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic_core import PydanticCustomError

from components.render.frameworks import ADAPTERS, DRAIN_SOURCE, flag_name
from components.render.mooncake_env import ROLE_ENV
from components.spec.base import fail
from components.spec.roles import MULTI_NODE_FLAGS, ROLES_PATH, SPLIT_ROLES

if TYPE_CHECKING:
    from components.spec.endpoint import Endpoint

CREDENTIAL_FLAG_WORDS = ("key", "token", "secret", "password")
"""A flag named one of these, or ending in ``-<word>`` (``--api-key``, ``--hf-token``), takes a credential."""
VLLM_CREDENTIAL_ENV = {"--api-key": "VLLM_API_KEY", "--hf-token": "HF_TOKEN", "--token": "HF_TOKEN"}
"""Where vLLM reads the same credential from the environment (vllm/envs.py, huggingface_hub)."""


def flag_value(args: tuple[str, ...], flag: str) -> str | None:
    """The value ``args`` give ``flag`` (``--flag value`` or ``--flag=value``, the last one winning as
    with argparse; vLLM reads ``_`` in a flag's name as ``-``), None when they give none."""
    value = None
    for index, arg in enumerate(args):
        name = flag_name(arg)
        if name is None or "--" + name.lstrip("-").replace("_", "-") != flag:
            continue
        if "=" in arg:
            value = arg.split("=", 1)[1]
        elif index + 1 < len(args):
            value = args[index + 1]
    return value


def credential_flag(arg: str) -> str | None:
    """The flag of ``arg`` (``--api-key`` of ``--api-key=sk-...`` or of ``--api_key``) when it takes a
    credential, else None."""
    name = flag_name(arg)
    if name is None:
        return None
    normalized = "--" + name.lstrip("-").lower().replace("_", "-")
    word = normalized.removeprefix("--")
    if word in CREDENTIAL_FLAG_WORDS or word.endswith(tuple(f"-{w}" for w in CREDENTIAL_FLAG_WORDS)):
        return normalized
    return None


def args_rules(endpoint: Endpoint) -> Iterator[PydanticCustomError]:
    """Refuse args and env that repeat what inference-fleet renders from a field."""
    owned = endpoint.server_launch().owned
    variables = {name: source for name, source in owned.items() if not name.startswith("-")}
    if endpoint.mooncake is not None:
        owned["--kv-transfer-config"] = "mooncake"
        variables.update(ROLE_ENV)
    for variable in (*endpoint.env, *endpoint.secret_env):
        if variable in variables:
            field = "env" if variable in endpoint.env else "secret_env"
            yield fail(
                "owned_env",
                "{name!r} is set by inference-fleet from {source}; remove it",
                at=f"{field}.{variable}",
                name=variable,
                source=variables[variable],
            )
    if endpoint.args and flag_name(endpoint.args[0]) is None and ADAPTERS[endpoint.framework].model_flag is None:
        # After the rendered flags (each with its value) a bare word is a second positional model.
        source = owned["--model"]
        yield fail(
            "positional_model",
            "{arg!r} would be a second positional model; the model is rendered from {source}: set {source} "
            "instead of passing it in args",
            at="args[0]",
            arg=endpoint.args[0],
            source=source,
        )
    for index, arg in enumerate(endpoint.args):
        credential = _credential_rule(endpoint, index, arg)
        name = flag_name(arg)
        if credential is not None:
            yield credential
        elif name in owned and owned[name] == DRAIN_SOURCE:
            yield fail(
                "owned_flag",
                "{name!r} is rendered by inference-fleet so that the server drains within its pod's grace "
                'period (docs/deploying.md, "How a rollout drains"); remove it',
                at=f"args[{index}]",
                name=name,
            )
        elif name in owned:
            yield fail(
                "owned_flag",
                "{name!r} is rendered from {source}; set {source} instead of passing it in args",
                at=f"args[{index}]",
                name=name,
                source=owned[name],
            )


def _credential_rule(endpoint: Endpoint, index: int, arg: str) -> PydanticCustomError | None:
    """A credential on the command line is in the pod spec, the plan, the state and every process
    listing: it belongs in a Secret, read through secret_env."""
    flag = credential_flag(arg)
    if flag is None:
        return None
    variable = VLLM_CREDENTIAL_ENV.get(flag) if endpoint.framework == "vllm" else None
    if variable == "VLLM_API_KEY" and endpoint.mooncake is not None:
        fix = (
            "a Mooncake endpoint's servers take their key from mooncake.proxy.admin_api_key_secret "
            "(a Secret the proxy presents too)"
        )
    elif variable is not None:
        fix = (
            f"read it from a Kubernetes Secret instead: secret_env: {{{variable}: {{secret: <name>, "
            f"key: <key>}}}} (vLLM reads {variable} for {flag})"
        )
    else:
        fix = (
            "read it from a Kubernetes Secret instead: secret_env: {<VARIABLE>: {secret: <name>, key: "
            "<key>}}, with the variable the server reads for it"
        )
    return fail(
        "credential_in_args",
        "{flag!r} passes a credential on the command line, where the pod spec, the plan, the Pulumi state "
        "and process listings show it; remove it from args: {fix}",
        at=f"args[{index}]",
        flag=flag,
        fix=fix,
    )


def role_args_rules(endpoint: Endpoint) -> Iterator[PydanticCustomError]:
    """A role's own args, held to the same rules as the endpoint's, each problem at the role's field."""
    for role in SPLIT_ROLES:
        shape = endpoint.mooncake.roles.shape(role) if endpoint.mooncake is not None else None
        if shape is None or shape.args is None:
            continue
        for problem in args_rules(endpoint.role_spec(role)):
            at = str((problem.context or {}).get("at", ""))
            if at.startswith("args"):  # env is the endpoint's, checked once with its own args
                yield PydanticCustomError(problem.type, problem.message_template, {"at": f"{ROLES_PATH}.{role}.{at}"})


def group_args_rules(endpoint: Endpoint) -> Iterator[PydanticCustomError]:
    """A role spanning nodes renders its multi-node launch from ``nodes``: args must not set it."""
    for role in SPLIT_ROLES:
        if endpoint.nodes(role) == 1:
            continue
        shape = endpoint.mooncake.roles.shape(role) if endpoint.mooncake is not None else None
        where = f"{ROLES_PATH}.{role}.args" if shape is not None and shape.args is not None else "args"
        for index, arg in enumerate(endpoint.role_spec(role).args):
            name = flag_name(arg)
            if name is not None and "--" + name.lstrip("-").replace("_", "-") in MULTI_NODE_FLAGS:
                yield fail(
                    "group_flag",
                    "{name!r} is rendered for {role}, which spans {nodes} nodes, from mooncake.roles.{role}.nodes "
                    "(vLLM's multi-node launch, one pipeline stage per node); remove it",
                    at=f"{where}[{index}]",
                    name=name,
                    role=role,
                    nodes=endpoint.nodes(role),
                )
