"""The real proxy program, started exactly as the proxy Deployment renders it, in front of
prefill and decode stand-ins that restart, come and go (docs/design.md, decision 16)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from components.render.mooncake import mooncake_objects
from components.render.placement import PlacedEndpoint
from components.render.proxy import PROGRAM_DIR, PROGRAM_FILE, PROXY_PORT, REFRESH_SECONDS
from tests.e2e.namespace import run_driver
from tests.unit.stack_builders import mooncake_endpoint, placed_endpoint, stack_config

ADMIN_KEY = "test-admin-key"
PORT = 8080
"""The role servers' port: not the proxy's 8000, which the proxy binds on every address."""
RECOVERY_SECONDS = REFRESH_SECONDS + 3
"""A refresh period, plus room for one refresh and a busy test machine (measured: about one period)."""


def split_endpoint() -> PlacedEndpoint:
    """Autoscaled prefill over TCP, the role servers holding an admin key."""
    mooncake = {
        "transfer": {"protocol": "tcp", "bootstrap_base_port": 8998},
        "proxy": {"admin_api_key_secret": "chat-admin"},
        "autoscaling": {"enabled": True, "prefill": {"min_replicas": 1, "max_replicas": 4}},
    }
    spec = mooncake_endpoint({"node_group": "gpu", "port": PORT, "mooncake": mooncake})
    return placed_endpoint(stack_config(endpoints={"chat": spec}))


def mounted_front(
    objects: dict[str, dict[str, Any]], front: str, program_dir: Path
) -> tuple[list[str], dict[str, Any]]:
    """The command line of a front's container (``proxy`` or ``gate``) as its pod runs it, the
    ConfigMap's files where its volume mounts them (here ``program_dir``); and the container."""
    for name, text in objects[f"{front}-program"]["data"].items():
        (program_dir / name).write_text(text)
    (container,) = objects[front]["spec"]["template"]["spec"]["containers"]
    assert container["command"][1] == f"{PROGRAM_DIR}/{PROGRAM_FILE}"
    argv = [*container["command"], *container["args"]]
    argv[1] = str(program_dir / PROGRAM_FILE)
    return argv, container


def rendered_proxy(endpoint: PlacedEndpoint, program_dir: Path) -> dict[str, Any]:
    """The proxy container's command, arguments and environment, as the pod runs them: its
    program where the volume mounts it, the Secret's key where the environment takes it from."""
    argv, container = mounted_front(mooncake_objects(endpoint, None), "proxy", program_dir)
    env = {}
    for variable in container.get("env", []):
        assert variable["valueFrom"]["secretKeyRef"]["name"] == "chat-admin"
        env[variable["name"]] = ADMIN_KEY
    return {"argv": argv, "env": env}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    endpoint = split_endpoint()
    program_dir = tmp_path_factory.mktemp("proxy-program")
    spec = {
        "proxy": rendered_proxy(endpoint, program_dir),
        # python3 is the image's interpreter; here the test's, which has aiohttp as the image does.
        "path": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "prefill_service": f"chat-prefill.{endpoint.namespace}.svc",
        "decode_host": f"chat-decode.{endpoint.namespace}.svc",
        "port": PORT,
        "bootstrap_port": 8998,
        "proxy_port": PROXY_PORT,
        "api_key": ADMIN_KEY,
    }
    return run_driver("tests.e2e.proxy_driver", json.dumps(spec), mount=True, timeout=240)


pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


def test_the_proxy_serves_once_one_listed_prefill_pod_and_decode_answer(scenario: dict[str, Any]) -> None:
    """One of the two pods the prefill Service lists never starts: the proxy serves with the other."""
    assert scenario["ready_seconds"] <= RECOVERY_SECONDS
    engines = {"127.0.0.11": {"0": scenario["first_engine"]}}
    assert scenario["health"] == {"prefill": engines, "decode": True, "answered": 0}
    assert scenario["first"] == {
        "status": 200,
        "engine_id": scenario["first_engine"],
        "bootstrap": "http://127.0.0.11:8998",
    }
    assert scenario["first_stream"] == {"status": 200, "engine_id": scenario["first_engine"], "text": "decoded"}
    # What fleetctl verify reads to measure a canary set's share: decode answers relayed (docs/mooncake-canary.md).
    assert scenario["health_after_two"]["answered"] == 2


def test_a_prefill_restart_between_two_refreshes_costs_no_plain_request(scenario: dict[str, Any]) -> None:
    """Decode cannot find the engine id the proxy named; the proxy finds the pod's new id and prefills again."""
    unseen = scenario["unseen_restart"]
    assert (unseen["status"], unseen["engine_id"]) == (200, unseen["new_engine"])
    assert "restarted under request" in scenario["proxy_log"]


def test_a_stream_sees_a_prefill_restart_within_a_refresh(scenario: dict[str, Any]) -> None:
    """A stream has its 200 before decode fails, so it cannot be retried: the stale id lasts until the next
    refresh, and the error reaches the client as vLLM streams it."""
    stream = scenario["unseen_restart_stream"]
    assert stream["recovered_seconds"] <= RECOVERY_SECONDS
    for failure in stream["failed"]:
        assert failure["status"] == 200
        assert "not found from bootstrap server" in failure["stream_error"]


def test_a_replaced_prefill_process_serves_under_its_new_engine_id_within_seconds(scenario: dict[str, Any]) -> None:
    restart = scenario["process_restart"]
    assert restart["recovered_seconds"] <= RECOVERY_SECONDS
    assert restart["engine_id"] != restart["old_engine"]
    assert scenario["process_restart_plain"]["status"] == 200
    assert scenario["process_restart_plain"]["engine_id"] == restart["engine_id"]


def test_health_follows_the_prefill_role_down_and_back(scenario: dict[str, Any]) -> None:
    down, back = scenario["all_prefill_down"], scenario["prefill_back"]
    assert down["unready_seconds"] <= RECOVERY_SECONDS
    assert down["request"]["status"] == 503
    assert back["ready_seconds"] <= RECOVERY_SECONDS
    assert (back["request"]["status"], back["request"]["engine_id"]) == (200, back["engine_id"])


def test_an_added_prefill_pod_is_found_by_name_and_takes_its_turn(scenario: dict[str, Any]) -> None:
    """Autoscaled prefill: the pods come from the headless Service's name, and decode gets each one's
    own bootstrap address and engine id (vllm-router 0.1.17 gives discovered pods none)."""
    up = scenario["scale_up"]
    assert up["found_seconds"] <= RECOVERY_SECONDS
    assert set(up["turns"]) == set(up["engines"].values())


def test_a_removed_prefill_pod_fails_no_request(scenario: dict[str, Any]) -> None:
    down = scenario["scale_down"]
    assert down["requests"] > 10
    assert down["failed"] == []
    assert down["engines"] == [scenario["scale_up"]["engines"]["127.0.0.11"]]


def test_health_follows_decode_down_and_back(scenario: dict[str, Any]) -> None:
    down, back = scenario["decode_down"], scenario["decode_back"]
    assert down["unready_seconds"] <= RECOVERY_SECONDS
    assert down["request"]["status"] == 503
    assert back["ready_seconds"] <= RECOVERY_SECONDS
    assert back["request"]["status"] == 200
    assert scenario["proxy_alive"]
