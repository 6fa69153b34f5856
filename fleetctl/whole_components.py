"""The provider components the offline plan shows as one resource each.

``awsx:ec2:Vpc`` (pulumi-awsx 3.11.0), ``eks:index:Cluster`` and ``eks:index:ManagedNodeGroup``
(pulumi-eks 4.4.0) are remote components: their providers create their children (a VPC's subnets,
route tables, gateways and addresses; a cluster's ``aws:eks/cluster:Cluster``, its IAM role and
security groups; a node group's ``aws:eks/nodeGroup:NodeGroup``) inside ``pulumi up``, and the
offline plan, which runs only this program (fleetctl/mocks.py answers the components' outputs),
never sees them. So plan.json, the plan's totals and ``fleetctl diff`` hold each such component as
one resource with the inputs the program gave it; a change to those inputs is what the diff shows,
and ``pulumi preview`` is what lists the children it changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Final

SHOWN_WHOLE: Final[dict[str, str]] = {
    "awsx:ec2:Vpc": "pulumi-awsx 3.11.0",
    "eks:index:Cluster": "pulumi-eks 4.4.0",
    "eks:index:ManagedNodeGroup": "pulumi-eks 4.4.0",
}
"""Type -> the package whose provider creates its children (requirements.txt pins both)."""


def plan_note(resources: Iterable[Mapping[str, Any]]) -> str | None:
    """The note under a plan's totals naming each component counted as one resource."""
    counted = Counter(str(resource["type"]) for resource in resources if resource.get("type") in SHOWN_WHOLE)
    if not counted:
        return None
    named = ", ".join(f"{kind} ({counted[kind]})" for kind in SHOWN_WHOLE if counted[kind])
    return (
        f"note: {named} are counted as one resource each: their providers create their children during "
        "`pulumi up`, which the offline plan does not model (`pulumi preview` lists them)"
    )


def diff_note(kind: str) -> str | None:
    """The note on a diff's change to such a component."""
    package = SHOWN_WHOLE.get(kind)
    if package is None:
        return None
    return (
        f"a {package} component shown as one resource: its inputs are compared; what its children "
        "do is for `pulumi preview` to say"
    )
