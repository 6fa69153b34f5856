"""A streamed model_source's IAM, evaluated by the real IAM policy engine the cold tier's tests use
(tools/iam-simulate): every request the Run:ai Model Streamer makes for a streamed load
(components/render/model_loading.py STREAMER_REQUESTS, which tests/e2e/test_model_streaming.py checks
against the real streamer's requests) is allowed to the role the pods run as, and nothing beside the
model's prefix is.

The documents are the dev example's, as the program renders them: ``assistant`` streams
s3://dev-models/qwen3-8b; the role is the one its pods' ServiceAccount is bound to through its Pod
Identity association. The model bucket is the operator's, with no policy of ours: the identity policy
alone decides (same account).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from components import naming
from components.render.model_loading import STREAMER_REQUESTS, StreamerRequest
from tests.component.programs import by_type, example_plan
from tests.security.test_cold_tier_access import ACCOUNT, ALLOWED, decide, s3_context

STACK = "dev"
REGION = "us-west-2"
ENDPOINT = "assistant"
BUCKET = "dev-models"
PREFIX = "qwen3-8b"
WEIGHTS = "model-00001-of-00004.safetensors"


@cache
def role_and_policy() -> tuple[str, dict[str, Any]]:
    plan = example_plan(STACK)
    (deployment,) = [
        resource["inputs"]
        for resource in by_type(plan, "kubernetes:apps/v1:Deployment")
        if resource["name"] == f"{REGION}-{ENDPOINT}"
    ]
    pod = deployment["spec"]["template"]["spec"]
    assert "runai_streamer" in pod["containers"][0]["args"], "the example streams this endpoint"
    assert pod["containers"][0]["args"][0] == f"s3://{BUCKET}/{PREFIX}"
    (association,) = [
        association["inputs"]
        for association in by_type(plan, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if association["inputs"]["clusterName"] == f"{naming.fleet_name(STACK)}-{REGION}"
        and association["inputs"]["namespace"] == deployment["metadata"]["namespace"]
        and association["inputs"]["serviceAccount"] == pod["serviceAccountName"]
    ]
    role = association["roleArn"].rsplit("/", 1)[1]
    (policy,) = [
        json.loads(policy["inputs"]["policy"])
        for policy in by_type(plan, "aws:iam/rolePolicy:RolePolicy")
        if policy["inputs"]["role"] == f"{role}-id"
    ]
    return role, policy


def check(action: str, resource: str, context: dict[str, str]) -> dict[str, Any]:
    role, policy = role_and_policy()
    return {
        "request": {
            "principal": f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/eks-inference-{ENDPOINT}-5d8f7c9b4-q2w3e",
            "action": action,
            "resource": {"resource": resource, "accountId": ACCOUNT},
            "contextVariables": {
                **context,
                "aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/{role}",
                "aws:PrincipalAccount": ACCOUNT,
                "aws:PrincipalType": "AssumedRole",
            },
        },
        "identityPolicies": [{"name": role, "policy": policy}],
    }


def streamer_checks(request: StreamerRequest) -> list[dict[str, Any]]:
    """The authorisations S3 makes for one kind of the streamer's requests, on the dev model."""
    if not request.on_object:
        # ListObjectsV2 with Prefix "<prefix>/" (runai_model_streamer_s3.files.list_files).
        return [check(request.action, f"arn:aws:s3:::{BUCKET}", s3_context(**{"s3:prefix": f"{PREFIX}/"}))]
    keys = [f"{PREFIX}/config.json", f"{PREFIX}/{WEIGHTS}", f"{PREFIX}/tokenizer/tokenizer.json"]
    return [check(request.action, f"arn:aws:s3:::{BUCKET}/{key}", s3_context()) for key in keys]


FORBIDDEN = {
    "listing the bucket beyond the model's prefix": check(
        "s3:ListBucket", f"arn:aws:s3:::{BUCKET}", s3_context(**{"s3:prefix": ""})
    ),
    "listing a sibling prefix that starts alike": check(
        "s3:ListBucket", f"arn:aws:s3:::{BUCKET}", s3_context(**{"s3:prefix": f"{PREFIX}-instruct/"})
    ),
    "reading a sibling prefix that starts alike": check(
        "s3:GetObject", f"arn:aws:s3:::{BUCKET}/{PREFIX}-instruct/{WEIGHTS}", s3_context()
    ),
    "reading at the bucket root": check("s3:GetObject", f"arn:aws:s3:::{BUCKET}/{WEIGHTS}", s3_context()),
    "writing the weights": check("s3:PutObject", f"arn:aws:s3:::{BUCKET}/{PREFIX}/{WEIGHTS}", s3_context()),
    "deleting the weights": check("s3:DeleteObject", f"arn:aws:s3:::{BUCKET}/{PREFIX}/{WEIGHTS}", s3_context()),
    "reading another bucket": check("s3:GetObject", f"arn:aws:s3:::other-models/{PREFIX}/{WEIGHTS}", s3_context()),
}


@pytest.fixture(scope="module")
def decisions() -> dict[str, list[str]]:
    names: list[str] = []
    simulations: list[dict[str, Any]] = []
    for request in STREAMER_REQUESTS:
        for simulation in streamer_checks(request):
            names.append(request.name)
            simulations.append(simulation)
    for name, simulation in FORBIDDEN.items():
        names.append(name)
        simulations.append(simulation)
    found: dict[str, list[str]] = {}
    for name, decision in zip(names, decide(simulations), strict=True):
        found.setdefault(name, []).append(decision)
    return found


@pytest.mark.parametrize("request_name", [request.name for request in STREAMER_REQUESTS])
def test_every_request_of_a_streamed_load_is_allowed(decisions: dict[str, list[str]], request_name: str) -> None:
    assert decisions[request_name] == [ALLOWED] * len(decisions[request_name])


@pytest.mark.parametrize("request_name", list(FORBIDDEN))
def test_what_the_role_must_not_do_beside_the_model_is_denied(
    decisions: dict[str, list[str]], request_name: str
) -> None:
    (decision,) = decisions[request_name]
    assert decision != ALLOWED
