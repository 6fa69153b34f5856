"""The mechanisms the project's Kubernetes half relies on, through the real engine and the built
provider against the local cluster (tests/engine/programs.py platform): CRDs and a custom resource
of theirs in one `up` (the dependsOn the platform gives it), the provider's real awaits on kwok's
nodes, server-side apply leaving a field an autoscaler owns alone, `protect`, and a secret config
value that never reaches the state file in plaintext."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from components.catalog import applied_crds, pins
from tests.cluster.kube import Kube
from tests.engine.engine import Engine, EngineError, changed
from tests.engine.programs import NAMESPACE

pytestmark = pytest.mark.engine

PROGRAM = "tests.engine.programs:platform"
STACK = "platform"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
TOKEN = "engine-tests-token-4b1d7e"
"""The secret config value: grepped for in the state file."""
AUTOSCALER = "autoscaler-stand-in"
"""The field manager that writes spec.replicas between two `up`s, as the HorizontalPodAutoscaler
KEDA makes does through the scale subresource."""


def _config(image: str, protect: bool) -> dict[str, Any]:
    return {"engine-tests:image": image, "engine-tests:protect": str(protect).lower(), "engine-tests:token": TOKEN}


def _deployment(kube: Kube) -> dict[str, Any]:
    return kube.get("apps/v1", "Deployment", "server", NAMESPACE)


@pytest.fixture(scope="module")
def cleaned(local_cluster: tuple[Kube, Engine], dev_nodes: None) -> Iterator[tuple[Kube, Engine]]:
    kube, engine = local_cluster
    yield kube, engine
    # The CRDs stay after destroy by design (retain_on_delete, as Helm leaves its CRDs): removed here.
    for crd in applied_crds(pins().charts.keda):
        kube.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"])
    kube.forget_resources()


def test_crds_custom_resources_awaits_field_ownership_protect_and_secrets(cleaned: tuple[Kube, Engine]) -> None:
    kube, engine = cleaned
    secrets = {"engine-tests:token"}
    first = engine.run(PROGRAM, STACK, "up", _config("registry.k8s.io/pause:3.10.1", protect=True), secrets)
    crds = [step for step in first["steps"] if step["type"] == CRD]
    assert len(crds) == len(applied_crds(pins().charts.keda))
    assert {step["op"] for step in crds} == {"create"}
    # The ScaledObject began only once every CRD it depends on was created.
    log = first["log"]
    began = next(i for i, e in enumerate(log) if e["urn"].endswith("::server-scaler") and e["phase"] == "began")
    done = [i for i, e in enumerate(log) if e["type"] == CRD and e["phase"] == "done"]
    assert len(done) == len(crds)
    assert max(done) < began
    assert kube.get("keda.sh/v1alpha1", "ScaledObject", "server", NAMESPACE)["spec"]["maxReplicaCount"] == 4
    # The provider's Deployment await returned once kwok's node ran the pod Ready.
    assert _deployment(kube)["status"].get("readyReplicas") == 1

    # Secrets stay secret: the API has the value, the state file only its ciphertext.
    stored = kube.get("v1", "Secret", "token", NAMESPACE)
    assert base64.b64decode(stored["data"]["token"]).decode() == TOKEN
    state = "".join(path.read_text() for path in engine.state.rglob("*.json"))
    assert STACK in state
    assert TOKEN not in state
    assert base64.b64encode(TOKEN.encode()).decode() not in state

    # An autoscaler takes spec.replicas (through the scale subresource, under its own manager) ...
    kube.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/server/scale",
        {"spec": {"replicas": 3}},
        content_type="application/merge-patch+json",
        query={"fieldManager": AUTOSCALER},
    )
    # ... a second `up` with nothing changed is a no-op, and one that changes the pod template
    # updates the Deployment in place without taking the count back.
    assert changed(engine.run(PROGRAM, STACK, "preview", _config("registry.k8s.io/pause:3.10.1", True), secrets)) == {}
    update = engine.run(PROGRAM, STACK, "up", _config("registry.k8s.io/pause:3.10", protect=True), secrets)
    assert set(changed(update).values()) == {"update"}
    assert [urn.rsplit("::", 1)[1] for urn in changed(update)] == ["server"]
    deployment = _deployment(kube)
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10"
    # A protected resource stops `destroy` before anything is deleted ...
    with pytest.raises(EngineError, match="protect"):
        engine.run(PROGRAM, STACK, "destroy")
    assert kube.get("v1", "ConfigMap", "stateful", NAMESPACE)["data"] == {"kept": "yes"}
    # ... until an `up` lifts it.
    engine.run(PROGRAM, STACK, "up", _config("registry.k8s.io/pause:3.10", protect=False), secrets)
    engine.run(PROGRAM, STACK, "destroy")
    namespaces = {item["metadata"]["name"] for item in kube.objects("v1", "Namespace")}
    assert NAMESPACE not in namespaces
    kept = {item["metadata"]["name"] for item in kube.objects("apiextensions.k8s.io/v1", "CustomResourceDefinition")}
    assert kept >= {crd["metadata"]["name"] for crd in applied_crds(pins().charts.keda)}
