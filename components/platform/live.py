"""What EKS reports about a region's deployed cluster when the program runs (preview and update).

Two inputs cannot be taken from the stack file or from Pulumi's state alone:

* A node group's desired size. Cluster Autoscaler owns it after creation, so Pulumi's state holds
  the size at creation, and terraform-provider-aws ``resourceNodeGroupUpdate``
  (internal/service/eks/node_group.go, the provider pulumi-aws 7.51.1 bundles) sends the whole
  scaling config (``expandNodegroupScalingConfig``: desired, min and max) in
  ``UpdateNodegroupConfig`` whenever any of it changes. pulumi-eks's ``ignoreScalingChanges``
  only makes the engine send the state's old desired size (``ignoreChanges:
  ["scalingConfig.desiredSize"]``, pulumi/pulumi-eks nodejs/eks/nodes/nodegroup.ts
  createManagedNodeGroupInternal, v4.3.0 and main at 7bf0c1b): a min/max edit then resets a
  group the autoscaler grew, or fails when the new min_size exceeds the stale size. The program
  reads the live size instead and sends it, clamped into the new [min_size, max_size].
* The control plane's version, which may move one minor per update (components/spec/upgrades.py).

Each read starts from ``aws.eks.get_clusters`` (a list, never an error), so a region whose cluster
does not exist yet, on a first preview or `up`, reads nothing and uses the stack file's values.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from components.spec.upgrades import upgrade_problem


def clamped_desired_size(live: int | None, min_size: int, max_size: int, at_creation: int) -> int:
    """The desired size to send: the group's live size kept within [min_size, max_size], or the
    stack file's ``desired_size`` for a group that does not exist yet."""
    if live is None:
        return at_creation
    return min(max(live, min_size), max_size)


def checked_version(deployed: str | None, wanted: str, cluster_name: str) -> str:
    """``wanted``, when EKS can move the deployed cluster there in one update; else a RunError."""
    problem = upgrade_problem(deployed, wanted, f"cluster {cluster_name}") if deployed is not None else None
    if problem is not None:
        raise pulumi.RunError(problem)
    return wanted


def _names(found: Sequence[str] | None) -> list[str]:
    return list(found or [])


def _first_desired(configs: Sequence[aws.eks.outputs.GetNodeGroupScalingConfigResult] | None) -> int | None:
    return int(configs[0].desired_size) if configs else None


class LiveCluster:
    """The region's deployed EKS cluster as EKS describes it, or nothing before it exists."""

    def __init__(self, cluster_name: str, parent: pulumi.Resource) -> None:
        self.cluster_name = cluster_name
        self._parent = parent
        options = pulumi.InvokeOutputOptions(parent=parent)
        listed = aws.eks.get_clusters_output(opts=options).names.apply(_names)
        self.exists: pulumi.Output[bool] = listed.apply(lambda names: cluster_name in names)
        self.version: pulumi.Output[str | None] = self.exists.apply(
            lambda exists: aws.eks.get_cluster_output(name=cluster_name, opts=options).version if exists else None
        )
        self._node_groups: pulumi.Output[list[str]] = self.exists.apply(
            lambda exists: (
                aws.eks.get_node_groups_output(cluster_name=cluster_name, opts=options).names.apply(_names)
                if exists
                else []
            )
        )

    def desired_size(self, node_group_name: str, parent: pulumi.Resource) -> pulumi.Output[int | None]:
        """The managed node group's live desired size, None while it does not exist."""
        options = pulumi.InvokeOutputOptions(parent=parent)
        return self._node_groups.apply(
            lambda names: (
                aws.eks.get_node_group_output(
                    cluster_name=self.cluster_name, node_group_name=node_group_name, opts=options
                ).scaling_configs.apply(_first_desired)
                if node_group_name in names
                else None
            )
        )

    def version_to_deploy(self, wanted: str) -> pulumi.Output[str]:
        """``wanted`` once the deployed version allows it (one minor forward at most)."""
        return self.version.apply(lambda deployed: checked_version(deployed, wanted, self.cluster_name))
