"""fleetctl verify's in-cluster checks (the canary's share, Mooncake's KV evidence) against a
Kubernetes API stand-in and a route, in a private network namespace: each passes on pods that
behave and fails, naming what was wrong, on pods that do not."""

from __future__ import annotations

import base64
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from fleetctl.verify import evidence
from tests.certificates import certificate_authority, server_certificate
from tests.e2e.cluster_driver import TOKEN
from tests.e2e.namespace import run_driver
from tests.e2e.test_verify import write_stack
from tests.unit.stack_builders import classic_endpoint, mooncake_endpoint

ROOT = Path(__file__).resolve().parents[2]
TGI = "ghcr.io/huggingface/text-generation-inference:3.3.6"
TRITON = "nvcr.io/nvidia/tritonserver:25.10-py3"
VLLM = "vllm/vllm-openai:v0.33.0"
# A canary runs another image than its primary (validation refuses one that would compare nothing).
VLLM_CANARY = "vllm/vllm-openai:v0.34.0"
TGI_CANARY = "ghcr.io/huggingface/text-generation-inference:3.3.7"
TRITON_CANARY = "nvcr.io/nvidia/tritonserver:25.11-py3"
TCP = {"transfer": {"protocol": "tcp"}}
AT_ZERO = {
    "enabled": True,
    "prefill": {"min_replicas": 0, "max_replicas": 2, "metrics": ["queue:4"]},
    "decode": {"min_replicas": 0, "max_replicas": 2, "metrics": ["running:32"]},
}
ENDPOINTS: dict[str, dict[str, Any]] = {
    "canary-good": classic_endpoint({"canary": {"image": VLLM_CANARY, "weight": 10}}),
    "canary-skewed": classic_endpoint({"canary": {"image": VLLM_CANARY, "weight": 10}}),
    "canary-uncounted": classic_endpoint({"canary": {"image": VLLM_CANARY, "weight": 10}}),
    "canary-broken": classic_endpoint({"canary": {"image": VLLM_CANARY, "weight": 10}}),
    "canary-lagging": classic_endpoint({"canary": {"image": VLLM_CANARY, "weight": 10}}),
    "canary-tgi": classic_endpoint({"image": TGI, "canary": {"image": TGI_CANARY, "weight": 10}}),
    "canary-triton": classic_endpoint(
        {
            "image": TRITON,
            "model": "identity",
            "model_source": "s3://models/repository",
            "canary": {"image": TRITON_CANARY, "weight": 10},
        }
    ),
    "pd-good": mooncake_endpoint({"node_group": "gpu", "mooncake": TCP}),
    "pd-silent": mooncake_endpoint({"node_group": "gpu", "mooncake": TCP}),
    "pd-failed": mooncake_endpoint({"node_group": "gpu", "mooncake": TCP}),
    "pd-quiet": mooncake_endpoint({"node_group": "gpu", "mooncake": TCP, "args": ["--disable-log-stats"]}),
    "store-good": mooncake_endpoint({"node_group": "gpu", "mooncake": {**TCP, "mode": "store", "topology": None}}),
    "store-silent": mooncake_endpoint({"node_group": "gpu", "mooncake": {**TCP, "mode": "store", "topology": None}}),
    "rdma-good": mooncake_endpoint(),
    "rdma-fallback": mooncake_endpoint(),
    "rdma-group-fallback": mooncake_endpoint(
        {"mooncake": {"roles": {"prefill": {"nodes": 2}, "decode": {"nodes": 2}}}}
    ),
    "pdc-good": mooncake_endpoint(
        {"node_group": "gpu", "mooncake": TCP, "canary": {"image": VLLM_CANARY, "weight": 10}}
    ),
    "pdc-skewed": mooncake_endpoint(
        {"node_group": "gpu", "mooncake": TCP, "canary": {"image": VLLM_CANARY, "weight": 10}}
    ),
    "pdc-crossed": mooncake_endpoint(
        {"node_group": "gpu", "mooncake": TCP, "canary": {"image": VLLM_CANARY, "weight": 10}}
    ),
    "zero-wakes": mooncake_endpoint({"node_group": "gpu", "mooncake": {**TCP, "autoscaling": AT_ZERO}}),
    "zero-asleep": mooncake_endpoint({"node_group": "gpu", "mooncake": {**TCP, "autoscaling": AT_ZERO}}),
    # A classic endpoint at zero behind its gate; its server's own health path is not the gate's.
    "gated-wakes": classic_endpoint(
        {"autoscaling": {"min_replicas": 0, "max_replicas": 2, "metrics": ["queue:4"]}, "health_check_path": "/ready"}
    ),
    "storec-good": mooncake_endpoint(
        {
            "node_group": "gpu",
            "mooncake": {**TCP, "mode": "store", "topology": None},
            "canary": {"image": VLLM_CANARY, "weight": 10},
        }
    ),
}
EKS_HOST = "0123456789ABCDEF0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com"
GOOD = ["canary-good", "canary-tgi", "pd-good", "store-good", "rdma-good", "pdc-good", "storec-good"]


def kubeconfig(token: str, cluster: dict[str, str] | None = None) -> str:
    """A kubeconfig like pulumi-eks writes (a JSON string), its exec plugin a real process."""
    credential = {"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1"}
    program = f"import json; print(json.dumps({{**{credential!r}, 'status': {{'token': {token!r}}}}}))"
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "aws",
            "clusters": [{"name": "kubernetes", "cluster": cluster or {"server": "http://127.0.0.1:6443"}}],
            "contexts": [{"name": "aws", "context": {"cluster": "kubernetes", "user": "aws"}}],
            "users": [
                {
                    "name": "aws",
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": sys.executable,
                            "args": ["-c", program],
                            "env": [{"name": "AWS_PROFILE", "value": "verify"}],
                        }
                    },
                }
            ],
        }
    )


def run(
    tmp_path: Path,
    cases: list[str],
    token: str | None = TOKEN,
    cluster: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    if shutil.which("unshare") is None:
        pytest.fail("util-linux unshare is needed")
    stack = write_stack(tmp_path, {case: ENDPOINTS[case] for case in cases})
    outputs: dict[str, Any] = {
        "endpoints": {case: {"us-east-1": {"address": f"http://127.0.0.1:8080/{case}"}} for case in cases}
    }
    if token is not None:
        outputs["kubeconfigs"] = {"us-east-1": kubeconfig(token, cluster)}
    (tmp_path / "outputs.json").write_text(json.dumps(outputs))
    arguments = [str(stack), str(tmp_path / "outputs.json"), ",".join(cases), "--log-wait", "3", "--timeout", "5"]
    arguments += extra
    return run_driver("tests.e2e.cluster_driver", *arguments, mount=True, env=env, timeout=300)


def check(result: dict[str, Any], endpoint: str, name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        item for item in result["checks"] if (item["endpoint"], item["check"]) == (endpoint, name)
    ]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cases = [case for case in ENDPOINTS if not case.startswith(("zero", "gated"))]
    return run(tmp_path_factory.mktemp("cluster"), cases)


@pytest.mark.parametrize(
    ("endpoint", "name"),
    [
        ("canary-good", "canary share"),
        ("canary-tgi", "canary share"),
        ("canary-lagging", "canary share"),
        ("pd-good", "kv transfer"),
        ("store-good", "kv store"),
        ("rdma-good", "kv transfer"),
        ("rdma-good", "kv transport"),
        ("pdc-good", "canary share"),
        ("pdc-good", "kv transfer"),
        ("pdc-good", "canary kv transfer"),
        ("pdc-crossed", "kv transfer"),
        ("storec-good", "canary share"),
        ("storec-good", "kv store"),
        ("storec-good", "canary kv store"),
    ],
)
def test_pods_that_behave_pass(result: dict[str, Any], endpoint: str, name: str) -> None:
    assert check(result, endpoint, name)["status"] == "passed", check(result, endpoint, name)


@pytest.mark.parametrize(
    ("endpoint", "name", "message"),
    [
        ("canary-skewed", "canary share", "weight 10% accepts"),
        ("canary-uncounted", "canary share", "the pods counted 0 of the 200 requests sent"),
        ("canary-broken", "canary share", "POST /v1/completions: HTTP 500"),
        ("pd-silent", "kv transfer", "no prefill pod logged a successful Mooncake transfer"),
        ("pd-failed", "kv transfer", "failed KV transfers or receives"),
        ("store-silent", "kv store", "the Mooncake master logged no stored object"),
        ("rdma-fallback", "kv transport", "RDMA NOT IN USE: pod rdma-fallback-"),
        # A group's worker is read too: its leader found EFA, the worker of the decode group did not.
        ("rdma-group-fallback", "kv transport", "RDMA NOT IN USE: pod rdma-group-fallback-decode-0-1 container"),
        ("pdc-skewed", "canary share", "weight 10% accepts"),
        ("pdc-crossed", "canary kv transfer", "failed KV transfers or receives"),
    ],
)
def test_pods_that_do_not_fail_naming_what_was_wrong(
    result: dict[str, Any], endpoint: str, name: str, message: str
) -> None:
    found = check(result, endpoint, name)
    assert (found["region"], found["status"]) == ("us-east-1", "failed")
    assert message in found["detail"]


def test_a_skewed_split_reports_the_counts_it_saw(result: dict[str, Any]) -> None:
    detail = check(result, "canary-skewed", "canary share")["detail"]
    hits, total = (int(number) for number in detail.split("canary answered ")[1].split(" requests")[0].split(" of "))
    assert total == 200
    assert hits > 35  # the route sent about half; weight 10% accepts at most 35 of 200


def test_a_mooncake_canary_sets_share_is_counted_at_each_sets_entry_pods(result: dict[str, Any]) -> None:
    """At the proxies (their relayed answers) of a split endpoint, at the servers of a store endpoint."""
    for case in ("pdc-good", "storec-good"):
        detail = check(result, case, "canary share")["detail"]
        total = int(detail.split(" requests")[0].split(" of ")[1])
        assert total == 200, detail


def test_a_canary_whose_metrics_the_policy_closes_is_unverified_not_passed(result: dict[str, Any]) -> None:
    found = check(result, "canary-triton", "canary share")
    assert found["status"] == "unverified"
    assert "NetworkPolicy" in found["detail"]


def test_transfers_a_server_does_not_log_are_unverified_not_failed(result: dict[str, Any]) -> None:
    found = check(result, "pd-quiet", "kv transfer")
    assert (found["status"], found["detail"]) == (
        "unverified",
        "--disable-log-stats in args: vLLM logs no KV transfer stats",
    )


def test_the_real_transfer_engine_asked_for_rdma_without_devices_installs_tcp(result: dict[str, Any]) -> None:
    assert "Found 0 HCAs." in result["engine_log"]
    assert evidence.transport(result["engine_log"]) == "tcp"


def test_the_run_fails_when_any_check_fails(result: dict[str, Any]) -> None:
    assert result["code"] == 1


def test_every_check_of_pods_that_behave_passes(tmp_path: Path) -> None:
    good = run(tmp_path, GOOD)
    assert good["code"] == 0, [item for item in good["checks"] if item["status"] != "passed"]


def test_a_wrong_token_fails_with_the_api_servers_answer(tmp_path: Path) -> None:
    denied = run(tmp_path, ["canary-good"], token="not-the-token")
    assert "HTTP 401 Unauthorized" in check(denied, "canary-good", "canary share")["detail"]


def test_without_kubeconfigs_the_cluster_checks_fail_saying_so(tmp_path: Path) -> None:
    blind = run(tmp_path, ["canary-good"], token=None)
    found = check(blind, "canary-good", "canary share")
    assert found["status"] == "failed"
    assert "no kubeconfig for us-east-1 in the stack's outputs" in found["detail"]
    assert check(blind, "canary-good", "request")["status"] == "passed"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A certificate authority, another one, and the API server's certificate for EKS_HOST signed by the first."""
    directory = tmp_path_factory.mktemp("tls")
    certificate_authority(directory, "kubernetes")
    certificate_authority(directory, "impostor")
    server_certificate(directory, "kubernetes", EKS_HOST)
    return directory


def over_tls(tmp_path: Path, tls: Path, authority: str) -> dict[str, Any]:
    data = base64.b64encode((tls / f"{authority}.pem").read_bytes()).decode()
    cluster = {"server": f"https://{EKS_HOST}", "certificate-authority-data": data}
    return run(tmp_path, ["canary-good"], cluster=cluster, env={"CLUSTER_DRIVER_TLS": f"{tls}:{EKS_HOST}"})


def test_the_api_server_is_trusted_through_the_kubeconfigs_authority(tmp_path: Path, tls: Path) -> None:
    assert check(over_tls(tmp_path, tls, "kubernetes"), "canary-good", "canary share")["status"] == "passed"


def test_an_api_server_another_authority_signed_is_refused(tmp_path: Path, tls: Path) -> None:
    found = check(over_tls(tmp_path, tls, "impostor"), "canary-good", "canary share")
    assert found["status"] == "failed"
    assert "TLS failed" in found["detail"]
    assert "CERTIFICATE_VERIFY_FAILED" in found["detail"]


# Split endpoints scaled to zero: the proxy answers 503 scaled_to_zero with Retry-After 1 (the
# scenes' --retry-after-seconds) until the roles serve, after 3 requests (zero-wakes) or never.


@pytest.fixture(scope="module")
def at_zero(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cases = ["zero-wakes", "zero-asleep", "gated-wakes"]
    return run(tmp_path_factory.mktemp("zero"), cases, extra=("--wake-wait", "4"))


def test_an_endpoint_at_zero_is_waited_for_and_its_checks_run_once_it_woke(at_zero: dict[str, Any]) -> None:
    health = check(at_zero, "zero-wakes", "health")
    assert (health["status"], health["detail"]) == ("passed", "HTTP 200 (scaled to zero: prefill, decode)")
    request = check(at_zero, "zero-wakes", "request")
    assert request["status"] == "passed", request
    assert re.fullmatch(r" Paris\. \(woke from zero \d+ s after the first request, asked 4 times\)", request["detail"])
    assert check(at_zero, "zero-wakes", "kv transfer")["status"] == "passed"
    autoscaler = check(at_zero, "zero-wakes", "autoscaler active")
    assert autoscaler["status"] == "passed", autoscaler  # awake: every trigger read, every query finds series
    assert autoscaler["detail"].startswith("zero-wakes-prefill: queue=0 per replica, wake=0 per replica; ")


def test_an_endpoint_that_does_not_wake_within_the_wait_fails_and_its_other_checks_are_unverified(
    at_zero: dict[str, Any],
) -> None:
    request = check(at_zero, "zero-asleep", "request")
    assert request["status"] == "failed"
    assert request["detail"].startswith("scaled to zero and not awake within --wake-wait 4 s: ")
    assert (
        "requests answered 503 scaled_to_zero (the last: POST /v1/completions: HTTP 503 prefill and decode"
        in (request["detail"])
    )
    transfer = check(at_zero, "zero-asleep", "kv transfer")
    assert transfer == {
        **transfer,
        "status": "unverified",
        "detail": "scaled to zero and not awake within --wake-wait 4 s: no request was served to check",
    }
    autoscaler = check(at_zero, "zero-asleep", "autoscaler active")
    assert (autoscaler["status"], autoscaler["detail"]) == (
        "failed",
        "ScaledObject zero-asleep-prefill is still at zero though this run's requests should have woken it "
        "(scaled to zero and not awake within --wake-wait 4 s; its wake trigger reads 1)",
    )
    assert at_zero["code"] == 1


def test_with_wake_wait_0_the_request_that_woke_it_is_reported_unverified(tmp_path: Path) -> None:
    found = run(tmp_path, ["zero-wakes"], extra=("--wake-wait", "0"))
    assert check(found, "zero-wakes", "request") == {
        "endpoint": "zero-wakes",
        "region": "us-east-1",
        "check": "request",
        "status": "unverified",
        "detail": "scaled to zero; this request woke it (--wake-wait 0: not waited for)",
    }
    transfer = check(found, "zero-wakes", "kv transfer")
    assert (transfer["status"], transfer["detail"]) == (
        "unverified",
        "scaled to zero, not waited for (--wake-wait 0): no request was served to check",
    )
    autoscaler = check(found, "zero-wakes", "autoscaler active")
    assert (autoscaler["status"], autoscaler["detail"]) == (
        "passed",
        "zero-wakes-prefill: at zero, waiting for its wake trigger (wake=1); "
        "zero-wakes-decode: at zero, waiting for its wake trigger (wake=1)",
    )
    assert found["code"] == 1


def test_a_classic_endpoint_at_zero_is_checked_through_its_gate_as_a_split_one_through_its_proxy(
    at_zero: dict[str, Any],
) -> None:
    """The route's health check is the gate's /health (the route here does not serve the server's /ready);
    the request waits for the wake; the server's ScaledObject wakes on the gate's series."""
    health = check(at_zero, "gated-wakes", "health")
    assert (health["status"], health["detail"]) == ("passed", "HTTP 200 (scaled to zero: server)")
    request = check(at_zero, "gated-wakes", "request")
    assert request["status"] == "passed", request
    assert re.fullmatch(r" Paris\. \(woke from zero \d+ s after the first request, asked 3 times\)", request["detail"])
    autoscaler = check(at_zero, "gated-wakes", "autoscaler active")
    assert autoscaler["status"] == "passed", autoscaler
    assert autoscaler["detail"].startswith("gated-wakes: queue=0 per replica, wake=0 per replica")
