"""An rdma store's segments and buffers are 2 MiB huge pages (docs/efa.md): the pods request them,
their memory no longer counts them, Mooncake is told to use them, and the node group reserves them."""

from __future__ import annotations

from typing import Any

import pytest

from components.render.mooncake_roles import STORE_HUGEPAGE_ENV, role_deployment, role_template
from components.schedulability.hugepages import unrequested_hugepages
from components.scheduling import EFA_PAGE_ENTRY_BUDGET, LIBFABRIC_HUGEPAGES_2MI_BYTES
from components.spec import Problem, SpecError, parse_stack_config
from components.spec.region import NodeGroup
from fleetctl.stackfile import load_stack, stack_path

from .stack_builders import DELETE, IMAGE, REGION, placed_endpoint, with_mooncake, with_region

GIB = 2**30
MIB = 2**20


def problems(config: dict[str, Any]) -> tuple[Problem, ...]:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(config)
    return caught.value.problems


def server(config: dict[str, Any]) -> dict[str, Any]:
    pod = role_deployment(placed_endpoint(config), "server", None)["spec"]["template"]["spec"]
    container: dict[str, Any] = pod["containers"][0]
    return container


def store_mode(store: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """An 8-GPU store endpoint (on p5 unless ``node_group`` says otherwise), 96 GiB of its own memory."""
    mooncake = {"mode": "store", "topology": DELETE, "store": store or {}, **fields.pop("mooncake", {})}
    return with_mooncake({"gpu_count": 8, "resources": {"memory": "96GiB"}, "mooncake": mooncake, **fields})


def env(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container["env"] if "value" in item}


# Node groups.


def test_an_efa_group_reserves_libfabrics_share_unless_it_says_otherwise() -> None:
    group = parse_stack_config(with_mooncake()).regions[REGION].node_groups["gpu"]
    assert (group.hugepages_2mi, group.hugepages_bytes) == (None, 0)
    default = NodeGroup.model_validate(
        {"instance_types": ["p5.48xlarge"], "min_size": 0, "max_size": 1, "desired_size": 0, "efa": True}
        | {"availability_zone": "us-east-1a"}
    )
    assert default.hugepages_bytes == LIBFABRIC_HUGEPAGES_2MI_BYTES == 5120 * MIB
    assert parse_stack_config(with_mooncake()).regions[REGION].node_groups["p5"].hugepages_bytes == 69 * GIB


@pytest.mark.parametrize(
    ("group", "size", "fragment"),
    [
        ("gpu", "5120MiB", "is only used by efa groups"),
        ("p5", "3MiB", "must be a positive whole number of 2 MiB pages (e.g. 5120MiB), got 3145728 bytes"),
        ("p5", 0, "must be a positive whole number of 2 MiB pages"),
        ("p5", "5GB", "is ambiguous"),
    ],
)
def test_a_reservation_is_whole_pages_on_an_efa_group(group: str, size: Any, fragment: str) -> None:
    (problem,) = problems(with_region({"node_groups": {group: {"hugepages_2mi": size}}}))
    assert problem.path == f"regions.{REGION}.node_groups.{group}.hugepages_2mi"
    assert fragment in problem.message


# Pods.


def test_an_rdma_store_takes_its_ranks_segments_and_buffers_from_huge_pages_not_memory() -> None:
    container = server(store_mode({"global_segment_size": "6GiB", "local_buffer_size": "2GiB"}))
    requests = container["resources"]["requests"]
    assert requests == container["resources"]["limits"]
    assert requests["hugepages-2Mi"] == f"{5120 + 8 * (6 + 2) * 1024}Mi"
    assert requests["memory"] == "96Gi"  # the server's own: the store is in huge pages
    assert {name: env(container)[name] for name in STORE_HUGEPAGE_ENV} == {
        "MC_STORE_USE_HUGEPAGE": "1",
        "MC_STORE_HUGEPAGE_SIZE": "2MB",
    }


def test_a_tcp_store_stays_in_memory_and_requests_no_huge_pages() -> None:
    config = store_mode({"global_segment_size": "6GiB", "local_buffer_size": "2GiB"}, node_group="gpu")
    config["endpoints"]["chat"]["gpu_count"] = 4
    config["endpoints"]["chat"]["mooncake"]["transfer"] = {"protocol": "tcp"}
    container = server(config)
    assert "hugepages-2Mi" not in container["resources"]["requests"]
    assert container["resources"]["requests"]["memory"] == f"{96 + 4 * 8}Gi"
    assert not set(STORE_HUGEPAGE_ENV) & set(env(container))


def test_rdma_transfer_with_a_tcp_store_gives_the_store_no_huge_pages() -> None:
    config = with_mooncake({"gpu_count": 8, "mooncake": {"mode": "both", "store": {"protocol": "tcp"}}})
    template = role_template(placed_endpoint(config), "decode", None)
    container = template["spec"]["containers"][0]
    assert container["resources"]["requests"]["hugepages-2Mi"] == "5120Mi"  # libfabric's only
    assert not set(STORE_HUGEPAGE_ENV) & set(env(container))


def test_disaggregated_rdma_pods_request_libfabrics_share() -> None:
    template = role_template(placed_endpoint(with_mooncake()), "prefill", None)
    container = template["spec"]["containers"][0]
    assert container["resources"]["requests"]["hugepages-2Mi"] == "5120Mi"
    assert "MC_STORE_USE_HUGEPAGE" not in env(container)


def test_the_huge_page_variables_are_inference_fleets() -> None:
    config = store_mode(env={"MC_STORE_USE_HUGEPAGE": "0"})
    (problem,) = problems(config)
    assert problem.path == "endpoints.chat.env.MC_STORE_USE_HUGEPAGE"
    assert "is set by inference-fleet from mooncake.store.protocol rdma" in problem.message


# What the spec refuses.


def test_a_store_over_rdma_needs_the_pods_on_efa() -> None:
    config = store_mode({"protocol": "rdma"}, node_group="gpu", mooncake={"transfer": {"protocol": "tcp"}})
    (problem,) = problems(config)
    assert problem.path == "endpoints.chat.mooncake.store.protocol"
    assert "set transfer.protocol to rdma too, or the store's protocol to tcp" in problem.message


@pytest.mark.parametrize("key", ["global_segment_size", "local_buffer_size"])
def test_rdma_store_sizes_are_whole_huge_pages(key: str) -> None:
    (problem,) = problems(store_mode({key: str(4 * GIB + 4096)}))
    assert problem.path == f"endpoints.chat.mooncake.store.{key}"
    assert "must be a whole number of 2 MiB pages with protocol rdma (the store takes it from 2 MiB huge pages, " in (
        problem.message
    )
    config = store_mode({key: str(4 * GIB + 4096)}, node_group="gpu", mooncake={"transfer": {"protocol": "tcp"}})
    config["endpoints"]["chat"]["gpu_count"] = 4
    parse_stack_config(config)  # tcp keeps any size


def test_a_store_past_an_efa_devices_page_entries_is_refused_with_the_numbers() -> None:
    (problem,) = problems(store_mode({"global_segment_size": "6TiB", "local_buffer_size": "4GiB"}))
    assert problem.path == "endpoints.chat.mooncake.store"
    pages = 8 * (6 * 2**40 + 4 * GIB) // (2 * MIB)
    assert pages > EFA_PAGE_ENTRY_BUDGET
    assert problem.message == (
        f"8 ranks x (6291456 MiB segment + 4096 MiB buffer) registers {pages} pages of 2 MiB on each EFA device, "
        f"past the {EFA_PAGE_ENTRY_BUDGET} page entries one device holds (Mooncake's budget, docs/efa.md); "
        "lower store.global_segment_size or store.local_buffer_size"
    )


def test_prods_store_would_overflow_4_kib_page_entries_but_fits_in_huge_pages() -> None:
    """The case docs/efa.md starts from: 8 ranks x (64 GiB + 4 GiB) in 4 KiB pages on every NIC."""
    ranks, segment, buffer = 8, 64 * GIB, 4 * GIB
    assert ranks * (segment + buffer) // 4096 > 24_000_000 > EFA_PAGE_ENTRY_BUDGET
    assert ranks * (segment + buffer) // (2 * MIB) < EFA_PAGE_ENTRY_BUDGET
    parse_stack_config(store_mode({"global_segment_size": "64GiB", "local_buffer_size": "4GiB"}))


# What a shared reservation costs (issue 28, item 7).


def shared_p5() -> dict[str, Any]:
    """A store endpoint over rdma (69 GiB of huge pages per pod) and a 1P1D one without a store (libfabric's
    5 GiB per pod) on the one p5 group, which reserves the store's 69 GiB on every node."""
    config = store_mode()
    config["endpoints"]["reason"] = {
        "model": "Qwen/Qwen3-8B",
        "node_group": "p5",
        "gpu_count": 8,
        "mooncake": {"mode": "disaggregated", "topology": {"prefill": 1, "decode": 1}},
    }
    config["regions"][REGION]["node_groups"]["p5"]["max_size"] = 3
    return config


def test_huge_pages_a_group_reserves_for_one_endpoint_are_reported_on_the_nodes_of_another() -> None:
    """Kubelet offers pre-allocated huge pages only as hugepages-2Mi, taken out of allocatable memory
    (kubernetes pkg/kubelet/nodestatus/setters.go MachineInfo), so what no pod requests nobody can use:
    each of reason's two nodes locks 69 - 5 = 64 GiB."""
    (report,) = unrequested_hugepages(parse_stack_config(shared_p5()))
    assert (report.region, report.group, report.nodes, report.reserved) == (REGION, "p5", 2, 69 * GIB)
    assert report.unrequested == 2 * 64 * GIB
    assert report.message() == (
        f"regions.{REGION}.node_groups.p5.hugepages_2mi: 128GiB of 2 MiB huge pages reserved and requested by no "
        "pod, on 2 node(s) (69GiB reserved on each; memory no pod can use): give the pods that request less a "
        "node group of their own, whose hugepages_2mi is theirs"
    )


def test_a_group_of_its_own_per_huge_page_need_reserves_nothing_unused() -> None:
    config = shared_p5()
    groups = config["regions"][REGION]["node_groups"]
    groups["p5-rdma"] = {**groups["p5"], "hugepages_2mi": "5120MiB", "max_size": 2}
    groups["p5"].update(max_size=1, desired_size=1)
    groups["p5-rdma"]["desired_size"] = 1
    config["endpoints"]["reason"]["node_group"] = "p5-rdma"
    config["endpoints"]["chat"]["node_group"] = "p5"
    assert unrequested_hugepages(parse_stack_config(config)) == []


def test_an_efa_group_without_rdma_pods_is_told_to_drop_efa() -> None:
    config = store_mode(node_group="gpu", mooncake={"transfer": {"protocol": "tcp"}}, gpu_count=4)
    config["regions"][REGION]["node_groups"]["p5"]["hugepages_2mi"] = "5120MiB"
    config["endpoints"]["other"] = {"image": IMAGE, "model": "Qwen/Qwen3-8B", "node_group": "p5", "gpu_count": 8}
    (report,) = unrequested_hugepages(parse_stack_config(config))
    assert (report.group, report.unrequested, report.requested) == ("p5", 5 * GIB, False)
    assert report.message().endswith("no pod there uses EFA: set efa to false, or place an rdma endpoint on the group")


def test_prod_reserves_the_stores_huge_pages_only_where_the_store_runs() -> None:
    """prod once reserved chat's 549 GiB on every p5 node, reason's four included (2.1 TiB unused)."""
    _, spec = load_stack(stack_path("prod"))
    reported = {(report.region, report.group) for report in unrequested_hugepages(spec)}
    assert not {group for _, group in reported} & {"p5", "p5-store"}
    assert spec.regions["us-east-1"].node_groups["p5"].hugepages_bytes == LIBFABRIC_HUGEPAGES_2MI_BYTES
