"""One endpoint in one region, with every fact its rendering needs (plain data, no Outputs)."""

from __future__ import annotations

from dataclasses import dataclass

from components import naming
from components.catalog import instance_catalog
from components.scheduling import Taint, node_taints
from components.spec import StackSpec
from components.spec.checks import Placement
from components.spec.endpoint import Endpoint
from components.spec.region import Ingress


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
    efa_interfaces: int
    """EFA devices each node of the group offers (0 on groups without EFA)."""
    """The node group's one availability zone, where it has one (EFA groups, capacity blocks)."""
    ingress: Ingress

    @property
    def namespace(self) -> str:
        return self.spec.namespace

    def labels(self, role: naming.Role) -> dict[str, str]:
        """The label vocabulary of ``role``, plus the endpoint's own labels."""
        return {**naming.common_labels(self.name, role), **self.spec.labels}


def placed(spec: StackSpec, placement: Placement) -> PlacedEndpoint:
    region = spec.regions[placement.region]
    taints: tuple[Taint, ...] = ()
    zone = None
    efa_interfaces = 0
    if placement.node_group is not None:
        group = region.node_groups[placement.node_group]
        facts = instance_catalog().instance_types[group.instance_types[0]]
        taints = node_taints(group.efa, facts)
        zone = group.availability_zone
        efa_interfaces = facts.efa_interfaces if group.efa else 0
    return PlacedEndpoint(
        name=placement.endpoint,
        spec=spec.endpoints[placement.endpoint],
        region=placement.region,
        image=placement.image,
        node_group=placement.node_group,
        taints=taints,
        zone=zone,
        efa_interfaces=efa_interfaces,
        ingress=region.ingress,
    )
