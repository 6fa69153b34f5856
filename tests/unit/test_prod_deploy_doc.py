"""docs/deploying.md's first deploy of prod states the EC2 quota prod needs; the numbers are the stack's.

EC2's On-Demand quotas count running vCPUs per region and instance family ("Running On-Demand P
instances", "... G and VT instances", "... Standard (A, C, D, H, I, M, R, T, Z) instances"), so the
quota a region needs is every group's ``max_size`` times its type's vCPUs (config/instances.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.catalog import instance_catalog
from fleetctl.stackfile import load_stack

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deploying.md"
_, PROD = load_stack(ROOT / "stacks" / "Pulumi.prod.yaml")


def quota_phrase(region: str, instance_type: str) -> str:
    """'6 + 8 = 14 p5.48xlarge (2,688 vCPUs': the groups' max_size, their sum and its vCPUs."""
    sizes = [
        group.max_size
        for group in PROD.regions[region].node_groups.values()
        if group.instance_types == (instance_type,)
    ]
    total = sum(sizes)
    vcpus = total * instance_catalog().instance_types[instance_type].vcpus
    counted = f"{' + '.join(map(str, sizes))} = {total}" if len(sizes) > 1 else str(total)
    return f"{counted} {instance_type} ({vcpus:,} vCPUs"


def doc_text() -> str:
    return " ".join(DOC.read_text(encoding="utf-8").split())


@pytest.mark.parametrize("region", sorted(PROD.regions))
@pytest.mark.parametrize("instance_type", ["p5.48xlarge", "g6e.48xlarge", "m7i.2xlarge"])
def test_the_quota_of_the_first_deploy_is_prods_max_size_in_vcpus(region: str, instance_type: str) -> None:
    assert quota_phrase(region, instance_type) in doc_text()


def test_every_instance_type_of_prod_has_its_quota_in_the_doc() -> None:
    used = {
        kind
        for region in PROD.regions.values()
        for group in region.node_groups.values()
        for kind in group.instance_types
    }
    assert used == {"p5.48xlarge", "g6e.48xlarge", "m7i.2xlarge"}
