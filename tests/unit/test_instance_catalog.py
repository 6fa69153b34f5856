"""The node-sizing facts of config/instances.yaml: every entry has them, they are plausible,
and a few match the values read from EC2's data (Karpenter's reference, nodeadm's table)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from components.catalog import InstanceType, instance_catalog

CATALOG = instance_catalog().instance_types
NAMES = sorted(CATALOG)
MIB_PER_GIB = 1024
GIB = 2**30


def test_the_catalog_still_lists_every_type() -> None:
    assert len(CATALOG) == 112


@pytest.mark.parametrize("name", NAMES)
def test_memory_per_vcpu_is_between_1_and_32_gib(name: str) -> None:
    facts = CATALOG[name]
    assert 1 * MIB_PER_GIB * facts.vcpus <= facts.memory_mib <= 32 * MIB_PER_GIB * facts.vcpus


@pytest.mark.parametrize("name", NAMES)
def test_max_pods_is_within_what_any_eni_layout_gives(name: str) -> None:
    # 4 (t3.nano, 2 ENIs x 2 IPs) to 737 (15 ENIs x 50 IPs) in eni-max-pods.txt
    assert 4 <= CATALOG[name].max_pods <= 737


@pytest.mark.parametrize("name", NAMES)
def test_vcpus_are_even_as_on_every_type_listed(name: str) -> None:
    # two threads per core (x86) or a core per vCPU in pairs (Graviton, Grace): a typo such as 191 fails
    assert CATALOG[name].vcpus % 2 == 0


@pytest.mark.parametrize(
    "family", ["p4d.", "p4de.", "p5.", "p5e.", "p5en.", "p6-b200.", "g4dn.", "g5.", "g6.", "g6e.", "trn1.", "trn1n."]
)
def test_families_ec2_sells_with_local_nvme_have_instance_store(family: str) -> None:
    members = [name for name in NAMES if name.startswith(family)]
    assert members
    assert all(CATALOG[name].instance_store_gib > 0 for name in members)


@pytest.mark.parametrize(
    "family", ["c6i.", "c7g.", "c7i.", "m5.", "m6i.", "m7a.", "m7g.", "m7i.", "r6i.", "r7g.", "r7i.", "inf2."]
)
def test_ebs_only_families_have_no_instance_store(family: str) -> None:
    members = [name for name in NAMES if name.startswith(family)]
    assert members
    assert all(CATALOG[name].instance_store_gib == 0 for name in members)


@pytest.mark.parametrize(
    ("name", "vcpus", "memory_mib", "max_pods", "instance_store_gb"),
    [
        ("p5.48xlarge", 192, 2097152, 100, 8 * 3800),
        ("p5en.48xlarge", 192, 2097152, 198, 8 * 3800),
        ("p4d.24xlarge", 96, 1179648, 737, 8 * 1000),
        ("g6e.12xlarge", 48, 393216, 292, 2 * 1900),
        ("g5.xlarge", 4, 16384, 58, 250),
        ("m7i.xlarge", 4, 16384, 58, 0),
        ("m5.large", 2, 8192, 29, 0),
        ("c7g.16xlarge", 64, 131072, 737, 0),
        ("trn2.48xlarge", 192, 2097152, 100, 4 * 1900),
        ("inf2.48xlarge", 192, 786432, 737, 0),
    ],
)
def test_spot_checks_against_the_sources(
    name: str, vcpus: int, memory_mib: int, max_pods: int, instance_store_gb: int
) -> None:
    facts = CATALOG[name]
    assert (facts.vcpus, facts.memory_mib, facts.max_pods) == (vcpus, memory_mib, max_pods)
    assert facts.instance_store_gib == instance_store_gb * 10**9 // GIB


def test_instance_store_is_stored_in_gib_rounded_down_from_decimal_gb() -> None:
    assert CATALOG["p5.48xlarge"].instance_store_gib == 28312  # 30400 GB = 28312.5 GiB
    assert CATALOG["g6e.12xlarge"].instance_store_gib == 3539  # 3800 GB = 3539.03 GiB


def test_the_type_nodeadm_does_not_list_gets_its_last_resort_default() -> None:
    assert CATALOG["p6e-gb200.36xlarge"].max_pods == 110


def test_the_new_fields_are_required() -> None:
    entry = CATALOG["m7i.xlarge"].model_dump()
    del entry["max_pods"]
    with pytest.raises(ValidationError, match="max_pods"):
        InstanceType.model_validate(entry)


@pytest.mark.parametrize(
    ("field", "value"), [("vcpus", 0), ("memory_mib", 0), ("max_pods", 0), ("instance_store_gib", -1)]
)
def test_impossible_values_are_rejected(field: str, value: int) -> None:
    entry = CATALOG["m7i.xlarge"].model_dump() | {field: value}
    with pytest.raises(ValidationError, match=field):
        InstanceType.model_validate(entry)
