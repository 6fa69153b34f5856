"""The test cluster's credentials, made with the openssl command: one certificate authority, the
API server's serving certificate for 127.0.0.1, a client certificate per component and for the
tests (the API server authenticates clients by certificate), the service-account key pair the
API server signs and checks tokens with, and a kubeconfig per component."""

from __future__ import annotations

import subprocess
from pathlib import Path

SERVER_ADDRESS = "127.0.0.1"
CLIENTS = {
    # file stem -> (common name = user, organisation = group)
    "admin": ("inference-fleet-tests", "system:masters"),
    "kube-scheduler": ("system:kube-scheduler", None),
    "kube-controller-manager": ("system:kube-controller-manager", None),
}


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _key(path: Path) -> None:
    """An EC P-256 key: quick to make, and accepted for TLS and for service-account tokens (ES256)."""
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))


def _signed(directory: Path, stem: str, subject: str, extensions: str) -> None:
    key, request, extfile = directory / f"{stem}.key", directory / f"{stem}.csr", directory / f"{stem}.ext"
    _key(key)
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(request))
    extfile.write_text(extensions)
    _openssl(
        "x509",
        "-req",
        "-in",
        str(request),
        "-CA",
        str(directory / "ca.pem"),
        "-CAkey",
        str(directory / "ca.key"),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        str(extfile),
        "-out",
        str(directory / f"{stem}.pem"),
    )
    request.unlink()
    extfile.unlink()


def make_pki(directory: Path) -> Path:
    """Every credential of the cluster under ``directory``; returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    _key(directory / "ca.key")
    _openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        str(directory / "ca.key"),
        "-subj",
        "/CN=inference-fleet-test-ca",
        "-days",
        "2",
        "-out",
        str(directory / "ca.pem"),
    )
    _signed(
        directory,
        "apiserver",
        "/CN=kube-apiserver",
        f"subjectAltName=IP:{SERVER_ADDRESS},DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )
    for stem, (user, group) in CLIENTS.items():
        subject = f"/CN={user}" + (f"/O={group}" if group else "")
        _signed(directory, stem, subject, "extendedKeyUsage=clientAuth\n")
    _key(directory / "service-account.key")
    _openssl(
        "pkey", "-in", str(directory / "service-account.key"), "-pubout", "-out", str(directory / "service-account.pub")
    )
    return directory


def kubeconfig(directory: Path, stem: str, server: str) -> Path:
    """A kubeconfig for client ``stem`` (its certificate and key in ``directory``)."""
    path = directory / f"{stem}.kubeconfig"
    path.write_text(
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        f"- name: test\n  cluster:\n    server: {server}\n    certificate-authority: {directory / 'ca.pem'}\n"
        "users:\n"
        f"- name: {stem}\n  user:\n"
        f"    client-certificate: {directory / f'{stem}.pem'}\n    client-key: {directory / f'{stem}.key'}\n"
        "contexts:\n"
        f"- name: test\n  context:\n    cluster: test\n    user: {stem}\n"
        "current-context: test\n"
    )
    return path
