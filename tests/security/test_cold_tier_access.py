"""The cold tier's IAM, evaluated by a real IAM policy engine (tools/iam-simulate: npm
@cloud-copilot/iam-simulate, pinned by its package-lock.json, installed by `make test`): every
request vLLM 0.33.0's object tier makes through NIXL 1.5.0's OBJ plugin must be allowed, with
the permission S3 needs to answer a missing key with 404, and nothing the role must not do.

The documents are the prod example's, as the program renders them: the identity policy of the
role the pods' ServiceAccount is bound to (followed from the pod through its Pod Identity
association), the bucket's policy and the key's policy (the KMS default: the key is created
without one). Bucket and prefix come from the rendered ``--kv-transfer-config``; object keys are
composed as vLLM composes them. docs/cold-tier.md lists the calls and their sources.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from components import naming
from fleetctl.plan import Plan
from tests.component.programs import by_type, example_plan

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "tools" / "iam-simulate"
ACCOUNT = "123456789012"  # the offline plan's account
REGIONS = ("us-east-1", "eu-west-1")  # the prod example's regions, each with its cold tier
ENDPOINT = "chat"  # prod's endpoint with store.cold_tier_enabled
ALLOWED = "Allowed"

Check = tuple[str, str, dict[str, str]]
"""One authorisation S3 or KMS makes: (action, resource ARN, request context)."""


# What the program rendered.


def named(plan: Plan, resource_type: str, name: str) -> dict[str, Any]:
    (resource,) = [resource for resource in by_type(plan, resource_type) if resource["name"] == name]
    return resource


def pod_spec(plan: Plan, kind: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = named(plan, f"kubernetes:apps/v1:{kind}", name)["inputs"]["spec"]["template"]["spec"]
    return spec


def object_tier(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The S3 secondary tier of the pod's rendered --kv-transfer-config, if it has one."""
    args = pod["containers"][0]["args"]
    config = json.loads(args[args.index("--kv-transfer-config") + 1])
    children = config["kv_connector_extra_config"].get("connectors", [config])
    for child in children:
        if child["kv_connector"] == "OffloadingConnector":
            tier: dict[str, Any] = child["kv_connector_extra_config"]["secondary_tiers"][0]
            return tier
    return None


def identity_policy(plan: Plan, region: str, namespace: str, service_account: str) -> tuple[str, dict[str, Any]]:
    """(role name, policy document) of the role EKS Pod Identity gives the ServiceAccount."""
    (association,) = [
        association["inputs"]
        for association in by_type(plan, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if association["inputs"]["clusterName"] == f"{naming.fleet_name('prod')}-{region}"
        and association["inputs"]["namespace"] == namespace
        and association["inputs"]["serviceAccount"] == service_account
    ]
    role = association["roleArn"].rsplit("/", 1)[1]
    # A RolePolicy names its role by id; the offline mocks make a resource's id "<name>-id".
    policies = [
        policy["inputs"]["policy"]
        for policy in by_type(plan, "aws:iam/rolePolicy:RolePolicy")
        if policy["inputs"]["role"] == f"{role}-id"
    ]
    assert len(policies) <= 1, role
    # With nothing to grant a role has no policy (identity.py): it may do nothing.
    document: dict[str, Any] = json.loads(policies[0]) if policies else {"Version": "2012-10-17", "Statement": []}
    return role, document


def default_key_policy() -> dict[str, Any]:
    """What KMS gives a key created without a policy: the account's IAM policies decide."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "Enable IAM User Permissions",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
                "Action": "kms:*",
                "Resource": "*",
            }
        ],
    }


@dataclass(frozen=True)
class Tier:
    region: str
    bucket_arn: str
    prefix: str
    """The object tier's ``prefix`` as rendered for vLLM."""
    key_arn: str
    role: str
    policy: dict[str, Any]
    bucket_policy: dict[str, Any]
    other_bucket_arn: str
    """The other region's cold tier, of the same stack."""


@cache
def tier(region: str) -> Tier:
    plan = example_plan("prod")
    pod = pod_spec(plan, "Deployment", f"{region}-{ENDPOINT}-prefill")
    rendered = object_tier(pod)
    assert rendered is not None
    bucket = rendered["store_config"]["bucket"]
    namespace = named(plan, "kubernetes:apps/v1:Deployment", f"{region}-{ENDPOINT}-prefill")["inputs"]["metadata"][
        "namespace"
    ]
    role, policy = identity_policy(plan, region, namespace, pod["serviceAccountName"])
    encryption = named(
        plan,
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        f"{region}-cold-tier-encryption",
    )["inputs"]
    assert encryption["bucket"] == bucket
    (rule,) = encryption["rules"]
    bucket_policy = named(plan, "aws:s3/bucketPolicy:BucketPolicy", f"{region}-cold-tier-policy")["inputs"]
    assert bucket_policy["bucket"] == bucket
    assert "policy" not in named(plan, "aws:kms/key:Key", f"{region}-cold-tier-key")["inputs"]
    (other,) = [
        resource["inputs"]["bucket"]
        for resource in by_type(plan, "aws:s3/bucket:Bucket")
        if resource["name"].endswith("-cold-tier-bucket") and resource["inputs"]["bucket"] != bucket
    ]
    return Tier(
        region=region,
        bucket_arn=f"arn:aws:s3:::{bucket}",
        prefix=rendered["prefix"],
        key_arn=rule["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"],
        role=role,
        policy=policy,
        bucket_policy=json.loads(bucket_policy["policy"]),
        other_bucket_arn=f"arn:aws:s3:::{other}",
    )


# The object tier's keys and requests (vLLM 0.33.0, NIXL 1.5.0: docs/cold-tier.md).

PROBE_KEY = "__nixl_probe__/connectivity_test"
"""vllm/v1/kv_offload/tiering/obj/manager.py, _probe_connectivity: at the bucket root."""
MODEL = "/models/Llama-3.1-70B-Instruct"
BLOCK_HASH = "3f9a0c41d2e87b6655aa01c2f3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6"


def vllm_key(prefix: str, block_hash: str = BLOCK_HASH) -> str:
    """A KV object's key as vLLM 0.33.0 composes it: root ``f"{prefix}/"`` (obj/manager.py),
    ``<root>/<model>_<digest>`` (kv_offload/file_mapper.py _compute_base_path), then
    ``_r<rank>/<hhh>/<hh>_g<group>/<hash>.bin`` (get_file_name)."""
    root = f"{prefix}/" if prefix else ""
    base = f"{root}/{MODEL.replace('/', '_')}_0123456789ab"
    return f"{base}_r0/{block_hash[:3]}/{block_hash[3:5]}_g0/{block_hash}.bin"


def sent(key: str) -> str:
    """The key S3 receives from NIXL's AWS C++ SDK client, which by default collapses repeated
    slashes in the request path (ClientConfiguration preservePathSeparators, off)."""
    return re.sub(r"/{2,}", "/", key)


def s3_context(**overrides: str) -> dict[str, str]:
    """A signed HTTPS request of the role's session, as S3 sees it."""
    context = {
        "aws:SecureTransport": "true",
        "s3:TlsVersion": "1.3",
        "s3:authType": "REST-HEADER",
        "s3:signatureversion": "AWS4-HMAC-SHA256",
        "s3:ResourceAccount": ACCOUNT,
    }
    context.update(overrides)
    return context


def through_s3(t: Tier, region: str | None = None) -> dict[str, str]:
    """The context of the KMS call S3 makes on the caller's behalf for an SSE-KMS object
    (with an S3 Bucket Key the encryption context is the bucket's ARN)."""
    return {
        "aws:SecureTransport": "true",
        "kms:ViaService": f"s3.{region or t.region}.amazonaws.com",
        "kms:CallerAccount": ACCOUNT,
        "kms:EncryptionContext:aws:s3:arn": t.bucket_arn,
    }


def obj(t: Tier, key: str) -> str:
    return f"{t.bucket_arn}/{key}"


def not_found(t: Tier) -> Check:
    """What S3 checks before it answers a HEAD or GET of a missing key with 404 rather than 403:
    s3:ListBucket on the bucket, for a request that has no s3:prefix (HeadObject has no prefix
    parameter; the key is a condition key of ListObjects only, see the test below)."""
    return ("s3:ListBucket", t.bucket_arn, s3_context())


def stored_keys(t: Tier) -> list[str]:
    """A stored object's key both as vLLM composes it and as S3 receives it."""
    return [vllm_key(t.prefix), sent(vllm_key(t.prefix))]


# Every request of the object tier, each with every authorisation it needs.
REQUIRED: dict[str, Callable[[Tier], list[Check]]] = {
    "startup probe: HEAD of the missing probe key answers 404": lambda t: [
        ("s3:GetObject", obj(t, PROBE_KEY), s3_context()),
        not_found(t),
    ],
    "store: PUT of a KV object, encrypted with the bucket's key": lambda t: [
        *[("s3:PutObject", obj(t, key), s3_context()) for key in stored_keys(t)],
        ("kms:GenerateDataKey", t.key_arn, through_s3(t)),
    ],
    "lookup hit: HEAD of a stored object": lambda t: [
        ("s3:GetObject", obj(t, key), s3_context()) for key in stored_keys(t)
    ],
    "lookup miss: HEAD of a missing key inside the prefix answers 404": lambda t: [
        ("s3:GetObject", obj(t, sent(vllm_key(t.prefix, "f" * 64))), s3_context()),
        not_found(t),
    ],
    "load: ranged GET of a stored object, decrypted with the bucket's key": lambda t: [
        *[("s3:GetObject", obj(t, key), s3_context()) for key in stored_keys(t)],
        ("kms:Decrypt", t.key_arn, through_s3(t)),
    ],
}

# Requests the role must not be allowed, each denied on its own.
FORBIDDEN: dict[str, Callable[[Tier], Check]] = {
    "PUT under another endpoint's prefix": lambda t: (
        "s3:PutObject",
        obj(t, sent(vllm_key("mooncake-kv/summarize"))),
        s3_context(),
    ),
    "GET under another endpoint's prefix": lambda t: (
        "s3:GetObject",
        obj(t, sent(vllm_key("mooncake-kv/summarize"))),
        s3_context(),
    ),
    "PUT under a sibling prefix that starts alike": lambda t: (
        "s3:PutObject",
        obj(t, sent(vllm_key(f"{naming.KV_PREFIX}/{ENDPOINT}-canary"))),
        s3_context(),
    ),
    "PUT at the bucket root": lambda t: ("s3:PutObject", obj(t, "kv.bin"), s3_context()),
    "GET at the bucket root": lambda t: ("s3:GetObject", obj(t, "kv.bin"), s3_context()),
    "PUT directly under mooncake-kv/": lambda t: ("s3:PutObject", obj(t, "mooncake-kv/kv.bin"), s3_context()),
    "PUT of the probe key": lambda t: ("s3:PutObject", obj(t, PROBE_KEY), s3_context()),
    "GET of another key beside the probe": lambda t: ("s3:GetObject", obj(t, "__nixl_probe__/other"), s3_context()),
    "DELETE of its own KV object (objects leave by expiry)": lambda t: (
        "s3:DeleteObject",
        obj(t, sent(vllm_key(t.prefix))),
        s3_context(),
    ),
    "multipart upload (the tier never starts one)": lambda t: (
        "s3:AbortMultipartUpload",
        obj(t, sent(vllm_key(t.prefix))),
        s3_context(),
    ),
    "GET from the other region's cold tier": lambda t: (
        "s3:GetObject",
        f"{t.other_bucket_arn}/{sent(vllm_key(t.prefix))}",
        s3_context(),
    ),
    "PUT to the other region's cold tier": lambda t: (
        "s3:PutObject",
        f"{t.other_bucket_arn}/{sent(vllm_key(t.prefix))}",
        s3_context(),
    ),
    "listing the other region's cold tier": lambda t: ("s3:ListBucket", t.other_bucket_arn, s3_context()),
    "changing the bucket's policy": lambda t: ("s3:PutBucketPolicy", t.bucket_arn, s3_context()),
    "GET over plain HTTP": lambda t: (
        "s3:GetObject",
        obj(t, sent(vllm_key(t.prefix))),
        s3_context(**{"aws:SecureTransport": "false"}),
    ),
    "PUT over TLS 1.1": lambda t: (
        "s3:PutObject",
        obj(t, sent(vllm_key(t.prefix))),
        s3_context(**{"s3:TlsVersion": "1.1"}),
    ),
    "listing over plain HTTP": lambda t: (
        "s3:ListBucket",
        t.bucket_arn,
        s3_context(**{"aws:SecureTransport": "false"}),
    ),
    "decrypting with the key directly, not through S3": lambda t: (
        "kms:Decrypt",
        t.key_arn,
        {"aws:SecureTransport": "true", "kms:CallerAccount": ACCOUNT},
    ),
    "decrypting with the key through S3 of another region": lambda t: (
        "kms:Decrypt",
        t.key_arn,
        through_s3(t, region="ap-south-1"),
    ),
}


# The evaluator.


def simulation(t: Tier, check: Check, policy: dict[str, Any] | None = None) -> dict[str, Any]:
    action, resource, context = check
    principal = f"arn:aws:sts::{ACCOUNT}:assumed-role/{t.role}/eks-inference-{ENDPOINT}-prefill-7b9c4d5f6-x2k8q"
    request_context = {
        **context,
        "aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/{t.role}",
        "aws:PrincipalAccount": ACCOUNT,
        "aws:PrincipalType": "AssumedRole",
    }
    on_key = action.startswith("kms:")
    return {
        "request": {
            "principal": principal,
            "action": action,
            "resource": {"resource": resource, "accountId": ACCOUNT},
            "contextVariables": request_context,
        },
        "identityPolicies": [{"name": t.role, "policy": t.policy if policy is None else policy}],
        # Another bucket of the stack has the same TLS-only policy as ours.
        "resourcePolicy": default_key_policy() if on_key else t.bucket_policy,
    }


def run_harness(payload: dict[str, Any]) -> dict[str, Any]:
    if not (HARNESS / "node_modules" / "@cloud-copilot" / "iam-simulate").is_dir():
        pytest.fail("tools/iam-simulate/node_modules is missing: `make test` installs it with npm ci")
    node = shutil.which("node")
    assert node is not None, "Node.js runs the IAM evaluator"
    completed = subprocess.run(
        [node, str(HARNESS / "simulate.mjs")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    output: dict[str, Any] = json.loads(completed.stdout)
    return output


def decide(simulations: list[dict[str, Any]]) -> list[str]:
    results = run_harness({"simulations": simulations})["results"]
    assert all(result["errors"] is None for result in results), [result["errors"] for result in results]
    return [result["decision"] for result in results]


@pytest.fixture(scope="module")
def decisions() -> dict[tuple[str, str], list[str]]:
    """Every check of every case in both regions, in one run of the evaluator."""
    keys: list[tuple[str, str]] = []
    simulations: list[dict[str, Any]] = []
    for region in REGIONS:
        t = tier(region)
        for name, checks in REQUIRED.items():
            for check in checks(t):
                keys.append((region, name))
                simulations.append(simulation(t, check))
        for name, forbidden in FORBIDDEN.items():
            keys.append((region, name))
            simulations.append(simulation(t, forbidden(t)))
    found: dict[tuple[str, str], list[str]] = {}
    for key, decision in zip(keys, decide(simulations), strict=True):
        found.setdefault(key, []).append(decision)
    return found


@pytest.mark.parametrize("region", REGIONS)
@pytest.mark.parametrize("request_name", list(REQUIRED))
def test_every_request_of_the_object_tier_is_allowed(
    decisions: dict[tuple[str, str], list[str]], region: str, request_name: str
) -> None:
    assert decisions[(region, request_name)] == [ALLOWED] * len(decisions[(region, request_name)])


@pytest.mark.parametrize("region", REGIONS)
@pytest.mark.parametrize("request_name", list(FORBIDDEN))
def test_what_the_role_must_not_do_is_denied(
    decisions: dict[tuple[str, str], list[str]], region: str, request_name: str
) -> None:
    (decision,) = decisions[(region, request_name)]
    assert decision != ALLOWED


@pytest.mark.parametrize("region", REGIONS)
def test_plain_http_and_old_tls_are_refused_by_the_bucket_policy_itself(
    decisions: dict[tuple[str, str], list[str]], region: str
) -> None:
    for name in ("GET over plain HTTP", "PUT over TLS 1.1", "listing over plain HTTP"):
        assert decisions[(region, name)] == ["ExplicitlyDenied"], name


def test_s3_prefix_conditions_only_listing_so_a_missing_keys_404_needs_the_buckets_listing() -> None:
    """The service authorization reference (the evaluator's iam-data): s3:prefix is a condition key
    of s3:ListBucket, not of s3:GetObject, the action HeadObject and GetObject are authorised as.
    A ListBucket grant conditioned on the endpoint's prefix therefore never matches the check S3
    makes for a missing key; the evaluator agrees."""
    keys = run_harness({"actions": ["s3:ListBucket", "s3:GetObject", "s3:PutObject"]})["conditionKeys"]
    assert "s3:prefix" in keys["s3:ListBucket"]
    assert "s3:prefix" not in keys["s3:GetObject"]
    assert "s3:prefix" not in keys["s3:PutObject"]
    t = tier(REGIONS[0])
    conditioned = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": t.bucket_arn,
                "Condition": {"StringLike": {"s3:prefix": [f"{t.prefix}/*"]}},
            }
        ],
    }
    listing_the_prefix = ("s3:ListBucket", t.bucket_arn, s3_context(**{"s3:prefix": f"{t.prefix}/"}))
    assert decide([simulation(t, listing_the_prefix, conditioned), simulation(t, not_found(t), conditioned)]) == [
        ALLOWED,
        "ImplicitlyDenied",
    ]


@pytest.mark.parametrize("region", REGIONS)
def test_listing_key_names_is_the_one_grant_wider_than_the_prefix_and_only_on_its_own_bucket(region: str) -> None:
    """The cost of the 404s (docs/cold-tier.md): the role can list other endpoints' key names in
    its region's cold tier (their contents stay unreadable, as the cases above show)."""
    t = tier(region)
    others = ("s3:ListBucket", t.bucket_arn, s3_context(**{"s3:prefix": "mooncake-kv/summarize/"}))
    elsewhere = ("s3:ListBucket", t.other_bucket_arn, s3_context(**{"s3:prefix": f"{t.prefix}/"}))
    assert decide([simulation(t, others), simulation(t, elsewhere)]) == [ALLOWED, "ImplicitlyDenied"]


@pytest.mark.parametrize("region", REGIONS)
def test_decode_pods_run_without_any_access_to_the_cold_tier(region: str) -> None:
    """Decode has no object tier in its --kv-transfer-config, so it runs as the workload
    ServiceAccount, whose role reads weights only."""
    plan = example_plan("prod")
    pod = pod_spec(plan, "Deployment", f"{region}-{ENDPOINT}-decode")
    assert object_tier(pod) is None
    assert pod["serviceAccountName"] == naming.WORKLOAD_SERVICE_ACCOUNT
    t = tier(region)
    namespace = named(plan, "kubernetes:apps/v1:Deployment", f"{region}-{ENDPOINT}-decode")["inputs"]["metadata"][
        "namespace"
    ]
    _, workload = identity_policy(plan, region, namespace, pod["serviceAccountName"])
    checks: list[Check] = [
        ("s3:GetObject", obj(t, sent(vllm_key(t.prefix))), s3_context()),
        ("s3:PutObject", obj(t, sent(vllm_key(t.prefix))), s3_context()),
        ("s3:GetObject", obj(t, PROBE_KEY), s3_context()),
        ("s3:ListBucket", t.bucket_arn, s3_context()),
        ("kms:Decrypt", t.key_arn, through_s3(t)),
    ]
    assert decide([simulation(t, check, workload) for check in checks]) == ["ImplicitlyDenied"] * len(checks)
