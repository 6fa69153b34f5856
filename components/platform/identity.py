"""The IAM identity of inference pods, through EKS Pod Identity (DESIGN decision 11; eks_efa.md §5.2)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components import naming
from components.platform.cold_tier import ColdTier
from components.platform.policies import pod_identity_trust, s3_location, workload_access


@dataclass(frozen=True)
class WorkloadIdentityArgs:
    region: str
    cluster_name: pulumi.Input[str]
    namespaces: tuple[str, ...]
    """Every namespace the region's endpoints use; each gets the binding of the workload service account."""
    cold_tier: ColdTier | None
    """The region's cold tier, or None: then only the model sources are granted."""
    model_sources: tuple[str, ...]
    """s3:// URIs of the weights the region's endpoints sync; read-only."""


class WorkloadIdentity(pulumi.ComponentResource):
    """One role for the region's inference pods, bound to ``inference-workload`` in each namespace.

    The AWS provider comes from the parent. The role's access is least privilege: KV objects only
    under ``mooncake-kv/`` (listing limited to it by condition), the cold tier's key only through
    S3, and read-only model sources. With nothing to grant, the role has no policy at all.
    """

    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: WorkloadIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:WorkloadIdentity", name, None, opts)
        for uri in args.model_sources:
            s3_location(uri)  # refuse a bad source now, not inside the policy's apply

        role = aws.iam.Role(
            naming.platform_name(args.region, "workload"),
            description=f"Inference pods in {args.region}, through EKS Pod Identity",
            assume_role_policy=json.dumps(pod_identity_trust()),
            opts=pulumi.ResourceOptions(parent=self),
        )

        cold_tier = args.cold_tier
        policy: pulumi.Input[str] | None
        if cold_tier is not None:
            policy = pulumi.Output.all(cold_tier.bucket_arn, cold_tier.kms_key_arn).apply(
                lambda arns: json.dumps(workload_access(arns[0], arns[1], args.region, args.model_sources))
            )
        elif args.model_sources:
            policy = json.dumps(workload_access(None, None, args.region, args.model_sources))
        else:
            policy = None  # IAM refuses a policy without statements
        if policy is not None:
            aws.iam.RolePolicy(
                naming.platform_name(args.region, "workload", "access"),
                role=role.id,
                policy=policy,
                opts=pulumi.ResourceOptions(parent=self),
            )

        for namespace in sorted(set(args.namespaces)):
            aws.eks.PodIdentityAssociation(
                naming.platform_name(args.region, "workload", namespace),
                cluster_name=args.cluster_name,
                namespace=namespace,
                service_account=naming.WORKLOAD_SERVICE_ACCOUNT,
                role_arn=role.arn,
                opts=pulumi.ResourceOptions(parent=self),
            )

        self.role_arn = role.arn
        self.register_outputs({"role_arn": self.role_arn})
