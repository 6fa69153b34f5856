"""The EFA nodes' startup taint, and the DaemonSet that takes it off (docs/efa.md, "Extra nodes").

Cluster Autoscaler 1.34 counts a node as ready once kubelet reports Ready and, for a GPU node, its
GPUs are advertised; an EFA node whose device plugin has not registered yet advertises no
``vpc.amazonaws.com/efa``, so a pending rdma pod fits neither it nor, by CA's reckoning, anything
already coming up, and CA adds another node (a p5). Every EFA node group therefore registers its
nodes with ``EFA_STARTUP_TAINT``, whose key has CA's startup prefix: CA treats such a node as not
started (an upcoming node) for up to 15 minutes and leaves the taint out of the node templates it
scales from (kubernetes/autoscaler cluster-autoscaler-1.34.5 utils/taints/taints.go
``StartupTaintPrefix``, ``FilterOutNodesWithStartupTaints``, ``SanitizeTaints``;
clusterstate/clusterstate.go ``MaxNodeStartupTime``). The device plugins tolerate it
(components/platform/addons.py), and this module's DaemonSet removes it once the node advertises
its EFA devices (components/platform/efa_taint_program.py); the plugin cannot, it has no API
credentials (aws/eks-charts stable/aws-efa-k8s-device-plugin v0.5.30 templates/daemonset.yaml).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from components import naming, scheduling
from components.catalog import pins
from components.render.pods import TMP_VOLUME, locked_down, tmp_volume

NAME = "efa-startup-taint"
NAMESPACE = "kube-system"
PROGRAM_SOURCE = Path(__file__).with_name("efa_taint_program.py")
PROGRAM_DIR = "/etc/efa-startup-taint"
PROGRAM_FILE = "efa_startup_taint.py"
CHECKSUM_ANNOTATION = "inference-fleet/program-sha256"
REQUESTS = {"cpu": "10m", "memory": "32Mi"}
LIMITS = {"cpu": "100m", "memory": "64Mi"}
PERIOD_SECONDS = 5
HEARTBEAT = "/tmp/heartbeat"
ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_SECONDS = 3600


def program_text() -> str:
    return PROGRAM_SOURCE.read_text(encoding="utf-8")


def image() -> str:
    """Mooncake's master image, pinned already: python:3.12-slim with the standard library the
    program needs, non-root (config/pins.yaml ``mooncake.master_image``)."""
    return pins().mooncake.master_image


def _metadata(name: str, namespace: str | None = NAMESPACE) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {**naming.fleet_labels(), "app.kubernetes.io/name": NAME}}
    if namespace is not None:
        metadata["namespace"] = namespace
    return metadata


def service_account() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(NAME)}


def cluster_role() -> dict[str, Any]:
    """Read a node and patch its taints; nothing else."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": _metadata(f"inference-fleet:{NAME}", None),
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}],
    }


def cluster_role_binding() -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": _metadata(f"inference-fleet:{NAME}", None),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"inference-fleet:{NAME}"},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
    }


def config_map() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(NAME),
        "data": {PROGRAM_FILE: program_text()},
    }


def pod_tolerations() -> list[dict[str, str]]:
    """Every taint an EFA node carries, the startup one included."""
    taints = (scheduling.GPU_TAINT, scheduling.NEURON_TAINT, scheduling.EFA_TAINT, scheduling.EFA_STARTUP_TAINT)
    return scheduling.tolerations(taints)


def _probe() -> dict[str, Any]:
    """Alive while the loop completes rounds: the heartbeat is at most a few periods old."""
    check = ["python3", f"{PROGRAM_DIR}/{PROGRAM_FILE}", "--check", HEARTBEAT, "--max-age", str(12 * PERIOD_SECONDS)]
    return {"exec": {"command": check}, "initialDelaySeconds": 10, "periodSeconds": 30, "timeoutSeconds": 10}


def _token_volume() -> dict[str, Any]:
    """The API credentials, mounted explicitly where the program (and client libraries) look: the
    pod automounts no token, so no other container of it could get one."""
    return {
        "name": "api-token",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            ]
        },
    }


def pod_spec() -> dict[str, Any]:
    return {
        "serviceAccountName": NAME,
        "automountServiceAccountToken": False,
        "priorityClassName": "system-node-critical",
        "nodeSelector": {scheduling.EFA_LABEL: "true"},
        "tolerations": pod_tolerations(),
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": "remover",
                "image": image(),
                "command": [
                    "python3",
                    f"{PROGRAM_DIR}/{PROGRAM_FILE}",
                    "--taint",
                    scheduling.EFA_STARTUP_TAINT.key,
                    "--resource",
                    scheduling.EFA_RESOURCE,
                    "--period",
                    str(PERIOD_SECONDS),
                    "--heartbeat",
                    HEARTBEAT,
                ],
                "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                "resources": {"requests": dict(REQUESTS), "limits": dict(LIMITS)},
                "livenessProbe": _probe(),
                "readinessProbe": _probe(),
                "securityContext": locked_down(),
                "volumeMounts": [
                    {"name": "program", "mountPath": PROGRAM_DIR, "readOnly": True},
                    {"name": "api-token", "mountPath": ACCOUNT_DIR, "readOnly": True},
                    {"name": TMP_VOLUME, "mountPath": "/tmp"},
                ],
            }
        ],
        "volumes": [{"name": "program", "configMap": {"name": NAME}}, _token_volume(), tmp_volume()],
    }


def network_policy() -> dict[str, Any]:
    """The pod serves nothing: no traffic in. It calls only the API server, whose addresses (the
    control plane's interfaces in the VPC) the manifests do not know, so egress stays open."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(NAME),
        "spec": {"podSelector": {"matchLabels": {"app.kubernetes.io/name": NAME}}, "policyTypes": ["Ingress"]},
    }


def daemon_set() -> dict[str, Any]:
    selector = {"app.kubernetes.io/name": NAME}
    # A new program rolls the pods (a ConfigMap's change alone would not).
    annotations = {CHECKSUM_ANNOTATION: hashlib.sha256(program_text().encode()).hexdigest()}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _metadata(NAME),
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {
                    "labels": {**selector, **naming.fleet_labels()},
                    "annotations": annotations,
                },
                "spec": pod_spec(),
            },
        },
    }


def manifests() -> list[dict[str, Any]]:
    """In the order they are needed."""
    return [service_account(), cluster_role(), cluster_role_binding(), config_map(), network_policy(), daemon_set()]
