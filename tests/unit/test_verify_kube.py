"""fleetctl verify reaches a region's cluster through its kubeconfig: the current context's
cluster and user, the certificate authority from the kubeconfig, the token from the exec
plugin (a real process here) or a static token, and clear errors when any of it is wrong."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from fleetctl.verify.client import CheckError, Client
from fleetctl.verify.kube import connect
from tests.certificates import certificate_authority


def credential_program(token: str) -> list[str]:
    status = json.dumps({"kind": "ExecCredential", "status": {"token": token}})
    return ["-c", f"print({status!r})"]


def kubeconfig(user: dict[str, Any], cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "current-context": "aws",
        "clusters": [
            {"name": "other", "cluster": {"server": "http://127.0.0.1:1"}},
            {"name": "eks", "cluster": cluster or {"server": "http://127.0.0.1:6443"}},
        ],
        "contexts": [
            {"name": "other", "context": {"cluster": "other", "user": "other"}},
            {"name": "aws", "context": {"cluster": "eks", "user": "aws"}},
        ],
        "users": [{"name": "other", "user": {"token": "wrong"}}, {"name": "aws", "user": user}],
    }


def test_the_current_context_chooses_the_cluster_and_the_user() -> None:
    cluster = connect(kubeconfig({"token": "static"}), Client())
    assert (cluster.server, cluster.token, cluster.context) == ("http://127.0.0.1:6443", "static", None)


def test_a_json_string_kubeconfig_as_pulumi_eks_exports_it() -> None:
    cluster = connect(json.dumps(kubeconfig({"token": "static"})), Client())
    assert cluster.token == "static"


def test_the_exec_plugin_runs_with_its_environment() -> None:
    program = "import json, os; print(json.dumps({'status': {'token': os.environ['AWS_PROFILE']}}))"
    user = {
        "exec": {"command": sys.executable, "args": ["-c", program], "env": [{"name": "AWS_PROFILE", "value": "ops"}]}
    }
    assert connect(kubeconfig(user), Client()).token == "ops"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-c", "import sys; sys.stderr.write('Unable to locate credentials\\n'); sys.exit(255)"],
            "exited 255: Unable",
        ),
        (["-c", "print('not json')"], "printed no ExecCredential token"),
    ],
)
def test_a_failing_credential_command_is_a_clear_error(args: list[str], message: str) -> None:
    user = {"exec": {"command": sys.executable, "args": args}}
    with pytest.raises(CheckError, match=message):
        connect(kubeconfig(user), Client())


def test_a_missing_credential_command_is_a_clear_error() -> None:
    with pytest.raises(CheckError, match="credential command 'no-such-aws-cli' failed"):
        connect(kubeconfig({"exec": {"command": "no-such-aws-cli"}}), Client())


@pytest.mark.parametrize(
    "config",
    [{"users": []}, {"clusters": [], "users": []}, {"clusters": [{"name": "eks", "cluster": {}}], "users": []}],
)
def test_a_kubeconfig_without_a_cluster_or_user_is_a_clear_error(config: dict[str, Any]) -> None:
    with pytest.raises(CheckError, match="the kubeconfig has no usable cluster and user"):
        connect(config, Client())


def test_https_trusts_exactly_the_kubeconfigs_certificate_authority(tmp_path: Path) -> None:
    certificate = certificate_authority(tmp_path, "kubernetes")
    authority = base64.b64encode(certificate.read_bytes()).decode()
    cluster = connect(
        kubeconfig(
            {"token": "t"},
            {"server": "https://ABC.gr7.us-east-1.eks.amazonaws.com", "certificate-authority-data": authority},
        ),
        Client(),
    )
    assert cluster.context is not None
    assert cluster.context.check_hostname
    (authority_certificate,) = cluster.context.get_ca_certs()
    assert str(authority_certificate["subject"]) == "((('commonName', 'kubernetes'),),)"
