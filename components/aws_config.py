"""The ``aws:*`` keys of a stack file, which only Pulumi's default AWS provider would read.

The program builds an explicit ``aws.Provider`` per region (and one for Global Accelerator's API
region), and an explicit provider takes its settings from its arguments alone: a stack file's
``aws:profile`` or ``aws:assumeRoles`` reach it only when the program passes them. This module
reads those keys once, as the engine hands them over (strings, objects as JSON), into the
arguments every provider gets (``pulumi_aws`` 7.51.1 ``Provider``: ``profile``, ``assume_roles``,
``allowed_account_ids``, ``forbidden_account_ids``, ``shared_config_files``,
``shared_credentials_files``) and into the kubeconfig's credentials (``aws eks get-token
--profile --role-arn``), and refuses the keys that would configure nothing: ``aws:region``
(each provider's region is the region it serves) and any other ``aws:`` key.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.spec.errors import Problem

NAMESPACE = "aws"

# Stack-file key -> the pulumi_aws.Provider argument it becomes.
PASSED = {
    "profile": "profile",
    "assumeRoles": "assume_roles",
    "allowedAccountIds": "allowed_account_ids",
    "forbiddenAccountIds": "forbidden_account_ids",
    "sharedConfigFiles": "shared_config_files",
    "sharedCredentialsFiles": "shared_credentials_files",
}
# A role's keys in aws:assumeRoles -> ProviderAssumeRoleArgs's.
ROLE_KEYS = {
    "roleArn": "role_arn",
    "sessionName": "session_name",
    "externalId": "external_id",
    "duration": "duration",
    "policy": "policy",
    "policyArns": "policy_arns",
    "sourceIdentity": "source_identity",
    "tags": "tags",
    "transitiveTagKeys": "transitive_tag_keys",
}
_ACCOUNT = re.compile(r"^[0-9]{12}$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+$")


@dataclass(frozen=True)
class AwsSettings:
    """What every AWS provider of the program, and every kubeconfig, is given."""

    provider_args: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``pulumi_aws.Provider`` (assume roles as dicts of its argument names)."""
    profile: str | None = None
    role_arn: str | None = None
    """The one role ``aws eks get-token`` assumes: the identity that creates, so administers, the clusters."""


def _decoded(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _strings(key: str, value: Any, problems: list[Problem], pattern: re.Pattern[str] | None = None) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        problems.append(Problem(f"{NAMESPACE}:{key}", "must be a list of strings"))
        return []
    for index, item in enumerate(value):
        if pattern is not None and not pattern.match(item):
            problems.append(Problem(f"{NAMESPACE}:{key}[{index}]", f"must be a 12-digit AWS account id, got {item!r}"))
    return list(value)


def _roles(value: Any, problems: list[Problem]) -> list[dict[str, Any]]:
    where = f"{NAMESPACE}:assumeRoles"
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        problems.append(Problem(where, "must be a list of roles, each a mapping with roleArn (and sessionName, ...)"))
        return []
    if len(value) > 1:
        problems.append(
            Problem(
                where,
                f"lists {len(value)} roles; give one: the kubeconfig's `aws eks get-token --role-arn` assumes a "
                "single role from the deployer's credentials, and that role creates, so administers, the clusters",
            )
        )
    roles = []
    for index, role in enumerate(value):
        unknown = sorted(set(role) - set(ROLE_KEYS))
        if unknown:
            problems.append(
                Problem(f"{where}[{index}]", f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(ROLE_KEYS)}")
            )
        arn = role.get("roleArn")
        if not isinstance(arn, str) or not _ROLE_ARN.match(arn):
            problems.append(
                Problem(
                    f"{where}[{index}].roleArn",
                    f"must be an IAM role ARN (arn:aws:iam::<account>:role/<name>), got {arn!r}",
                )
            )
        roles.append({ROLE_KEYS[key]: item for key, item in role.items() if key in ROLE_KEYS})
    return roles


def aws_settings(config: Mapping[str, Any]) -> tuple[AwsSettings, list[Problem]]:
    """The settings of every AWS provider from a stack's config (keys with their namespace, values as
    the engine gives them), and a problem for each ``aws:`` key the program would not honour."""
    problems: list[Problem] = []
    args: dict[str, Any] = {}
    for full_key in sorted(config):
        namespace, _, key = str(full_key).partition(":")
        if namespace != NAMESPACE:
            continue
        value = _decoded(config[full_key])
        if key == "region":
            problems.append(
                Problem(
                    full_key,
                    "configures nothing: the program builds one AWS provider per region of inference-fleet:regions "
                    "(and one in us-west-2 for Global Accelerator), each with its own region; remove the line",
                )
            )
        elif key == "profile":
            if isinstance(value, str) and value:
                args["profile"] = value
            else:
                problems.append(Problem(full_key, "must be the name of a profile of the AWS config files"))
        elif key == "assumeRoles":
            args["assume_roles"] = _roles(value, problems)
        elif key in ("allowedAccountIds", "forbiddenAccountIds"):
            args[PASSED[key]] = _strings(key, value, problems, _ACCOUNT)
        elif key in PASSED:
            args[PASSED[key]] = _strings(key, value, problems)
        else:
            close = difflib.get_close_matches(key, list(PASSED), n=1, cutoff=0.6)
            hint = f"did you mean {f'{NAMESPACE}:{close[0]}'!r}? " if close else ""
            problems.append(
                Problem(
                    full_key,
                    f"is not passed to the program's AWS providers, which are built explicitly, one per region, so it "
                    f"would do nothing; {hint}the stack file may set "
                    f"{', '.join(f'{NAMESPACE}:{name}' for name in PASSED)} (the rest comes from the environment: "
                    "AWS_* variables and the AWS config files)",
                )
            )
    roles: Sequence[Mapping[str, Any]] = args.get("assume_roles", [])
    role_arn = roles[0].get("role_arn") if len(roles) == 1 else None
    settings = AwsSettings(
        provider_args=args,
        profile=args.get("profile"),
        role_arn=role_arn if isinstance(role_arn, str) else None,
    )
    return settings, problems
