"""EFA and capacity rules of a GPU node group, as data plus pure functions (docs/design.md, decision 7).

Nothing here creates a resource; ``node_groups`` turns these answers into a launch
template and a managed node group.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from components.catalog import InstanceType

PRIMARY_INTERFACE_TYPE = "efa"
SECONDARY_INTERFACE_TYPE = "efa-only"


def efa_network_interfaces(
    interface_count: int, security_group_ids: Sequence[pulumi.Input[str]]
) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgsDict]:
    """The launch template's network interfaces for an instance with ``interface_count`` EFA devices.

    One interface per network card ("Layout A", as pulumi-eks and terraform-aws-eks
    generate it): card 0 is an ``efa`` interface at device index 0 and carries the
    node's IP; every other card gets an ``efa-only`` interface at device index 1,
    which takes no IP address (no subnet exhaustion, no routing conflicts). EFA
    needs the security groups on every interface, never at instance level, and an
    EKS managed node group forbids a subnet in its launch template (the group's
    subnets decide). Because the template lists security groups, EKS no longer
    adds the cluster security group: callers pass it in ``security_group_ids``.

    - https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html
      (EFA on instances with multiple network cards)
    - https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html
    - https://docs.aws.amazon.com/eks/latest/userguide/launch-templates.html
    """
    if interface_count < 1:
        raise ValueError(f"an EFA node group needs at least one EFA interface, got {interface_count}")
    return [
        {
            "network_card_index": card,
            "device_index": 0 if card == 0 else 1,
            "interface_type": PRIMARY_INTERFACE_TYPE if card == 0 else SECONDARY_INTERFACE_TYPE,
            "security_groups": list(security_group_ids),
            # pulumi-aws 7 types these as nullable-bool strings.
            "delete_on_termination": "true",
            "associate_public_ip_address": "false",
        }
        for card in range(interface_count)
    ]


def check_instance_facts(
    instance_type: str, facts: InstanceType, efa_supported: bool, efa_maximum_interfaces: int
) -> int:
    """The catalog's EFA count for ``instance_type`` once EC2 (``aws.ec2.get_instance_type``) agrees with it.

    Raises ``ValueError`` naming both values when they disagree, so a wrong
    ``config/instances.yaml`` entry fails the deployment instead of launching
    nodes with too few (or impossible) EFA interfaces.
    """
    if not efa_supported:
        raise ValueError(
            f"{instance_type}: EC2 reports that this instance type does not support EFA (efa_supported false), "
            f"but config/instances.yaml gives efa_interfaces {facts.efa_interfaces}; "
            "choose an EFA-capable instance type or set efa: false on the node group"
        )
    if facts.efa_interfaces != efa_maximum_interfaces:
        raise ValueError(
            f"{instance_type}: config/instances.yaml gives efa_interfaces {facts.efa_interfaces}, "
            f"but EC2 reports efa_maximum_interfaces {efa_maximum_interfaces}; correct the catalog entry"
        )
    return facts.efa_interfaces
