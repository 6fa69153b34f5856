"""The EFA hardware rules: interface layout per instance type, the deploy-time cross-check, capacity types."""

from __future__ import annotations

from typing import get_args

import pytest

from components.catalog import InstanceType, instance_catalog
from components.platform.efa import check_instance_facts, efa_network_interfaces
from components.scheduling import eks_capacity_type
from components.spec.region import CapacityType

SECURITY_GROUPS = ["sg-efa", "sg-cluster"]
EFA_TYPES = sorted(name for name, facts in instance_catalog().instance_types.items() if facts.efa_supported)


def facts_of(instance_type: str) -> InstanceType:
    return instance_catalog().instance_types[instance_type]


def test_the_catalog_has_efa_types_to_check() -> None:
    assert {"p5.48xlarge", "p5en.48xlarge", "p4d.24xlarge"} <= set(EFA_TYPES)


@pytest.mark.parametrize("instance_type", EFA_TYPES)
def test_every_efa_type_gets_one_interface_per_efa_device_card_0_efa_the_rest_efa_only(instance_type: str) -> None:
    count = facts_of(instance_type).efa_interfaces
    interfaces = efa_network_interfaces(count, SECURITY_GROUPS)

    assert len(interfaces) == count
    assert [interface["network_card_index"] for interface in interfaces] == list(range(count))
    primary, *secondary = interfaces
    assert (primary["interface_type"], primary["device_index"]) == ("efa", 0)
    assert all((item["interface_type"], item["device_index"]) == ("efa-only", 1) for item in secondary)
    for interface in interfaces:
        assert interface["security_groups"] == SECURITY_GROUPS
        assert interface["delete_on_termination"] == "true"
        assert interface["associate_public_ip_address"] == "false"
        assert "subnet_id" not in interface


@pytest.mark.parametrize(
    ("instance_type", "efa_only"),
    [("p5.48xlarge", 31), ("p5en.48xlarge", 15), ("p4d.24xlarge", 3)],
)
def test_known_instance_types_get_one_efa_and_the_documented_number_of_efa_only(
    instance_type: str, efa_only: int
) -> None:
    interfaces = efa_network_interfaces(facts_of(instance_type).efa_interfaces, SECURITY_GROUPS)
    kinds = [interface["interface_type"] for interface in interfaces]
    assert kinds == ["efa"] + ["efa-only"] * efa_only


def test_a_single_efa_device_gives_only_the_primary_interface() -> None:
    assert [(i["interface_type"], i["device_index"]) for i in efa_network_interfaces(1, SECURITY_GROUPS)] == [
        ("efa", 0)
    ]


def test_each_interface_gets_its_own_copy_of_the_security_groups() -> None:
    first, second = efa_network_interfaces(2, SECURITY_GROUPS)
    assert first["security_groups"] is not second["security_groups"]


@pytest.mark.parametrize("count", [0, -1])
def test_rejects_fewer_than_one_efa_interface(count: int) -> None:
    with pytest.raises(ValueError, match=rf"at least one EFA interface, got {count}"):
        efa_network_interfaces(count, SECURITY_GROUPS)


def test_instance_facts_check_passes_the_catalog_count_when_ec2_agrees() -> None:
    assert check_instance_facts("p5.48xlarge", facts_of("p5.48xlarge"), True, 32) == 32


def test_instance_facts_check_names_the_type_and_both_counts_when_ec2_disagrees() -> None:
    with pytest.raises(ValueError, match=r"p5en\.48xlarge") as raised:
        check_instance_facts("p5en.48xlarge", facts_of("p5en.48xlarge"), True, 32)
    message = str(raised.value)
    assert "efa_interfaces 16" in message
    assert "efa_maximum_interfaces 32" in message


def test_instance_facts_check_refuses_a_type_ec2_says_has_no_efa() -> None:
    with pytest.raises(ValueError, match=r"p4d\.24xlarge: EC2 reports .* does not support EFA") as raised:
        check_instance_facts("p4d.24xlarge", facts_of("p4d.24xlarge"), False, 0)
    assert "efa_interfaces 4" in str(raised.value)


@pytest.mark.parametrize(
    ("spec_value", "eks_value"),
    [("on-demand", "ON_DEMAND"), ("spot", "SPOT"), ("capacity-block", "CAPACITY_BLOCK")],
)
def test_capacity_types_map_to_the_eks_spelling(spec_value: CapacityType, eks_value: str) -> None:
    assert eks_capacity_type(spec_value) == eks_value


def test_every_spec_capacity_type_has_an_eks_spelling() -> None:
    assert {eks_capacity_type(value) for value in get_args(CapacityType)} == {"ON_DEMAND", "SPOT", "CAPACITY_BLOCK"}
