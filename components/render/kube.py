"""Small helpers shared by the renderers: object metadata and Kubernetes quantities."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from components import naming

if TYPE_CHECKING:
    from components.naming import Role
    from components.render.placement import PlacedEndpoint

_IEC_UNITS = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def quantity(size: int | str) -> str:
    """Bytes as a Kubernetes quantity, in the largest IEC unit that keeps it exact (``12Gi``)."""
    size = int(size)
    for unit, factor in _IEC_UNITS:
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def metadata(name: str, namespace: str | None, labels: Mapping[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    return meta


def pod_identity_account(name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """A ServiceAccount EKS Pod Identity binds to an IAM role; no Kubernetes API token is mounted."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(name, namespace, labels),
        "automountServiceAccountToken": False,
    }


# NetworkPolicy pieces.


def endpoint_pods(endpoint: PlacedEndpoint, *roles: Role) -> dict[str, Any]:
    """A selector of the endpoint's pods of ``roles``."""
    return {
        "matchLabels": {"app.kubernetes.io/name": endpoint.name},
        "matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In", "values": list(roles)}],
    }


def scraper_rule(port: int) -> dict[str, Any]:
    """Ingress from the region's Prometheus server only (docs/metrics.md), to ``port`` only."""
    return {
        "from": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": naming.METRICS_NAMESPACE}},
                "podSelector": {"matchLabels": dict(naming.SCRAPER_LABELS)},
            }
        ],
        "ports": tcp_ports((port, port)),
    }


def framework_metrics_port(endpoint: PlacedEndpoint) -> int | None:
    """A port of its own where the endpoint's framework serves /metrics (Triton's), or None."""
    from components.render.frameworks import ADAPTERS  # the spec models import the adapters from here

    return ADAPTERS[endpoint.spec.framework].metrics_port


def metrics_port(endpoint: PlacedEndpoint) -> int:
    """Where the endpoint's server pods serve /metrics: the framework's own port, else the server's."""
    return framework_metrics_port(endpoint) or endpoint.spec.port


def tcp_ports(*ranges: tuple[int, int]) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": low, **({"endPort": high} if high != low else {})} for low, high in ranges]


def network_policy(
    name: str, endpoint: PlacedEndpoint, selector: dict[str, Any], rules: list[dict[str, Any]]
) -> dict[str, Any]:
    """Only ``rules`` reach the pods of ``selector`` (ingress; egress stays open)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(name, endpoint.namespace, endpoint.labels("network-policy")),
        "spec": {"podSelector": selector, "policyTypes": ["Ingress"], "ingress": rules},
    }
