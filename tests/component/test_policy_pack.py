"""The policy pack over offline plans: both example stacks pass; crafted bad plans fail,
offline (fleetctl plan --policy) and through the real pulumi-policy SDK (the pack's own
virtualenv, built by `make test`)."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetctl.cli import main as fleetctl
from fleetctl.policy_check import check_plan
from tests.component.programs import edited, example_plan

ROOT = Path(__file__).resolve().parents[2]
POLICY_PYTHON = ROOT / "policy" / "venv" / "bin" / "python"


def resources_of(stack: str) -> list[dict[str, Any]]:
    return [copy.deepcopy(entry) for entry in example_plan(stack).resources]


def spoiled(stack: str, resource_type: str, spoil: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    resources = resources_of(stack)
    for entry in resources:
        if entry["type"] == resource_type:
            spoil(entry)
    return resources


def unblock(entry: dict[str, Any]) -> None:
    entry["inputs"]["restrictPublicBuckets"] = False


def drop_limits(entry: dict[str, Any]) -> None:
    entry["inputs"]["spec"]["template"]["spec"]["containers"][0]["resources"].pop("limits")


def leave_placement_group(entry: dict[str, Any]) -> None:
    entry["inputs"].pop("placement", None)


def grant_every_bucket(entry: dict[str, Any]) -> None:
    document = json.loads(entry["inputs"]["policy"])
    document["Statement"].append({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::*/*"})
    entry["inputs"]["policy"] = json.dumps(document)


BAD_PLANS = [
    pytest.param(
        "prod",
        "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
        unblock,
        "private-encrypted-buckets",
        id="public-bucket",
    ),
    pytest.param("prod", "kubernetes:apps/v1:StatefulSet", drop_limits, "container-resources", id="no-limits"),
    pytest.param(
        "prod",
        "aws:ec2/launchTemplate:LaunchTemplate",
        leave_placement_group,
        "efa-node-groups",
        id="efa-without-placement-group",
    ),
    pytest.param(
        "dev", "aws:iam/rolePolicy:RolePolicy", grant_every_bucket, "no-wildcard-s3-objects", id="wildcard-s3"
    ),
]


@pytest.mark.parametrize("stack", ["dev", "prod", "existing"])
def test_both_example_stacks_pass_every_rule(stack: str) -> None:
    assert check_plan(example_plan(stack).resources) == []


@pytest.mark.parametrize(("stack", "resource_type", "spoil", "rule"), BAD_PLANS)
def test_a_crafted_bad_plan_fails_the_rule_it_breaks(
    stack: str, resource_type: str, spoil: Callable[[dict[str, Any]], None], rule: str
) -> None:
    found = check_plan(spoiled(stack, resource_type, spoil))
    assert found
    assert {violation.rule for violation in found} == {rule}


def test_fleetctl_plan_policy_reports_an_unprotected_cold_tier(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = edited(
        tmp_path / "stack",
        "prod",
        ("        retain_on_delete: true\n", "        retain_on_delete: true\n        protect: false\n"),
    )
    code = fleetctl(["plan", "--stack-file", str(stack), "--out", str(tmp_path / "plan"), "--policy"])
    err = capsys.readouterr().err
    assert code == 1
    assert "policy protected-cold-tier:" in err
    assert "us-east-1-cold-tier-bucket" in err


def test_the_pack_built_with_the_real_policy_sdk_agrees(tmp_path: Path) -> None:
    if not POLICY_PYTHON.exists():
        pytest.fail("policy/venv is missing: `make test` builds the policy pack's virtualenv")
    paths = {}
    for name, resources in (
        ("dev", resources_of("dev")),
        ("prod", resources_of("prod")),
        ("bad", spoiled("prod", "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", unblock)),
    ):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps({"resources": resources}))
    completed = subprocess.run(
        [str(POLICY_PYTHON), "selftest.py", *(str(path) for path in paths.values())],
        cwd=ROOT / "policy",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    results = json.loads(completed.stdout)
    assert results[str(paths["dev"])] == []
    assert results[str(paths["prod"])] == []
    assert {violation[0] for violation in results[str(paths["bad"])]} == {"private-encrypted-buckets"}
