"""Rules of regions on an existing cluster that need more than the region's own model: its
kubeconfig as the program will read it, the instance catalog, and the endpoints placed there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from components.catalog import InstanceCatalog
from components.scheduling import ACCELERATOR_LABEL, EFA_LABEL, GPU_PRESENT_LABEL
from components.spec.checks import Placement, node_group_instance
from components.spec.endpoint import Endpoint
from components.spec.errors import Problem, dotted
from components.spec.existing import ExistingCluster, KubeconfigError, read_kubeconfig
from components.spec.front import GlobalFront
from components.spec.region import Region

SYSTEM_ADDONS = (
    "cluster_autoscaler",
    "aws_load_balancer_controller",
    "keda",
    "prometheus",
    "metrics_server",
    "grafana",
)
"""Installed add-ons whose pods select the program's system-node label (``ACCELERATOR_LABEL: none``)."""


def check_existing_region(name: str, region: Region, catalog: InstanceCatalog, base: Path | None) -> list[Problem]:
    """The kubeconfig can be read, and the nodes carry the labels the add-ons the program installs select."""
    existing = region.existing_cluster
    if existing is None:
        return []
    problems = _kubeconfig_problems(name, existing, base)
    path: list[str | int] = ["regions", name, "node_groups"]
    kinds = {}
    for group_name, group in region.node_groups.items():
        facts = node_group_instance(group, catalog)
        if facts is not None:
            kinds[group_name] = facts.accelerator
    nvidia = [group for group, kind in kinds.items() if kind == "nvidia"]
    efa = [group_name for group_name, group in region.node_groups.items() if group.efa]
    needs: list[tuple[str, str, str, list[str]]] = []
    # A DaemonSet must run on every node it serves; a Deployment needs one group that takes it.
    if region.installs("nvidia_device_plugin"):
        # The chart's own node affinity wants the label too (GPU_PRESENT_LABEL in components/scheduling.py).
        needs.append(("nvidia_device_plugin", ACCELERATOR_LABEL, "nvidia", nvidia))
        needs.append(("nvidia_device_plugin", GPU_PRESENT_LABEL, "true", nvidia))
    if region.metrics.enabled and region.installs("dcgm_exporter"):
        needs.append(("dcgm_exporter", ACCELERATOR_LABEL, "nvidia", nvidia))
    if region.installs("efa_device_plugin"):
        needs.append(("efa_device_plugin", EFA_LABEL, "true", efa))
    for addon, key, value, groups in needs:
        for group_name in groups:
            if region.node_groups[group_name].labels.get(key) != value:
                problems.append(
                    Problem(
                        dotted([*path, group_name, "labels"]),
                        f"has no {key}: {value}, which the {addon.replace('_', ' ')} the program installs selects: "
                        f"label the group's nodes {key}={value} and list it here, or set "
                        f"regions.{name}.existing_cluster.addons.{addon} to present",
                    )
                )
    installed = [addon for addon in SYSTEM_ADDONS if region.installs(addon) and _needed(addon, region)]
    system = [g for g, k in kinds.items() if k == "none"]
    if installed and system and not any(region.node_groups[g].labels.get(ACCELERATOR_LABEL) == "none" for g in system):
        problems.append(
            Problem(
                dotted([*path, system[0], "labels"]),
                f"has no {ACCELERATOR_LABEL}: none, which the add-ons the program installs select for their pods "
                f"({', '.join(installed)}): label a system group's nodes {ACCELERATOR_LABEL}=none and list it under "
                f"its labels, or set those add-ons to present under regions.{name}.existing_cluster.addons",
            )
        )
    return problems


def _needed(addon: str, region: Region) -> bool:
    """Whether the region runs ``addon`` at all (its metrics pipeline resolved)."""
    if addon in ("keda", "prometheus", "metrics_server"):
        return bool(region.metrics.enabled)
    if addon == "grafana":
        return bool(region.metrics.enabled and region.metrics.grafana)
    return True


def _kubeconfig_problems(name: str, existing: ExistingCluster, base: Path | None) -> list[Problem]:
    if existing.kubeconfig is None:
        return []
    try:
        read_kubeconfig(existing.kubeconfig, base)
    except KubeconfigError as error:
        return [Problem(dotted(["regions", name, "existing_cluster", "kubeconfig"]), str(error))]
    return []


def check_kubeconfig_placements(
    regions: Mapping[str, Region],
    endpoints: Mapping[str, Endpoint],
    placements: Sequence[Placement],
    front: GlobalFront | None,
) -> list[Problem]:
    """What an endpoint in a region reached by kubeconfig alone cannot have: weights synced from S3
    (its pods get no AWS identity there) or a place behind the global front (it finds each region's
    ALB through AWS)."""
    problems = []
    fronted = set()
    for placement in placements:
        region = regions[placement.region]
        if region.existing_cluster is None or region.existing_cluster.eks:
            continue
        fronted.add(placement.region)
        endpoint = endpoints[placement.endpoint]
        if endpoint.model_source is not None:
            problems.append(
                Problem(
                    dotted(["endpoints", placement.endpoint, "model_source"]),
                    f"is synced from S3 with an IAM role EKS Pod Identity binds, which {placement.region} (a cluster "
                    "given by kubeconfig) has not: use model (a Hugging Face id) or model_path (weights on the "
                    f"nodes), give regions.{placement.region}.existing_cluster.name instead, or take "
                    f"{placement.region} out of the endpoint's target_regions",
                )
            )
    if front is not None and front.enabled:
        for region_name in sorted(fronted):
            problems.append(
                Problem(
                    "global.enabled",
                    f"fronts every region with endpoints through its ALB, found in AWS; {region_name} is a cluster "
                    f"given by kubeconfig: give regions.{region_name}.existing_cluster.name instead, or turn the "
                    "global front off",
                )
            )
    return problems
