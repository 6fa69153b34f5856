"""NetworkPolicy ingress as the API defines it (networking.k8s.io/v1), across namespaces: a pod
selected by some Ingress policy of its namespace admits a connection only if a rule of one of
them admits its source and port; peers with only a podSelector are pods of the policy's own
namespace, with a namespaceSelector pods of the namespaces it selects (every pod there unless a
podSelector narrows it). ipBlock peers are not evaluated (none of ours selects pods by address)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: Mapping[str, str]
    namespace_labels: Mapping[str, str] = field(default_factory=dict)

    def namespace_labels_with_name(self) -> Mapping[str, str]:
        """The API server labels every namespace with its name (kubernetes.io/metadata.name)."""
        return {**self.namespace_labels, "kubernetes.io/metadata.name": self.namespace}


def matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        held = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not held:
            return False
    return True


def _peer_admits(peer: Mapping[str, Any], policy_namespace: str, source: Pod) -> bool:
    if "ipBlock" in peer:
        return False
    if "namespaceSelector" in peer:
        if not matches(peer["namespaceSelector"], source.namespace_labels_with_name()):
            return False
    elif source.namespace != policy_namespace:
        return False
    return "podSelector" not in peer or matches(peer["podSelector"], source.labels)


def admitted(policies: Iterable[Mapping[str, Any]], source: Pod, target: Pod, port: int) -> bool:
    """Whether a TCP connection from ``source`` to ``port`` of ``target`` is allowed by ``policies``."""
    selecting = [
        policy
        for policy in policies
        if policy["metadata"]["namespace"] == target.namespace
        and "Ingress" in policy["spec"].get("policyTypes", ["Ingress"])
        and matches(policy["spec"]["podSelector"], target.labels)
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            peers = rule.get("from")
            if peers is not None and not any(
                _peer_admits(peer, policy["metadata"]["namespace"], source) for peer in peers
            ):
                continue
            ports = rule.get("ports")
            if ports is None or any(
                entry.get("protocol", "TCP") == "TCP" and entry["port"] <= port <= entry.get("endPort", entry["port"])
                for entry in ports
            ):
                return True
    return False
