"""Node labels and taints of the node groups, and the tolerations that match them.

One vocabulary for both sides: the platform puts these on nodes, device plugins
and workloads select and tolerate exactly these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from components.catalog import AcceleratorKind, InstanceType

if TYPE_CHECKING:  # the spec package imports this module
    from components.spec.region import CapacityType

NODE_GROUP_LABEL = "inference-fleet/node-group"
EFA_LABEL = "inference-fleet/efa"
ACCELERATOR_LABEL = "inference-fleet/accelerator"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
"""The label the NVIDIA device plugin chart's default node affinity requires (NVIDIA/k8s-device-plugin
v0.19.3, deployments/helm/nvidia-device-plugin/values.yaml) when Node Feature Discovery does not run.
The EKS AL2023 AMI sets it itself only from Kubernetes 1.35 (amazon-eks-ami
nodeadm/internal/kubelet/config.go), so our NVIDIA groups carry it on every version."""
CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"
"""Set by EKS on every node of a managed node group, to the EKS spelling of its capacity type."""

# The EKS API's spelling of the spec's capacity types.
# https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html (capacityType)
EKS_CAPACITY_TYPES: Mapping[CapacityType, str] = {
    "on-demand": "ON_DEMAND",
    "spot": "SPOT",
    "capacity-block": "CAPACITY_BLOCK",
}

# The extended resource each device plugin advertises.
DEVICE_RESOURCES: Mapping[AcceleratorKind, str] = {
    "nvidia": "nvidia.com/gpu",
    "neuron": "aws.amazon.com/neuron",
}
EFA_RESOURCE = "vpc.amazonaws.com/efa"

HUGEPAGES_2MI_RESOURCE = "hugepages-2Mi"
HUGEPAGE_2MI_BYTES = 2 * 2**20
LIBFABRIC_HUGEPAGES_2MI_BYTES = 5120 * 2**20
"""2 MiB huge pages every rdma pod requests for libfabric's EFA provider, which takes its internal
buffers from huge pages; also what an EFA node group reserves unless it says otherwise
(``node_groups.<g>.hugepages_2mi``, written into the node's user data by
``components/platform/user_data.py``).

5120 MiB is what the EKS EFA guide's example pod requests (awsdocs/amazon-eks-user-guide
latest/ug/ml/node-efa.adoc, ``hugepages-2Mi: 5120Mi``). Nothing else reserves huge pages on our
nodes: the AL2023 NVIDIA AMI installs EFA with ``efa_installer.sh --minimal`` and configures none
(awslabs/amazon-eks-ami v20260724 templates/al2023/provisioners/install-efa.sh, runtime/). An rdma
pod whose Mooncake store is backed by huge pages requests its ranks' segments and buffers on top
(``render/mooncake_roles.py``, docs/efa.md); its node group must reserve that much."""

EFA_PAGE_ENTRY_BUDGET = 22 * 2**20
"""Page entries one EFA device holds for registered memory: "roughly 24 million" in hardware, of which
Mooncake budgets 22 Mi (kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/efa_transport/
efa_transport.cpp ``kDefaultMaxPteEntries``). Mooncake checks it one buffer at a time, but every
rank's store segment and buffer is registered on every device of the node, so the ranks of a pod
share it; past it ``fi_mr_reg`` fails with ENOMEM (ofiwg/libfabric#9739). docs/efa.md."""


def hugepages_quantity(size_bytes: int) -> str:
    """A huge page amount as a Kubernetes quantity in MiB (``5120Mi``), whole pages only."""
    if size_bytes <= 0 or size_bytes % HUGEPAGE_2MI_BYTES:
        raise ValueError(f"huge pages come in whole 2 MiB pages, got {size_bytes} bytes")
    return f"{size_bytes // 2**20}Mi"


Effect = Literal["NoSchedule", "NoExecute", "PreferNoSchedule"]

# The EKS API spells taint effects differently from Kubernetes.
_EKS_EFFECTS: dict[Effect, str] = {
    "NoSchedule": "NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
}


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: Effect = "NoSchedule"

    @property
    def eks_effect(self) -> str:
        return _EKS_EFFECTS[self.effect]

    def toleration(self) -> dict[str, str]:
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}


GPU_TAINT = Taint("nvidia.com/gpu", "true")
NEURON_TAINT = Taint("aws.amazon.com/neuron", "true")
EFA_TAINT = Taint("vpc.amazonaws.com/efa", "true")
EFA_STARTUP_TAINT = Taint("startup-taint.cluster-autoscaler.kubernetes.io/efa-not-advertised", "true")
"""Every EFA node registers with it, until it advertises its EFA devices (components/platform/efa_ready.py):
Cluster Autoscaler takes a node with a taint of that prefix for one still starting. Transient, so not
among ``node_taints`` (what a running node carries, which the schedulability check places pods on)."""


def node_labels(group_name: str, efa: bool, facts: InstanceType) -> dict[str, str]:
    labels = {NODE_GROUP_LABEL: group_name, ACCELERATOR_LABEL: facts.accelerator}
    if facts.accelerator == "nvidia":
        labels[GPU_PRESENT_LABEL] = "true"
    if efa:
        labels[EFA_LABEL] = "true"
    return labels


def node_taints(efa: bool, facts: InstanceType) -> tuple[Taint, ...]:
    """Accelerator nodes repel pods that do not ask for them; EFA nodes also repel non-EFA pods."""
    taints: list[Taint] = []
    if facts.accelerator == "nvidia":
        taints.append(GPU_TAINT)
    elif facts.accelerator == "neuron":
        taints.append(NEURON_TAINT)
    if efa:
        taints.append(EFA_TAINT)
    return tuple(taints)


def registration_taints(efa: bool, facts: InstanceType) -> tuple[Taint, ...]:
    """What a node group registers its nodes with: ``node_taints``, and on EFA nodes the startup taint."""
    return (*node_taints(efa, facts), *((EFA_STARTUP_TAINT,) if efa else ()))


def tolerations(taints: tuple[Taint, ...]) -> list[dict[str, str]]:
    return [taint.toleration() for taint in taints]


def eks_capacity_type(spec_value: CapacityType) -> str:
    return EKS_CAPACITY_TYPES[spec_value]
