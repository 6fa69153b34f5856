"""The AWS Load Balancer Controller (Helm, pinned) with its IAM role through EKS Pod Identity.

It turns the endpoints' Ingresses (one ALB per region, shared through an ingress
group) into load balancers with weighted target groups for canaries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import naming
from components.catalog import pins
from components.platform.addons import helm_release
from components.platform.policies import pod_identity_trust
from components.spec.region import Ingress

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "aws-load-balancer-controller"
CLUSTER_TAG = "elbv2.k8s.aws/cluster"


def controller_policy() -> dict[str, Any]:
    """What the controller calls for ALBs in IP target mode, with WAF and Shield integration off
    (the chart values below disable them). Mutations are limited to load balancers, target groups
    and security groups the controller tagged with its cluster tag."""
    owned = {"Null": {f"aws:ResourceTag/{CLUSTER_TAG}": "false"}}
    requested = {"Null": {f"aws:RequestTag/{CLUSTER_TAG}": "false"}}
    elb = "elasticloadbalancing"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ServiceLinkedRole",
                "Effect": "Allow",
                "Action": "iam:CreateServiceLinkedRole",
                "Resource": "*",
                "Condition": {"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}},
            },
            {
                "Sid": "Discover",
                "Effect": "Allow",
                "Action": [
                    "ec2:DescribeAccountAttributes",
                    "ec2:DescribeAddresses",
                    "ec2:DescribeAvailabilityZones",
                    "ec2:DescribeInternetGateways",
                    "ec2:DescribeVpcs",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeInstances",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeTags",
                    "ec2:DescribeRouteTables",
                    "ec2:GetSecurityGroupsForVpc",
                    f"{elb}:Describe*",
                    "acm:ListCertificates",
                    "acm:DescribeCertificate",
                ],
                "Resource": "*",
            },
            {
                "Sid": "CreateSecurityGroups",
                "Effect": "Allow",
                "Action": ["ec2:CreateSecurityGroup"],
                "Resource": "*",
            },
            {
                "Sid": "TagNewSecurityGroups",
                "Effect": "Allow",
                "Action": "ec2:CreateTags",
                "Resource": "arn:*:ec2:*:*:security-group/*",
                "Condition": {"StringEquals": {"ec2:CreateAction": "CreateSecurityGroup"}, **requested},
            },
            {
                "Sid": "ManageOwnSecurityGroups",
                "Effect": "Allow",
                "Action": [
                    "ec2:AuthorizeSecurityGroupIngress",
                    "ec2:RevokeSecurityGroupIngress",
                    "ec2:DeleteSecurityGroup",
                    "ec2:CreateTags",
                    "ec2:DeleteTags",
                ],
                "Resource": "*",
                "Condition": owned,
            },
            {
                # Node security groups: the controller opens them to its load balancers' groups.
                "Sid": "OpenNodesToLoadBalancers",
                "Effect": "Allow",
                "Action": ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"],
                "Resource": "*",
            },
            {
                "Sid": "CreateOwnLoadBalancers",
                "Effect": "Allow",
                "Action": [f"{elb}:CreateLoadBalancer", f"{elb}:CreateTargetGroup"],
                "Resource": "*",
                "Condition": requested,
            },
            {
                "Sid": "ListenersAndRules",
                "Effect": "Allow",
                "Action": [
                    f"{elb}:CreateListener",
                    f"{elb}:DeleteListener",
                    f"{elb}:ModifyListener",
                    f"{elb}:AddListenerCertificates",
                    f"{elb}:RemoveListenerCertificates",
                    f"{elb}:CreateRule",
                    f"{elb}:DeleteRule",
                    f"{elb}:ModifyRule",
                ],
                "Resource": "*",
            },
            {
                "Sid": "TagOwnResources",
                "Effect": "Allow",
                "Action": [f"{elb}:AddTags", f"{elb}:RemoveTags"],
                "Resource": [
                    "arn:*:elasticloadbalancing:*:*:targetgroup/*/*",
                    "arn:*:elasticloadbalancing:*:*:loadbalancer/app/*/*",
                    "arn:*:elasticloadbalancing:*:*:listener/app/*/*/*",
                    "arn:*:elasticloadbalancing:*:*:listener-rule/app/*/*/*",
                ],
            },
            {
                "Sid": "ManageOwnLoadBalancers",
                "Effect": "Allow",
                "Action": [
                    f"{elb}:ModifyLoadBalancerAttributes",
                    f"{elb}:SetIpAddressType",
                    f"{elb}:SetSecurityGroups",
                    f"{elb}:SetSubnets",
                    f"{elb}:DeleteLoadBalancer",
                    f"{elb}:ModifyTargetGroup",
                    f"{elb}:ModifyTargetGroupAttributes",
                    f"{elb}:DeleteTargetGroup",
                ],
                "Resource": "*",
                "Condition": owned,
            },
            {
                "Sid": "Targets",
                "Effect": "Allow",
                "Action": [f"{elb}:RegisterTargets", f"{elb}:DeregisterTargets"],
                "Resource": "arn:*:elasticloadbalancing:*:*:targetgroup/*/*",
            },
        ],
    }


def controller_values(cluster_name: str, region: str, vpc_id: str, ingress: Ingress) -> dict[str, Any]:
    return {
        "clusterName": cluster_name,
        "region": region,
        "vpcId": vpc_id,
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        "enableShield": False,
        "enableWaf": False,
        "enableWafv2": False,
        "createIngressClassResource": True,
        "ingressClass": naming.INGRESS_CLASS,
        "ingressClassParams": {
            "create": True,
            "spec": {"scheme": ingress.scheme, "group": {"name": naming.INGRESS_GROUP}},
        },
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
    }


@dataclass(frozen=True)
class LoadBalancerControllerArgs:
    region: str
    cluster_name: pulumi.Output[str]
    """Resolves once the cluster exists: the pod identity association needs the cluster."""
    vpc_id: pulumi.Input[str]
    ingress: Ingress
    kubernetes: k8s.Provider
    addons: pulumi.Resource
    """Pod Identity must be running before the controller starts."""


class LoadBalancerController(pulumi.ComponentResource):
    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: LoadBalancerControllerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:LoadBalancerController", name, None, opts)
        region = args.region
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            naming.platform_name(region, "lb-controller"),
            assume_role_policy=json.dumps(pod_identity_trust()),
            description=f"AWS Load Balancer Controller of the {region} cluster",
            opts=child,
        )
        aws.iam.RolePolicy(
            naming.platform_name(region, "lb-controller"),
            role=role.id,
            policy=json.dumps(controller_policy()),
            opts=child,
        )
        association = aws.eks.PodIdentityAssociation(
            naming.platform_name(region, "lb-controller"),
            cluster_name=args.cluster_name,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=role.arn,
            opts=child,
        )
        values = pulumi.Output.all(args.cluster_name, args.vpc_id).apply(
            lambda names: controller_values(names[0], region, names[1], args.ingress)
        )
        helm_release(
            naming.platform_name(region, "lb-controller"),
            pins().charts.aws_load_balancer_controller,
            values,
            NAMESPACE,
            pulumi.ResourceOptions(parent=self, provider=args.kubernetes, depends_on=[association, args.addons]),
        )
        self.role_arn = role.arn
        self.register_outputs({"role_arn": self.role_arn})
