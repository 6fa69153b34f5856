"""A small Kubernetes API client for the cluster tests: HTTPS with the tests' client certificate,
server-side apply, status patches, lists and deletes. The API server listens only inside the
control plane's private network namespace, so every connection is opened from inside it
(``setns`` on this thread for the ``connect``, then straight back): the socket stays in that
namespace for its life, and the rest of the test process never leaves its own."""

from __future__ import annotations

import ctypes
import http.client
import json
import os
import ssl
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"setns: {os.strerror(error)}")


@contextmanager
def network_namespace(pid: int) -> Iterator[None]:
    """This thread in process ``pid``'s network namespace for the duration."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(target)
        os.close(own)


class ApiError(Exception):
    def __init__(self, method: str, path: str, status: int, body: Mapping[str, Any]) -> None:
        self.status = status
        self.body = body
        self.reason = str(body.get("reason", ""))
        self.message = str(body.get("message", body))
        super().__init__(f"{method} {path}: HTTP {status} {self.reason}: {self.message}")


class _Connection(http.client.HTTPSConnection):
    namespace_pid: int

    def connect(self) -> None:
        with network_namespace(self.namespace_pid):
            super().connect()


@dataclass(frozen=True)
class Resource:
    """Where the API serves a kind: its path segment and whether objects live in a namespace."""

    prefix: str  # /api/v1 or /apis/<group>/<version>
    plural: str
    namespaced: bool

    def path(self, name: str | None = None, namespace: str | None = None, subresource: str | None = None) -> str:
        parts = [self.prefix]
        if self.namespaced and namespace:
            parts += ["namespaces", namespace]
        parts.append(self.plural)
        if name:
            parts.append(name)
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


@dataclass
class Kube:
    server: str
    pki: Path
    namespace_pid: int
    _connection: _Connection | None = None
    _resources: dict[tuple[str, str], Resource] = field(default_factory=dict)

    def _context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki / "ca.pem"))
        context.load_cert_chain(str(self.pki / "admin.pem"), str(self.pki / "admin.key"))
        return context

    def _open(self) -> _Connection:
        parsed = urllib.parse.urlsplit(self.server)
        connection = _Connection(parsed.hostname or "", parsed.port, context=self._context(), timeout=60)
        connection.namespace_pid = self.namespace_pid
        return connection

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: Mapping[str, str | int | bool] | None = None,
    ) -> dict[str, Any]:
        target = path + ("?" + urllib.parse.urlencode({k: _text(v) for k, v in query.items()}) if query else "")
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):  # a kept-alive connection the server closed is reopened once
            if self._connection is None:
                self._connection = self._open()
            try:
                self._connection.request(method, target, body=payload, headers=headers)
                response = self._connection.getresponse()
                data = response.read()
                break
            except (http.client.HTTPException, ConnectionError):
                self._connection.close()
                self._connection = None
                if attempt == 2:
                    raise
        answer: dict[str, Any] = json.loads(data) if data else {}
        if response.status >= 400:
            raise ApiError(method, path, response.status, answer)
        return answer

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # Discovery: where each kind lives.

    def resource(self, api_version: str, kind: str) -> Resource:
        key = (api_version, kind)
        if key not in self._resources:
            prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            for entry in self.request("GET", prefix)["resources"]:
                if "/" not in entry["name"]:
                    found = Resource(prefix, entry["name"], bool(entry["namespaced"]))
                    self._resources[(api_version, entry["kind"])] = found
            if key not in self._resources:
                raise KeyError(f"the API server serves no {kind} in {api_version}")
        return self._resources[key]

    def forget_resources(self) -> None:
        """After new CustomResourceDefinitions, discovery is read again."""
        self._resources.clear()

    def path_of(self, manifest: Mapping[str, Any], subresource: str | None = None) -> str:
        metadata = manifest["metadata"]
        resource = self.resource(manifest["apiVersion"], manifest["kind"])
        return resource.path(metadata["name"], metadata.get("namespace") or "default", subresource)

    # Verbs.

    def apply(self, manifest: Mapping[str, Any], field_manager: str, force: bool = False) -> dict[str, Any]:
        """Server-side apply of the whole object, as pulumi-kubernetes does with enableServerSideApply
        (provider/pkg/await/await.go: an apply patch under the resource's field manager, not
        forced); unknown or duplicate fields are refused rather than dropped."""
        return self.request(
            "PATCH",
            self.path_of(manifest),
            manifest,
            content_type="application/apply-patch+yaml",  # JSON is YAML
            query={"fieldManager": field_manager, "force": force, "fieldValidation": "Strict"},
        )

    def create(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        metadata = manifest["metadata"]
        resource = self.resource(manifest["apiVersion"], manifest["kind"])
        return self.request("POST", resource.path(None, metadata.get("namespace") or "default"), manifest)

    def patch_status(self, manifest: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
        return self.request(
            "PATCH",
            self.path_of(manifest, "status"),
            {"status": status},
            content_type="application/strategic-merge-patch+json",
        )

    def patch(self, manifest: Mapping[str, Any], patch: Mapping[str, Any], subresource: str | None = None) -> Any:
        return self.request(
            "PATCH",
            self.path_of(manifest, subresource),
            patch,
            content_type="application/merge-patch+json",
        )

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self.request("GET", self.resource(api_version, kind).path(name, namespace))

    def objects(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Every object of ``kind`` (in ``namespace``, or in all)."""
        items: list[dict[str, Any]] = self.request("GET", self.resource(api_version, kind).path(None, namespace))[
            "items"
        ]
        for item in items:  # a list names the kind once, not per item
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items

    def delete_all(self, api_version: str, kind: str, namespace: str | None = None, **query: str | int) -> None:
        """Every object of ``kind`` (in ``namespace``): one deletecollection."""
        self.request("DELETE", self.resource(api_version, kind).path(None, namespace), query=query)

    def namespaced_kinds(self) -> list[tuple[str, str]]:
        """(apiVersion, kind) of every namespaced resource that can be deleted as a collection,
        one version per group (the preferred), as the namespace controller finds them."""
        found = [("v1", entry["kind"]) for entry in self._collectable("/api/v1")]
        for group in self.request("GET", "/apis")["groups"]:
            version = group["preferredVersion"]["groupVersion"]
            found += [(version, entry["kind"]) for entry in self._collectable(f"/apis/{version}")]
        return found

    def _collectable(self, prefix: str) -> list[dict[str, Any]]:
        return [
            entry
            for entry in self.request("GET", prefix)["resources"]
            if "/" not in entry["name"] and entry["namespaced"] and "deletecollection" in entry.get("verbs", ())
        ]

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None, **query: str | int) -> None:
        try:
            self.request("DELETE", self.resource(api_version, kind).path(name, namespace), query=query)
        except ApiError as error:
            if error.status != 404:
                raise


def _text(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
