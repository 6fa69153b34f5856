"""The AWS Load Balancer Controller (Helm, pinned) with its IAM role through EKS Pod Identity,
and the chart's CRDs applied as resources of their own before the release.

It turns the endpoints' Ingresses (one ALB per region, shared through an ingress
group) into load balancers with weighted target groups for canaries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import naming
from components.catalog import pins
from components.platform.addons import helm_release, vendored_crds
from components.platform.identity import controller_identity
from components.spec.region import Ingress

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "aws-load-balancer-controller"
CLUSTER_TAG = "elbv2.k8s.aws/cluster"


def controller_policy(partition: str = "aws") -> dict[str, Any]:
    """The controller's published IAM policy, statement for statement: docs/install/iam_policy.json
    of kubernetes-sigs/aws-load-balancer-controller at v3.4.2, the pinned chart's controller
    (tests/unit/test_load_balancer_policy.py holds it to a copy of that file). ARNs carry the region's
    partition, as the published iam_policy_cn.json and iam_policy_us-gov.json do.

    Left out: the waf-regional:*, wafv2:* and shield:* actions and elasticloadbalancing:SetWebAcl
    (the permission WAF's AssociateWebACL checks on the ALB). The controller calls them only from
    its WAF Classic, WAFv2 and Shield add-ons, which controller_values() turns off: the flags
    --enable-waf, --enable-wafv2 and --enable-shield gate those synthesizers (pkg/deploy/stack_deployer.go).

    Load balancers, target groups and security groups are changed only while they carry the
    controller's cluster tag; their tags only at creation (CreateAction) or without touching
    the cluster tag itself."""
    arn = f"arn:{partition}"
    elb = "elasticloadbalancing"
    target_groups = f"{arn}:{elb}:*:*:targetgroup/*/*"
    load_balancers = [target_groups, f"{arn}:{elb}:*:*:loadbalancer/net/*/*", f"{arn}:{elb}:*:*:loadbalancer/app/*/*"]
    security_groups = f"{arn}:ec2:*:*:security-group/*"
    requested = f"aws:RequestTag/{CLUSTER_TAG}"
    owned = f"aws:ResourceTag/{CLUSTER_TAG}"
    tagged_in_request = {"Null": {requested: "false"}}
    owned_resource = {"Null": {owned: "false"}}
    owned_cluster_tag_untouched = {"Null": {requested: "true", owned: "false"}}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ServiceLinkedRole",
                "Effect": "Allow",
                "Action": ["iam:CreateServiceLinkedRole"],
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
                    "ec2:DescribeVpcPeeringConnections",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeInstances",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeTags",
                    "ec2:GetCoipPoolUsage",
                    "ec2:DescribeCoipPools",
                    "ec2:GetSecurityGroupsForVpc",
                    "ec2:DescribeIpamPools",
                    "ec2:DescribeRouteTables",
                    f"{elb}:DescribeLoadBalancers",
                    f"{elb}:DescribeLoadBalancerAttributes",
                    f"{elb}:DescribeListeners",
                    f"{elb}:DescribeListenerCertificates",
                    f"{elb}:DescribeSSLPolicies",
                    f"{elb}:DescribeRules",
                    f"{elb}:DescribeTargetGroups",
                    f"{elb}:DescribeTargetGroupAttributes",
                    f"{elb}:DescribeTargetHealth",
                    f"{elb}:DescribeTags",
                    f"{elb}:DescribeTrustStores",
                    f"{elb}:DescribeListenerAttributes",
                    f"{elb}:DescribeCapacityReservation",
                ],
                "Resource": "*",
            },
            {
                # The published statement also lists the WAF, WAFv2 and Shield actions (see above).
                "Sid": "CertificatesAndAuthentication",
                "Effect": "Allow",
                "Action": [
                    "cognito-idp:DescribeUserPoolClient",
                    "acm:ListCertificates",
                    "acm:DescribeCertificate",
                    "iam:ListServerCertificates",
                    "iam:GetServerCertificate",
                ],
                "Resource": "*",
            },
            {
                # Node security groups: the controller opens them to its load balancers' groups.
                "Sid": "OpenNodesToLoadBalancers",
                "Effect": "Allow",
                "Action": ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"],
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
                "Action": ["ec2:CreateTags"],
                "Resource": security_groups,
                "Condition": {"StringEquals": {"ec2:CreateAction": "CreateSecurityGroup"}, **tagged_in_request},
            },
            {
                "Sid": "RetagOwnSecurityGroups",
                "Effect": "Allow",
                "Action": ["ec2:CreateTags", "ec2:DeleteTags"],
                "Resource": security_groups,
                "Condition": owned_cluster_tag_untouched,
            },
            {
                "Sid": "ManageOwnSecurityGroups",
                "Effect": "Allow",
                "Action": [
                    "ec2:AuthorizeSecurityGroupIngress",
                    "ec2:RevokeSecurityGroupIngress",
                    "ec2:DeleteSecurityGroup",
                ],
                "Resource": "*",
                "Condition": owned_resource,
            },
            {
                "Sid": "CreateOwnLoadBalancers",
                "Effect": "Allow",
                "Action": [f"{elb}:CreateLoadBalancer", f"{elb}:CreateTargetGroup"],
                "Resource": "*",
                "Condition": tagged_in_request,
            },
            {
                "Sid": "CreateAndDeleteListenersAndRules",
                "Effect": "Allow",
                "Action": [
                    f"{elb}:CreateListener",
                    f"{elb}:DeleteListener",
                    f"{elb}:CreateRule",
                    f"{elb}:DeleteRule",
                ],
                "Resource": "*",
            },
            {
                "Sid": "RetagOwnLoadBalancers",
                "Effect": "Allow",
                "Action": [f"{elb}:AddTags", f"{elb}:RemoveTags"],
                "Resource": load_balancers,
                "Condition": owned_cluster_tag_untouched,
            },
            {
                "Sid": "TagListenersAndRules",
                "Effect": "Allow",
                "Action": [f"{elb}:AddTags", f"{elb}:RemoveTags"],
                "Resource": [
                    f"{arn}:{elb}:*:*:listener/net/*/*/*",
                    f"{arn}:{elb}:*:*:listener/app/*/*/*",
                    f"{arn}:{elb}:*:*:listener-rule/net/*/*/*",
                    f"{arn}:{elb}:*:*:listener-rule/app/*/*/*",
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
                    f"{elb}:ModifyListenerAttributes",
                    f"{elb}:ModifyCapacityReservation",
                    f"{elb}:ModifyIpPools",
                ],
                "Resource": "*",
                "Condition": owned_resource,
            },
            {
                "Sid": "TagNewLoadBalancers",
                "Effect": "Allow",
                "Action": [f"{elb}:AddTags"],
                "Resource": load_balancers,
                "Condition": {
                    "StringEquals": {f"{elb}:CreateAction": ["CreateTargetGroup", "CreateLoadBalancer"]},
                    **tagged_in_request,
                },
            },
            {
                "Sid": "Targets",
                "Effect": "Allow",
                "Action": [f"{elb}:RegisterTargets", f"{elb}:DeregisterTargets"],
                "Resource": target_groups,
            },
            {
                # SetRulePriorities: the rules of the shared ALB are renumbered whenever an Ingress
                # of the group comes or goes. The published statement also has SetWebAcl (see above).
                "Sid": "ModifyListenersAndRules",
                "Effect": "Allow",
                "Action": [
                    f"{elb}:ModifyListener",
                    f"{elb}:AddListenerCertificates",
                    f"{elb}:RemoveListenerCertificates",
                    f"{elb}:ModifyRule",
                    f"{elb}:SetRulePriorities",
                ],
                "Resource": "*",
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
    cluster_name: pulumi.Output[str] | None
    """Resolves once the cluster exists: the pod identity association needs the cluster (None only with
    ``crds_only``)."""
    vpc_id: pulumi.Input[str] | None
    ingress: Ingress
    kubernetes: k8s.Provider
    addons: pulumi.Resource
    """Pod Identity must be running before the controller starts."""
    crds_only: bool = False
    """The controller runs already (``existing_cluster.addons.aws_load_balancer_controller: crds``): its
    CRDs only, no IAM role, no release."""


class LoadBalancerController(pulumi.ComponentResource):
    role_arn: pulumi.Output[str] | None
    crds: list[k8s.apiextensions.v1.CustomResourceDefinition]

    def __init__(self, name: str, args: LoadBalancerControllerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:LoadBalancerController", name, None, opts)
        region = args.region
        chart = pins().charts.aws_load_balancer_controller
        if args.crds_only:
            self.crds = vendored_crds(region, "lb-controller", chart, self, args.kubernetes)
            self.role_arn = None
            self.register_outputs({})
            return
        assert args.cluster_name is not None  # validation: installed only on EKS
        assert args.vpc_id is not None
        role, association = controller_identity(
            self,
            naming.platform_name(region, "lb-controller"),
            f"AWS Load Balancer Controller of the {region} cluster",
            json.dumps(controller_policy(naming.aws_partition(region))),
            args.cluster_name,
            NAMESPACE,
            SERVICE_ACCOUNT,
        )
        values = pulumi.Output.all(args.cluster_name, args.vpc_id).apply(
            lambda names: controller_values(names[0], region, names[1], args.ingress)
        )
        # Deleting a CRD would delete the TargetGroupBindings behind each route: they stay (vendored_crds).
        self.crds = vendored_crds(region, "lb-controller", chart, self, args.kubernetes)
        helm_release(
            naming.platform_name(region, "lb-controller"),
            chart,
            values,
            NAMESPACE,
            pulumi.ResourceOptions(
                parent=self, provider=args.kubernetes, depends_on=[association, args.addons, *self.crds]
            ),
            skip_crds=True,
        )
        self.role_arn = role.arn
        self.register_outputs({"role_arn": self.role_arn})
