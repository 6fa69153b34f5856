"""The connection to a cluster that exists already (``regions.<r>.existing_cluster``,
docs/existing-cluster.md): a Kubernetes provider from its kubeconfig, or for an EKS cluster named
by ``name``, from the endpoint and certificate EKS reports and a token from ``aws eks get-token``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.platform.cluster import kubernetes_provider
from components.spec.existing import ExistingCluster, read_kubeconfig

EXEC_API_VERSION = "client.authentication.k8s.io/v1beta1"
"""What ``aws eks get-token`` prints (aws/aws-cli awscli/customizations/eks/get_token.py)."""


def eks_kubeconfig(cluster_name: str, region: str, server: str, certificate_authority: str) -> dict[str, Any]:
    """A kubeconfig for an EKS cluster whose token ``aws eks get-token`` makes with the deployer's
    default AWS credentials, as pulumi-eks writes one (nodejs/eks/cluster/cluster.ts generateKubeconfig)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster_name, "cluster": {"server": server, "certificate-authority-data": certificate_authority}}
        ],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "current-context": cluster_name,
        "users": [
            {
                "name": cluster_name,
                "user": {
                    "exec": {
                        "apiVersion": EXEC_API_VERSION,
                        "command": "aws",
                        "args": [
                            "eks",
                            "get-token",
                            "--cluster-name",
                            cluster_name,
                            "--region",
                            region,
                            "--output",
                            "json",
                        ],
                    }
                },
            }
        ],
    }


@dataclass(frozen=True)
class ExistingClusterConnectionArgs:
    region: str
    existing: ExistingCluster


class ExistingClusterConnection(pulumi.ComponentResource):
    """The Kubernetes provider of a region whose cluster the program does not create. With ``name``
    the AWS provider comes from the parent (``providers={"aws": ...}``), for the EKS lookup."""

    cluster_name: pulumi.Output[str] | None
    """The EKS cluster's name (``name`` only): what Pod Identity associations and add-ons name."""
    vpc_id: pulumi.Output[str] | None
    """The EKS cluster's VPC (``name`` only), for the load balancer controller."""
    endpoint: pulumi.Output[str] | None
    kubeconfig: pulumi.Output[str]
    """The kubeconfig the provider uses (secret)."""
    kubernetes: k8s.Provider

    def __init__(
        self, name: str, args: ExistingClusterConnectionArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("inference-fleet:platform:ExistingCluster", name, None, opts)
        existing, region = args.existing, args.region
        self.cluster_name = self.vpc_id = self.endpoint = None
        if existing.name is not None:
            cluster = aws.eks.get_cluster_output(name=existing.name, opts=pulumi.InvokeOutputOptions(parent=self))
            # Read off the whole result: its nested values are typed only there.
            self.cluster_name = cluster.apply(lambda found: found.name)
            self.vpc_id = cluster.apply(lambda found: found.vpc_config.vpc_id)
            self.endpoint = cluster.apply(lambda found: found.endpoint)
            cluster_name = existing.name
            text = cluster.apply(
                lambda found: json.dumps(
                    eks_kubeconfig(cluster_name, region, found.endpoint, found.certificate_authorities[0].data)
                )
            )
            context = None
        else:
            assert existing.kubeconfig is not None  # the model holds exactly one of name and kubeconfig
            text = pulumi.Output.from_input(read_kubeconfig(existing.kubeconfig))
            context = existing.context
        self.kubeconfig = pulumi.Output.secret(text)
        self.kubernetes = kubernetes_provider(region, self.kubeconfig, self, context)
        self.register_outputs({"endpoint": self.endpoint, "kubeconfig": self.kubeconfig})
