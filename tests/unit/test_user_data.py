"""The node's user data: decoded and parsed as the node reads it (base64, MIME multi-part, NodeConfig YAML)."""

from __future__ import annotations

import pytest

from components.platform import user_data
from components.scheduling import LIBFABRIC_HUGEPAGES_2MI_BYTES
from tests.user_data import mime_parts, node_config


def test_instance_store_nodes_put_kubelet_and_containerd_on_a_raid0_of_the_local_disks() -> None:
    rendered = user_data.node_user_data(instance_store_gib=7450, hugepages_bytes=0)
    assert rendered is not None
    assert node_config(rendered) == {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"instance": {"localStorage": {"strategy": "RAID0"}}},
    }
    assert list(mime_parts(rendered)) == ["application/node.eks.aws"]


def test_our_node_config_leaves_the_cluster_to_the_part_eks_merges_in() -> None:
    assert "cluster" not in user_data.node_config(local_storage=True)["spec"]


def test_efa_nodes_reserve_huge_pages_in_a_shell_part_after_the_node_config() -> None:
    rendered = user_data.node_user_data(instance_store_gib=7450, hugepages_bytes=LIBFABRIC_HUGEPAGES_2MI_BYTES)
    assert rendered is not None
    parts = mime_parts(rendered)
    assert list(parts) == ["application/node.eks.aws", "text/x-shellscript"]
    script = parts["text/x-shellscript"]
    assert script.startswith("#!/bin/bash\n")
    assert f"pages={LIBFABRIC_HUGEPAGES_2MI_BYTES // (2 * 2**20)}\n" in script


def test_the_node_reserves_what_its_group_says() -> None:
    rendered = user_data.node_user_data(instance_store_gib=0, hugepages_bytes=549 * 2**30)
    assert rendered is not None
    assert f"pages={549 * 512}\n" in mime_parts(rendered)["text/x-shellscript"]


def test_efa_nodes_without_instance_store_get_the_huge_pages_only() -> None:
    rendered = user_data.node_user_data(instance_store_gib=0, hugepages_bytes=LIBFABRIC_HUGEPAGES_2MI_BYTES)
    assert rendered is not None
    assert list(mime_parts(rendered)) == ["text/x-shellscript"]


def test_nodes_that_need_nothing_get_no_user_data() -> None:
    assert user_data.node_user_data(instance_store_gib=0, hugepages_bytes=0) is None


def test_the_huge_page_script_reserves_exactly_persists_and_checks() -> None:
    script = user_data.hugepages_script(10 * 2**20)
    assert "pages=5\n" in script
    assert 'sysctl -w vm.nr_hugepages="$pages"' in script
    assert f'echo "vm.nr_hugepages = $pages" > {user_data.HUGEPAGES_SYSCTL_FILE}' in script
    assert '[ "$reserved" != "$pages" ]' in script
    assert '[ "$size_kb" != "2048" ]' in script


@pytest.mark.parametrize("size", [0, -2 * 2**20, 3 * 2**20 + 1, 2**20])
def test_a_reservation_that_is_not_whole_2_mib_pages_is_refused(size: int) -> None:
    with pytest.raises(ValueError, match="multiple of 2 MiB"):
        user_data.hugepages_script(size)


def test_the_user_data_is_the_same_for_the_same_node() -> None:
    same = user_data.node_user_data(100, LIBFABRIC_HUGEPAGES_2MI_BYTES)
    assert same == user_data.node_user_data(100, LIBFABRIC_HUGEPAGES_2MI_BYTES)
