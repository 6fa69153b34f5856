"""One endpoint in one region, with every fact its rendering needs (plain data, no Outputs)."""

from __future__ import annotations

from dataclasses import dataclass

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
    """The node group's one availability zone, where it has one (EFA groups, capacity blocks)."""
    ingress: Ingress

    @property
    def namespace(self) -> str:
        return self.spec.namespace


def placed(spec: StackSpec, placement: Placement) -> PlacedEndpoint:
    region = spec.regions[placement.region]
    taints: tuple[Taint, ...] = ()
    zone = None
    if placement.node_group is not None:
        group = region.node_groups[placement.node_group]
        facts = instance_catalog().instance_types[group.instance_types[0]]
        taints = node_taints(group.efa, facts)
        zone = group.availability_zone
    return PlacedEndpoint(
        name=placement.endpoint,
        spec=spec.endpoints[placement.endpoint],
        region=placement.region,
        image=placement.image,
        node_group=placement.node_group,
        taints=taints,
        zone=zone,
        ingress=region.ingress,
    )
