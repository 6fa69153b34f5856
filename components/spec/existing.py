"""A region whose cluster exists already (``regions.<r>.existing_cluster``, docs/existing-cluster.md):
which cluster, how the program reaches its API, and which platform add-ons it runs already."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from components.spec.base import LabelKey, LabelValue, NonEmptyStr, SpecModel, fail, looks_like

if TYPE_CHECKING:  # the region model imports this module
    from components.spec.region import Region

AddonChoice = Literal["install", "present"]
INSTALL: AddonChoice = "install"
PRESENT: AddonChoice = "present"

ENV_PREFIX = "env:"
"""``kubeconfig: env:VAR``: the kubeconfig's text is the value of the environment variable VAR."""

_EKS_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
"""EKS's cluster name pattern (EKS API reference, CreateCluster ``name``)."""


EksClusterName = Annotated[
    str, looks_like(_EKS_CLUSTER_NAME, "an EKS cluster name (1-100 letters, digits, '-' and '_', e.g. ml-platform)")
]

_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$")


def _bucket_name(value: str) -> str:
    if not _BUCKET_NAME.match(value) or ".." in value:
        raise fail(
            "bucket_name",
            "must be an S3 bucket name (3-63 lowercase letters, digits, '-' and '.'), got {value!r}",
            value=value,
        )
    return value


BucketName = Annotated[str, AfterValidator(_bucket_name)]
KmsKeyArn = Annotated[str, looks_like(_KMS_KEY_ARN, "arn:aws:kms:<region>:<account>:key/<id> (a key, not an alias)")]


def _addon(description: str) -> AddonChoice:
    value: AddonChoice = Field(
        INSTALL,
        description=f"{description} install: the program installs it, as in a region whose cluster it creates; "
        "present: the cluster runs it already, the program installs nothing of it and the placement check "
        "trusts it is there.",
    )
    return value


class Addons(SpecModel):
    """Each platform add-on the program would install, installed or already present. Only those a
    region needs are looked at (the EFA plugin with an EFA group, LeaderWorkerSet with a split role
    spanning nodes, the metrics pipeline's parts with the pipeline)."""

    coredns: AddonChoice = _addon("CoreDNS, as the EKS add-on (needs an EKS cluster: `name`).")
    eks_pod_identity_agent: AddonChoice = _addon(
        "The EKS Pod Identity agent, as the EKS add-on (needs an EKS cluster: `name`)."
    )
    nvidia_device_plugin: AddonChoice = _addon("The NVIDIA device plugin (Helm), with an NVIDIA group.")
    efa_device_plugin: AddonChoice = _addon("The EFA device plugin (Helm), with an EFA group.")
    cluster_autoscaler: AddonChoice = _addon(
        "The Cluster Autoscaler (Helm, with its IAM role through Pod Identity: needs `name`); the check places "
        "pods on each group's max_size either way."
    )
    aws_load_balancer_controller: AddonChoice = _addon(
        "The AWS Load Balancer Controller and its CRDs (Helm, with its IAM role through Pod Identity: needs "
        "`name`), which turns the endpoints' Ingresses into the region's ALB."
    )
    lws: AddonChoice = _addon("LeaderWorkerSet's controller and CRDs (Helm), with a split role spanning nodes.")
    keda: AddonChoice = _addon("KEDA and its CRDs (Helm), with the metrics pipeline.")
    prometheus: AddonChoice = _addon("Prometheus (Helm), with the metrics pipeline.")
    metrics_server: AddonChoice = _addon("metrics-server (Helm), with the metrics pipeline.")
    dcgm_exporter: AddonChoice = _addon("The DCGM exporter (Helm), with the metrics pipeline and NVIDIA nodes.")
    grafana: AddonChoice = _addon("Grafana (Helm), with the metrics pipeline and metrics.grafana.")

    def installs(self, addon: str) -> bool:
        choice: AddonChoice = getattr(self, addon)
        return choice == INSTALL


NEEDS_EKS = ("coredns", "eks_pod_identity_agent", "cluster_autoscaler", "aws_load_balancer_controller")
"""Add-ons the program installs through the EKS API or with an IAM role bound by EKS Pod Identity."""


class ExistingCluster(SpecModel):
    """The cluster the region's endpoints run on, made outside this program (Terraform, eksctl, ...)."""

    name: EksClusterName | None = Field(
        None,
        description="An EKS cluster in the region: its API endpoint and certificate are read from EKS, the "
        "program's kubeconfig runs `aws eks get-token`; its access entries stay as they are.",
    )
    kubeconfig: NonEmptyStr | None = Field(
        None,
        description="Any Kubernetes cluster: a kubeconfig file's path (relative to the project directory; read "
        "when the program runs), or env:VAR for a kubeconfig held in the environment variable VAR. Nothing of "
        "AWS is created or read in such a region (docs/existing-cluster.md says what that rules out).",
    )
    context: NonEmptyStr | None = Field(
        None, description="The kubeconfig's context to use (only with kubeconfig); its current context by default."
    )
    addons: Addons = Field(
        default_factory=Addons,
        description="Per platform add-on: install (the default) or present (the cluster runs it already).",
    )

    def _rules(self) -> Iterator[PydanticCustomError]:
        if (self.name is None) == (self.kubeconfig is None):
            yield fail(
                "existing_cluster_shape",
                "give either name (an EKS cluster of the region) or kubeconfig (a path, or env:VAR), exactly one",
            )
        if self.context is not None and self.kubeconfig is None:
            yield fail("existing_cluster_context", "is only used with kubeconfig", at="context")

    @property
    def eks(self) -> bool:
        """The cluster is an EKS cluster the program may call EKS about (``name``)."""
        return self.name is not None


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be read; the message says why and how to fix it."""


PROJECT_DIR = Path(__file__).resolve().parents[2]
"""Where Pulumi.yaml is, and the program: a relative kubeconfig path starts here whatever the
current directory (Pulumi runs the program here; fleetctl may run anywhere)."""


def read_kubeconfig(source: str, base: Path | None = None) -> str:
    """The text of the kubeconfig ``source`` names: a file (relative to ``base``, else the project
    directory) or ``env:VAR``."""
    if source.startswith(ENV_PREFIX):
        variable = source[len(ENV_PREFIX) :]
        text = os.environ.get(variable)
        if not text:
            raise KubeconfigError(
                f"names the environment variable {variable}, which is {'empty' if text == '' else 'not set'}: "
                f"export {variable} with the kubeconfig's text, or give the kubeconfig's path"
            )
        return text
    path = Path(source).expanduser()
    if not path.is_absolute():
        path = (base or PROJECT_DIR) / path
    try:
        return path.read_text()
    except FileNotFoundError:
        raise KubeconfigError(
            f"{str(path)!r} does not exist: write the cluster's kubeconfig there, or give its path "
            "(relative to the project directory) or env:VAR"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise KubeconfigError(f"{str(path)!r} cannot be read ({error}): give a readable kubeconfig file") from None


TaintEffect = Literal["NoSchedule", "NoExecute", "PreferNoSchedule"]


class NodeTaint(SpecModel):
    """A taint the nodes of a described group carry; the endpoints placed there tolerate it."""

    key: LabelKey = Field(description="The taint's key (e.g. nvidia.com/gpu).")
    value: LabelValue = Field("", description="The taint's value; empty for none.")
    effect: TaintEffect = Field("NoSchedule", description="NoSchedule, NoExecute or PreferNoSchedule.")


NodeLabels = dict[LabelKey, LabelValue]


def existing_region_rules(region: Region, existing: ExistingCluster) -> Iterator[PydanticCustomError]:
    """The rules of a region on an existing cluster (``Region._rules``)."""
    if region.vpc is not None:
        yield fail(
            "existing_cluster_vpc",
            "is not used with existing_cluster (the cluster has its network already): remove it",
            at="vpc",
        )
    if region.cluster_access.admins or region.cluster_access.public_access_cidrs:
        yield fail(
            "existing_cluster_access",
            "is not used with existing_cluster: the program leaves an existing cluster's access entries and "
            "endpoint as they are; remove it",
            at="cluster_access",
        )
    for name, group in region.node_groups.items():
        if not group.labels:
            yield fail(
                "node_group_labels_required",
                "is required with existing_cluster: the labels that select this group's nodes "
                "(e.g. {{eks.amazonaws.com/nodegroup: {name}}})",
                at=f"node_groups.{name}.labels",
                name=name,
            )
        for size in ("min_size", "desired_size"):
            if getattr(group, size) is not None:
                yield fail(
                    "node_group_size_described",
                    "is not used with existing_cluster (the program never sizes an existing group; max_size "
                    "says how many nodes it can have): remove it",
                    at=f"node_groups.{name}.{size}",
                )
    if not existing.eks:
        yield from _kubeconfig_rules(region, existing)
    cold_tier = region.cold_tier
    if cold_tier.enabled and existing.eks and (cold_tier.bucket is None or cold_tier.kms_key_arn is None):
        missing = "bucket" if cold_tier.bucket is None else "kms_key_arn"
        yield fail(
            "existing_cluster_cold_tier",
            "is required with existing_cluster: the program creates no bucket there; name the existing bucket "
            "(bucket) and the KMS key it encrypts with (kms_key_arn), or set enabled false",
            at=f"cold_tier.{missing}",
        )
    elif cold_tier.enabled and not existing.eks:
        yield fail(
            "existing_cluster_needs_eks",
            "needs an IAM role bound by EKS Pod Identity for the pods that write it, which a cluster given by "
            "kubeconfig has not: set enabled false, or give the EKS cluster's name instead of kubeconfig",
            at="cold_tier.enabled",
        )


def _kubeconfig_rules(region: Region, existing: ExistingCluster) -> Iterator[PydanticCustomError]:
    """What a region reached by kubeconfig alone cannot have: nothing there may call AWS."""
    for addon in NEEDS_EKS:
        if existing.addons.installs(addon):
            yield fail(
                "existing_cluster_needs_eks",
                "cannot be installed on a cluster given by kubeconfig (it is installed through EKS or with an "
                "IAM role EKS Pod Identity binds): set it to present if the cluster runs it, or give the EKS "
                "cluster's name instead of kubeconfig",
                at=f"existing_cluster.addons.{addon}",
            )
    if region.metrics.amp_workspace_arn is not None:
        yield fail(
            "existing_cluster_needs_eks",
            "needs an IAM role bound by EKS Pod Identity, which a cluster given by kubeconfig has not: remove "
            "it, or give the EKS cluster's name instead of kubeconfig",
            at="metrics.amp_workspace_arn",
        )
