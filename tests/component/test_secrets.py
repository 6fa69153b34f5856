"""The Secrets prod's endpoints read, created by its own ``pulumi up`` (issue 28, item 10): one per
region in the endpoints' namespace, their data a Pulumi secret end to end (``[secret]`` in
plan.json, never the stack file's ciphertext nor a value), every workload that reads one waiting
for it. pulumi-kubernetes marks a Secret's ``data`` and ``stringData`` as additional secret
outputs besides (pulumi/pulumi-kubernetes provider/pkg/provider/provider.go, Secret kinds)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from fleetctl.plan import SECRET, ProgramError, manifest_files, run_program
from fleetctl.stackfile import read_stack_file, stack_path
from tests.component.programs import by_type, example_plan

SECRETS = {"hf-token": "token", "chat-proxy-admin": "ADMIN_API_KEY"}


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1"])
def test_every_secret_an_endpoint_reads_is_created_in_its_namespace_as_a_secret(region: str) -> None:
    plan = example_plan("prod")
    secrets = [r for r in by_type(plan, "kubernetes:core/v1:Secret") if r["name"].startswith(f"{region}-")]
    assert {r["inputs"]["metadata"]["name"] for r in secrets} == set(SECRETS)
    for secret in secrets:
        assert secret["inputs"]["metadata"]["namespace"] == "inference"
        # pulumi_kubernetes' Secret makes the whole of stringData secret (core/v1/Secret.py).
        assert secret["inputs"]["stringData"] == SECRET
        assert {"data", "stringData"} <= set(secret["options"]["additionalSecretOutputs"])


def test_neither_the_ciphertext_nor_the_placeholder_reaches_the_plan() -> None:
    text = json.dumps([resource["inputs"] for resource in example_plan("prod").resources])
    ciphertexts = [
        line.split("secure:")[1].strip() for line in stack_path("prod").read_text().splitlines() if "secure:" in line
    ]
    assert ciphertexts
    assert not any(ciphertext in text for ciphertext in ciphertexts)


def test_the_workloads_that_read_a_secret_wait_for_it() -> None:
    plan = example_plan("prod")
    secret_urns = {
        r["inputs"]["metadata"]["name"] + "@" + r["name"].split("-inference-")[0]: r["urn"]
        for r in by_type(plan, "kubernetes:core/v1:Secret")
    }
    readers = 0
    for kind in ("kubernetes:apps/v1:Deployment", "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"):
        for workload in by_type(plan, kind):
            text = json.dumps(workload["inputs"])
            region = "us-east-1" if workload["name"].startswith("us-east-1") else "eu-west-1"
            for name, key in SECRETS.items():
                if json.dumps({"secretKeyRef": {"key": key, "name": name}}) in text:
                    readers += 1
                    assert secret_urns[f"{name}@{region}"] in workload["options"]["dependsOn"], workload["name"]
    assert readers >= 6  # chat's, reason's and summarize's workloads in both regions


def test_a_secrets_config_pulumi_did_not_encrypt_fails_the_program_before_any_resource() -> None:
    stack_file = dataclasses.replace(read_stack_file(stack_path("prod")), secret_keys=())
    with pytest.raises(ProgramError, match=r"inference-fleet:secrets is plaintext in the stack config"):
        run_program(stack_file)


def test_the_manifest_of_a_secret_says_its_data_is_secret_and_stays_a_valid_object() -> None:
    text = manifest_files(example_plan("prod"))["manifests/us-east-1/inference/Secret-hf-token.yaml"]
    assert text.startswith(f"# stringData: {SECRET} (Pulumi secrets, never written out)\n")
    assert "\nstringData:" not in text
