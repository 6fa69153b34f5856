"""Runs inside a private network namespace (``unshare -n``, tests/cluster/conftest.py): etcd,
kube-apiserver, kube-controller-manager and kube-scheduler built by tools/kube/build.sh, with
the credentials of tests/cluster/pki.py. Prints one JSON line once all four answer, then runs
until its standard input closes, and stops them. Every flag is explained in
docs/real-control-plane.md; nothing outside the namespace can reach any of them.

    python -m tests.cluster.control_plane <binaries directory> <work directory>
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from tests.cluster.pki import SERVER_ADDRESS, kubeconfig

ETCD = "http://127.0.0.1:2379"
ADVERTISED = "192.0.2.1"
"""The API server's address in the ``kubernetes`` Service (TEST-NET-1, on the namespace's loopback
device): that Service's endpoints may not be a loopback address, and the namespace has no other."""
SERVER = f"https://{SERVER_ADDRESS}:6443"
HEALTH = {
    # component -> its health endpoint (the scheduler's and controller manager's default secure ports)
    "kube-controller-manager": "https://127.0.0.1:10257/healthz",
    "kube-scheduler": "https://127.0.0.1:10259/healthz",
}
START_SECONDS = 120
STOP_SECONDS = 10
PR_SET_PDEATHSIG = 1


def commands(binaries: Path, work: Path) -> dict[str, list[str]]:
    pki = work / "pki"
    return {
        "etcd": [
            str(binaries / "etcd"),
            f"--data-dir={work / 'etcd'}",
            f"--listen-client-urls={ETCD}",
            f"--advertise-client-urls={ETCD}",
            "--unsafe-no-fsync",
        ],
        "kube-apiserver": [
            str(binaries / "kube-apiserver"),
            f"--etcd-servers={ETCD}",
            f"--advertise-address={ADVERTISED}",
            "--service-cluster-ip-range=10.100.0.0/16",
            f"--client-ca-file={pki / 'ca.pem'}",
            f"--tls-cert-file={pki / 'apiserver.pem'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki / 'service-account.pub'}",
            f"--service-account-signing-key-file={pki / 'service-account.key'}",
            "--disable-admission-plugins=TaintNodesByCondition",
        ],
        "kube-controller-manager": [
            str(binaries / "kube-controller-manager"),
            f"--kubeconfig={kubeconfig(pki, 'kube-controller-manager', SERVER)}",
            "--leader-elect=false",
            "--controllers=*,-node-lifecycle-controller,-horizontal-pod-autoscaler-controller",
            "--kube-api-qps=500",
            "--kube-api-burst=1000",
        ],
        "kube-scheduler": [
            str(binaries / "kube-scheduler"),
            f"--kubeconfig={kubeconfig(pki, 'kube-scheduler', SERVER)}",
            "--leader-elect=false",
        ],
    }


def _die_with_parent() -> None:
    """Children get SIGKILL if this driver dies without stopping them (a killed test run)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _start(name: str, command: list[str], logs: Path) -> subprocess.Popen[bytes]:
    log: IO[bytes] = (logs / f"{name}.log").open("wb")
    return subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
    )


def _answers(url: str, context: ssl.SSLContext | None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _wait(name: str, process: subprocess.Popen[bytes], ready: Callable[[], bool], logs: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = (logs / f"{name}.log").read_text(errors="replace")[-4000:]
            raise RuntimeError(f"{name} exited with {process.returncode}:\n{tail}")
        if ready():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not become ready in {START_SECONDS} s")


def _client_context(pki: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    context.load_cert_chain(str(pki / "admin.pem"), str(pki / "admin.key"))
    return context


def _stop(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    """Each in turn, clients before the servers they talk to: the scheduler and controller manager,
    then the API server while etcd still answers (it shuts down gracefully then), then etcd."""
    for process in reversed(processes.values()):
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def running(binaries: Path, work: Path) -> Iterator[dict[str, Any]]:
    """The four components up in this (private) network namespace, with the credentials under
    ``work/pki``; yields what the first line says (server, version, seconds to start), and stops
    them on the way out. Raises RuntimeError, with the failing one's log, if one does not start."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "addr", "add", f"{ADVERTISED}/32", "dev", "lo"], check=True)
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    pki = work / "pki"
    admin = _client_context(pki)
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE  # the components' own self-signed serving certificates
    checks = {
        "etcd": lambda: _answers(f"{ETCD}/health", None),
        "kube-apiserver": lambda: _answers(f"{SERVER}/readyz", admin),
        "kube-controller-manager": lambda: (
            _answers(HEALTH["kube-controller-manager"], insecure)
            # the service-account controller has made kube-system's default account (platform pods need it)
            and _answers(f"{SERVER}/api/v1/namespaces/kube-system/serviceaccounts/default", admin)
        ),
        "kube-scheduler": lambda: _answers(HEALTH["kube-scheduler"], insecure),
    }
    processes: dict[str, subprocess.Popen[bytes]] = {}
    started = time.monotonic()
    deadline = started + START_SECONDS
    try:
        for name, command in commands(binaries, work).items():
            processes[name] = _start(name, command, logs)
            if name in ("etcd", "kube-apiserver"):  # what the others need first
                _wait(name, processes[name], checks[name], logs, deadline)
        for name in ("kube-controller-manager", "kube-scheduler"):
            _wait(name, processes[name], checks[name], logs, deadline)
        with urllib.request.urlopen(f"{SERVER}/version", context=admin) as response:
            version = json.load(response)["gitVersion"]
        yield {"server": SERVER, "version": version, "seconds": time.monotonic() - started}
    finally:
        _stop(processes)


def main(argv: list[str]) -> int:
    binaries, work = Path(argv[0]), Path(argv[1])
    try:
        with running(binaries, work) as started:
            print(json.dumps({"pid": os.getpid(), **started}), flush=True)
            sys.stdin.read()  # until the test session closes our standard input (or dies)
    except RuntimeError as error:
        print(str(error), file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
