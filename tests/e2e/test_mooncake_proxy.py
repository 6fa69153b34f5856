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
from components.render.proxy import PROGRAM_DIR, PROXY_METRICS_PORT, PROXY_PORT, REFRESH_SECONDS
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
    ConfigMap's files where its volume mounts them (here ``program_dir``, each key at its item's path);
    and the container."""
    (volume,) = [v for v in objects[front]["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    data = objects[f"{front}-program"]["data"]
    for item in volume["configMap"]["items"]:
        (program_dir / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (program_dir / item["path"]).write_text(data[item["key"]])
    (container,) = objects[front]["spec"]["template"]["spec"]["containers"]
    assert container["command"][1] == PROGRAM_DIR
    argv = [*container["command"], *container["args"]]
    argv[1] = str(program_dir)
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
        "metrics_port": PROXY_METRICS_PORT,
        "api_key": ADMIN_KEY,
    }
    return run_driver("tests.e2e.proxy_driver", json.dumps(spec), mount=True, timeout=240)


pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


def test_the_proxy_serves_once_one_listed_prefill_pod_and_decode_answer(scenario: dict[str, Any]) -> None:
    """One of the two pods the prefill Service lists never starts: the proxy serves with the other."""
    assert scenario["ready_seconds"] <= RECOVERY_SECONDS
    assert scenario["health"] == {"prefill": 1, "decode": True, "answered": 0}
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


def test_a_prefill_restart_between_two_refreshes_costs_no_stream(scenario: dict[str, Any]) -> None:
    """A stream has its 200 before decode fails, and decode's error event opens it: the proxy reads that
    before the client gets any of it, finds the pod's new id and prefills again."""
    stream = scenario["unseen_restart_stream"]
    assert stream["failed"] == []
    assert stream["recovered_seconds"] <= RECOVERY_SECONDS


def test_a_decode_whose_load_fails_before_any_output_is_run_again(scenario: dict[str, Any]) -> None:
    """The prefill engine is current and the transfer there, yet decode's load fails once (a real vLLM
    decode did when the Mooncake transfer engine returned -1): the client gets the second run's answer,
    whole or streamed, not the 500 or the error event."""
    failed = scenario["load_fails_once"]
    assert failed["plain"] == {
        "status": 200,
        "engine_id": scenario["first_engine"],
        "bootstrap": "http://127.0.0.11:8998",
    }
    assert failed["stream"] == {"status": 200, "engine_id": scenario["first_engine"], "text": "decoded"}
    assert scenario["proxy_log"].count("decode failed before any output under request") == 2


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


def test_the_health_the_load_balancer_reads_names_no_pod_and_no_engine(scenario: dict[str, Any]) -> None:
    """The serving port's /health is reachable through the ALB: how many engines serve, not where; the
    prefill pods' addresses and engine ids are on the metrics port (open to the region's Prometheus)."""
    assert scenario["health_after_two"] == {"prefill": 1, "decode": True, "answered": 2}
    engines = {"127.0.0.11": {"0": scenario["first_engine"]}}
    assert scenario["detail"] == {"prefill": engines, "decode": True, "answered": 2}


def decoded(answer: dict[str, Any]) -> bool:
    """Whether decode answered (its stand-in names the KV it pulled)."""
    return answer["status"] == 200 and "kv" in answer["body"]


def test_a_prompt_whose_first_token_is_eos_is_decoded(scenario: dict[str, Any]) -> None:
    """Without min_tokens 1 the prefill samples EOS, finishes FINISHED_STOPPED and keeps no KV, and the
    decoder's pull fails (vLLM: after VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT, 480 s, then 500)."""
    shapes = scenario["shapes"]
    assert decoded(shapes["eos_first"]), shapes["eos_first"]
    assert decoded(shapes["eos_first_chat"]), shapes["eos_first_chat"]


def test_the_clients_min_tokens_reaches_decode_not_the_prefill(scenario: dict[str, Any]) -> None:
    """vLLM refuses min_tokens above max_tokens; the prefill's max_tokens is 1."""
    assert decoded(scenario["shapes"]["min_tokens"]), scenario["shapes"]["min_tokens"]


def test_a_prefill_finished_on_a_stop_string_is_the_answer(scenario: dict[str, Any]) -> None:
    """The prefill's one token ends the generation: its answer is the client's, streamed as vLLM streams
    it when the client asked for a stream (a chunk, the usage asked for, [DONE])."""
    shapes = scenario["shapes"]
    plain = shapes["stop_string"]
    assert plain["status"] == 200
    assert "kv" not in plain["body"]
    assert [(c["text"], c["finish_reason"]) for c in plain["body"]["choices"]] == [("", "stop")]
    events = shapes["stop_string_stream"]["events"]
    assert events[-1] == "[DONE]"
    assert [event["object"] for event in events[:-1]] == ["text_completion", "text_completion"]
    assert events[0]["choices"][0]["finish_reason"] == "stop"
    assert (events[1]["choices"], events[1]["usage"]["completion_tokens"]) == ([], 1)
    chat = shapes["stop_string_chat_stream"]["events"]
    assert chat[0]["object"] == "chat.completion.chunk"
    assert chat[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chat[-1] == "[DONE]"


def test_several_engine_requests_under_one_transfer_are_refused_naming_the_field(scenario: dict[str, Any]) -> None:
    """vLLM fans n > 1 and a list of prompts out into engine requests under the one transfer id."""
    shapes = scenario["shapes"]
    assert shapes["n"]["status"] == 400
    assert shapes["n"]["body"]["error"]["message"].startswith("n is 2:")
    assert shapes["prompts"]["status"] == 400
    assert shapes["prompts"]["body"]["error"]["message"].startswith("prompt holds 2 prompts")
    assert decoded(shapes["one_prompt_in_a_list"])
    assert decoded(shapes["token_ids"])  # a list of token ids is one prompt


def test_the_routes_that_need_no_prefill_go_to_decode_with_the_key(scenario: dict[str, Any]) -> None:
    """The role servers require the admin key on /v1 (vLLM's GUARDED_PREFIX) and only the proxy has it."""
    shapes = scenario["shapes"]
    assert shapes["models"] == {
        "status": 200,
        "body": {"object": "list", "data": [{"id": "Qwen/Qwen3-8B", "object": "model"}]},
    }
    assert shapes["tokenize"]["body"]["tokens"] == [9707, 1879]
    assert shapes["detokenize"]["body"] == {"prompt": "hello"}
    assert shapes["responses"]["body"]["output_text"] == "unsplit"
    assert shapes["sleep"]["status"] == 404  # an operator's route of vLLM's, not a client's
    assert shapes["lora"]["status"] == 404


def test_a_stalled_health_keeps_the_proxy_serving_until_several_probes_missed(scenario: dict[str, Any]) -> None:
    """Both roles answer /health later than the probe's timeout for two probes: the proxy stays ready and
    every request is answered; stalled for longer, decode is taken out."""
    stall = scenario["stall"]
    assert stall["statuses"] == [200]
    assert (stall["failed"], stall["requests"] > 10) == ([], True)
    long = scenario["long_stall"]
    assert 503 in long["statuses"]
    assert long["first_503"] is not None
    assert long["first_503"] > 0


def test_sigterm_finishes_the_stream_in_flight_refusing_new_connections(scenario: dict[str, Any]) -> None:
    drain = scenario["drain"]
    events = drain["stream"]["events"]
    assert (drain["stream"]["status"], events[-1]) == (200, "[DONE]")
    assert "".join(event["choices"][0]["text"] for event in events[:-1]) == "decoded"
    assert drain["health_while_draining"] == 0  # refused: readiness fails, the pod leaves its Service
    assert drain["exit"] == 0
    assert 1.0 < drain["exit_seconds"] < 10  # it waited for the stream (1.5 s), not for --drain-seconds
