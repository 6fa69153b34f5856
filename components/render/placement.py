"""One endpoint in one region, with every fact its rendering needs (plain data, no Outputs)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from components import naming
from components.catalog import instance_catalog
from components.scheduling import Taint, node_taints
from components.spec import StackSpec
from components.spec.checks import Placement
from components.spec.endpoint import Endpoint
from components.spec.region import Ingress, Region


@dataclass(frozen=True)
class GroupFacts:
    """What a pod needs to know of the node group it runs on."""

    node_group: str | None
    taints: tuple[Taint, ...] = ()
    """Taints of the node group's nodes, which the pods tolerate."""
    zone: str | None = None
    """The node group's one availability zone, where it has one (EFA groups, capacity blocks)."""
    efa_interfaces: int = 0
    """EFA devices each node of the group offers (0 on groups without EFA)."""
    labels: tuple[tuple[str, str], ...] | None = None
    """The labels that select the group's nodes, on an existing cluster (``node_groups.<g>.labels``);
    None where the program labels the nodes itself."""


@dataclass(frozen=True)
class PlacedEndpoint:
    name: str
    spec: Endpoint
    region: str
    image: str
    """The image pulled in this region (explicit override or ECR rewrite applied)."""
    node_group: str | None
    taints: tuple[Taint, ...]
    """Taints of the node group's nodes, which the pods tolerate."""
    zone: str | None
    """The node group's one availability zone, where it has one (EFA groups, capacity blocks)."""
    efa_interfaces: int
    """EFA devices each node of the group offers (0 on groups without EFA)."""
    ingress: Ingress
    role_groups: tuple[tuple[str, GroupFacts], ...] = ()
    """The node group of each split role (``mooncake.roles``)."""
    group_labels: tuple[tuple[str, str], ...] | None = None
    """The labels that select the node group's nodes on an existing cluster; None where the
    program labels them (its pods then select ``NODE_GROUP_LABEL``)."""

    @property
    def namespace(self) -> str:
        return self.spec.namespace

    def labels(self, role: naming.Role) -> dict[str, str]:
        """The label vocabulary of ``role``, plus the endpoint's own labels."""
        return {**naming.common_labels(self.name, role), **self.spec.labels}

    def for_role(self, role: str) -> PlacedEndpoint:
        """The endpoint as ``role``'s pods run it: the role's GPUs, args and resources
        (``Endpoint.role_spec``) on the role's node group. Every renderer of a role's pods takes
        this view, so a view of the endpoint (a canary's) gets its roles' shapes alike."""
        facts = dict(self.role_groups).get(role)
        spec = self.spec.role_spec(role)
        if facts is None:
            return dataclasses.replace(self, spec=spec)
        return dataclasses.replace(
            self,
            spec=spec,
            node_group=facts.node_group,
            taints=facts.taints,
            zone=facts.zone,
            efa_interfaces=facts.efa_interfaces,
            group_labels=facts.labels,
        )


def group_facts(region: Region, group_name: str | None) -> GroupFacts:
    if group_name is None:
        return GroupFacts(None)
    group = region.node_groups[group_name]
    facts = instance_catalog().instance_types[group.instance_types[0]]
    if region.existing:
        # The nodes are the cluster's own: their labels and taints as the group describes them.
        return GroupFacts(
            node_group=group_name,
            taints=group.described_taints,
            zone=group.availability_zone,
            efa_interfaces=facts.efa_interfaces if group.efa else 0,
            labels=tuple(sorted(group.labels.items())),
        )
    return GroupFacts(
        node_group=group_name,
        taints=node_taints(group.efa, facts),
        zone=group.availability_zone,
        efa_interfaces=facts.efa_interfaces if group.efa else 0,
    )


def placed(spec: StackSpec, placement: Placement) -> PlacedEndpoint:
    region = spec.regions[placement.region]
    own = group_facts(region, placement.node_group)
    return PlacedEndpoint(
        name=placement.endpoint,
        spec=spec.endpoints[placement.endpoint],
        region=placement.region,
        image=placement.image,
        node_group=own.node_group,
        taints=own.taints,
        zone=own.zone,
        efa_interfaces=own.efa_interfaces,
        group_labels=own.labels,
        ingress=region.ingress,
        role_groups=tuple((role, group_facts(region, group)) for role, group in placement.role_groups),
    )
