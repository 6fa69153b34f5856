"""What the platform add-ons a stack marks ``present`` would do on a real cluster, as far as the provider's
awaits look: their CRDs are in the API and the metrics pipeline's namespace exists (applied here, as the
cluster's owner installed them: docs/existing-cluster.md says a present pipeline runs in
``inference-fleet-metrics``, where the program puts its dashboard), the AWS Load Balancer Controller
gives every Ingress an address (the provider's Ingress await waits for ``.status.loadBalancer.ingress``:
provider/pkg/await/ingress.go), and LeaderWorkerSet's controller turns each LeaderWorkerSet into
StatefulSets whose pods back the Services the provider awaits endpoints for
(provider/pkg/await/service.go). Played by a thread polling the API server while the engine runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from components import naming
from components.catalog import applied_crds, pins
from tests.cluster.kube import ApiError, Kube
from tests.cluster.region import group_stand_ins, wait_established

MANAGER = "present-addons-stand-in"
POLL_SECONDS = 0.5
CHARTS = ("keda", "lws", "aws_load_balancer_controller")
"""The add-ons whose CRDs the program's objects need (ScaledObject, LeaderWorkerSet, TargetGroupBinding)."""


def install_present(kube: Kube) -> None:
    """What the cluster's owner installed with the present add-ons: their CRDs, the pipeline's namespace."""
    crds = [crd for chart in CHARTS for crd in applied_crds(getattr(pins().charts, chart))]
    for crd in crds:
        kube.apply(crd, MANAGER, force=True)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": naming.METRICS_NAMESPACE}}
    kube.apply(namespace, MANAGER, force=True)
    wait_established(kube, crds)


def _load_balance(kube: Kube) -> None:
    for ingress in kube.objects("networking.k8s.io/v1", "Ingress"):
        if not (ingress.get("status") or {}).get("loadBalancer", {}).get("ingress"):
            name = ingress["metadata"]["name"]
            address = {"hostname": f"internal-{name}.us-west-2.elb.amazonaws.com.local-cluster"}
            kube.patch_status(ingress, {"loadBalancer": {"ingress": [address]}})


def _group(kube: Kube) -> None:
    try:
        groups = kube.objects("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    except (KeyError, ApiError):
        return
    for group in groups:
        if group["metadata"].get("deletionTimestamp"):
            continue
        for stand_in in group_stand_ins(group):
            stand_in["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": group["apiVersion"],
                    "kind": group["kind"],
                    "name": group["metadata"]["name"],
                    "uid": group["metadata"]["uid"],
                }
            ]
            kube.apply(stand_in, MANAGER, force=True)


@contextmanager
def present_addons(kube: Kube) -> Iterator[None]:
    """The stand-ins running (on a client of their own) for the duration."""
    own = Kube(kube.server, kube.pki, kube.namespace_pid)
    stop = threading.Event()
    failures: list[BaseException] = []

    def loop() -> None:
        while not stop.wait(POLL_SECONDS):
            try:
                _load_balance(own)
                _group(own)
            except ApiError as error:
                if error.status not in (404, 409):  # an object going away under us, or changed meanwhile
                    failures.append(error)
                    return

    thread = threading.Thread(target=loop, name="present-addons", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        own.close()
    assert failures == [], failures
