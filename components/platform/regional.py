"""Everything one region runs before any workload: the RegionalPlatform component."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components import naming
from components.catalog import instance_catalog
from components.platform.addons import ClusterAddons, ClusterAddonsArgs
from components.platform.autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from components.platform.cluster import EksCluster, EksClusterArgs, KubeconfigCredentials
from components.platform.cold_tier import ColdTier, ColdTierArgs
from components.platform.identity import KvEndpoint, WorkloadIdentity, WorkloadIdentityArgs
from components.platform.leader_worker_set import LeaderWorkerSetController, LeaderWorkerSetControllerArgs
from components.platform.load_balancer import LoadBalancerController, LoadBalancerControllerArgs
from components.platform.metrics import MetricsPipeline, MetricsPipelineArgs
from components.platform.network import Network, NetworkArgs
from components.platform.node_groups import EfaNodeGroup, GpuNodeGroup, NodeGroupArgs
from components.spec.region import Region


@dataclass(frozen=True)
class RegionalPlatformArgs:
    stack: str
    region: str
    spec: Region
    namespaces: tuple[str, ...]
    """Namespaces the region's endpoints run in; each gets the workload identity."""
    model_sources: tuple[str, ...]
    """s3:// URIs the region's endpoints load weights from."""
    kv_endpoints: tuple[KvEndpoint, ...] = ()
    """Endpoints of the region that write its cold tier, each with an IAM role of its own."""
    leader_worker_sets: bool = False
    """An endpoint of the region has a Mooncake role spanning nodes: LeaderWorkerSet's controller runs."""
    credentials: KubeconfigCredentials = field(default_factory=lambda: KubeconfigCredentials())
    """What the region's kubeconfig authenticates with (the AWS providers' profile and role)."""


class RegionalPlatform(pulumi.ComponentResource):
    """Network, EKS cluster, node groups, add-ons, Cluster Autoscaler, load balancer controller,
    metrics pipeline, cold tier and workload identity of one region. Create it with
    ``providers={"aws": <the region's provider>}``: every AWS child inherits that provider."""

    cluster: EksCluster
    kubernetes: k8s.Provider
    node_group_names: dict[str, pulumi.Output[str]]
    cold_tier: ColdTier | None
    workload_role_arn: pulumi.Output[str]
    workload_dependencies: list[pulumi.Resource]
    """What pods need first: node groups, device plugins, Cluster Autoscaler (a group may start at
    zero nodes), the load balancer controller, whose webhooks see every Service and pod, and the
    metrics pipeline, whose CRDs the endpoints' ScaledObjects are."""

    def __init__(self, name: str, args: RegionalPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:RegionalPlatform", name, None, opts)
        region, spec = args.region, args.spec
        child = pulumi.ResourceOptions(parent=self)
        catalog = instance_catalog()

        network = Network(naming.platform_name(region, "network"), NetworkArgs(region=region, vpc=spec.vpc), child)
        self.cluster = EksCluster(
            naming.platform_name(region, "cluster"),
            EksClusterArgs(
                stack=args.stack,
                region=region,
                kubernetes_version=spec.kubernetes_version,
                vpc_id=network.vpc_id,
                private_subnet_ids=network.private_subnet_ids,
                public_subnet_ids=network.public_subnet_ids,
                protect=spec.protect,
                access=spec.cluster_access,
                credentials=args.credentials,
            ),
            child,
        )
        self.kubernetes = self.cluster.kubernetes

        facts = {name: catalog.instance_types[group.instance_types[0]] for name, group in spec.node_groups.items()}
        groups: dict[str, GpuNodeGroup | EfaNodeGroup] = {}
        for group_name, group in spec.node_groups.items():
            group_args = NodeGroupArgs(
                stack=args.stack,
                region=region,
                group_name=group_name,
                spec=group,
                facts=facts[group_name],
                cluster=self.cluster.cluster,
                node_role=self.cluster.node_role,
                vpc_id=network.vpc_id,
                subnet_ids=network.private_subnet_ids,
                cluster_security_group_id=self.cluster.cluster_security_group_id,
                kubernetes_version=spec.kubernetes_version,
                live=self.cluster.live,
            )
            component = EfaNodeGroup if group.efa else GpuNodeGroup
            groups[group_name] = component(naming.platform_name(region, "nodes", group_name), group_args, child)
        self.node_group_names = {group_name: group.node_group_name for group_name, group in groups.items()}

        system_groups = [groups[name] for name, fact in facts.items() if fact.accelerators == 0]
        addons = ClusterAddons(
            naming.platform_name(region, "addons"),
            ClusterAddonsArgs(
                region=region,
                cluster_name=self.cluster.cluster_name,
                kubernetes=self.kubernetes,
                nodes=system_groups,
                gpu_nodes=any(fact.accelerator == "nvidia" for fact in facts.values()),
                efa_nodes=any(group.efa for group in spec.node_groups.values()),
            ),
            child,
        )
        autoscaler = ClusterAutoscaler(
            naming.platform_name(region, "cluster-autoscaler"),
            ClusterAutoscalerArgs(
                region=region,
                cluster_name=self.cluster.cluster_name,
                kubernetes_version=spec.kubernetes_version,
                kubernetes=self.kubernetes,
                addons=addons,
            ),
            child,
        )
        lb_controller = LoadBalancerController(
            naming.platform_name(region, "lb-controller"),
            LoadBalancerControllerArgs(
                region=region,
                cluster_name=self.cluster.cluster_name,
                vpc_id=network.vpc_id,
                ingress=spec.ingress,
                kubernetes=self.kubernetes,
                addons=addons,
            ),
            child,
        )

        groups_controller: list[pulumi.Resource] = []
        if args.leader_worker_sets:
            groups_controller.append(
                LeaderWorkerSetController(
                    naming.platform_name(region, "lws"),
                    LeaderWorkerSetControllerArgs(region=region, kubernetes=self.kubernetes, addons=addons),
                    child,
                )
            )

        pipeline: list[pulumi.Resource] = []
        if spec.metrics.enabled:
            pipeline.append(
                MetricsPipeline(
                    naming.platform_name(region, "metrics"),
                    MetricsPipelineArgs(
                        region=region,
                        settings=spec.metrics,
                        kubernetes=self.kubernetes,
                        addons=addons,
                        gpu_nodes=any(fact.accelerator == "nvidia" for fact in facts.values()),
                        cluster_name=self.cluster.cluster_name,
                    ),
                    child,
                )
            )

        self.cold_tier = None
        if spec.cold_tier.enabled:
            self.cold_tier = ColdTier(
                naming.platform_name(region, "cold-tier"),
                ColdTierArgs(stack=args.stack, region=region, settings=spec.cold_tier),
                child,
            )
        identity = WorkloadIdentity(
            naming.platform_name(region, "workload-identity"),
            WorkloadIdentityArgs(
                region=region,
                cluster_name=self.cluster.cluster_name,
                namespaces=args.namespaces,
                cold_tier=self.cold_tier,
                model_sources=args.model_sources,
                kv_endpoints=args.kv_endpoints,
            ),
            child,
        )
        self.workload_role_arn = identity.role_arn
        self.workload_dependencies = [
            *groups.values(),
            addons,
            autoscaler,
            lb_controller,
            identity,
            *pipeline,
            *groups_controller,
        ]
        self.register_outputs(
            {
                "cluster_name": self.cluster.cluster_name,
                "endpoint": self.cluster.endpoint,
                "node_group_names": self.node_group_names,
                "workload_role_arn": self.workload_role_arn,
            }
        )

    def summary(self) -> dict[str, pulumi.Input[object]]:
        """What the stack exports about this region (the kubeconfig, a secret, goes separately)."""
        return {
            "cluster_name": self.cluster.cluster_name,
            "cluster_endpoint": self.cluster.endpoint,
            "node_groups": self.node_group_names,
            "cold_tier_bucket": self.cold_tier.bucket_name if self.cold_tier is not None else None,
            "workload_role_arn": self.workload_role_arn,
        }
