"""Prometheus's remote write to Amazon Managed Service for Prometheus, when a region names a
workspace: what the program plans (the role, its policy, the Pod Identity association of the
server's ServiceAccount, the remote write block) and that policy evaluated by a real IAM engine
(tools/iam-simulate, as the cold tier's): the server may write to that workspace and nothing else."""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from components import naming
from fleetctl.plan import Plan, run_program
from fleetctl.stackfile import read_stack_file
from tests.component.programs import by_type, edited
from tests.security.test_cold_tier_access import ACCOUNT, ALLOWED, decide

REGION = "us-east-1"
WORKSPACE = f"arn:aws:aps:{REGION}:{ACCOUNT}:workspace/ws-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"
OTHER_WORKSPACE = f"arn:aws:aps:{REGION}:{ACCOUNT}:workspace/ws-ffffffff-4e5f-6a7b-8c9d-0e1f2a3b4c5d"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/{REGION}-prometheus"


@cache
def amp_plan() -> Plan:
    directory = Path(tempfile.mkdtemp(prefix="amp-plan-"))
    stack = edited(
        directory,
        "prod",
        (
            '    us-east-1:\n      kubernetes_version: "1.34"\n',
            f'    us-east-1:\n      kubernetes_version: "1.34"\n      metrics: {{amp_workspace_arn: "{WORKSPACE}"}}\n',
        ),
    )
    return run_program(read_stack_file(stack))


def named(resource_type: str, name: str) -> dict[str, Any]:
    (found,) = [r for r in by_type(amp_plan(), resource_type) if r["name"] == name]
    return found


def test_the_server_writes_every_sample_to_the_workspace_signed_for_its_region() -> None:
    release = named("kubernetes:helm.sh/v3:Release", f"{REGION}-prometheus")
    values = release["inputs"]["values"]
    assert values["server"]["remoteWrite"] == [
        {
            "url": f"https://aps-workspaces.{REGION}.amazonaws.com/workspaces/"
            "ws-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d/api/v1/remote_write",
            "sigv4": {"region": REGION},
        }
    ]
    assert values["serviceAccounts"]["server"] == {"create": True, "name": "prometheus"}
    association = named("aws:eks/podIdentityAssociation:PodIdentityAssociation", f"{REGION}-prometheus")
    assert (association["inputs"]["namespace"], association["inputs"]["serviceAccount"]) == (
        naming.METRICS_NAMESPACE,
        "prometheus",
    )
    assert association["urn"] in release["options"]["dependsOn"]


def test_a_region_without_a_workspace_writes_nowhere_and_has_no_role() -> None:
    release = named("kubernetes:helm.sh/v3:Release", "eu-west-1-prometheus")
    assert "remoteWrite" not in release["inputs"]["values"]["server"]
    assert not [r for r in by_type(amp_plan(), "aws:iam/role:Role") if r["name"] == "eu-west-1-prometheus"]


def simulation(policy: dict[str, Any], action: str, resource: str) -> dict[str, Any]:
    return {
        "request": {
            "principal": ROLE,
            "action": action,
            "resource": {"resource": resource, "accountId": ACCOUNT},
            "contextVariables": {},
        },
        "identityPolicies": [{"name": f"{REGION}-prometheus", "policy": policy}],
    }


@pytest.fixture(scope="module")
def policy() -> dict[str, Any]:
    planned: dict[str, Any] = json.loads(
        named("aws:iam/rolePolicy:RolePolicy", f"{REGION}-prometheus")["inputs"]["policy"]
    )
    return planned


def test_the_role_may_write_to_its_workspace(policy: dict[str, Any]) -> None:
    assert decide([simulation(policy, "aps:RemoteWrite", WORKSPACE)]) == [ALLOWED]


@pytest.mark.parametrize(
    ("action", "resource"),
    [
        ("aps:RemoteWrite", OTHER_WORKSPACE),
        ("aps:QueryMetrics", WORKSPACE),
        ("aps:DeleteWorkspace", WORKSPACE),
        ("aps:CreateRuleGroupsNamespace", f"{WORKSPACE.replace('workspace/', 'rulegroupsnamespace/')}/rules"),
    ],
)
def test_the_role_may_do_nothing_else(policy: dict[str, Any], action: str, resource: str) -> None:
    (decision,) = decide([simulation(policy, action, resource)])
    assert decision != ALLOWED
