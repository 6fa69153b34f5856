"""The load balancer controller's IAM policy, held to the policy the controller publishes.

tests/data/aws-load-balancer-controller-v3.4.2-iam_policy.json is, byte for byte (git blob
761d0e733c41089c91ea009dd29faf71918085e5), docs/install/iam_policy.json of
kubernetes-sigs/aws-load-balancer-controller at tag v3.4.2, the controller of the pinned chart
aws-load-balancer-controller 3.4.2 (its Chart.yaml appVersion and image tag v3.4.2):
https://github.com/kubernetes-sigs/aws-load-balancer-controller/blob/v3.4.2/docs/install/iam_policy.json
On a chart bump, replace it with the new tag's file.

Statements are compared as (effect, action set, resource set, condition) with the Sid ignored,
as IAM evaluates them: every published statement must be in ours with exactly its actions,
resources and condition, and ours must have nothing else. The only exceptions are the actions
in LEFT_OUT, each with the reason; they are taken out of the published statements before the
comparison (two published statements mix them with actions we keep).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from components.catalog import pins
from components.platform.load_balancer import controller_policy, controller_values
from components.spec.region import Ingress
from tests.vendored import git_blob_id

PUBLISHED = Path(__file__).resolve().parent.parent / "data" / "aws-load-balancer-controller-v3.4.2-iam_policy.json"

_WAF = "the WAF Classic add-on, off: controller_values sets enableWaf false (--enable-waf=false)"
_WAFV2 = "the WAFv2 add-on, off: controller_values sets enableWafv2 false (--enable-wafv2=false)"
_SHIELD = "the Shield add-on, off: controller_values sets enableShield false (--enable-shield=false)"
LEFT_OUT: dict[str, str] = {
    "waf-regional:GetWebACL": _WAF,
    "waf-regional:GetWebACLForResource": _WAF,
    "waf-regional:AssociateWebACL": _WAF,
    "waf-regional:DisassociateWebACL": _WAF,
    "wafv2:GetWebACL": _WAFV2,
    "wafv2:GetWebACLForResource": _WAFV2,
    "wafv2:AssociateWebACL": _WAFV2,
    "wafv2:DisassociateWebACL": _WAFV2,
    "shield:GetSubscriptionState": _SHIELD,
    "shield:DescribeProtection": _SHIELD,
    "shield:CreateProtection": _SHIELD,
    "shield:DeleteProtection": _SHIELD,
    "elasticloadbalancing:SetWebAcl": "the ALB-side permission AssociateWebACL of WAF Classic and WAFv2 "
    "checks; with both WAF add-ons off nothing associates a web ACL",
}
"""Published actions ours leaves out. The controller at v3.4.2 calls WAF, WAFv2 and Shield only from
the add-on synthesizers its --enable-waf, --enable-wafv2 and --enable-shield flags gate
(pkg/deploy/stack_deployer.go), and our routes set no WAF or Shield annotation."""

Statement = tuple[str, frozenset[str], frozenset[str], frozenset[tuple[str, str, frozenset[str]]]]


def as_set(value: str | list[str]) -> frozenset[str]:
    return frozenset([value] if isinstance(value, str) else value)


def normal(statement: dict[str, Any]) -> Statement:
    """What IAM evaluates of an Allow/Deny statement, order and Sid aside."""
    assert set(statement) <= {"Sid", "Effect", "Action", "Resource", "Condition"}, sorted(statement)
    condition = frozenset(
        (operator, key, as_set(values))
        for operator, keys in statement.get("Condition", {}).items()
        for key, values in keys.items()
    )
    return statement["Effect"], as_set(statement["Action"]), as_set(statement["Resource"]), condition


def published(partition: str = "aws") -> dict[str, Any]:
    document: dict[str, Any] = json.loads(PUBLISHED.read_text().replace("arn:aws:", f"arn:{partition}:"))
    return document


def without_left_out(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The published statements without the LEFT_OUT actions (a statement left empty goes)."""
    kept = []
    for statement in copy.deepcopy(document["Statement"]):
        actions = [action for action in as_set(statement["Action"]) if action not in LEFT_OUT]
        if actions:
            kept.append({**statement, "Action": actions})
    return kept


def differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """Every statement one policy has and the other lacks (after LEFT_OUT), as readable lines."""
    assert ours["Version"] == theirs["Version"] == "2012-10-17"
    mine = Counter(normal(statement) for statement in ours["Statement"])
    expected = Counter(normal(statement) for statement in without_left_out(theirs))
    missing = [f"missing from ours: {sorted(s[1])} on {sorted(s[2])} if {sorted(s[3])}" for s in expected - mine]
    extra = [f"ours only: {sorted(s[1])} on {sorted(s[2])} if {sorted(s[3])}" for s in mine - expected]
    return missing + extra


def test_the_published_policy_is_the_upstream_file_of_the_pinned_controller() -> None:
    version = pins().charts.aws_load_balancer_controller.version
    assert PUBLISHED.name == f"aws-load-balancer-controller-v{version}-iam_policy.json"
    data = PUBLISHED.read_bytes()
    assert git_blob_id(data) == "761d0e733c41089c91ea009dd29faf71918085e5"


@pytest.mark.parametrize("index", range(len(published()["Statement"])))
def test_every_published_statement_is_ours_with_the_same_actions_resources_and_condition(index: int) -> None:
    statement = published()["Statement"][index]
    if as_set(statement["Action"]) <= set(LEFT_OUT):
        pytest.fail("a published statement of left-out actions only: say why in LEFT_OUT and skip it here")
    expected = normal({**statement, "Action": [a for a in as_set(statement["Action"]) if a not in LEFT_OUT]})
    assert expected in {normal(ours) for ours in controller_policy()["Statement"]}


@pytest.mark.parametrize("partition", ["aws", "aws-cn", "aws-us-gov"])
def test_ours_grants_nothing_the_published_policy_does_not(partition: str) -> None:
    """Per partition: the published iam_policy_cn.json and iam_policy_us-gov.json at v3.4.2 differ
    from iam_policy.json only in the ARN partition (and the order of two statements)."""
    assert differences(controller_policy(partition), published(partition)) == []


def test_no_left_out_action_is_granted_and_each_is_in_the_published_policy() -> None:
    granted = {action for statement in controller_policy()["Statement"] for action in as_set(statement["Action"])}
    assert not granted & set(LEFT_OUT)
    published_actions = {action for statement in published()["Statement"] for action in as_set(statement["Action"])}
    assert set(LEFT_OUT) <= published_actions


def test_the_add_ons_whose_actions_are_left_out_are_off_in_the_chart_values() -> None:
    values = controller_values("inference-fleet-prod-us-east-1", "us-east-1", "vpc-1", Ingress())
    assert (values["enableWaf"], values["enableWafv2"], values["enableShield"]) == (False, False, False)


def test_every_resource_arn_is_in_the_regions_partition() -> None:
    for statement in controller_policy("aws-cn")["Statement"]:
        for resource in as_set(statement["Resource"]):
            assert resource == "*" or resource.startswith("arn:aws-cn:"), resource


def test_sids_are_unique_and_alphanumeric() -> None:
    sids = [statement["Sid"] for statement in controller_policy()["Statement"]]
    assert len(sids) == len(set(sids))
    assert all(sid.isalnum() for sid in sids)


def _drop_set_rule_priorities(document: dict[str, Any]) -> None:
    for statement in document["Statement"]:
        statement["Action"] = [a for a in as_set(statement["Action"]) if a != "elasticloadbalancing:SetRulePriorities"]


def _unconditional_load_balancer_tags(document: dict[str, Any]) -> None:
    for statement in document["Statement"]:
        if "elasticloadbalancing:RemoveTags" in as_set(statement["Action"]):
            statement.pop("Condition", None)


def _any_partition(document: dict[str, Any]) -> None:
    for statement in document["Statement"]:
        statement["Resource"] = [r.replace("arn:aws:", "arn:*:") for r in as_set(statement["Resource"])]


def _grant_waf(document: dict[str, Any]) -> None:
    document["Statement"].append({"Effect": "Allow", "Action": "wafv2:AssociateWebACL", "Resource": "*"})


@pytest.mark.parametrize(
    "change",
    [_drop_set_rule_priorities, _unconditional_load_balancer_tags, _any_partition, _grant_waf],
    ids=["no SetRulePriorities", "unconditional AddTags/RemoveTags", "any partition", "a WAF action"],
)
def test_the_comparison_catches_what_the_policy_once_got_wrong(change: Any) -> None:
    """The gaps of the policy before this comparison existed, each found."""
    document = controller_policy()
    change(document)
    assert differences(document, published())
