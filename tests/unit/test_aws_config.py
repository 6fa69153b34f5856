"""The stack file's aws:* keys: passed to every explicit provider, or refused.

An explicit ``aws.Provider`` takes its settings from its arguments only; the stack's aws:* config is
the default provider's, which the program never uses. pulumi_aws 7.51.1 ``Provider`` takes
``profile``, ``assume_roles`` (``ProviderAssumeRoleArgs``: role_arn, session_name, external_id, ...),
``allowed_account_ids``, ``forbidden_account_ids``, ``shared_config_files`` and
``shared_credentials_files``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.aws_config import aws_settings
from fleetctl.stackfile import StackFileError, parse_stack_bytes

ROLE = "arn:aws:iam::123456789012:role/inference-fleet-deployer"


def test_profile_roles_and_accounts_become_provider_arguments() -> None:
    settings, problems = aws_settings(
        {
            "aws:profile": "prod-deployer",
            "aws:assumeRoles": json.dumps([{"roleArn": ROLE, "sessionName": "pulumi", "externalId": "x"}]),
            "aws:allowedAccountIds": json.dumps(["123456789012"]),
            "inference-fleet:regions": "{}",
        }
    )
    assert problems == []
    assert settings.provider_args == {
        "profile": "prod-deployer",
        "assume_roles": [{"role_arn": ROLE, "session_name": "pulumi", "external_id": "x"}],
        "allowed_account_ids": ["123456789012"],
    }
    assert (settings.profile, settings.role_arn) == ("prod-deployer", ROLE)


def test_aws_region_is_refused_because_every_provider_has_its_own() -> None:
    _, problems = aws_settings({"aws:region": "us-east-1"})
    assert [problem.path for problem in problems] == ["aws:region"]
    assert "configures nothing" in problems[0].message


@pytest.mark.parametrize(
    ("config", "path", "fragment"),
    [
        ({"aws:assumeRole": "{}"}, "aws:assumeRole", "did you mean 'aws:assumeRoles'?"),
        ({"aws:skipCredentialsValidation": "true"}, "aws:skipCredentialsValidation", "is not passed"),
        ({"aws:allowedAccountIds": '["1234"]'}, "aws:allowedAccountIds[0]", "12-digit"),
        ({"aws:assumeRoles": '[{"roleArn": "ci"}]'}, "aws:assumeRoles[0].roleArn", "IAM role ARN"),
        (
            {"aws:assumeRoles": json.dumps([{"roleArn": ROLE}, {"roleArn": ROLE}])},
            "aws:assumeRoles",
            "assumes a single role",
        ),
    ],
)
def test_keys_the_providers_would_not_honour_are_refused(config: dict[str, str], path: str, fragment: str) -> None:
    _, problems = aws_settings(config)
    assert [problem.path for problem in problems] == [path]
    assert fragment in problems[0].message


def test_fleetctl_validate_refuses_aws_region_in_a_stack_file() -> None:
    text = b"config:\n  aws:region: us-east-1\n  inference-fleet:regions: {}\n"
    with pytest.raises(StackFileError) as refused:
        parse_stack_bytes(Path("Pulumi.dev.yaml"), text)
    assert [problem.path for problem in refused.value.problems] == ["aws:region"]
