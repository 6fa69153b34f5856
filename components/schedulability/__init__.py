"""The offline schedulability check (docs/design.md, decision 14): every pod a stack renders, and every
DaemonSet of the platform, placed on the nodes the stack can have, before anything is deployed.

``check_schedulable`` is the entry point; the layers below it are pure and tested on their own:
``quantities`` (Kubernetes quantities), ``matching`` (selectors, affinity, taints),
``nodes`` (a node group's nodes and what kubelet leaves allocatable), ``workloads`` (the pods
of rendered manifests), ``platform_pods`` (the DaemonSets and Deployments of the platform, as
their pinned charts render them) and ``packing`` (placing pods and explaining failures).
"""

from components.schedulability.check import check_schedulable

__all__ = ["check_schedulable"]
