"""ColdTier and WorkloadIdentity under the recording mocks, inside a parent that carries each region's provider.

Four regions of one program: us-east-1 (cold tier with defaults, 7-day expiry, two model sources,
endpoint chat writing the cold tier),
eu-west-1 (cold tier neither protected nor retained), ap-south-1 (no cold tier, one model source)
and ca-central-1 (nothing to grant).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleetctl.plan import Plan, ProgramError
from tests.component.programs import by_type, run_snippet

PROGRAM = """
from components.naming import platform_name
from components.platform.cold_tier import ColdTier, ColdTierArgs
from components.platform.identity import KvEndpoint, WorkloadIdentity, WorkloadIdentityArgs
from components.spec.region import ColdTier as ColdTierSettings


class Platform(pulumi.ComponentResource):
    # The shape of RegionalPlatform: the region's provider reaches the children through the parent.
    def __init__(self, region, settings, namespaces, model_sources, kv_endpoints=()):
        provider = aws.Provider(f"aws-{region}", region=region)
        opts = pulumi.ResourceOptions(providers={"aws": provider})
        super().__init__("inference-fleet:test:Platform", region, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cold_tier = None
        if settings.enabled:
            args = ColdTierArgs(stack=pulumi.get_stack(), region=region, settings=settings)
            cold_tier = ColdTier(platform_name(region, "cold-tier"), args, child)
            pulumi.export(f"{region}-bucket", cold_tier.bucket_name)
        identity = WorkloadIdentity(
            platform_name(region, "workload"),
            WorkloadIdentityArgs(
                region=region,
                cluster_name=f"inference-fleet-test-{region}",
                namespaces=namespaces,
                cold_tier=cold_tier,
                model_sources=model_sources,
                kv_endpoints=kv_endpoints,
            ),
            child,
        )
        pulumi.export(f"{region}-role", identity.role_arn)
        pulumi.export(f"{region}-kv-roles", identity.kv_role_arns)


Platform(
    "us-east-1",
    ColdTierSettings(enabled=True, expiration_days=7),
    ("chat", "batch", "chat"),
    ("s3://weights/llama-3/", "s3://weights/mistral"),
    (KvEndpoint("chat", "chat", "s3://weights/llama-3/"),),
)
Platform(
    "eu-west-1",
    ColdTierSettings(enabled=True, protect=False, retain_on_delete=False),
    ("inference",),
    (),
)
Platform("ap-south-1", ColdTierSettings(), ("inference",), ("s3://weights/llama-3",))
Platform("ca-central-1", ColdTierSettings(), ("inference",), ())
"""

BUCKET = "inference-fleet-test-kv-123456789012-us-east-1"
BUCKET_ARN = f"arn:aws:s3:::{BUCKET}"
KEY_ARN = "arn:aws:kms:offline:123456789012:key/us-east-1-cold-tier-key"
COLD_TIER_URN = "urn:pulumi:test::inference-fleet::inference-fleet:test:Platform$inference-fleet:platform:ColdTier::"
IDENTITY_URN = (
    "urn:pulumi:test::inference-fleet::inference-fleet:test:Platform$inference-fleet:platform:WorkloadIdentity::"
)
BUCKET_CONTROLS = (
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls",
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketVersioning:BucketVersioning",
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
    "aws:s3/bucketPolicy:BucketPolicy",
)


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    return run_snippet(tmp_path_factory.mktemp("cold-tier"), PROGRAM)


def one(plan: Plan, resource_type: str, name: str) -> dict[str, Any]:
    matches = [resource for resource in by_type(plan, resource_type) if resource["name"] == name]
    assert len(matches) == 1, f"{len(matches)} {resource_type} named {name}"
    return matches[0]


def in_region(plan: Plan, resource_type: str, region: str) -> list[dict[str, Any]]:
    return [resource for resource in by_type(plan, resource_type) if resource["name"].startswith(f"{region}-")]


def document(text: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def statements_by_sid(text: str) -> dict[str, dict[str, Any]]:
    return {statement["Sid"]: statement for statement in document(text)["Statement"]}


# The bucket and its controls.


def test_bucket_name_is_derived_from_stack_account_and_region(plan: Plan) -> None:
    bucket = one(plan, "aws:s3/bucket:Bucket", "us-east-1-cold-tier-bucket")
    assert bucket["inputs"]["bucket"] == BUCKET
    assert bucket["inputs"]["forceDestroy"] is False
    assert plan.outputs["us-east-1-bucket"] == BUCKET
    assert plan.outputs["eu-west-1-bucket"] == "inference-fleet-test-kv-123456789012-eu-west-1"


def test_every_bucket_control_targets_the_regions_bucket(plan: Plan) -> None:
    for region in ("us-east-1", "eu-west-1"):
        for control in BUCKET_CONTROLS:
            (resource,) = in_region(plan, control, region)
            assert resource["inputs"]["bucket"] == f"inference-fleet-test-kv-123456789012-{region}"


def test_acls_are_off_by_bucket_owner_enforced(plan: Plan) -> None:
    ownership = one(plan, BUCKET_CONTROLS[0], "us-east-1-cold-tier-ownership")
    assert ownership["inputs"]["rule"] == {"objectOwnership": "BucketOwnerEnforced"}


def test_all_four_public_access_blocks_are_on(plan: Plan) -> None:
    block = one(plan, BUCKET_CONTROLS[1], "us-east-1-cold-tier-public-access")["inputs"]
    assert block["blockPublicAcls"] is True
    assert block["blockPublicPolicy"] is True
    assert block["ignorePublicAcls"] is True
    assert block["restrictPublicBuckets"] is True


def test_objects_are_encrypted_with_the_regions_rotating_key_and_a_bucket_key(plan: Plan) -> None:
    encryption = one(plan, BUCKET_CONTROLS[2], "us-east-1-cold-tier-encryption")
    assert encryption["inputs"]["rules"] == [
        {
            "applyServerSideEncryptionByDefault": {"kmsMasterKeyId": KEY_ARN, "sseAlgorithm": "aws:kms"},
            "bucketKeyEnabled": True,
        }
    ]
    key = one(plan, "aws:kms/key:Key", "us-east-1-cold-tier-key")["inputs"]
    assert key["enableKeyRotation"] is True
    assert key["deletionWindowInDays"] == 30
    assert key["description"] == "KV cold tier of inference-fleet-test in us-east-1"


def test_the_key_alias_names_the_bucket(plan: Plan) -> None:
    alias = one(plan, "aws:kms/alias:Alias", "us-east-1-cold-tier-key-alias")["inputs"]
    assert alias == {"name": f"alias/{BUCKET}", "targetKeyId": "us-east-1-cold-tier-key-id"}


def test_versioning_is_enabled(plan: Plan) -> None:
    versioning = one(plan, BUCKET_CONTROLS[3], "us-east-1-cold-tier-versioning")
    assert versioning["inputs"]["versioningConfiguration"] == {"status": "Enabled"}


def test_kv_prefix_expires_after_the_configured_days_aborts_stale_uploads_and_drops_delete_markers(plan: Plan) -> None:
    lifecycle = one(plan, BUCKET_CONTROLS[4], "us-east-1-cold-tier-lifecycle")
    assert lifecycle["inputs"]["rules"] == [
        {
            "id": "expire-kv",
            "status": "Enabled",
            "filter": {"prefix": "mooncake-kv/"},
            "expiration": {"days": 7},
            "noncurrentVersionExpiration": {"noncurrentDays": 1},
            "abortIncompleteMultipartUpload": {"daysAfterInitiation": 1},
        },
        {
            "id": "remove-expired-delete-markers",
            "status": "Enabled",
            "filter": {"prefix": "mooncake-kv/"},
            "expiration": {"expiredObjectDeleteMarker": True},
        },
    ]
    versioning = one(plan, BUCKET_CONTROLS[3], "us-east-1-cold-tier-versioning")
    assert lifecycle["options"]["dependsOn"] == [versioning["urn"]]
    defaults = one(plan, BUCKET_CONTROLS[4], "eu-west-1-cold-tier-lifecycle")
    assert defaults["inputs"]["rules"][0]["expiration"] == {"days": 30}


def test_bucket_policy_denies_plain_http_and_old_tls_after_public_access_is_blocked(plan: Plan) -> None:
    policy = one(plan, BUCKET_CONTROLS[5], "us-east-1-cold-tier-policy")
    by_sid = statements_by_sid(policy["inputs"]["policy"])
    assert sorted(by_sid) == ["DenyInsecureTransport", "DenyTlsOlderThan12"]
    for statement in by_sid.values():
        assert statement["Effect"] == "Deny"
        assert statement["Resource"] == [BUCKET_ARN, f"{BUCKET_ARN}/*"]
    assert by_sid["DenyInsecureTransport"]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert by_sid["DenyTlsOlderThan12"]["Condition"] == {"NumericLessThan": {"s3:TlsVersion": "1.2"}}
    block = one(plan, BUCKET_CONTROLS[1], "us-east-1-cold-tier-public-access")
    assert policy["options"]["dependsOn"] == [block["urn"]]


# Stateful things are protected (docs/design.md, decision 5).


@pytest.mark.parametrize(
    ("resource_type", "name"),
    [("aws:s3/bucket:Bucket", "cold-tier-bucket"), ("aws:kms/key:Key", "cold-tier-key")],
)
def test_bucket_and_key_are_protected_and_retained_by_default(plan: Plan, resource_type: str, name: str) -> None:
    options = one(plan, resource_type, f"us-east-1-{name}")["options"]
    assert options["protect"] is True
    assert options["retainOnDelete"] is True


def test_a_retained_bucket_keeps_every_control_and_the_key_alias(plan: Plan) -> None:
    for control in (*BUCKET_CONTROLS, "aws:kms/alias:Alias"):
        (resource,) = in_region(plan, control, "us-east-1")
        assert resource["options"]["protect"] is True, control
        assert resource["options"]["retainOnDelete"] is True, control


def test_settings_can_turn_protection_and_retention_off(plan: Plan) -> None:
    children = [resource for resource in plan.resources if resource["parent"] == f"{COLD_TIER_URN}eu-west-1-cold-tier"]
    assert len(children) == 9
    for resource in children:
        assert "protect" not in resource["options"], resource["type"]
        assert "retainOnDelete" not in resource["options"], resource["type"]


# Parents and providers (docs/design.md, decision 4).


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1", "ap-south-1", "ca-central-1"])
def test_every_aws_resource_is_a_child_of_its_component_on_the_regions_provider(plan: Plan, region: str) -> None:
    provider = one(plan, "pulumi:providers:aws", f"aws-{region}")
    components = {f"{COLD_TIER_URN}{region}-cold-tier", f"{IDENTITY_URN}{region}-workload"}
    resources = [
        resource
        for resource in plan.resources
        if resource["type"].startswith("aws:") and resource["name"].startswith(f"{region}-")
    ]
    expected = {"us-east-1": 16, "eu-west-1": 11, "ap-south-1": 3, "ca-central-1": 2}[region]
    assert len(resources) == expected
    for resource in resources:
        assert resource["parent"] in components, resource["urn"]
        assert resource["provider"] == provider["urn"], resource["urn"]


# Workload identity.


@pytest.mark.parametrize("role_name", ["us-east-1-workload", "us-east-1-kv-chat", "ca-central-1-workload"])
def test_each_pod_identity_role_is_trusted_only_by_eks_pod_identity_for_the_account(plan: Plan, role_name: str) -> None:
    role = one(plan, "aws:iam/role:Role", role_name)
    assert document(role["inputs"]["assumeRolePolicy"])["Statement"] == [
        {
            "Sid": "EksPodIdentity",
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Condition": {"StringEquals": {"aws:SourceAccount": "123456789012"}},
        }
    ]


def test_the_workload_role_arn_is_exported(plan: Plan) -> None:
    assert plan.outputs["us-east-1-role"] == "arn:aws:iam:offline:123456789012:role/us-east-1-workload"


def test_the_regions_workload_role_reads_the_model_sources_and_nothing_of_the_cold_tier(plan: Plan) -> None:
    policy = one(plan, "aws:iam/rolePolicy:RolePolicy", "us-east-1-workload-access")
    assert policy["inputs"]["role"] == "us-east-1-workload-id"
    by_sid = statements_by_sid(policy["inputs"]["policy"])
    assert sorted(by_sid) == ["ListModelSource0", "ReadModelSources"]
    assert by_sid["ListModelSource0"]["Condition"] == {"StringLike": {"s3:prefix": ["llama-3/*", "mistral/*"]}}
    assert by_sid["ReadModelSources"]["Resource"] == [
        "arn:aws:s3:::weights/llama-3/*",
        "arn:aws:s3:::weights/mistral/*",
    ]


def test_a_cold_tier_endpoint_has_its_own_role_scoped_to_its_own_prefix_the_key_and_its_source(plan: Plan) -> None:
    policy = one(plan, "aws:iam/rolePolicy:RolePolicy", "us-east-1-kv-chat")
    assert policy["inputs"]["role"] == "us-east-1-kv-chat-id"
    by_sid = statements_by_sid(policy["inputs"]["policy"])
    assert by_sid["NotFoundForMissingKeys"]["Resource"] == BUCKET_ARN
    assert by_sid["ReadWriteKvObjects"]["Resource"] == f"{BUCKET_ARN}/mooncake-kv/chat/*"
    assert by_sid["ObjectTierStartupProbe"]["Resource"] == f"{BUCKET_ARN}/__nixl_probe__/connectivity_test"
    assert by_sid["UseColdTierKeyThroughS3"]["Resource"] == KEY_ARN
    assert by_sid["UseColdTierKeyThroughS3"]["Condition"] == {
        "StringEquals": {"kms:ViaService": "s3.us-east-1.amazonaws.com"}
    }
    assert by_sid["ReadModelSources"]["Resource"] == ["arn:aws:s3:::weights/llama-3/*"]
    (association,) = [
        resource
        for resource in by_type(plan, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if resource["name"] == "us-east-1-kv-chat"
    ]
    assert association["inputs"]["namespace"] == "chat"
    assert association["inputs"]["serviceAccount"] == "chat-kv"
    assert association["inputs"]["roleArn"] == plan.outputs["us-east-1-kv-roles"]["chat"]


def test_no_object_action_is_granted_on_a_wildcard_resource(plan: Plan) -> None:
    for policy in by_type(plan, "aws:iam/rolePolicy:RolePolicy"):
        for statement in document(policy["inputs"]["policy"])["Statement"]:
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            assert "*" not in resources
            assert all(resource.startswith(("arn:aws:s3:::", "arn:aws:kms:")) for resource in resources)


def test_without_a_cold_tier_the_role_only_reads_the_model_sources(plan: Plan) -> None:
    policy = one(plan, "aws:iam/rolePolicy:RolePolicy", "ap-south-1-workload-access")
    by_sid = statements_by_sid(policy["inputs"]["policy"])
    assert sorted(by_sid) == ["ListModelSource0", "ReadModelSources"]
    assert by_sid["ReadModelSources"]["Resource"] == ["arn:aws:s3:::weights/llama-3/*"]


def test_with_nothing_to_grant_the_role_has_no_policy(plan: Plan) -> None:
    assert len(in_region(plan, "aws:iam/role:Role", "ca-central-1")) == 1
    assert in_region(plan, "aws:iam/rolePolicy:RolePolicy", "ca-central-1") == []


def test_each_namespace_binds_the_workload_service_account_to_the_role_once(plan: Plan) -> None:
    role = one(plan, "aws:iam/role:Role", "us-east-1-workload")
    associations = [
        association
        for association in in_region(plan, "aws:eks/podIdentityAssociation:PodIdentityAssociation", "us-east-1")
        if association["inputs"]["serviceAccount"] == "inference-workload"
    ]
    assert [association["inputs"] for association in associations] == [
        {
            "clusterName": "inference-fleet-test-us-east-1",
            "namespace": namespace,
            "roleArn": plan.outputs["us-east-1-role"],
            "serviceAccount": "inference-workload",
        }
        for namespace in ("batch", "chat")
    ]
    assert [association["name"] for association in associations] == [
        "us-east-1-workload-batch",
        "us-east-1-workload-chat",
    ]
    assert role["parent"] == associations[0]["parent"]


def test_a_model_source_iam_would_read_as_a_wildcard_fails_the_program(tmp_path: Path) -> None:
    program = """
    from components.platform.identity import WorkloadIdentity, WorkloadIdentityArgs

    args = WorkloadIdentityArgs(
        region="us-east-1", cluster_name="c", namespaces=("inference",), cold_tier=None,
        model_sources=("s3://weights/*",),
    )
    WorkloadIdentity("us-east-1-workload", args)
    """
    with pytest.raises(ProgramError, match=r"model source 's3://weights/\*' contains \*"):
        run_snippet(tmp_path, program)
