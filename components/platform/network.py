"""The region's VPC: created with pulumi-awsx, or an existing one adopted from config.

Why awsx.ec2.Vpc rather than hand-built subnets: it is Pulumi's own maintained
component for exactly this (subnet layout across zones, one NAT gateway per zone,
route tables, internet gateway), it is what Pulumi's EKS templates use, and its
layout is computed from the CIDR, so the program holds no subnet arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_awsx as awsx

from components import naming
from components.spec.region import Vpc

# Tags the AWS Load Balancer Controller reads to place load balancers
# (https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/subnet_discovery/).
INTERNAL_ELB_TAG = {"kubernetes.io/role/internal-elb": "1"}
PUBLIC_ELB_TAG = {"kubernetes.io/role/elb": "1"}

ALB_SUBNET_PREFIX = 27
"""The smallest subnet an Application Load Balancer accepts: a /27 with at least 8 free addresses
(Elastic Load Balancing user guide, "Subnets for your Application Load Balancer")."""


def subnet_masks(prefix: int) -> tuple[int, int]:
    """Each zone's private and public subnet prefix in a created /``prefix`` VPC: a private /N+3
    (pods take VPC addresses) and a public /N+6, never smaller than an ALB's /27. With four zones
    (the most a VPC spec allows) half the block is private and four public subnets of at most 1/64
    each, or four /27s (128 addresses) in a /22 (1024), fit in the rest."""
    return prefix + 3, min(prefix + 6, ALB_SUBNET_PREFIX)


@dataclass(frozen=True)
class NetworkArgs:
    region: str
    vpc: Vpc


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[Sequence[str]]
    public_subnet_ids: pulumi.Output[Sequence[str]]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:Network", name, None, opts)
        spec = args.vpc
        if spec.creates:
            assert spec.cidr is not None
            assert spec.availability_zones is not None
            private_mask, public_mask = subnet_masks(int(spec.cidr.split("/")[1]))
            vpc = awsx.ec2.Vpc(
                naming.platform_name(args.region, "vpc"),
                cidr_block=spec.cidr,
                availability_zone_names=list(spec.availability_zones),
                nat_gateways=awsx.ec2.NatGatewayConfigurationArgs(strategy=awsx.ec2.NatGatewayStrategy.ONE_PER_AZ),
                subnet_specs=[
                    awsx.ec2.SubnetSpecArgs(
                        type=awsx.ec2.SubnetType.PRIVATE, cidr_mask=private_mask, tags=INTERNAL_ELB_TAG
                    ),
                    awsx.ec2.SubnetSpecArgs(
                        type=awsx.ec2.SubnetType.PUBLIC, cidr_mask=public_mask, tags=PUBLIC_ELB_TAG
                    ),
                ],
                enable_dns_hostnames=True,
                enable_dns_support=True,
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.vpc_id = vpc.vpc_id
            self.private_subnet_ids = vpc.private_subnet_ids
            self.public_subnet_ids = vpc.public_subnet_ids
        else:
            assert spec.id is not None
            assert spec.private_subnet_ids is not None
            self.vpc_id = pulumi.Output.from_input(spec.id)
            self.private_subnet_ids = pulumi.Output.from_input(list(spec.private_subnet_ids))
            self.public_subnet_ids = pulumi.Output.from_input(list(spec.public_subnet_ids))
        self.register_outputs(
            {
                "vpc_id": self.vpc_id,
                "private_subnet_ids": self.private_subnet_ids,
                "public_subnet_ids": self.public_subnet_ids,
            }
        )
