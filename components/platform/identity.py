"""The IAM identity of inference pods, through EKS Pod Identity (docs/design.md, decision 11; eks_efa.md §5.2)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components import naming
from components.platform.cold_tier import ColdTierBucket
from components.platform.policies import pod_identity_trust, s3_location, workload_access


@dataclass(frozen=True)
class KvEndpoint:
    """An endpoint that writes the region's cold tier: its own role, for its own prefix."""

    name: str
    namespace: str
    model_source: str | None


@dataclass(frozen=True)
class WorkloadIdentityArgs:
    region: str
    cluster_name: pulumi.Input[str]
    namespaces: tuple[str, ...]
    """Every namespace the region's endpoints use; each gets the binding of the workload service account."""
    cold_tier: ColdTierBucket | None
    """The region's cold tier, or None."""
    model_sources: tuple[str, ...]
    """s3:// URIs of the weights the region's endpoints sync; read-only."""
    kv_endpoints: tuple[KvEndpoint, ...] = ()
    """Endpoints of the region that write its cold tier (needs ``cold_tier``)."""


def pod_identity_trust_policy(parent: pulumi.Resource) -> pulumi.Output[str]:
    """The trust policy of a Pod Identity role, as JSON, for the account of ``parent``'s AWS provider
    (the region's, inherited through ``parent``): the account is asked of STS, never typed."""
    caller = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=parent))
    return caller.account_id.apply(lambda account: json.dumps(pod_identity_trust(account)))


def controller_identity(
    parent: pulumi.Resource,
    name: str,
    description: str,
    policy: pulumi.Input[str],
    cluster_name: pulumi.Input[str],
    namespace: str,
    service_account: str,
) -> tuple[aws.iam.Role, aws.eks.PodIdentityAssociation]:
    """The IAM role one ServiceAccount of the platform (a controller's) assumes through EKS Pod
    Identity, its inline ``policy`` and the association; all three named ``name``, children of ``parent``."""
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(name, assume_role_policy=pod_identity_trust_policy(parent), description=description, opts=child)
    aws.iam.RolePolicy(name, role=role.id, policy=policy, opts=child)
    association = aws.eks.PodIdentityAssociation(
        name,
        cluster_name=cluster_name,
        namespace=namespace,
        service_account=service_account,
        role_arn=role.arn,
        opts=child,
    )
    return role, association


def kv_policy(cold_tier: ColdTierBucket, region: str, sources: tuple[str, ...], prefix: str) -> pulumi.Output[str]:
    def document(arns: list[str]) -> str:
        return json.dumps(workload_access(arns[0], arns[1], region, sources, kv_prefix=prefix))

    return pulumi.Output.all(cold_tier.bucket_arn, cold_tier.kms_key_arn).apply(document)


class WorkloadIdentity(pulumi.ComponentResource):
    """The IAM roles of the region's inference pods, through EKS Pod Identity.

    One role bound to ``inference-workload`` in each namespace reads the model sources. Each
    endpoint that writes the cold tier gets a role of its own, bound to its own ServiceAccount
    (``<endpoint>-kv``), which only the pods that write the tier run as: KV objects read and
    written only under ``mooncake-kv/<endpoint>/``, the object tier's startup probe key, the
    bucket's listing (so S3 answers a missing key with 404, docs/cold-tier.md), the cold tier's
    key only through S3, and its own model source. The AWS provider comes from the parent; with
    nothing to grant, a role has no policy at all.
    """

    role_arn: pulumi.Output[str]
    kv_role_arns: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: WorkloadIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:WorkloadIdentity", name, None, opts)
        for uri in args.model_sources:
            s3_location(uri)  # refuse a bad source now, not inside the policy's apply
        if args.kv_endpoints and args.cold_tier is None:
            raise ValueError(f"endpoints write a cold tier that {args.region} does not have")
        region = args.region
        self._trust = pod_identity_trust_policy(self)

        role = self._role(naming.platform_name(region, "workload"), f"Inference pods in {region}")
        if args.model_sources:
            self._policy(
                naming.platform_name(region, "workload", "access"),
                role,
                json.dumps(workload_access(None, None, region, args.model_sources)),
            )
        for namespace in sorted(set(args.namespaces)):
            self._bind(
                naming.platform_name(region, "workload", namespace),
                args,
                namespace,
                naming.WORKLOAD_SERVICE_ACCOUNT,
                role,
            )

        self.kv_role_arns = {}
        cold_tier = args.cold_tier
        for endpoint in args.kv_endpoints:
            assert cold_tier is not None
            kv_role = self._role(naming.platform_name(region, "kv", endpoint.name), f"{endpoint.name} in {region}")
            sources = (endpoint.model_source,) if endpoint.model_source else ()
            prefix = naming.kv_prefix(endpoint.name)
            self._policy(
                naming.platform_name(region, "kv", endpoint.name),
                kv_role,
                kv_policy(cold_tier, region, sources, prefix),
            )
            account = naming.kv_service_account(endpoint.name)
            self._bind(naming.platform_name(region, "kv", endpoint.name), args, endpoint.namespace, account, kv_role)
            self.kv_role_arns[endpoint.name] = kv_role.arn

        self.role_arn = role.arn
        self.register_outputs({"role_arn": self.role_arn, "kv_role_arns": self.kv_role_arns})

    def _role(self, name: str, description: str) -> aws.iam.Role:
        return aws.iam.Role(
            name,
            description=f"{description}, through EKS Pod Identity",
            assume_role_policy=self._trust,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _policy(self, name: str, role: aws.iam.Role, policy: pulumi.Input[str]) -> None:
        aws.iam.RolePolicy(name, role=role.id, policy=policy, opts=pulumi.ResourceOptions(parent=self))

    def _bind(
        self, name: str, args: WorkloadIdentityArgs, namespace: str, service_account: str, role: aws.iam.Role
    ) -> None:
        aws.eks.PodIdentityAssociation(
            name,
            cluster_name=args.cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=role.arn,
            opts=pulumi.ResourceOptions(parent=self),
        )
