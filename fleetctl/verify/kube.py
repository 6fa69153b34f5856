"""Just enough of the Kubernetes API for verification, through a region's kubeconfig (the
stack's `kubeconfigs` output): list an endpoint's pods, read a pod's metrics through the API
server's pod proxy, read a container's log. Credentials come from the kubeconfig's exec plugin
(`aws eks get-token` for EKS) or its static token, run once per cluster."""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import urllib.parse
from dataclasses import dataclass
from typing import Any

from fleetctl.verify.client import CheckError, Client

LOG_BYTES = 16 * 2**20
"""The most of one container log read at once (from its start, or from --since)."""
EXEC_SECONDS = 60


@dataclass(frozen=True)
class Pod:
    name: str
    containers: tuple[str, ...]


@dataclass(frozen=True)
class Cluster:
    server: str
    client: Client
    token: str | None = None
    context: ssl.SSLContext | None = None

    def get(self, path: str, **query: str | int) -> bytes:
        url = self.server.rstrip("/") + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        status, body = self.client.fetch("GET", url, headers=headers, context=self.context)
        if status != 200:
            raise CheckError(f"Kubernetes API GET {path}: HTTP {status} {_status_message(body)}".rstrip())
        return body

    def post(self, path: str, body: Any, answer: dict[str, str] | None = None) -> tuple[int, Any]:
        """(status, decoded JSON or None) of a JSON POST, e.g. through the pod proxy to a pod's server;
        the response's headers into ``answer`` when given."""
        url = self.server.rstrip("/") + path
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode()
        status, raw = self.client.fetch("POST", url, data, headers, context=self.context, answer=answer)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, None

    def running_pods(self, namespace: str, labels: dict[str, str]) -> list[Pod]:
        """The running pods matching every label, by name."""
        selector = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
        listing = json.loads(self.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector))
        pods = [
            Pod(item["metadata"]["name"], tuple(container["name"] for container in item["spec"]["containers"]))
            for item in listing.get("items", [])
            if item.get("status", {}).get("phase") == "Running"
        ]
        return sorted(pods, key=lambda pod: pod.name)

    def pod_metrics(self, namespace: str, pod: str, port: int) -> str:
        """The pod's /metrics on ``port``, through the API server's pod proxy."""
        return self.pod_get(namespace, pod, port, "/metrics").decode()

    def pod_get(self, namespace: str, pod: str, port: int, path: str) -> bytes:
        """GET ``path`` of the pod's ``port``, through the API server's pod proxy."""
        return self.get(f"/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy{path}")

    def log(self, namespace: str, pod: str, container: str, since_seconds: int | None = None) -> str:
        query: dict[str, str | int] = {"container": container, "limitBytes": LOG_BYTES}
        if since_seconds is not None:
            query["sinceSeconds"] = max(1, since_seconds)
        return self.get(f"/api/v1/namespaces/{namespace}/pods/{pod}/log", **query).decode(errors="replace")


def connect(kubeconfig: Any, client: Client) -> Cluster:
    """A cluster from a kubeconfig (a JSON string or an object), its current context's."""
    config = json.loads(kubeconfig) if isinstance(kubeconfig, str) else kubeconfig
    try:
        context_name = config.get("current-context")
        contexts = {entry["name"]: entry["context"] for entry in config.get("contexts", [])}
        context: dict[str, Any] = contexts.get(context_name) or next(iter(contexts.values()), {})
        cluster = _named(config["clusters"], context.get("cluster"))
        user = _named(config.get("users", []), context.get("user"))
        server = str(cluster["server"])
    except (KeyError, IndexError, TypeError, AttributeError) as error:
        raise CheckError(f"the kubeconfig has no usable cluster and user ({error!r})") from None
    return Cluster(server, client, _token(user), _tls(cluster) if server.startswith("https://") else None)


def _named(entries: list[dict[str, Any]], name: str | None) -> dict[str, Any]:
    chosen = next((entry for entry in entries if entry.get("name") == name), None) or entries[0]
    for kind in ("cluster", "user"):
        if kind in chosen:
            return dict(chosen[kind])
    raise KeyError(name)


def _tls(cluster: dict[str, Any]) -> ssl.SSLContext:
    if "certificate-authority-data" in cluster:
        authority = base64.b64decode(cluster["certificate-authority-data"]).decode()
        return ssl.create_default_context(cadata=authority)
    return ssl.create_default_context(cafile=cluster.get("certificate-authority"))


def _token(user: dict[str, Any]) -> str | None:
    if "token" in user:
        return str(user["token"])
    plugin = user.get("exec")
    if not plugin:
        return None
    command = [plugin["command"], *(plugin.get("args") or [])]
    environment = {entry["name"]: entry["value"] for entry in plugin.get("env") or []}
    try:
        completed = subprocess.run(
            command,
            env={**os.environ, **environment},
            capture_output=True,
            timeout=EXEC_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise CheckError(f"kubeconfig credential command {command[0]!r} failed: {error}") from None
    if completed.returncode != 0:
        message = completed.stderr.decode(errors="replace").strip().splitlines()
        raise CheckError(
            f"kubeconfig credential command {command[0]!r} exited {completed.returncode}"
            + (f": {message[-1]}" if message else "")
        )
    try:
        return str(json.loads(completed.stdout)["status"]["token"])
    except (ValueError, KeyError, TypeError):
        raise CheckError(f"kubeconfig credential command {command[0]!r} printed no ExecCredential token") from None


def _status_message(body: bytes) -> str:
    try:
        return str(json.loads(body).get("message", ""))
    except (ValueError, AttributeError):
        return ""
