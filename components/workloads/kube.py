"""Registering a rendered manifest as the typed pulumi_kubernetes resource of its kind."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

KINDS: dict[tuple[str, str], type[pulumi.CustomResource]] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("apps/v1", "StatefulSet"): k8s.apps.v1.StatefulSet,
    ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
    ("networking.k8s.io/v1", "Ingress"): k8s.networking.v1.Ingress,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
}

CUSTOM_KINDS: frozenset[tuple[str, str]] = frozenset(
    {("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"), ("keda.sh/v1alpha1", "ScaledObject")}
)
"""Kinds of the CRDs the platform installs (components/platform/leader_worker_set.py, KEDA's with the
metrics pipeline), registered as pulumi_kubernetes CustomResources."""

_UPPER = re.compile(r"(?<!^)(?=[A-Z])")


def _argument(field: str) -> str:
    """The resource argument of a top-level manifest field (``automountServiceAccountToken``)."""
    return _UPPER.sub("_", field).lower()


def register(name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Register ``manifest`` (camelCase inside, as kubectl takes it) with the provider in ``opts``."""
    if (manifest["apiVersion"], manifest["kind"]) in CUSTOM_KINDS:
        return k8s.apiextensions.CustomResource(
            name,
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=opts,
        )
    kind = KINDS[(manifest["apiVersion"], manifest["kind"])]
    arguments = {_argument(key): value for key, value in manifest.items() if key not in ("apiVersion", "kind")}
    return kind(name, opts=opts, **arguments)
