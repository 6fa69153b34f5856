"""The platform's own pods in a region: the DaemonSets every node runs (EKS add-ons, and the
device plugins that make a node advertise its GPUs and EFA devices) and the Deployments
that need an untainted node (CoreDNS, the load balancer controller, the cluster autoscaler, and
where the region's metrics pipeline runs, KEDA, Prometheus, metrics-server and Grafana). Device plugins are
rendered from the chart defaults recorded in config/platform_pods.yaml merged with the
values we pass, as Helm merges them, so a value we change is a value the check sees."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from components.catalog import CONFIG_DIR, _read
from components.platform.addons import efa_plugin_values, nvidia_plugin_values
from components.platform.autoscaler import NAMESPACE as AUTOSCALER_NAMESPACE
from components.platform.autoscaler import autoscaler_values
from components.platform.dcgm import dcgm_values
from components.platform.grafana import NAMESPACE as GRAFANA_NAMESPACE
from components.platform.grafana import grafana_values
from components.platform.keda import COMPONENTS as KEDA_COMPONENTS
from components.platform.keda import NAMESPACE as KEDA_NAMESPACE
from components.platform.keda import keda_values
from components.platform.leader_worker_set import NAMESPACE as LWS_NAMESPACE
from components.platform.leader_worker_set import lws_values
from components.platform.load_balancer import NAMESPACE as CONTROLLER_NAMESPACE
from components.platform.load_balancer import controller_values
from components.platform.metrics_server import NAMESPACE as METRICS_SERVER_NAMESPACE
from components.platform.metrics_server import metrics_server_values
from components.platform.prometheus import NAMESPACE as PROMETHEUS_NAMESPACE
from components.platform.prometheus import prometheus_values
from components.schedulability.nodes import Node
from components.schedulability.quantities import amounts
from components.schedulability.workloads import DEFAULT_MAX_SURGE, Workload, scaled
from components.scheduling import DEVICE_RESOURCES, EFA_RESOURCE
from components.spec.region import Region

FACTS_FILE = CONFIG_DIR / "platform_pods.yaml"
SYSTEM_NAMESPACE = "kube-system"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@cache
def facts() -> Mapping[str, Any]:
    loaded = _read(FACTS_FILE.name)
    assert isinstance(loaded, Mapping)
    return loaded


def helm_merge(defaults: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's coalescing of user values over chart defaults: maps merge key by key, anything
    else (lists included) replaces, and null deletes the default."""
    merged = dict(defaults)
    for key, value in values.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = helm_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class DaemonSet:
    name: str
    pod: Mapping[str, Any]
    requests: Mapping[str, int]
    resource: str | None = None
    """The extended resource it makes a node advertise, if it is a device plugin."""
    supply: Callable[[Node], int] = lambda node: 0
    """How much of ``resource`` a node has, when the plugin runs there (0: not its hardware)."""


def nvidia_device_plugin() -> DaemonSet:
    chart = facts()["charts"]["nvidia_device_plugin"]
    values = helm_merge(chart["defaults"], nvidia_plugin_values())
    return DaemonSet(
        name="nvidia-device-plugin",
        pod={key: values[key] for key in ("nodeSelector", "affinity", "tolerations") if key in values},
        requests=amounts((values.get("resources") or {}).get("requests") or {}),
        resource=DEVICE_RESOURCES["nvidia"],
        supply=lambda node: node.facts.accelerators if node.facts.accelerator == "nvidia" else 0,
    )


def efa_device_plugin() -> DaemonSet:
    chart = facts()["charts"]["efa_device_plugin"]
    values = helm_merge(chart["defaults"], efa_plugin_values())
    supported = values["supportedInstanceLabels"]
    terms = [
        {
            "matchExpressions": [
                {"key": key, "operator": "In", "values": list(supported["values"])},
                {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["auto"]},
            ]
        }
        for key in supported["keys"]
    ]
    return DaemonSet(
        name="aws-efa-k8s-device-plugin",
        pod={
            "nodeSelector": values.get("nodeSelector") or {},
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
            },
            "tolerations": [*chart["template_tolerations"], *(values.get("tolerations") or [])],
        },
        requests=amounts((values.get("resources") or {}).get("requests") or {}),
        resource=EFA_RESOURCE,
        supply=lambda node: node.facts.efa_interfaces if node.efa else 0,
    )


EKS_ADDONS = {"eks-pod-identity-agent": "eks_pod_identity_agent", "coredns": "coredns"}
"""The EKS add-ons of config/platform_pods.yaml the program installs, each with its field of
``existing_cluster.addons``; the others (aws-node, kube-proxy) come with every EKS cluster."""


def _eks_addon_runs(name: str, region: Region) -> bool:
    """Whether the check places ``name``'s pods: on a created cluster every EKS add-on; on an
    existing one only those the program installs (what the cluster runs already is its own)."""
    if not region.existing:
        return True
    return name in EKS_ADDONS and region.installs(EKS_ADDONS[name])


def trusted(daemon_set: DaemonSet) -> DaemonSet:
    """A device plugin an existing cluster runs already (``present``): trusted to run on every
    node of its hardware and make it advertise that hardware; its pods' room is the cluster's."""
    return dataclasses.replace(daemon_set, pod={"tolerations": [{"operator": "Exists"}]}, requests={})


def _addon_pod(addon: Mapping[str, Any]) -> dict[str, Any]:
    return {key: addon[key] for key in ("nodeSelector", "affinity", "tolerations") if key in addon}


def daemon_sets(region: Region, node_facts: list[Node]) -> list[DaemonSet]:
    """The region's DaemonSets; a device plugin only where the platform installs it
    (components/platform/addons.py: NVIDIA with any NVIDIA group, EFA with any EFA group), the
    DCGM exporter where the metrics pipeline runs and there are NVIDIA nodes."""
    found = [
        DaemonSet(name=name, pod=_addon_pod(addon), requests=amounts(addon.get("requests") or {}))
        for name, addon in facts()["addons"].items()
        if addon["kind"] == "DaemonSet" and _eks_addon_runs(name, region)
    ]
    plugins = []
    if any(node.facts.accelerator == "nvidia" for node in node_facts):
        plugins.append(("nvidia_device_plugin", nvidia_device_plugin()))
    if any(group.efa for group in region.node_groups.values()):
        plugins.append(("efa_device_plugin", efa_device_plugin()))
    found += [plugin if region.installs(addon) else trusted(plugin) for addon, plugin in plugins]
    if (
        region.metrics.enabled
        and region.installs("dcgm_exporter")
        and any(node.facts.accelerator == "nvidia" for node in node_facts)
    ):
        found.append(dcgm_exporter())
    return found


def dcgm_exporter() -> DaemonSet:
    """The metrics pipeline's GPU exporter (components/platform/dcgm.py), on every NVIDIA node."""
    values = helm_merge(facts()["charts"]["dcgm_exporter"]["defaults"], dcgm_values())
    return DaemonSet(
        name="dcgm-exporter",
        pod={key: values[key] for key in ("nodeSelector", "affinity", "tolerations") if values.get(key)},
        requests=amounts((values.get("resources") or {}).get("requests") or {}),
    )


def platform_workloads(region_name: str, region: Region, *, leader_worker_sets: bool = False) -> list[Workload]:
    """Deployments of the platform that must find room on the region's untainted nodes;
    ``leader_worker_sets``: a Mooncake role of the region spans nodes, so LeaderWorkerSet's
    controller runs (components/platform/leader_worker_set.py)."""
    found = [
        _deployment(name, SYSTEM_NAMESPACE, _addon_pod(addon), addon.get("requests") or {}, int(addon["replicas"]))
        for name, addon in facts()["addons"].items()
        if addon["kind"] == "Deployment" and _eks_addon_runs(name, region)
    ]
    charts: list[tuple[str, str, str, dict[str, Any]]] = []
    if region.installs("aws_load_balancer_controller"):
        charts.append(
            (
                "aws-load-balancer-controller",
                CONTROLLER_NAMESPACE,
                "aws_load_balancer_controller",
                controller_values("<cluster>", region_name, "<vpc>", region.ingress),
            )
        )
    if region.installs("cluster_autoscaler"):
        charts.append(
            (
                "cluster-autoscaler",
                AUTOSCALER_NAMESPACE,
                "cluster_autoscaler",
                autoscaler_values("<cluster>", region_name, region.kubernetes_version),
            )
        )
    if leader_worker_sets and region.installs("lws"):
        charts.append(("lws-controller-manager", LWS_NAMESPACE, "lws", lws_values()))
    for name, namespace, chart, ours in charts:
        values = helm_merge(facts()["charts"][chart]["defaults"], ours)
        pod = {key: values[key] for key in ("nodeSelector", "affinity", "tolerations") if values.get(key)}
        requests = (values.get("resources") or {}).get("requests") or {}
        found.append(_deployment(name, namespace, pod, requests, int(values["replicaCount"])))
    if region.metrics.enabled:
        if region.installs("keda"):
            found += keda_deployments()
        if region.installs("prometheus"):
            found.append(prometheus_server(region))
        if region.installs("metrics_server"):
            found.append(metrics_server())
        if region.metrics.grafana and region.installs("grafana"):
            found.append(grafana())
    return found


def grafana() -> Workload:
    """Grafana's pod: its own container and the dashboard sidecar's, their requests added."""
    values = helm_merge(facts()["charts"]["grafana"]["defaults"], grafana_values())
    pod = {key: values[key] for key in ("nodeSelector", "affinity", "tolerations") if values.get(key)}
    requests: dict[str, int] = {}
    for resources in (values.get("resources"), values["sidecar"].get("resources")):
        for resource, value in amounts((resources or {}).get("requests") or {}).items():
            requests[resource] = requests.get(resource, 0) + value
    workload = _deployment("grafana", GRAFANA_NAMESPACE, pod, {}, int(values["replicas"]))
    return dataclasses.replace(workload, requests=requests)


def metrics_server() -> Workload:
    values = helm_merge(facts()["charts"]["metrics_server"]["defaults"], metrics_server_values())
    pod = {key: values[key] for key in ("nodeSelector", "affinity", "tolerations") if values.get(key)}
    requests = (values.get("resources") or {}).get("requests") or {}
    return _deployment("metrics-server", METRICS_SERVER_NAMESPACE, pod, requests, int(values["replicas"]))


def prometheus_server(region: Region) -> Workload:
    values = helm_merge(facts()["charts"]["prometheus"]["defaults"], prometheus_values(region.metrics))["server"]
    pod = {key: values[key] for key in ("nodeSelector", "affinity", "tolerations") if values.get(key)}
    requests = (values.get("resources") or {}).get("requests") or {}
    return _deployment("prometheus", PROMETHEUS_NAMESPACE, pod, requests, int(values["replicaCount"]))


def keda_deployments() -> list[Workload]:
    """KEDA's three Deployments as its templates render them: each component's selector,
    tolerations and affinity, else the top-level ones, and always ``kubernetes.io/os: linux``."""
    chart = facts()["charts"]["keda"]
    values = helm_merge(chart["defaults"], keda_values())
    found = []
    for name, (key, resources_key) in KEDA_COMPONENTS.items():
        component = values[key]
        pod: dict[str, Any] = {
            "nodeSelector": {**chart["template_node_selector"], **(component["nodeSelector"] or values["nodeSelector"])}
        }
        for field in ("tolerations", "affinity"):
            if component[field] or values[field]:
                pod[field] = component[field] or values[field]
        requests = values["resources"][resources_key]["requests"]
        found.append(_deployment(name, KEDA_NAMESPACE, pod, requests, int(component["replicaCount"])))
    return found


def _deployment(
    name: str, namespace: str, pod: Mapping[str, Any], requests: Mapping[str, str], replicas: int
) -> Workload:
    return Workload(
        kind="Deployment",
        name=name,
        namespace=namespace,
        endpoint=None,
        pod=pod,
        requests=amounts(requests),
        replicas=replicas,
        surge=scaled(DEFAULT_MAX_SURGE, replicas, round_up=True),
    )
