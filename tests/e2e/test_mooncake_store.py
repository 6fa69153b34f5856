"""The real Mooncake master and store client accept exactly what we render for a store."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from components.catalog import kv_transfer_schema
from components.render.mooncake_roles import role_deployment
from components.render.mooncake_store import (
    MASTER_RPC_PORT,
    REAL_CLIENT_PORT,
    config_map,
    master_host,
    master_stateful_set,
)
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
    endpoint: Any, tmp_path: Path, extra: list[dict[str, Any]], env: dict[str, str] | None = None
) -> dict[str, Any]:
    master = master_stateful_set(endpoint, replicas=1)["spec"]["template"]["spec"]["containers"][0]
    config = tmp_path / "mooncake.json"
    config.write_text(config_map(endpoint)["data"]["mooncake.json"])
    processes = [container_process(master, MASTER_RPC_PORT), *extra]
    arguments = [json.dumps(processes), str(config), str(KV_BLOCK), master_host(endpoint)]
    return run_driver("tests.e2e.store_driver", *arguments, mount=True, env=env)


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
    endpoint = store_endpoint(offload="disk", offload_disk_size="1GiB")
    pod = role_deployment(endpoint, "server", None)["spec"]["template"]["spec"]
    store_client = next(container for container in pod["containers"] if container["name"] == "store-client")
    ssd = tmp_path / "ssd"
    ssd.mkdir()
    # The rendered SSD path is a volume in the pod; here it is a directory of the test.
    process = container_process(store_client, REAL_CLIENT_PORT, {"MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": str(ssd)})
    result = run_store(endpoint, tmp_path, [process])
    assert result["mode"] == "standalone-store"
    assert_served(result)
