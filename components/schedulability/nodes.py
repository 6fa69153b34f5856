"""The nodes a region can have, shaped as the scheduler sees them: labels, taints, and what
kubelet leaves allocatable on an EKS AL2023 node."""

from __future__ import annotations

from dataclasses import dataclass, field

from components.catalog import InstanceCatalog, InstanceType
from components.schedulability.quantities import CPU, MEMORY, PODS
from components.scheduling import (
    CAPACITY_TYPE_LABEL,
    HUGEPAGES_2MI_RESOURCE,
    Taint,
    eks_capacity_type,
    node_labels,
    node_taints,
)
from components.spec.region import NodeGroup, Region

ZONE_LABEL = "topology.kubernetes.io/zone"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ARCH_LABEL = "kubernetes.io/arch"
OS_LABEL = "kubernetes.io/os"
_ARCH = {"x86_64": "amd64", "arm64": "arm64"}

MIB = 2**20
EVICTION_HARD_MEMORY = 100 * MIB
"""nodeadm's default ``evictionHard: memory.available: 100Mi`` (amazon-eks-ami
nodeadm/internal/kubelet/config.go, defaultKubeletSubConfig)."""
VM_MEMORY_OVERHEAD = 0.075
"""The part of an instance's memory the kernel and hypervisor keep, so kubelet's capacity is
below EC2's MemoryInfo: Karpenter's default estimate (its ``vmMemoryOverheadPercent`` setting)."""
MANAGED_NODE_GROUP_MAX_PODS = ((30, 110), (None, 250))
"""EKS managed node groups cap maxPods at 110 up to 30 vCPUs and 250 above (EKS user guide,
"How maxPods is determined"; amazon-eks-ami's max-pods-calculator.sh: ``CPU_COUNT > 30``). The cap
reaches kubelet as a drop-in of maxPods alone: nodeadm still reserves memory for its own count."""


def reserved_millicores(millicores: int) -> int:
    """nodeadm's ``getCPUMillicoresToReserve``: 6% of the first core, 1% of the second,
    0.5% of the next two, 0.25% of the rest (amazon-eks-ami nodeadm/internal/kubelet/config.go)."""
    bounds = (0, 1000, 2000, 4000, millicores)
    per_ten_thousand = (600, 100, 50, 25)
    reserved = 0
    for index, share in enumerate(per_ten_thousand):
        low, high = bounds[index], bounds[index + 1]
        if millicores > low:
            reserved += (min(millicores, high) - low) * share // 10000
    return reserved


def max_pods(facts: InstanceType) -> int:
    for below, cap in MANAGED_NODE_GROUP_MAX_PODS:
        if below is None or facts.vcpus <= below:
            return min(facts.max_pods, cap)
    raise AssertionError("unreachable: the last cap has no bound")


def reserved_memory(pods: int) -> int:
    """nodeadm's ``getMemoryMebibytesToReserve``: 11 MiB per pod plus 255 MiB, as kube-reserved,
    for the pods nodeadm itself counts (the catalog's ``max_pods``, before the managed cap)."""
    return (11 * pods + 255) * MIB


def allocatable(facts: InstanceType, hugepages: int) -> dict[str, int]:
    """What kubelet offers pods before any device plugin registers: capacity less kube-reserved,
    the eviction threshold and the huge pages the node reserves at boot (an EFA group's
    ``hugepages_2mi``), which kubelet offers as ``hugepages-2Mi`` instead of memory."""
    millicores = facts.vcpus * 1000
    pods = max_pods(facts)
    memory = int(facts.memory_mib * MIB * (1 - VM_MEMORY_OVERHEAD))
    memory -= reserved_memory(facts.max_pods) + EVICTION_HARD_MEMORY
    resources = {CPU: millicores - reserved_millicores(millicores), MEMORY: memory, PODS: pods}
    if hugepages:
        resources[MEMORY] -= hugepages
        resources[HUGEPAGES_2MI_RESOURCE] = hugepages
    return resources


@dataclass
class Node:
    name: str
    group: str
    facts: InstanceType
    efa: bool
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    allocatable: dict[str, int]
    free: dict[str, int] = field(default_factory=dict)
    """What is left once DaemonSets and placed pods took their share."""
    pods: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.free:
            self.free = dict(self.allocatable)


def described_labels(group: NodeGroup, facts: InstanceType) -> dict[str, str]:
    """The labels of an existing group's nodes: those its description lists, and those kubelet
    sets on every node."""
    return {
        INSTANCE_TYPE_LABEL: group.instance_types[0],
        ARCH_LABEL: _ARCH[facts.architecture],
        OS_LABEL: "linux",
        **group.labels,
    }


def group_labels(group_name: str, group: NodeGroup, facts: InstanceType, kubernetes_version: str) -> dict[str, str]:
    """Our labels (the node group's config), those EKS and kubelet set, and nodeadm's NVIDIA label
    from Kubernetes 1.35 on (amazon-eks-ami nodeadm/internal/kubelet/config.go)."""
    labels = {
        **node_labels(group_name, group.efa, facts),
        CAPACITY_TYPE_LABEL: eks_capacity_type(group.capacity_type),
        INSTANCE_TYPE_LABEL: group.instance_types[0],
        ARCH_LABEL: _ARCH[facts.architecture],
        OS_LABEL: "linux",
    }
    if facts.accelerator == "nvidia" and tuple(map(int, kubernetes_version.split("."))) >= (1, 35):
        labels.setdefault("nvidia.com/gpu.present", "true")
    return labels


def _zones(group: NodeGroup, region: Region) -> tuple[str, ...]:
    """Where the group's nodes come up: its one zone, else the Auto Scaling group's balance over
    the VPC's zones (an existing VPC's zones are not known offline: the node groups' zones)."""
    if group.availability_zone is not None:
        return (group.availability_zone,)
    if region.vpc is not None and region.vpc.availability_zones:
        return tuple(region.vpc.availability_zones)
    return tuple(sorted({g.availability_zone for g in region.node_groups.values() if g.availability_zone}))


def group_nodes(region: Region, group_name: str, count: int, catalog: InstanceCatalog) -> list[Node]:
    """The first ``count`` nodes of a group, spread over its zones as its Auto Scaling group does."""
    group = region.node_groups[group_name]
    facts = catalog.instance_types[group.instance_types[0]]
    if region.existing:
        labels = described_labels(group, facts)
    else:
        labels = group_labels(group_name, group, facts, region.kubernetes_version)
    taints = group.described_taints if region.existing else node_taints(group.efa, facts)
    zones = _zones(group, region)
    nodes = []
    for index in range(count):
        node_labels_ = dict(labels)
        if zones:
            node_labels_[ZONE_LABEL] = zones[index % len(zones)]
        nodes.append(
            Node(
                name=f"{group_name}-{index + 1}",
                group=group_name,
                facts=facts,
                efa=group.efa,
                labels=node_labels_,
                taints=taints,
                allocatable=allocatable(facts, group.hugepages_bytes),
            )
        )
    return nodes


def node_count(group: NodeGroup, autoscaled: bool) -> int:
    """``max_size`` when a node autoscaler adds nodes on demand, ``desired_size`` when nothing does."""
    return group.max_size if autoscaled or group.desired_size is None else group.desired_size


def region_nodes(region: Region, catalog: InstanceCatalog, *, autoscaled: bool) -> list[Node]:
    """Every node the region can have."""
    return [
        node
        for group_name, group in region.node_groups.items()
        for node in group_nodes(region, group_name, node_count(group, autoscaled), catalog)
    ]
