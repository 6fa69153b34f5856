"""What a diff must say when it deletes a VPC that Global Accelerator reached.

With client IP preservation, which every endpoint group of the front sets (components/platform/
global_front.py endpoint_configuration), Global Accelerator creates a security group named
``GlobalAccelerator`` in the ALB's VPC. Nothing in the stack owns it, AWS keeps it after the endpoint
group is deleted, and it blocks the VPC's deletion: "the provider will retry the VPC deletion for a few
minutes before reporting a `DependencyViolation` error. This cannot be resolved by re-running the
provider" (pulumi-aws 7.51.1, globalaccelerator/_inputs.py,
EndpointGroupEndpointConfigurationArgs.client_ip_preservation_enabled). So a region removal (or a
replaced VPC) in a stack whose base had an endpoint group in that region says what to delete, and when.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fleetctl.diff.verdicts import DELETE, REPLACE

if TYPE_CHECKING:
    from fleetctl.diff.engine import ResourceChange

VPC = "awsx:ec2:Vpc"
ENDPOINT_GROUP = "aws:globalaccelerator/endpointGroup:EndpointGroup"
SECURITY_GROUP = "GlobalAccelerator"
DOCS = 'docs/deploying.md, "With the global front: Global Accelerator\'s security group"'
DELETES = (DELETE, REPLACE)


def _groups_by_region(base_resources: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The base's endpoint groups, by the region of the ALB each one reaches."""
    groups: dict[str, list[str]] = {}
    for resource in base_resources:
        region = resource.get("inputs", {}).get("endpointGroupRegion")
        if resource.get("type") == ENDPOINT_GROUP and isinstance(region, str):
            groups.setdefault(region, []).append(str(resource["name"]))
    return groups


def _note(region: str, groups: Sequence[str]) -> str:
    named = f"endpoint group {groups[0]} is" if len(groups) == 1 else f"endpoint groups {', '.join(groups)} are"
    return (
        f"Global Accelerator's security group `{SECURITY_GROUP}` (client IP preservation) is in this VPC, outside "
        "the stack, and AWS refuses to delete the VPC while it is there (DependencyViolation, which re-running does "
        f"not resolve): delete it after the {named} gone, find it with "
        f"aws ec2 describe-security-groups --region {region} "
        f"--filters Name=vpc-id,Values=<vpc> Name=group-name,Values={SECURITY_GROUP} "
        f"(<vpc>: the region's vpc_id output), then aws ec2 delete-security-group --region {region} "
        f"--group-id <sg> ({DOCS})"
    )


def with_security_group_notes(
    resources: Sequence[ResourceChange], base_resources: Iterable[Mapping[str, Any]]
) -> list[ResourceChange]:
    """The resources, each deleted or replaced VPC of a region the base's accelerator reached with a note."""
    groups = _groups_by_region(base_resources)
    noted = []
    for resource in resources:
        reached = sorted(groups.get(resource.region, ()))
        if resource.type == VPC and resource.action in DELETES and reached:
            resource = replace(resource, notes=(*resource.notes, _note(resource.region, reached)))
        noted.append(resource)
    return noted
