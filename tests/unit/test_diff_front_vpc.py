"""What fleetctl diff says when a plan deletes a VPC that Global Accelerator reached.

With client IP preservation (components/platform/global_front.py endpoint_configuration) Global
Accelerator creates a security group named ``GlobalAccelerator`` in the ALB's VPC, which nothing in
the stack owns and which blocks the VPC's deletion: "the provider will retry the VPC deletion for a few
minutes before reporting a `DependencyViolation` error. This cannot be resolved by re-running the
provider" (pulumi-aws 7.51.1, globalaccelerator/_inputs.py,
EndpointGroupEndpointConfigurationArgs.client_ip_preservation_enabled)."""

from __future__ import annotations

from typing import Any

from fleetctl.diff import diff_plans, render_text
from fleetctl.whole_components import diff_note
from tests.unit.test_diff import plan, resource

VPC = "awsx:ec2:Vpc"
ENDPOINT_GROUP = "aws:globalaccelerator/endpointGroup:EndpointGroup"


def vpc(region: str, cidr: str = "10.20.0.0/16") -> dict[str, Any]:
    return resource(VPC, f"{region}-vpc", {"cidrBlock": cidr}, region=region)


def endpoint_group(region: str, name: str | None = None) -> dict[str, Any]:
    inputs = {
        "endpointGroupRegion": region,
        "endpointConfigurations": [{"clientIpPreservationEnabled": True, "endpointId": f"arn:{region}"}],
    }
    return resource(ENDPOINT_GROUP, name or f"global-front-{region}", inputs, region="us-west-2")


def vpc_notes(base: dict[str, Any], head: dict[str, Any]) -> tuple[str, ...]:
    (deleted,) = [change for change in diff_plans(base, head).resources if change.type == VPC]
    return tuple(note for note in deleted.notes if note != diff_note(VPC))


def test_removing_a_region_of_the_accelerator_names_the_security_group_to_delete() -> None:
    base = plan(vpc("us-east-1"), vpc("eu-west-1"), endpoint_group("us-east-1"), endpoint_group("eu-west-1"))
    head = plan(vpc("eu-west-1"), endpoint_group("eu-west-1"))
    (note,) = vpc_notes(base, head)
    assert "security group `GlobalAccelerator`" in note
    assert "DependencyViolation" in note
    assert (
        "aws ec2 describe-security-groups --region us-east-1 "
        "--filters Name=vpc-id,Values=<vpc> Name=group-name,Values=GlobalAccelerator"
    ) in note
    assert "after the endpoint group global-front-us-east-1 is gone" in note
    assert 'docs/deploying.md, "With the global front: Global Accelerator\'s security group"' in note
    assert "security group `GlobalAccelerator`" in render_text(diff_plans(base, head), "base", "head")


def test_every_endpoint_group_of_the_region_is_named() -> None:
    base = plan(
        vpc("us-east-1"), endpoint_group("us-east-1"), endpoint_group("us-east-1", "global-front-chat-at-us-east-1")
    )
    (note,) = vpc_notes(base, plan())
    assert "after the endpoint groups global-front-chat-at-us-east-1, global-front-us-east-1 are gone" in note


def test_a_replaced_vpc_meets_the_same_group() -> None:
    base = plan(vpc("us-east-1"), endpoint_group("us-east-1"))
    head = plan(vpc("us-east-1", cidr="10.40.0.0/16"), endpoint_group("us-east-1"))
    (note,) = vpc_notes(base, head)
    assert "security group `GlobalAccelerator`" in note


def test_a_vpc_the_accelerator_never_reached_has_no_such_note() -> None:
    # No endpoint group in that region (a latency-routed front, or a region without routes): no group in the VPC.
    base = plan(vpc("us-east-1"), vpc("eu-west-1"), endpoint_group("eu-west-1"))
    head = plan(vpc("eu-west-1"), endpoint_group("eu-west-1"))
    assert vpc_notes(base, head) == ()
