"""One region of a stack on the test cluster, as EKS would run it: Node objects shaped like the
region's node groups (no kubelet: the scheduler binds pods to the objects), the platform's
DaemonSets and Deployments derived from the facts the offline check uses, the plan's manifests
applied with server-side apply, then where every pod landed, read back from the API."""

from __future__ import annotations

import hashlib
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.catalog import instance_catalog
from components.schedulability.check import node_autoscaled
from components.schedulability.nodes import Node, region_nodes
from components.schedulability.platform_pods import DaemonSet, daemon_sets, platform_workloads
from components.schedulability.quantities import CPU
from components.schedulability.workloads import CEILING_FIELDS, Workload
from components.spec.region import Region
from tests.cluster.kube import ApiError, Kube

PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"
"""What the stand-ins of the platform's pods run: nothing runs anything here, any image would do."""
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
HOSTNAME_LABEL = "kubernetes.io/hostname"
STAND_IN_LABEL = "inference-fleet-tests/stand-in"
"""Marks the platform's pods we derive (the charts' and EKS add-ons' real ones are not ours to render)."""
PLATFORM_MANAGER = "inference-fleet-tests"
APPLY_FIRST = ("Namespace", "CustomResourceDefinition", "ServiceAccount", "Secret", "ConfigMap")
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
KEPT = frozenset({("v1", "Event"), ("events.k8s.io/v1", "Event")})
"""What a reset leaves: the record of what happened (a test failing later may want it)."""
SYSTEM_KEPT = frozenset(
    {
        ("v1", "ServiceAccount"),
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "Service"),
        ("v1", "Endpoints"),
        ("discovery.k8s.io/v1", "EndpointSlice"),
        ("coordination.k8s.io/v1", "Lease"),
        ("rbac.authorization.k8s.io/v1", "Role"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    }
)
"""What the control plane itself keeps in its own namespaces (the ``kubernetes`` Service, the
components' leases, the bootstrap roles, the default ServiceAccounts and their CA bundles)."""
SETTLE_SECONDS = 120
STABLE_SECONDS = 1.0


def field_manager(manifest: Mapping[str, Any]) -> str:
    """pulumi-kubernetes applies each resource under a manager of its own, ``pulumi-kubernetes-``
    and eight random characters chosen when the resource is created and kept in its state
    (provider/pkg/provider/provider.go fieldManagerName); here derived from the object's
    identity, so the next apply of the same object is the same manager, as in a real update."""
    metadata = manifest["metadata"]
    identity = "/".join((manifest["apiVersion"], manifest["kind"], metadata.get("namespace", ""), metadata["name"]))
    return "pulumi-kubernetes-" + hashlib.sha256(identity.encode()).hexdigest()[:8]


def quantity(resource: str, value: int) -> str:
    return f"{value}m" if resource == CPU else str(value)


def label_of(kind: str, namespace: str, name: str) -> str:
    """A workload as the offline check names it (``Workload.label``)."""
    return f"{kind} {namespace}/{name}"


# The region's nodes.


def nodes_of(region: Region) -> list[Node]:
    """Every node the offline check places pods on: each group at ``max_size`` (the cluster
    autoscaler's ceiling), with what kubelet leaves allocatable before any device plugin."""
    return region_nodes(region, instance_catalog(), autoscaled=node_autoscaled(region))


def node_manifest(node: Node) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": {**node.labels, HOSTNAME_LABEL: node.name}},
        "spec": {"taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints]},
    }


def node_status(resources: Mapping[str, int]) -> dict[str, Any]:
    """What kubelet would report: capacity and allocatable (capacity's overhead is nobody's
    concern here), and Ready. Nothing marks the node NotReady later: the node lifecycle
    controller, which would without kubelet's heartbeats, does not run."""
    amounts = {resource: quantity(resource, value) for resource, value in resources.items()}
    return {
        "capacity": amounts,
        "allocatable": amounts,
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "a Node object of the tests"}
        ],
    }


def create_nodes(kube: Kube, nodes: Sequence[Node]) -> None:
    for node in nodes:
        manifest = node_manifest(node)
        kube.create(manifest)
        kube.patch_status(manifest, node_status(node.allocatable))


# The platform's pods, derived from config/platform_pods.yaml through the offline check's own code.


def _pod_spec(pod: Mapping[str, Any], requests: Mapping[str, int]) -> dict[str, Any]:
    spec = {key: pod[key] for key in ("nodeSelector", "affinity", "tolerations") if pod.get(key)}
    resources = {"requests": {resource: quantity(resource, value) for resource, value in requests.items()}}
    return {
        **spec,
        "automountServiceAccountToken": False,
        "containers": [{"name": "main", "image": PAUSE_IMAGE, "resources": resources if requests else {}}],
    }


def _workload_manifest(kind: str, name: str, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name, STAND_IN_LABEL: "platform"}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": pod}},
    }


def daemon_set_manifest(daemon_set: DaemonSet) -> dict[str, Any]:
    return _workload_manifest(
        "DaemonSet", daemon_set.name, "kube-system", _pod_spec(daemon_set.pod, daemon_set.requests)
    )


def platform_deployment_manifest(workload: Workload) -> dict[str, Any]:
    manifest = _workload_manifest(
        "Deployment", workload.name, workload.namespace, _pod_spec(workload.pod, workload.requests)
    )
    manifest["spec"]["replicas"] = workload.replicas
    return manifest


# Reading pods back.


@dataclass(frozen=True)
class PodState:
    name: str
    workload: str
    """Its owner as the offline check labels it: ``Deployment ns/name`` (through its ReplicaSet),
    ``StatefulSet ns/name`` or ``DaemonSet ns/name``."""
    node: str | None
    unschedulable: str | None
    """The scheduler's message when it found no node (condition PodScheduled=False, Unschedulable)."""


_REASON = re.compile(r"^(\d+) (.+)$")


def reasons(message: str) -> Counter[str]:
    """``0/7 nodes are available: 3 Insufficient nvidia.com/gpu, 4 node(s) didn't match Pod's node
    affinity/selector. preemption: ...`` -> each reason and how many nodes gave it."""
    _, _, listed = message.partition(" nodes are available: ")
    listed = listed.split(". ", 1)[0].rstrip(".")  # then what preemption and other plugins add
    found: Counter[str] = Counter()
    for part in listed.split(", "):
        matched = _REASON.match(part.strip())
        if matched:
            found[matched.group(2)] += int(matched.group(1))
    return found


def _owners(kube: Kube) -> dict[str, str]:
    """ReplicaSet ``ns/name`` -> the label of the Deployment owning it."""
    found = {}
    for replica_set in kube.objects("apps/v1", "ReplicaSet"):
        metadata = replica_set["metadata"]
        for owner in metadata.get("ownerReferences") or []:
            if owner.get("controller"):
                found[f"{metadata['namespace']}/{metadata['name']}"] = label_of(
                    owner["kind"], metadata["namespace"], owner["name"]
                )
    return found


def pod_states(kube: Kube) -> list[PodState]:
    replica_sets = _owners(kube)
    states = []
    for pod in kube.objects("v1", "Pod"):
        metadata, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
        if metadata.get("deletionTimestamp"):
            continue
        namespace = metadata["namespace"]
        owner = next((o for o in metadata.get("ownerReferences") or [] if o.get("controller")), None)
        group = group_label(metadata.get("labels") or {}, namespace)
        if group is not None:
            workload = group
        elif owner is None:
            workload = label_of("Pod", namespace, metadata["name"])
        elif owner["kind"] == "ReplicaSet":
            workload = replica_sets.get(
                f"{namespace}/{owner['name']}", label_of("ReplicaSet", namespace, owner["name"])
            )
        else:
            workload = label_of(owner["kind"], namespace, owner["name"])
        scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        unschedulable = None
        if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            unschedulable = str(scheduled.get("message", ""))
        states.append(PodState(metadata["name"], workload, spec.get("nodeName"), unschedulable))
    return sorted(states, key=lambda state: (state.workload, state.name))


def start_bound_pods(kube: Kube, pods: Iterable[Mapping[str, Any]]) -> None:
    """kubelet's part, as far as controllers look at it: a pod bound to a node is Running and
    Ready. An OrderedReady StatefulSet creates its next pod only then."""
    for pod in pods:
        status = pod.get("status") or {}
        if (
            pod["spec"].get("nodeName")
            and status.get("phase") != "Running"
            and not pod["metadata"].get("deletionTimestamp")
        ):
            conditions = [{"type": kind, "status": "True"} for kind in ("Initialized", "ContainersReady", "Ready")]
            try:
                kube.patch_status(pod, {"phase": "Running", "conditions": conditions})
            except ApiError as error:
                if error.status != 404:
                    raise


def _controllers_done(kube: Kube) -> bool:
    """Every workload controller has seen its object and made the pods it will make."""
    for kind in WORKLOAD_KINDS:
        for item in kube.objects("apps/v1", kind):
            metadata, spec, status = item["metadata"], item["spec"], item.get("status") or {}
            if status.get("observedGeneration", 0) < metadata.get("generation", 1):
                return False
            if kind == "DaemonSet":
                if status.get("currentNumberScheduled", 0) + status.get("numberMisscheduled", 0) < status.get(
                    "desiredNumberScheduled", 0
                ):
                    return False
            elif kind == "Deployment" and status.get("replicas", 0) < spec.get("replicas", 1):
                return False
    return True


def settle(kube: Kube, timeout: float = SETTLE_SECONDS) -> list[PodState]:
    """Wait until every pod is bound or the scheduler called it unschedulable, every controller
    has made its pods, and nothing changed for a while; then where every pod is."""
    deadline = time.monotonic() + timeout
    previous: list[PodState] | None = None
    stable_since = time.monotonic()
    while True:
        pods = kube.objects("v1", "Pod")
        start_bound_pods(kube, pods)
        states = pod_states(kube)
        decided = all(state.node or state.unschedulable is not None for state in states)
        if states != previous:
            previous, stable_since = states, time.monotonic()
        elif decided and time.monotonic() - stable_since >= STABLE_SECONDS and _controllers_done(kube):
            return states
        if time.monotonic() > deadline:
            undecided = [state for state in states if not (state.node or state.unschedulable is not None)]
            raise TimeoutError(f"pods did not settle in {timeout} s; undecided: {undecided}")
        time.sleep(0.3)


# Applying.


GROUP_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"


def group_stand_ins(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What LeaderWorkerSet's controller (not run here) makes of a LeaderWorkerSet, as far as pods go
    (kubernetes-sigs/lws v0.10.0 pkg/controllers): a StatefulSet of the groups' leaders named after
    it, with ``replicas`` pods from the leader template, and per group ``i`` a StatefulSet
    ``<name>-<i>`` of ``size - 1`` workers from the worker template; the pods labelled with the set's
    name and their worker index, as the controller labels them ("0" on leaders; the stand-ins give
    every worker "1", their group index telling the groups' StatefulSets apart)."""
    metadata, spec = manifest["metadata"], manifest["spec"]
    name, namespace = metadata["name"], metadata["namespace"]
    group = spec["leaderWorkerTemplate"]
    replicas, size = int(spec.get("replicas", 1)), int(group["size"])

    def stateful_set(set_name: str, count: int, template: Mapping[str, Any], labels: dict[str, str]) -> dict[str, Any]:
        pod_labels = {**template.get("metadata", {}).get("labels", {}), GROUP_NAME_LABEL: name, **labels}
        return {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": set_name, "namespace": namespace, "labels": {GROUP_NAME_LABEL: name}},
            "spec": {
                "replicas": count,
                "serviceName": set_name,
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {GROUP_NAME_LABEL: name, **labels}},
                "template": {"metadata": {"labels": pod_labels}, "spec": template["spec"]},
            },
        }

    leaders = stateful_set(name, replicas, group["leaderTemplate"], {WORKER_INDEX_LABEL: "0"})
    workers = [
        stateful_set(
            f"{name}-{index}",
            size - 1,
            group["workerTemplate"],
            {WORKER_INDEX_LABEL: "1", GROUP_INDEX_LABEL: str(index)},
        )
        for index in range(replicas)
    ]
    return [leaders, *workers]


def group_label(pod_labels: Mapping[str, str], namespace: str) -> str | None:
    """The offline check's label of a group pod's workload (``workloads._group_workloads``)."""
    name = pod_labels.get(GROUP_NAME_LABEL)
    if name is None:
        return None
    part = "leaders" if pod_labels.get(WORKER_INDEX_LABEL) == "0" else "workers"
    return f"{label_of('LeaderWorkerSet', namespace, name)} ({part})"


def apply_all(kube: Kube, manifests: Iterable[Mapping[str, Any]]) -> None:
    """Namespaces and CRDs first (and the CRDs established), then what pods refer to, then the rest;
    a LeaderWorkerSet with the StatefulSets its controller would make (``group_stand_ins``)."""
    manifests = list(manifests)
    manifests += [
        stand_in
        for manifest in manifests
        if manifest["kind"] == "LeaderWorkerSet"
        for stand_in in group_stand_ins(manifest)
    ]
    ordered = sorted(
        manifests,
        key=lambda m: (
            APPLY_FIRST.index(m["kind"]) if m["kind"] in APPLY_FIRST else len(APPLY_FIRST),
            m["kind"] in WORKLOAD_KINDS,
            m["kind"],
            m["metadata"].get("namespace", ""),
            m["metadata"]["name"],
        ),
    )
    crds = [m for m in ordered if m["kind"] == "CustomResourceDefinition"]
    for manifest in ordered:
        if manifest["kind"] not in ("Namespace", "CustomResourceDefinition") and crds:
            wait_established(kube, crds)
            crds = []
        kube.apply(manifest, field_manager(manifest))


def wait_established(kube: Kube, crds: Sequence[Mapping[str, Any]], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    for crd in crds:
        while True:
            live = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"])
            conditions = (live.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"CustomResourceDefinition {crd['metadata']['name']} not established")
            time.sleep(0.1)
    kube.forget_resources()


def scale_to_ceilings(kube: Kube, manifests: Sequence[Mapping[str, Any]]) -> None:
    """A workload an autoscaler owns carries no replica count (design decision 9); the offline
    check assumes the autoscaler's maximum, so the cluster runs that many, as KEDA's
    HorizontalPodAutoscaler would at its ceiling (neither runs here: no metrics)."""
    for manifest in manifests:
        if manifest["kind"] not in CEILING_FIELDS:
            continue
        target = manifest["spec"]["scaleTargetRef"]
        workload = {
            "apiVersion": target.get("apiVersion", "apps/v1"),
            "kind": target["kind"],
            "metadata": {"name": target["name"], "namespace": manifest["metadata"]["namespace"]},
        }
        ceiling = int(manifest["spec"][CEILING_FIELDS[manifest["kind"]]])
        kube.patch(workload, {"spec": {"replicas": ceiling}}, subresource="scale")


# Resetting between regions.


def reset(kube: Kube, timeout: float = 120) -> None:
    """Back to an empty cluster: workloads, then every pod at once (no kubelet would ever confirm a
    graceful delete), then every other object in the namespaces we made, and the nodes. The
    namespaces themselves stay (each stack applies its own again): emptying them directly takes a
    second, deleting them waits for the namespace controller. CustomResourceDefinitions stay too:
    every stack applies the same ones, they place no pods, and deleting one just created can stall
    for minutes (its finalizer finds the new custom resources' storage still initialising)."""
    deadline = time.monotonic() + timeout
    namespaces = [n["metadata"]["name"] for n in kube.objects("v1", "Namespace")]
    for kind in WORKLOAD_KINDS:
        for item in kube.objects("apps/v1", kind):
            metadata = item["metadata"]
            kube.delete("apps/v1", kind, metadata["name"], metadata["namespace"], propagationPolicy="Background")
    while True:
        pods = kube.objects("v1", "Pod")
        leftovers = [item for kind in (*WORKLOAD_KINDS, "ReplicaSet") for item in kube.objects("apps/v1", kind)]
        if not pods and not leftovers:
            break
        for namespace in {pod["metadata"]["namespace"] for pod in pods}:
            kube.delete_all("v1", "Pod", namespace, gracePeriodSeconds=0)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(pods)} pods and {len(leftovers)} workloads outlive the reset")
        time.sleep(0.1)
    for api_version, kind in kube.namespaced_kinds():
        if (api_version, kind) in KEPT:
            continue
        for namespace in namespaces:
            if namespace not in SYSTEM_NAMESPACES or (api_version, kind) not in SYSTEM_KEPT:
                kube.delete_all(api_version, kind, namespace, propagationPolicy="Background")
    kube.delete_all("v1", "Node")
    while kube.objects("v1", "Node"):
        if time.monotonic() > deadline:
            raise TimeoutError("nodes outlive the reset")
        time.sleep(0.1)


# A region, end to end.


@dataclass
class RegionRun:
    """What the real control plane did with one region."""

    nodes: list[Node]
    landed: dict[str, set[str]] = field(default_factory=dict)
    """DaemonSet name -> the nodes its pods were bound to."""
    advertised: dict[str, dict[str, int]] = field(default_factory=dict)
    """Node -> the device resources its plugins' pods (once bound) make it advertise."""
    pods: list[PodState] = field(default_factory=list)
    replicas: dict[str, int] = field(default_factory=dict)
    """Workload label -> the pods its controller is asked for."""


def run_region(kube: Kube, region_name: str, region: Region, *stages: Sequence[Mapping[str, Any]]) -> RegionRun:
    """Reset the cluster, then run one region of a plan on it (see the module's docstring): each
    stage of manifests applied once the pods of the one before have settled (one stage is a
    plan applied to an empty cluster; a second, objects added to a running one)."""
    reset(kube)
    nodes = nodes_of(region)
    run = RegionRun(nodes)
    create_nodes(kube, nodes)
    # The platform's DaemonSets as stand-ins, but for those the plan holds itself (the EFA startup
    # taint's remover): the plan's own manifest of it is applied with the rest.
    planned = {
        manifest["metadata"]["name"]
        for stage in stages
        for manifest in stage
        if manifest["kind"] == "DaemonSet" and manifest["metadata"].get("namespace") == "kube-system"
    }
    plugins = [daemon_set for daemon_set in daemon_sets(region, nodes) if daemon_set.name not in planned]
    for daemon_set in plugins:
        kube.apply(daemon_set_manifest(daemon_set), PLATFORM_MANAGER)
    # Device plugins register their hardware where their pod runs: only then does a node offer it.
    landed: dict[str, set[str]] = {}
    for state in settle(kube):
        if state.node and state.workload.startswith("DaemonSet "):
            landed.setdefault(state.workload.split("/", 1)[1], set()).add(state.node)
    run.landed = landed
    by_name = {node.name: node for node in nodes}
    for daemon_set in plugins:
        if daemon_set.resource is None:
            continue
        for node_name in sorted(landed.get(daemon_set.name, ())):
            supply = daemon_set.supply(by_name[node_name])
            if supply > 0:
                run.advertised.setdefault(node_name, {})[daemon_set.resource] = supply
    for node_name, extra in run.advertised.items():
        kube.patch_status(node_manifest(by_name[node_name]), node_status({**by_name[node_name].allocatable, **extra}))
    groups = any(manifest["kind"] == "LeaderWorkerSet" for stage in stages for manifest in stage)
    deployments = platform_workloads(region_name, region, leader_worker_sets=groups)
    for namespace in sorted({workload.namespace for workload in deployments} - SYSTEM_NAMESPACES):
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, PLATFORM_MANAGER)
    platform = [platform_deployment_manifest(workload) for workload in deployments]
    for manifest in platform:
        kube.apply(manifest, PLATFORM_MANAGER)
    for manifests in stages:
        apply_all(kube, manifests)
        scale_to_ceilings(kube, manifests)
        run.pods = settle(kube)
    for state in run.pods:
        name = state.workload.split("/", 1)[1] if state.workload.startswith("DaemonSet ") else None
        if state.node and name is not None and name in planned:
            run.landed.setdefault(name, set()).add(state.node)
    for kind in ("Deployment", "StatefulSet"):
        for item in kube.objects("apps/v1", kind):
            metadata = item["metadata"]
            replicas = int(item["spec"]["replicas"])
            group = group_label(item["spec"]["template"]["metadata"].get("labels") or {}, metadata["namespace"])
            if group is not None:  # a stand-in for one of a LeaderWorkerSet's StatefulSets
                run.replicas[group] = run.replicas.get(group, 0) + replicas
            else:
                run.replicas[label_of(kind, metadata["namespace"], metadata["name"])] = replicas
    return run
