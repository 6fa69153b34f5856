"""IAM policy documents of the platform: what each statement allows, on what, under which condition."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.naming import KV_PREFIX
from components.platform.policies import (
    OBJECT_TIER_PROBE_KEY,
    deny_insecure_transport,
    pod_identity_trust,
    s3_location,
    workload_access,
)

BUCKET_ARN = "arn:aws:s3:::inference-fleet-prod-kv-123456789012-eu-west-1"
KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
REGION = "eu-west-1"
SOURCES = ("s3://weights/llama-3/", "s3://weights/mistral", "s3://other-weights/qwen/v2")

fast = settings(max_examples=100, deadline=None)


def statements(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Statements by Sid (every statement of ours has one)."""
    by_sid = {statement["Sid"]: statement for statement in document["Statement"]}
    assert len(by_sid) == len(document["Statement"])
    return by_sid


def as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def object_action(action: str) -> bool:
    """S3 actions on objects (or their uploads), as opposed to bucket-level ones such as ListBucket."""
    return action.startswith("s3:") and ("Object" in action or "Multipart" in action or action == "s3:*")


# Bucket policy: TLS only.


def test_insecure_transport_is_denied_on_the_bucket_and_every_object() -> None:
    deny = statements(deny_insecure_transport(BUCKET_ARN))["DenyInsecureTransport"]
    assert deny["Effect"] == "Deny"
    assert deny["Principal"] == "*"
    assert deny["Action"] == "s3:*"
    assert deny["Resource"] == [BUCKET_ARN, f"{BUCKET_ARN}/*"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_tls_older_than_1_2_is_denied_on_the_bucket_and_every_object() -> None:
    deny = statements(deny_insecure_transport(BUCKET_ARN))["DenyTlsOlderThan12"]
    assert deny["Effect"] == "Deny"
    assert deny["Principal"] == "*"
    assert deny["Action"] == "s3:*"
    assert deny["Resource"] == [BUCKET_ARN, f"{BUCKET_ARN}/*"]
    assert deny["Condition"] == {"NumericLessThan": {"s3:TlsVersion": "1.2"}}


def test_the_bucket_policy_only_denies() -> None:
    document = deny_insecure_transport(BUCKET_ARN)
    assert document["Version"] == "2012-10-17"
    assert {statement["Effect"] for statement in document["Statement"]} == {"Deny"}


# Trust.


def test_only_eks_pod_identity_for_the_account_may_assume_the_role_and_tag_its_session() -> None:
    assert pod_identity_trust("123456789012") == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "EksPodIdentity",
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {"StringEquals": {"aws:SourceAccount": "123456789012"}},
            }
        ],
    }


def test_the_trust_names_the_account_it_is_given() -> None:
    statement = pod_identity_trust("210987654321")["Statement"][0]
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": "210987654321"}}


@pytest.mark.parametrize("account", ["", "12345678901", "1234567890123", "12345678901a", "<account>"])
def test_the_trust_refuses_what_is_not_an_account_id(account: str) -> None:
    with pytest.raises(ValueError, match="an AWS account id is 12 digits"):
        pod_identity_trust(account)


# Workload access: the cold tier.

KV = "mooncake-kv/chat/"


def cold_tier_args(cold_tier: bool) -> tuple[str | None, str | None]:
    return (BUCKET_ARN, KEY_ARN) if cold_tier else (None, None)


def test_the_cold_tier_bucket_is_listable_so_missing_keys_answer_404() -> None:
    # Unconditioned: the check S3 makes for a missing key's 404 carries no s3:prefix
    # (tests/security/test_cold_tier_access.py evaluates it).
    listing = statements(workload_access(BUCKET_ARN, KEY_ARN, REGION, (), kv_prefix=KV))["NotFoundForMissingKeys"]
    assert listing == {
        "Sid": "NotFoundForMissingKeys",
        "Effect": "Allow",
        "Action": "s3:ListBucket",
        "Resource": BUCKET_ARN,
    }


def test_kv_objects_are_read_and_written_only_under_the_kv_prefix_and_never_deleted() -> None:
    objects = statements(workload_access(BUCKET_ARN, KEY_ARN, REGION, (), kv_prefix=KV))["ReadWriteKvObjects"]
    assert objects["Effect"] == "Allow"
    assert objects["Action"] == ["s3:GetObject", "s3:PutObject"]
    assert objects["Resource"] == f"{BUCKET_ARN}/{KV_PREFIX}/chat/*"


def test_the_object_tiers_startup_probe_key_is_only_readable() -> None:
    probe = statements(workload_access(BUCKET_ARN, KEY_ARN, REGION, (), kv_prefix=KV))["ObjectTierStartupProbe"]
    assert probe["Action"] == "s3:GetObject"
    assert probe["Resource"] == f"{BUCKET_ARN}/__nixl_probe__/connectivity_test"
    assert OBJECT_TIER_PROBE_KEY == "__nixl_probe__/connectivity_test"


def test_the_cold_tier_grants_nothing_else() -> None:
    by_sid = statements(workload_access(BUCKET_ARN, KEY_ARN, REGION, (), kv_prefix=KV))
    assert sorted(by_sid) == [
        "NotFoundForMissingKeys",
        "ObjectTierStartupProbe",
        "ReadWriteKvObjects",
        "UseColdTierKeyThroughS3",
    ]


@pytest.mark.parametrize("prefix", ["mooncake-kv/chat", "mooncake-kv/chat//", "mooncake-kv//chat/"])
def test_the_kv_prefix_ends_in_one_slash_so_it_cannot_reach_a_sibling(prefix: str) -> None:
    # Without it, mooncake-kv/chat* would also grant mooncake-kv/chat-canary/.
    with pytest.raises(ValueError, match="must end in one '/'"):
        workload_access(BUCKET_ARN, KEY_ARN, REGION, (), kv_prefix=prefix)


def test_the_key_is_usable_only_through_s3_in_the_region() -> None:
    kms = statements(workload_access(BUCKET_ARN, KEY_ARN, REGION, (), kv_prefix=KV))["UseColdTierKeyThroughS3"]
    assert kms["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert kms["Resource"] == KEY_ARN
    assert kms["Condition"] == {"StringEquals": {"kms:ViaService": "s3.eu-west-1.amazonaws.com"}}


def test_the_bucket_arn_and_the_key_arn_go_together() -> None:
    with pytest.raises(ValueError, match="give both or neither"):
        workload_access(BUCKET_ARN, None, REGION, SOURCES)
    with pytest.raises(ValueError, match="give both or neither"):
        workload_access(None, KEY_ARN, REGION, SOURCES)


def test_cold_tier_access_is_always_to_one_endpoints_prefix_under_the_kv_prefix() -> None:
    with pytest.raises(ValueError, match="give kv_prefix with the bucket"):
        workload_access(BUCKET_ARN, KEY_ARN, REGION, SOURCES)
    with pytest.raises(ValueError, match="must lie under mooncake-kv/"):
        workload_access(BUCKET_ARN, KEY_ARN, REGION, SOURCES, kv_prefix="")


# Workload access: model sources.


def test_model_sources_are_read_only_under_their_prefixes() -> None:
    read = statements(workload_access(BUCKET_ARN, KEY_ARN, REGION, SOURCES, kv_prefix=KV))["ReadModelSources"]
    assert read["Action"] == "s3:GetObject"
    assert read["Resource"] == [
        "arn:aws:s3:::other-weights/qwen/v2/*",
        "arn:aws:s3:::weights/llama-3/*",
        "arn:aws:s3:::weights/mistral/*",
    ]


def test_each_model_source_bucket_is_listed_only_under_its_sources_prefixes() -> None:
    by_sid = statements(workload_access(None, None, REGION, SOURCES))
    listings = {
        statement["Resource"]: statement for statement in by_sid.values() if statement["Action"] == "s3:ListBucket"
    }
    assert listings["arn:aws:s3:::other-weights"]["Condition"] == {"StringLike": {"s3:prefix": ["qwen/v2/*"]}}
    assert listings["arn:aws:s3:::weights"]["Condition"] == {"StringLike": {"s3:prefix": ["llama-3/*", "mistral/*"]}}
    assert sorted(listings) == ["arn:aws:s3:::other-weights", "arn:aws:s3:::weights"]


def test_a_whole_bucket_source_is_listed_and_read_without_a_prefix() -> None:
    by_sid = statements(workload_access(None, None, REGION, ("s3://weights", "s3://weights/llama-3/")))
    assert by_sid["ListModelSource0"] == {
        "Sid": "ListModelSource0",
        "Effect": "Allow",
        "Action": "s3:ListBucket",
        "Resource": "arn:aws:s3:::weights",
    }
    assert by_sid["ReadModelSources"]["Resource"] == ["arn:aws:s3:::weights/*"]


def test_without_a_cold_tier_only_the_model_sources_are_granted() -> None:
    document = workload_access(None, None, REGION, SOURCES)
    text = json.dumps(document)
    assert KV_PREFIX not in text
    assert "kms:" not in text
    assert set(statements(document)) == {"ListModelSource0", "ListModelSource1", "ReadModelSources"}


def test_nothing_to_grant_gives_a_document_without_statements() -> None:
    assert workload_access(None, None, REGION, ()) == {"Version": "2012-10-17", "Statement": []}


@pytest.mark.parametrize(
    ("uri", "fragment"),
    [
        ("https://weights/llama", "is not an s3:// URI"),
        ("s3:///llama", "names no bucket"),
        ("s3://weights/llama/*", "contains *"),
        ("s3://weights/llama-?/", "contains ?"),
        ("s3://weights/${aws:username}/", "contains $"),
    ],
)
def test_rejects_model_sources_iam_would_not_read_literally(uri: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fragment)):
        workload_access(None, None, REGION, (uri,))


def test_a_model_source_is_its_bucket_and_its_prefix_without_slashes() -> None:
    location = s3_location("s3://weights/models/llama-3/")
    assert (location.bucket, location.prefix) == ("weights", "models/llama-3")


# Invariants over any model sources.

bucket_names = st.from_regex(r"[a-z0-9][a-z0-9-]{1,20}[a-z0-9]", fullmatch=True)
prefixes = st.lists(st.from_regex(r"[A-Za-z0-9_.-]{1,12}", fullmatch=True), max_size=3).map("/".join)
model_sources = st.lists(
    st.tuples(bucket_names, prefixes, st.sampled_from(["", "/"])).map(lambda p: f"s3://{p[0]}/{p[1]}{p[2]}"),
    max_size=6,
)


@fast
@given(model_sources, st.booleans())
def test_no_s3_object_action_is_granted_on_a_wildcard_resource(sources: list[str], cold_tier: bool) -> None:
    document = workload_access(*cold_tier_args(cold_tier), REGION, sources, kv_prefix=KV if cold_tier else None)
    for statement in document["Statement"]:
        if any(object_action(action) for action in as_list(statement["Action"])):
            for resource in as_list(statement["Resource"]):
                assert resource != "*"
                assert re.fullmatch(r"arn:aws:s3:::[a-z0-9.-]+/.*", resource), resource


@fast
@given(model_sources, st.booleans())
def test_bucket_listings_are_conditioned_on_a_prefix_unless_a_whole_bucket_is_a_source(
    sources: list[str], cold_tier: bool
) -> None:
    document = workload_access(*cold_tier_args(cold_tier), REGION, sources, kv_prefix=KV if cold_tier else None)
    whole_buckets = {s3_location(uri).bucket for uri in sources if not s3_location(uri).prefix}
    for statement in document["Statement"]:
        if statement["Sid"] == "NotFoundForMissingKeys":  # the cold tier's own bucket, for its 404s
            assert statement["Resource"] == BUCKET_ARN
            continue
        if statement["Action"] == "s3:ListBucket" and statement["Resource"].removeprefix("arn:aws:s3:::") not in (
            whole_buckets
        ):
            assert statement["Condition"]["StringLike"]["s3:prefix"]


@fast
@given(model_sources, st.randoms(use_true_random=False))
def test_the_policy_does_not_depend_on_the_order_or_repetition_of_sources(sources: list[str], random: Any) -> None:
    shuffled = sources + sources[:2]
    random.shuffle(shuffled)
    original = json.dumps(workload_access(BUCKET_ARN, KEY_ARN, REGION, sources, kv_prefix=KV))
    assert json.dumps(workload_access(BUCKET_ARN, KEY_ARN, REGION, shuffled, kv_prefix=KV)) == original


@fast
@given(model_sources)
def test_sids_are_unique_and_alphanumeric_as_iam_requires(sources: list[str]) -> None:
    sids = [
        statement["Sid"]
        for statement in workload_access(BUCKET_ARN, KEY_ARN, REGION, sources, kv_prefix=KV)["Statement"]
    ]
    assert len(sids) == len(set(sids))
    assert all(re.fullmatch(r"[A-Za-z0-9]+", sid) for sid in sids)


def test_model_source_arns_carry_the_regions_partition() -> None:
    document = workload_access(None, None, "cn-north-1", ["s3://weights/llama"])
    resources = json.dumps(document)
    assert "arn:aws-cn:s3:::weights" in resources
    assert "arn:aws:s3:::" not in resources
