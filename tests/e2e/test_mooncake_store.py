"""The real Mooncake master and store client accept exactly what we render for a store."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from components.catalog import kv_transfer_schema
from components.render.mooncake_roles import STORE_HUGEPAGE_ENV, role_deployment
from components.render.mooncake_store import (
    MASTER_RPC_PORT,
    REAL_CLIENT_PORT,
    config_map,
    master_host,
    master_stateful_set,
)
from components.render.network_policy import TRANSFER_ENGINE_PORTS, network_policies
from fleetctl.verify import evidence
from tests.e2e import mooncake_reader
from tests.e2e.namespace import run_driver
from tests.unit.stack_builders import MODEL, placed_endpoint, stack_config

ROOT = Path(__file__).resolve().parents[2]
KV_BLOCK = 2 * 1024 * 1024  # 16 tokens of a Qwen3-8B-sized KV block, roughly


def store_endpoint(**store: Any) -> Any:
    """A store-mode endpoint over TCP with a small pool, so the test client stays light."""
    mooncake = {
        "mode": "store",
        "transfer": {"protocol": "tcp"},
        "store": {"global_segment_size": "256MiB", "local_buffer_size": "64MiB", **store},
    }
    config = stack_config(endpoints={"chat": {"model": MODEL, "mooncake": mooncake, "node_group": "gpu"}})
    return placed_endpoint(config)


def test_mooncake_json_holds_only_keys_the_pinned_reader_reads() -> None:
    for endpoint in (store_endpoint(), store_endpoint(offload="disk", offload_disk_size="1GiB")):
        rendered = json.loads(config_map(endpoint)["data"]["mooncake.json"])
        assert set(rendered) <= set(kv_transfer_schema().mooncake_json_keys)
        assert isinstance(rendered["enable_offload"], bool)
    assert set(mooncake_reader.DEFAULTS) == set(kv_transfer_schema().mooncake_json_keys)


def container_process(container: dict[str, Any], port: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    values = {item["name"]: item["value"] for item in container.get("env", []) if "value" in item}
    return {"argv": [*container["command"], *container["args"]], "env": {**values, **(env or {})}, "port": port}


def run_store(
    endpoint: Any, tmp_path: Path, extra: list[dict[str, Any]], env: dict[str, str] | None = None, timeout: float = 120
) -> dict[str, Any]:
    master = master_stateful_set(endpoint, replicas=1)["spec"]["template"]["spec"]["containers"][0]
    config = tmp_path / "mooncake.json"
    config.write_text(config_map(endpoint)["data"]["mooncake.json"])
    processes = [container_process(master, MASTER_RPC_PORT), *extra]
    arguments = [json.dumps(processes), str(config), str(KV_BLOCK), master_host(endpoint)]
    return run_driver("tests.e2e.store_driver", *arguments, mount=True, env=env, timeout=timeout)


def role_pod(endpoint: Any) -> dict[str, Any]:
    pod: dict[str, Any] = role_deployment(endpoint, "server", None)["spec"]["template"]["spec"]
    return pod


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(item for item in pod["containers"] if item["name"] == name)


def env_value(item: dict[str, Any], name: str) -> str:
    return str(next(variable["value"] for variable in item["env"] if variable["name"] == name))


def admitted_from_role_pods(endpoint: Any) -> list[tuple[int, int]]:
    """The TCP port ranges the rendered NetworkPolicy lets role pods open to each other."""
    rules = network_policies(endpoint)["policy-roles"]["spec"]["ingress"]
    return [
        (port["port"], port.get("endPort", port["port"])) for rule in rules if "from" in rule for port in rule["ports"]
    ]


def assert_served(result: dict[str, Any]) -> None:
    assert result["setup"] == 0
    assert result["put"] == [0, 0, 0, 0]
    assert result["exists"] == [1, 1, 1, 1]
    assert result["get_equal"] == [True, True, True, True]
    assert (result["spare_put"], result["remove"], result["exists_after_remove"]) == (0, 0, 0)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_real_master_and_client_accept_the_rendered_store(tmp_path: Path) -> None:
    result = run_store(store_endpoint(), tmp_path, [], env={"STORE_DRIVER_MASTER_SUMMARY": "1"})
    assert result["mode"] == "embedded"
    assert_served(result)
    # fleetctl verify's store evidence, held to what the real master logs: its summary
    # before any object was stored says none was, the first one after the puts says some were.
    assert "Master Admin Metrics:" in result["master_log_before"]
    assert not evidence.store_puts(result["master_log_before"])
    assert evidence.store_puts(result["master_log"])


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_real_store_client_owns_the_pool_and_ssd_tier_of_offload_disk(tmp_path: Path) -> None:
    """The real mooncake_client, started with the rendered args and env, listens on the pinned port
    and on its transfer engine's two ports, each one the rendered NetworkPolicy opens between role
    pods and nothing else; it registers its segment under the name vLLM's MOONCAKE_PREFERRED_SEGMENT
    gives, and objects that only its SSD tier still holds are read through that port."""
    endpoint = store_endpoint(offload="disk", offload_disk_size="1GiB")
    pod = role_pod(endpoint)
    ssd = tmp_path / "ssd"
    ssd.mkdir()
    test_only = {
        # The rendered SSD path is a volume in the pod; here it is a directory of the test.
        "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": str(ssd),
        # Write each object to disk at once instead of once 500 fill a bucket: only timing changes.
        "MOONCAKE_OFFLOAD_BUCKET_KEYS_LIMIT": "1",
    }
    process = container_process(container(pod, "store-client"), REAL_CLIENT_PORT, test_only)
    preferred = env_value(container(pod, "server"), "MOONCAKE_PREFERRED_SEGMENT")
    result = run_store(endpoint, tmp_path, [process], env={"STORE_DRIVER_DISK_TIER": preferred}, timeout=240)
    assert result["mode"] == "standalone-store"
    assert_served(result)

    _, client_ports = result["listening"]
    engine = [port for port in client_ports if TRANSFER_ENGINE_PORTS[0] <= port <= TRANSFER_ENGINE_PORTS[1]]
    assert sorted(set(client_ports) - set(engine)) == [REAL_CLIENT_PORT], client_ports
    assert len(engine) == 2, client_ports  # the transfer engine's handshake and its TCP transport
    admitted = admitted_from_role_pods(endpoint)
    assert all(any(low <= port <= high for low, high in admitted) for port in client_ports), (client_ports, admitted)
    assert (REAL_CLIENT_PORT, REAL_CLIENT_PORT) in admitted

    disk = result["disk_tier"]
    assert preferred == f"$(VLLM_HOST_IP):{REAL_CLIENT_PORT}"
    assert disk["put"] == [0, 0, 0, 0]
    assert disk["segments"] == [preferred.replace("$(VLLM_HOST_IP)", "192.0.2.10")]
    assert disk["offloaded"] == [True, True, True, True]
    assert disk["memory_copies_left"] == [False, False, False, False]
    assert disk["get_equal"] == [True, True, True, True]
    assert disk["disk_reads"] >= 1


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_the_rendered_huge_page_env_reaches_the_store_allocation_vllm_makes(tmp_path: Path) -> None:
    """An rdma store's server env makes the real store client (MooncakeDistributedStore.setup,
    vLLM's call) map its buffer with MAP_HUGETLB and fail rather than fall back to 4 KiB pages.
    The test host reserves no huge pages (reserving them is host-wide), so the mapping must fail."""
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    overcommit = int(Path("/proc/sys/vm/nr_overcommit_hugepages").read_text())
    if int(meminfo["HugePages_Free"]) or overcommit:
        pytest.skip("this host has 2 MiB huge pages to give: the failure this test expects would not happen")
    rdma = placed_endpoint(
        stack_config(
            endpoints={
                "chat": {
                    "model": MODEL,
                    "mooncake": {
                        "mode": "store",
                        "store": {"global_segment_size": "256MiB", "local_buffer_size": "64MiB"},
                    },
                }
            }
        )
    )
    server = container(role_pod(rdma), "server")
    rendered = {name: env_value(server, name) for name in STORE_HUGEPAGE_ENV}
    assert rendered == {"MC_STORE_USE_HUGEPAGE": "1", "MC_STORE_HUGEPAGE_SIZE": "2MB"}
    # The same sizes over tcp: the test host has no EFA device, and the allocation is the same.
    result = run_store(store_endpoint(), tmp_path, [], env=rendered)
    assert str(result["setup"]).startswith("MemoryError"), result["setup"]
    assert f"mmap failed, size={64 * 2**20}, errno=12" in result["client_log"]
    assert "Using hugepage size: 2MB" in result["client_log"]
