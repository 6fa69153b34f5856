"""IAM policy documents of the regional platform, as plain dicts (pure: no invokes, no Outputs).

Callers serialise at the boundary, inside one ``apply``:
``Output.all(arn, key).apply(lambda a: json.dumps(workload_access(*a, region, sources)))``.
Every list is sorted and de-duplicated, so the same input always gives byte-identical JSON
(and a preview shows no spurious policy diff).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from components.naming import KV_PREFIX, aws_partition

Document = dict[str, Any]
Statement = dict[str, Any]

VERSION = "2012-10-17"
S3_SCHEME = "s3://"
# IAM reads these as wildcards or policy variables in a resource or condition value, and has no
# escape for them; a model source containing one would grant more than it names.
_IAM_SPECIAL = frozenset("*?$")

KV_OBJECT_ACTIONS = ("s3:GetObject", "s3:PutObject")
"""What vLLM's object tier does under its prefix (docs/cold-tier.md): HeadObject and ranged GetObject
(both authorised as s3:GetObject) and single-request PutObject. No multipart upload (NIXL's plain
S3 client never starts one), no delete (objects leave by lifecycle expiration), no listing."""

OBJECT_TIER_PROBE_KEY = "__nixl_probe__/connectivity_test"
"""The key vLLM's object tier HEADs at the bucket root when it starts (never under its prefix):
a 404 is success, anything else stops the server."""

KMS_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")


def _document(statements: Iterable[Statement]) -> Document:
    return {"Version": VERSION, "Statement": list(statements)}


def _unique(values: Iterable[str]) -> list[str]:
    return sorted(set(values))


def bucket_arn_of(bucket: str, region: str) -> str:
    return f"arn:{aws_partition(region)}:s3:::{bucket}"


def deny_insecure_transport(bucket_arn: str) -> Document:
    """Bucket policy refusing plain HTTP and TLS older than 1.2, on the bucket and every object.

    Deny-only, so it is not "public" and coexists with Block Public Access (CIS AWS 3.1.1;
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/security-best-practices.html).
    """
    resources = _unique([bucket_arn, f"{bucket_arn}/*"])
    return _document(
        [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": resources,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
            {
                "Sid": "DenyTlsOlderThan12",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": resources,
                "Condition": {"NumericLessThan": {"s3:TlsVersion": "1.2"}},
            },
        ]
    )


def pod_identity_trust(account_id: str) -> Document:
    """Trust policy of a role assumed through EKS Pod Identity (the agent also tags the session),
    only on behalf of ``account_id``: the cross-service confused deputy guard of the IAM user guide.

    No ``aws:SourceArn``: the EKS user guide's Pod Identity role page recommends none (it narrows
    roles by the session tags Pod Identity sets instead), so we do not guess what the key carries.
    """
    if not (len(account_id) == 12 and account_id.isdigit()):
        raise ValueError(f"an AWS account id is 12 digits, got {account_id!r}")
    return _document(
        [
            {
                "Sid": "EksPodIdentity",
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {"StringEquals": {"aws:SourceAccount": account_id}},
            }
        ]
    )


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str
    """Key prefix without leading or trailing '/'; empty for the whole bucket."""


def s3_location(uri: str) -> S3Location:
    """``s3://bucket/some/prefix/`` -> (bucket, 'some/prefix'); refuses what IAM would read as a wildcard."""
    if not uri.startswith(S3_SCHEME):
        raise ValueError(f"model source {uri!r} is not an s3:// URI")
    bucket, _, prefix = uri[len(S3_SCHEME) :].partition("/")
    if not bucket:
        raise ValueError(f"model source {uri!r} names no bucket")
    special = sorted(_IAM_SPECIAL.intersection(uri))
    if special:
        raise ValueError(
            f"model source {uri!r} contains {', '.join(special)}, which IAM reads as a wildcard or variable; "
            "name the prefix without it"
        )
    return S3Location(bucket=bucket, prefix=prefix.strip("/"))


def _read_statements(locations: Iterable[S3Location], region: str) -> list[Statement]:
    """Read-only access to each location: list its bucket only under the prefix, get objects only below it."""
    prefixes: dict[str, set[str]] = {}
    for location in locations:
        prefixes.setdefault(location.bucket, set()).add(location.prefix)
    objects: list[str] = []
    statements: list[Statement] = []
    for index, bucket in enumerate(sorted(prefixes)):
        arn = bucket_arn_of(bucket, region)
        listing: Statement = {
            "Sid": f"ListModelSource{index}",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": arn,
        }
        if "" in prefixes[bucket]:  # the whole bucket is a source: nothing narrower to say
            objects.append(f"{arn}/*")
        else:
            objects.extend(f"{arn}/{prefix}/*" for prefix in prefixes[bucket])
            listing["Condition"] = {"StringLike": {"s3:prefix": _unique(f"{p}/*" for p in prefixes[bucket])}}
        statements.append(listing)
    if objects:
        statements.append(
            {"Sid": "ReadModelSources", "Effect": "Allow", "Action": "s3:GetObject", "Resource": _unique(objects)}
        )
    return statements


def _cold_tier_statements(bucket_arn: str, kms_key_arn: str, region: str, kv_prefix: str) -> list[Statement]:
    """What vLLM's object tier needs, and only that (docs/cold-tier.md has the calls and the sources)."""
    return [
        {
            # Not for listing: S3 answers a HEAD or GET of a missing key with 404 only to a caller
            # allowed s3:ListBucket on the bucket, and with 403 otherwise, which NIXL takes for an
            # error (the startup probe fails, a lookup batch is lost). The request that check
            # authorises carries no s3:prefix (a ListObjects parameter), so a grant conditioned on
            # the endpoint's prefix would not count: the grant is the bucket's, unconditioned. It
            # discloses the names of other endpoints' KV objects, never their contents.
            "Sid": "NotFoundForMissingKeys",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": bucket_arn,
        },
        {
            "Sid": "ReadWriteKvObjects",
            "Effect": "Allow",
            "Action": list(KV_OBJECT_ACTIONS),
            "Resource": f"{bucket_arn}/{kv_prefix}*",
        },
        {
            # The startup probe's HEAD: read-only, on exactly that key.
            "Sid": "ObjectTierStartupProbe",
            "Effect": "Allow",
            "Action": "s3:GetObject",
            "Resource": f"{bucket_arn}/{OBJECT_TIER_PROBE_KEY}",
        },
        {
            # SSE-KMS: S3 asks KMS for data keys on the caller's behalf; only through S3 in this region.
            "Sid": "UseColdTierKeyThroughS3",
            "Effect": "Allow",
            "Action": list(KMS_ACTIONS),
            "Resource": kms_key_arn,
            "Condition": {"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}},
        },
    ]


def workload_access(
    bucket_arn: str | None,
    kms_key_arn: str | None,
    region: str,
    model_sources: Sequence[str],
    kv_prefix: str | None = None,
) -> Document:
    """Least privilege for inference pods: KV under one endpoint's ``kv_prefix`` of the cold
    tier (``mooncake-kv/<endpoint>/``, ending in ``/`` so ``chat`` does not reach ``chat-canary``),
    the object tier's startup probe, and read-only weights.

    ``bucket_arn`` and ``kms_key_arn`` are both None without cold-tier access; the model
    sources are granted either way. The document has no statement when there is nothing to grant.
    """
    if (bucket_arn is None) != (kms_key_arn is None):
        raise ValueError("the cold tier's bucket ARN and KMS key ARN go together: give both or neither")
    if (bucket_arn is None) != (kv_prefix is None):
        raise ValueError("cold-tier access is always to one endpoint's prefix: give kv_prefix with the bucket")
    if kv_prefix is not None and not kv_prefix.startswith(f"{KV_PREFIX}/"):
        raise ValueError(f"kv_prefix must lie under {KV_PREFIX}/, got {kv_prefix!r}")
    if kv_prefix is not None and (not kv_prefix.endswith("/") or "//" in kv_prefix):
        raise ValueError(f"kv_prefix must end in one '/' and repeat none, got {kv_prefix!r}")
    statements: list[Statement] = []
    if bucket_arn is not None and kms_key_arn is not None and kv_prefix is not None:
        statements.extend(_cold_tier_statements(bucket_arn, kms_key_arn, region, kv_prefix))
    statements.extend(_read_statements((s3_location(uri) for uri in _unique(model_sources)), region))
    return _document(statements)
