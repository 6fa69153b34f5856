"""Data the program is pinned to, read from ``config/``: instance facts, AWS region
codes, and the versions we render for. Loaded once; never from ``pulumi.Config``."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from ruamel.yaml import YAML

from components import naming

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"

Architecture = Literal["x86_64", "arm64"]
AcceleratorKind = Literal["nvidia", "neuron", "none"]
AmiType = Literal[
    "AL2023_x86_64_NVIDIA",
    "AL2023_ARM_64_NVIDIA",
    "AL2023_x86_64_NEURON",
    "AL2023_x86_64_STANDARD",
    "AL2023_ARM_64_STANDARD",
]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class InstanceType(_Data):
    """One entry of ``config/instances.yaml``; its header says what each field means
    and where it comes from, including how nodeadm turns ``vcpus`` and ``max_pods``
    into the kubelet's kubeReserved and how managed node groups cap maxPods."""

    architecture: Architecture
    accelerator: AcceleratorKind
    accelerators: int = Field(ge=0)
    accelerator_memory_gib: int = Field(ge=0)
    efa_interfaces: int = Field(ge=0)
    ami_type: AmiType
    source: str
    vcpus: int = Field(gt=0)
    """EC2 VCpuInfo.DefaultVCpus."""
    memory_mib: int = Field(gt=0)
    """EC2 MemoryInfo.SizeInMiB (what EC2 sells; the kernel reports a little less)."""
    max_pods: int = Field(gt=0)
    """kubelet maxPods nodeadm computes without prefix delegation (ENI formula, no vCPU cap)."""
    instance_store_gib: int = Field(ge=0)
    """Total local NVMe instance store in GiB, rounded down from EC2's decimal GB; 0 = none."""

    @property
    def efa_supported(self) -> bool:
        return self.efa_interfaces > 0


class Connector(_Data):
    extra_config: tuple[str, ...] = Field(strict=False)


class KvTransferSchema(_Data):
    """What the pinned vLLM release accepts (config/vllm_kv_transfer.yaml)."""

    release: str
    kv_transfer_config_fields: tuple[str, ...] = Field(strict=False)
    kv_roles: tuple[str, ...] = Field(strict=False)
    connectors: dict[str, Connector]
    mooncake_protocols: tuple[str, ...] = Field(strict=False)
    object_tier_keys: tuple[str, ...] = Field(strict=False)
    object_store_config_keys: tuple[str, ...] = Field(strict=False)
    mooncake_json_keys: tuple[str, ...] = Field(strict=False)


class InstanceCatalog(_Data):
    instance_types: dict[str, InstanceType]


class RegionList(_Data):
    regions: tuple[str, ...] = Field(strict=False)


class VllmPins(_Data):
    release: str
    image: str
    efa_image: str


class MooncakePins(_Data):
    global_segment_size: str
    local_buffer_size: str
    offload_disk_size: str
    master_image: str


class ToolPins(_Data):
    aws_cli: str


class KubernetesPins(_Data):
    default_version: str
    supported_versions: tuple[str, ...] = Field(strict=False)


class Chart(_Data):
    repo: str
    chart: str
    version: str
    crds: str | None = None
    """A file under config/ with the chart's CustomResourceDefinitions, applied by the program
    itself (Helm installs a chart's crds/ once and never upgrades them); the release skips them."""


class ClusterAutoscalerChart(Chart):
    images: dict[str, str]
    """Kubernetes minor -> Cluster Autoscaler image tag of that minor."""

    def image_for(self, kubernetes_version: str) -> str:
        if kubernetes_version not in self.images:
            raise ValueError(
                f"no Cluster Autoscaler image pinned for Kubernetes {kubernetes_version} "
                f"(config/pins.yaml charts.cluster_autoscaler.images has {', '.join(self.images)})"
            )
        return self.images[kubernetes_version]


class ChartPins(_Data):
    nvidia_device_plugin: Chart
    efa_device_plugin: Chart
    aws_load_balancer_controller: Chart
    cluster_autoscaler: ClusterAutoscalerChart
    keda: Chart
    lws: Chart
    prometheus: Chart
    dcgm_exporter: Chart
    grafana: Chart
    metrics_server: Chart


class Pins(_Data):
    vllm: VllmPins
    mooncake: MooncakePins
    tools: ToolPins
    kubernetes: KubernetesPins
    charts: ChartPins


def _loader() -> YAML:
    """The project's own files under config/ are read with ruamel's C parser (``ruamel.yaml.clib``,
    pinned), several times faster than the pure one; tests/unit/test_catalog_loader.py holds that
    both read every file there to the same values and types. Users' stack files keep the pure
    parser (fleetctl/stackfile.py): its errors carry the marks the problems report."""
    return YAML(typ="safe", pure=False)


def _read(name: str) -> object:
    with (CONFIG_DIR / name).open(encoding="utf-8") as handle:
        return _loader().load(handle)


@cache
def instance_catalog() -> InstanceCatalog:
    return InstanceCatalog.model_validate(_read("instances.yaml"))


@cache
def aws_regions() -> frozenset[str]:
    return frozenset(RegionList.model_validate(_read("aws_regions.yaml")).regions)


@cache
def pins() -> Pins:
    return Pins.model_validate(_read("pins.yaml"))


@cache
def kv_transfer_schema() -> KvTransferSchema:
    return KvTransferSchema.model_validate(_read("vllm_kv_transfer.yaml"))


_CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")


@cache
def _documents(name: str) -> tuple[dict[str, Any], ...]:
    with (CONFIG_DIR / name).open(encoding="utf-8") as handle:
        documents = [document for document in _loader().load_all(handle) if document is not None]
    if not all(isinstance(document, dict) for document in documents):
        raise ValueError(f"config/{name}: every document must be a mapping")
    return tuple(documents)


def chart_crds(chart: Chart) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions vendored for ``chart`` (none unless it names a file), each a
    fresh copy the caller may change."""
    if chart.crds is None:
        return []
    documents = _documents(chart.crds)
    for document in documents:
        if (document.get("apiVersion"), document.get("kind")) != _CRD:
            raise ValueError(f"config/{chart.crds}: {document.get('kind')!r} is not an apiextensions.k8s.io/v1 CRD")
    return copy.deepcopy(list(documents))


PATCH_FORCE = "pulumi.com/patchForce"
"""Server-side apply takes fields over from another field manager (see applied_crds)."""


def applied_crds(chart: Chart) -> list[dict[str, Any]]:
    """``chart``'s vendored CRDs as the program applies them, rather than Helm, which installs a chart's
    CRDs once and never upgrades them: labelled with the chart version they came from, and
    ``pulumi.com/patchForce``, since on a cluster where Helm installed them its field manager still
    co-owns every field and the server-side apply of a newer chart's CRDs would conflict; we are their
    only writer now."""
    crds = chart_crds(chart)
    for crd in crds:
        metadata = crd["metadata"]
        version = {"app.kubernetes.io/version": chart.version}
        metadata["labels"] = {**metadata.get("labels", {}), **naming.fleet_labels(), **version}
        metadata["annotations"] = {**metadata.get("annotations", {}), PATCH_FORCE: "true"}
    return crds
