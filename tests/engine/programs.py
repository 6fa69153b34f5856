"""Inline programs of the real-engine tests that are not the project's own (that one is
``project``, in tests/engine/test_examples.py): the mechanisms the project relies on, on the
pieces of the project that use them.

``platform`` registers KEDA's vendored CRDs the way the platform does
(components/platform/addons.py vendored_crds), a ScaledObject of one of them through the
project's own registration (components/workloads/kube.py register) depending on them, a Namespace,
a Deployment without ``replicas`` (as components/render/classic.py renders an autoscaled one: the
HorizontalPodAutoscaler owns the count) and its Service, a Secret from a secret config value, and
a ConfigMap whose ``protect`` is the config's.
"""

from __future__ import annotations

import os
import runpy
from pathlib import Path
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from components.catalog import pins
from components.platform.addons import vendored_crds
from components.workloads.kube import register
from tests.cluster.namespace import ROOT

NAMESPACE = "engine-tests"
LABELS = {"app.kubernetes.io/name": "server"}


def platform() -> None:
    config = pulumi.Config()
    provider = k8s.Provider("local", kubeconfig=Path(os.environ["KUBECONFIG"]).read_text())
    holder = pulumi.ComponentResource("engine-tests:index:Platform", "platform")
    crds = vendored_crds("local", "keda", pins().charts.keda, holder, provider)
    options = pulumi.ResourceOptions(provider=provider)
    namespace = k8s.core.v1.Namespace("namespace", metadata={"name": NAMESPACE}, opts=options)
    inside = pulumi.ResourceOptions(provider=provider, depends_on=[namespace])
    container: dict[str, Any] = {
        "name": "server",
        "image": config.require("image"),
        "ports": [{"name": "http", "containerPort": 8000}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
    }
    deployment = k8s.apps.v1.Deployment(
        "server",
        metadata={"name": "server", "namespace": NAMESPACE},
        spec=cast(
            Any,
            {
                "selector": {"matchLabels": LABELS},
                "template": {"metadata": {"labels": LABELS}, "spec": {"containers": [container]}},
            },
        ),
        opts=inside,
    )
    k8s.core.v1.Service(
        "server",
        metadata={"name": "server", "namespace": NAMESPACE},
        spec=cast(Any, {"selector": LABELS, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}),
        opts=inside,
    )
    register(
        "server-scaler",
        {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": {"name": "server", "namespace": NAMESPACE},
            "spec": {
                "scaleTargetRef": {"name": "server"},
                "minReplicaCount": 1,
                "maxReplicaCount": 4,
                "triggers": [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "80"}}],
            },
        },
        pulumi.ResourceOptions(provider=provider, depends_on=[namespace, deployment, *crds]),
    )
    k8s.core.v1.Secret(
        "token",
        metadata={"name": "token", "namespace": NAMESPACE},
        string_data={"token": config.require_secret("token")},
        opts=inside,
    )
    k8s.core.v1.ConfigMap(
        "stateful",
        metadata={"name": "stateful", "namespace": NAMESPACE},
        data={"kept": "yes"},
        opts=pulumi.ResourceOptions(provider=provider, depends_on=[namespace], protect=config.require_bool("protect")),
    )
    pulumi.export("crds", [crd.metadata["name"] for crd in crds])


def project() -> None:
    """The project's own program, as `pulumi up` runs __main__.py (its stack config is the stack's)."""
    runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
