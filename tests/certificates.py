"""Certificates made with the openssl command for the tests: a certificate authority like the
one EKS writes into a kubeconfig, and a server certificate it signs."""

from __future__ import annotations

import subprocess
from pathlib import Path


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def certificate_authority(directory: Path, name: str) -> Path:
    """A self-signed authority ``name`` (``<name>.pem``, ``<name>.key`` in ``directory``)."""
    pem, key = directory / f"{name}.pem", directory / f"{name}.key"
    subject = f"/CN={name}"
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        subject,
        "-keyout",
        str(key),
        "-out",
        str(pem),
    )
    return pem


def server_certificate(directory: Path, authority: str, host: str) -> None:
    """``server.pem`` and ``server.key`` for ``host``, signed by the authority ``authority``."""
    (directory / "san.ext").write_text(f"subjectAltName=DNS:{host}\n")
    request, key = directory / "server.csr", directory / "server.key"
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver", "-keyout", str(key), "-out", str(request)
    )
    openssl(
        "x509",
        "-req",
        "-in",
        str(request),
        "-days",
        "1",
        "-CAcreateserial",
        "-CA",
        str(directory / f"{authority}.pem"),
        "-CAkey",
        str(directory / f"{authority}.key"),
        "-extfile",
        str(directory / "san.ext"),
        "-out",
        str(directory / "server.pem"),
    )
