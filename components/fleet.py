"""The fleet: one regional platform per region, endpoints placed on them, and what the stack exports."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components import naming
from components.platform.global_front import ACCELERATOR, GlobalFrontArgs, GlobalFrontDoor, RegionFront, global_address
from components.platform.identity import KvEndpoint
from components.platform.regional import RegionalPlatform, RegionalPlatformArgs
from components.render.placement import placed
from components.spec import StackSpec
from components.workloads.regional import RegionalWorkloads, RegionalWorkloadsArgs


@dataclass(frozen=True)
class FleetArgs:
    stack: str
    spec: StackSpec
    aws_providers: Mapping[str, aws.Provider]
    """One explicit provider per region of the spec that calls AWS (``aws_regions``), created by ``__main__``."""
    global_provider: aws.Provider | None = None
    """The provider of the global front door (Global Accelerator's API region), when it is enabled."""


class Fleet(pulumi.ComponentResource):
    """Every region's platform and workloads, grouped under one component."""

    platforms: dict[str, RegionalPlatform]
    workloads: dict[str, RegionalWorkloads]
    regions: pulumi.Output[dict[str, Any]]
    """region -> cluster name and endpoint, node group names, cold-tier bucket."""
    kubeconfigs: pulumi.Output[dict[str, Any]]
    """region -> kubeconfig (secret)."""
    placements: pulumi.Output[dict[str, Any]]
    """endpoint -> region -> {node_group, image}: where each endpoint runs."""
    endpoints: pulumi.Output[dict[str, Any]]
    """endpoint -> region -> engine record with the routed address (docs/design.md, "The engine record")."""
    front: GlobalFrontDoor | None
    """The global front door, when ``global.enabled`` (docs/global.md)."""

    def __init__(self, name: str, args: FleetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:fleet:Fleet", name, None, opts)
        spec = args.spec
        missing = sorted(set(aws_regions(spec)) - set(args.aws_providers))
        if missing:
            raise ValueError(f"no AWS provider for region(s) {', '.join(missing)}")
        self.platforms = {
            region: RegionalPlatform(
                region,
                RegionalPlatformArgs(
                    stack=args.stack,
                    region=region,
                    spec=region_spec,
                    namespaces=namespaces_in(spec, region),
                    model_sources=model_sources_in(spec, region),
                    kv_endpoints=kv_endpoints_in(spec, region),
                    leader_worker_sets=spans_nodes_in(spec, region),
                ),
                pulumi.ResourceOptions(
                    parent=self,
                    providers={"aws": args.aws_providers[region]} if region in args.aws_providers else None,
                ),
            )
            for region, region_spec in spec.regions.items()
        }
        self.workloads = {
            region: RegionalWorkloads(
                naming.platform_name(region, "workloads"),
                RegionalWorkloadsArgs(
                    region=region,
                    namespaces=namespaces_in(spec, region),
                    endpoints=[placed(spec, placement) for placement in spec.placements_in(region)],
                    kubernetes=platform.kubernetes,
                    platform=platform.workload_dependencies,
                    cold_tier_bucket=platform.cold_tier.bucket_name if platform.cold_tier is not None else None,
                    dashboard=bool(spec.regions[region].metrics.enabled),
                ),
                pulumi.ResourceOptions(parent=self, providers={"kubernetes": platform.kubernetes}),
            )
            for region, platform in self.platforms.items()
        }
        records: dict[str, dict[str, pulumi.Input[Any]]] = {}
        for region, workloads in self.workloads.items():
            for endpoint, record in workloads.records.items():
                records.setdefault(endpoint, {})[region] = record
        self.front = self._global_front(args, records) if spec.global_front.enabled else None
        self.endpoints = pulumi.Output.from_input(records)
        self.regions = pulumi.Output.from_input(
            {region: platform.summary() for region, platform in self.platforms.items()}
        )
        kubeconfigs: dict[str, pulumi.Input[str]] = {
            region: platform.kubeconfig for region, platform in self.platforms.items()
        }
        self.kubeconfigs = pulumi.Output.secret(kubeconfigs)
        self.placements = pulumi.Output.from_input(placement_table(spec))
        self.register_outputs({"regions": self.regions, "placements": self.placements, "endpoints": self.endpoints})

    def _global_front(self, args: FleetArgs, records: dict[str, dict[str, pulumi.Input[Any]]]) -> GlobalFrontDoor:
        """The accelerator in front of every region's ALB; each record gains the endpoint's global address."""
        spec = args.spec
        if args.global_provider is None and spec.global_front.kind == ACCELERATOR:
            raise ValueError("global is enabled but no provider was given for the accelerator")
        served = {
            region: RegionFront(
                cluster_name=_eks_name(self.platforms[region], region),
                routes=list(workloads.records.values()),
                provider=args.aws_providers[region],
            )
            for region, workloads in self.workloads.items()
            if workloads.records
        }
        front = GlobalFrontDoor(
            naming.platform_name("global", "front"),
            GlobalFrontArgs(
                stack=args.stack,
                front=spec.global_front,
                regions=spec.regions,
                served=served,
                provider=args.global_provider,
            ),
            pulumi.ResourceOptions(parent=self),
        )
        for endpoint, by_region in records.items():
            for region, record in by_region.items():
                address = front.dns_name.apply(functools.partial(global_address, endpoint, spec.regions[region]))
                by_region[region] = pulumi.Output.all(record, address).apply(_with_global_address)
        return front


def _eks_name(platform: RegionalPlatform, region: str) -> pulumi.Output[str]:
    if platform.cluster_name is None:
        # Validation refuses the front with a cluster given by kubeconfig (components/spec/existing_checks.py).
        raise ValueError(f"the global front needs the EKS cluster of {region}, which is given by kubeconfig")
    return platform.cluster_name


def _with_global_address(values: list[Any]) -> dict[str, Any]:
    record, address = values
    return {**record, "global_address": address}


def aws_regions(spec: StackSpec) -> list[str]:
    """The regions whose platform calls AWS: all but those on a cluster given by kubeconfig."""
    return [
        name for name, region in spec.regions.items() if region.existing_cluster is None or region.existing_cluster.eks
    ]


def namespaces_in(spec: StackSpec, region: str) -> tuple[str, ...]:
    return tuple(sorted({spec.endpoints[placement.endpoint].namespace for placement in spec.placements_in(region)}))


def spans_nodes_in(spec: StackSpec, region: str) -> bool:
    """Whether an endpoint of the region has a Mooncake role spanning nodes (a LeaderWorkerSet)."""
    return any(spec.endpoints[placement.endpoint].spans_nodes for placement in spec.placements_in(region))


def kv_endpoints_in(spec: StackSpec, region: str) -> tuple[KvEndpoint, ...]:
    """The region's endpoints that write its cold tier."""
    found = []
    for placement in spec.placements_in(region):
        endpoint = spec.endpoints[placement.endpoint]
        if endpoint.mooncake is not None and endpoint.mooncake.store.cold_tier_enabled:
            found.append(KvEndpoint(placement.endpoint, endpoint.namespace, endpoint.model_source))
            if endpoint.canary is not None:
                # The canary set writes under its own prefix, as its own identity (render/mooncake.py).
                canary = naming.canary_set_name(placement.endpoint)
                found.append(KvEndpoint(canary, endpoint.namespace, endpoint.model_source))
    return tuple(found)


def model_sources_in(spec: StackSpec, region: str) -> tuple[str, ...]:
    sources = {spec.endpoints[placement.endpoint].model_source for placement in spec.placements_in(region)}
    return tuple(sorted(source for source in sources if source is not None))


def placement_table(spec: StackSpec) -> dict[str, Any]:
    table: dict[str, dict[str, Any]] = {name: {} for name in spec.endpoints}
    for placement in spec.placements:
        table[placement.endpoint][placement.region] = {
            "node_group": placement.node_group,
            "image": placement.image,
        }
    return table
