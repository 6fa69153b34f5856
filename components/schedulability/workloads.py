"""The pods a set of rendered manifests asks the scheduler for: each workload's pod spec,
its effective requests, how many pods it runs at most and how many more a rollout adds."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from components.schedulability.quantities import amounts

WORKLOAD_KINDS = ("Deployment", "StatefulSet")
GROUP_KIND = "LeaderWorkerSet"
DEFAULT_MAX_SURGE = "25%"
"""Kubernetes' default for a Deployment's rolling update (apps/v1 defaults)."""


@dataclass(frozen=True, eq=False)  # compared by identity: one object per workload
class Workload:
    kind: str
    name: str
    namespace: str
    endpoint: str | None
    """The endpoint the workload belongs to; None for the platform's own."""
    pod: Mapping[str, Any]
    """The pod spec: nodeSelector, affinity, tolerations, containers."""
    requests: Mapping[str, int]
    replicas: int
    surge: int
    """Pods a rolling update runs beside ``replicas`` at most."""

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """The scheduler's view of a pod's requests: the sum over its containers, at least the
    largest init container's; limits stand in for requests a container does not state."""
    total: dict[str, int] = {}
    for container in pod.get("containers") or []:
        for resource, value in _container_requests(container).items():
            total[resource] = total.get(resource, 0) + value
    for container in pod.get("initContainers") or []:
        for resource, value in _container_requests(container).items():
            total[resource] = max(total.get(resource, 0), value)
    return total


def _container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    return amounts({**(resources.get("limits") or {}), **(resources.get("requests") or {})})


def scaled(value: int | str, replicas: int, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    share = int(value.rstrip("%")) * replicas / 100
    return math.ceil(share) if round_up else math.floor(share)


def rollout_surge(manifest: Mapping[str, Any], replicas: int) -> int:
    if manifest["kind"] != "Deployment" or replicas == 0:
        return 0  # StatefulSets replace pods in place, one at a time
    strategy = manifest["spec"].get("strategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return 0
    surge = (strategy.get("rollingUpdate") or {}).get("maxSurge", DEFAULT_MAX_SURGE)
    return scaled(surge, replicas, round_up=True)


CEILING_FIELDS = {"ScaledObject": "maxReplicaCount", "HorizontalPodAutoscaler": "maxReplicas"}


def workloads_of(manifests: Iterable[Mapping[str, Any]], endpoint: str | None = None) -> list[Workload]:
    """Deployments and StatefulSets of ``manifests``; one without ``replicas`` runs as many as the
    autoscaler targeting it allows at most (or Kubernetes' default of one): a KEDA ScaledObject's
    maxReplicaCount, a HorizontalPodAutoscaler's maxReplicas."""
    manifests = list(manifests)
    ceilings = {
        (manifest["spec"]["scaleTargetRef"]["kind"], manifest["spec"]["scaleTargetRef"]["name"]): int(
            manifest["spec"][CEILING_FIELDS[manifest["kind"]]]
        )
        for manifest in manifests
        if manifest["kind"] in CEILING_FIELDS
    }
    found = []
    for manifest in manifests:
        if manifest["kind"] == GROUP_KIND:
            found += _group_workloads(manifest, endpoint)
            continue
        if manifest["kind"] not in WORKLOAD_KINDS:
            continue
        name = manifest["metadata"]["name"]
        spec = manifest["spec"]
        replicas = spec.get("replicas")
        if replicas is None:
            replicas = ceilings.get((manifest["kind"], name), 1)
        pod = spec["template"]["spec"]
        found.append(
            Workload(
                kind=manifest["kind"],
                name=name,
                namespace=manifest["metadata"].get("namespace", "default"),
                endpoint=endpoint,
                pod=pod,
                requests=pod_requests(pod),
                replicas=int(replicas),
                surge=rollout_surge(manifest, int(replicas)),
            )
        )
    return found


def _group_workloads(manifest: Mapping[str, Any], endpoint: str | None) -> list[Workload]:
    """A LeaderWorkerSet's pods: ``replicas`` leaders and ``replicas x (size - 1)`` workers, each from
    its own template. A roll adds ``rolloutStrategy.rollingUpdateConfiguration.maxSurge`` whole groups
    (an absolute count or a share of ``replicas``, rounded up; 0 by default: kubernetes-sigs/lws v0.10.0
    api/leaderworkerset/v1/leaderworkerset_types.go; components/render/mooncake_groups.py renders 1)."""
    spec = manifest["spec"]
    group = spec["leaderWorkerTemplate"]
    replicas = int(spec.get("replicas", 1))
    rolling = (spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
    groups = scaled(rolling.get("maxSurge", 0), replicas, round_up=True) if replicas else 0
    name = manifest["metadata"]["name"]
    found = []
    for part, template, count, surge in (
        ("leaders", group.get("leaderTemplate") or group["workerTemplate"], replicas, groups),
        ("workers", group["workerTemplate"], replicas * (int(group["size"]) - 1), groups * (int(group["size"]) - 1)),
    ):
        pod = template["spec"]
        found.append(
            Workload(
                kind=GROUP_KIND,
                name=f"{name} ({part})",
                namespace=manifest["metadata"].get("namespace", "default"),
                endpoint=endpoint,
                pod=pod,
                requests=pod_requests(pod),
                replicas=count,
                surge=surge,
            )
        )
    return found
