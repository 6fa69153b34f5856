"""The region's KV cold tier: a private, KMS-encrypted, versioned, TLS-only S3 bucket
(docs/design.md, decisions 5 and 11)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

import pulumi
import pulumi_aws as aws

from components import naming
from components.platform.policies import deny_insecure_transport
from components.spec.region import ColdTier as ColdTierSettings

NONCURRENT_VERSION_DAYS = 1
"""KV is disposable: an overwritten or expired version is kept one day (the least S3 allows), not forever."""

ABORT_MULTIPART_DAYS = 1
"""A KV upload interrupted by a pod restart is never resumed; its parts are billed until aborted."""


class ColdTierBucket(Protocol):
    """What the region's pods and their IAM policies need of its cold tier: created (``ColdTier``)
    or named on an existing cluster (``NamedBucket``)."""

    @property
    def bucket_name(self) -> pulumi.Output[str]: ...

    @property
    def bucket_arn(self) -> pulumi.Output[str]: ...

    @property
    def kms_key_arn(self) -> pulumi.Output[str]: ...


@dataclass(frozen=True)
class NamedBucket:
    """An existing bucket and its KMS key (``cold_tier.bucket`` and ``kms_key_arn`` on an existing
    cluster): nothing is created, its settings are its owner's."""

    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]
    kms_key_arn: pulumi.Output[str]

    @classmethod
    def of(cls, region: str, bucket: str, kms_key_arn: str) -> NamedBucket:
        arn = f"arn:{naming.aws_partition(region)}:s3:::{bucket}"
        return cls(
            pulumi.Output.from_input(bucket), pulumi.Output.from_input(arn), pulumi.Output.from_input(kms_key_arn)
        )


@dataclass(frozen=True)
class ColdTierArgs:
    stack: str
    region: str
    settings: ColdTierSettings


class ColdTier(pulumi.ComponentResource):
    """One S3 bucket per region for Mooncake's KV objects, under ``mooncake-kv/``, with its own KMS key.

    The AWS provider comes from the parent (``providers={"aws": ...}``). ``protect`` and
    ``retain_on_delete`` apply to every child: a retained bucket keeps its key (or its objects
    are unreadable) and its controls (or it is left without public access block and TLS policy).
    """

    bucket_name: pulumi.Output[str]
    """The bucket's AWS name, ``inference-fleet-<stack>-kv-<account>-<region>``; what workloads write to."""
    bucket_arn: pulumi.Output[str]
    kms_key_arn: pulumi.Output[str]

    def __init__(self, name: str, args: ColdTierArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:ColdTier", name, None, opts)
        settings = args.settings

        def child(*depends_on: pulumi.Resource) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(
                parent=self,
                protect=settings.protect,
                retain_on_delete=settings.retain_on_delete,
                depends_on=list(depends_on) or None,
            )

        def resource_name(part: str) -> str:
            return naming.platform_name(args.region, "cold-tier", part)

        identity = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        derived_name = identity.account_id.apply(
            lambda account: naming.cold_tier_bucket_name(args.stack, args.region, account)
        )
        tags = {"inference-fleet:purpose": "kv-cold-tier", "inference-fleet:region": args.region}

        key = aws.kms.Key(
            resource_name("key"),
            description=f"KV cold tier of {naming.fleet_name(args.stack)} in {args.region}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            tags=tags,
            opts=child(),
        )
        aws.kms.Alias(
            resource_name("key-alias"),
            name=derived_name.apply(lambda bucket: f"alias/{bucket}"),
            target_key_id=key.key_id,
            opts=child(),
        )
        bucket = aws.s3.Bucket(
            resource_name("bucket"),
            bucket=derived_name,
            force_destroy=False,
            tags=tags,
            opts=child(),
        )
        # BucketOwnerEnforced turns ACLs off: the bucket policy and IAM alone decide access.
        aws.s3.BucketOwnershipControls(
            resource_name("ownership"),
            bucket=bucket.bucket,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child(),
        )
        public_access = aws.s3.BucketPublicAccessBlock(
            resource_name("public-access"),
            bucket=bucket.bucket,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child(),
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            resource_name("encryption"),
            bucket=bucket.bucket,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=(
                        aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                            sse_algorithm="aws:kms", kms_master_key_id=key.arn
                        )
                    ),
                    # One data key per bucket rather than per object: far fewer KMS calls for many small KV objects.
                    bucket_key_enabled=True,
                )
            ],
            opts=child(),
        )
        versioning = aws.s3.BucketVersioning(
            resource_name("versioning"),
            bucket=bucket.bucket,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child(),
        )
        # Versioning first, as the provider's docs ask of lifecycle rules that act on versions.
        aws.s3.BucketLifecycleConfiguration(
            resource_name("lifecycle"),
            bucket=bucket.bucket,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-kv",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=f"{naming.KV_PREFIX}/"),
                    expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(days=settings.expiration_days),
                    noncurrent_version_expiration=(
                        aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                            noncurrent_days=NONCURRENT_VERSION_DAYS
                        )
                    ),
                    abort_incomplete_multipart_upload=(
                        aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                            days_after_initiation=ABORT_MULTIPART_DAYS
                        )
                    ),
                ),
                # In a versioned bucket every expiry leaves a delete marker; drop those whose versions are gone.
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="remove-expired-delete-markers",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=f"{naming.KV_PREFIX}/"),
                    expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(expired_object_delete_marker=True),
                ),
            ],
            opts=child(versioning),
        )
        # After the public access block: concurrent bucket-configuration calls can fail with
        # OperationAborted, and no policy should land on a bucket that is not yet blocked.
        aws.s3.BucketPolicy(
            resource_name("policy"),
            bucket=bucket.bucket,
            policy=bucket.arn.apply(lambda arn: json.dumps(deny_insecure_transport(arn))),
            opts=child(public_access),
        )

        self.bucket_name = bucket.bucket
        self.bucket_arn = bucket.arn
        self.kms_key_arn = key.arn
        self.register_outputs(
            {"bucket_name": self.bucket_name, "bucket_arn": self.bucket_arn, "kms_key_arn": self.kms_key_arn}
        )
