"""A rollout of a split endpoint (its prefill, decode and proxy Deployments) and of a classic
endpoint with a gate (its server and gate Deployments) under steady load, through the real proxy
program started as both fronts render it, in front of stand-ins that drain on SIGTERM as vLLM does
with ``--shutdown-timeout`` (tests/e2e/rollout_driver.py plays Kubernetes and the load balancer).

The timings are the rendered pod specs' where the scene can take them: each pod is killed at its
``terminationGracePeriodSeconds`` and each front drains for the ``--drain-seconds`` its container is
rendered with (the program's default where it is rendered with none). The preStop is the scene's
(``SCENE_PRESTOP_SECONDS``): here the load balancer and the Services stop sending the moment a pod is
deregistered, where in a cluster they take the rendered preStop's seconds; what is left is the proxy's
own look at the prefill pods (a refresh and its probes), which the preStop must cover too: the
Deployment deletes an old prefill pod once its successor is ready, which the proxy sees only at its
next refresh.

Two scenes: every pod rolled (two prefill pods, then decode, the server and the fronts), and a prefill of
one pod rolled alone (a one-replica prefill role, as dev's chat-pd: its Deployment starts the successor
before it deletes the only pod, components/render/mooncake_roles.py ``role_deployment``)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from components.render.classic import classic_objects
from components.render.mooncake import mooncake_objects
from components.render.proxy import PROXY_PORT, REFRESH_SECONDS
from tests.e2e.namespace import run_driver
from tests.e2e.test_gate import HEALTH_PATH, SCALING
from tests.e2e.test_mooncake_proxy import ADMIN_KEY, PORT, mounted_front, rendered_proxy, split_endpoint
from tests.unit.stack_builders import placed_endpoint, with_classic

SCENE_PRESTOP_SECONDS = REFRESH_SECONDS + 1.0
AFTER_PREFILL = ["decode", "server", "split_fronts", "classic_fronts"]
SCENES: dict[str, dict[str, Any]] = {
    "every-pod": {"prefill_pods": 2, "roll": AFTER_PREFILL},
    "one-prefill-pod": {"prefill_pods": 1, "roll": []},
}
"""Which pods each scene rolls: how many prefill pods it starts (and rolls), and what it rolls after them."""
ROLES = {"prefill": "prefill", "decode": "decode", "split": "proxy", "server": "deployment", "classic": "gate"}
"""The scene's pods and the rendered object each one is a pod of."""


def grace(objects: dict[str, dict[str, Any]], name: str) -> int:
    seconds = objects[name]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert isinstance(seconds, int)
    return seconds


def pre_stop(objects: dict[str, dict[str, Any]], name: str) -> float | None:
    """The rendered preStop's sleep; None for a pod rendered without one."""
    (container, *_) = objects[name]["spec"]["template"]["spec"]["containers"]
    seconds = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds")
    return None if seconds is None else float(seconds)


@pytest.fixture(scope="module", params=sorted(SCENES))
def rollout(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    split = split_endpoint()
    classic = placed_endpoint(with_classic({"autoscaling": SCALING, "health_check_path": HEALTH_PATH}))
    split_objects, classic_objects_ = mooncake_objects(split, None), classic_objects(classic)
    objects = {**split_objects, **classic_objects_}
    gate_dir = tmp_path_factory.mktemp("gate-program")
    gate_argv, _ = mounted_front(classic_objects_, "gate", gate_dir)
    spec = {
        "fronts": {
            "split": rendered_proxy(split, tmp_path_factory.mktemp("proxy-program")),
            "classic": {"argv": gate_argv, "env": {}},
        },
        "path": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "prefill_service": f"chat-prefill.{split.namespace}.svc",
        "decode_host": f"chat-decode.{split.namespace}.svc",
        "server_host": f"chat.{classic.namespace}.svc",
        "health_path": HEALTH_PATH,
        "port": PORT,
        "bootstrap_port": 8998,
        "proxy_port": PROXY_PORT,
        "api_key": ADMIN_KEY,
        "prestop_seconds": SCENE_PRESTOP_SECONDS,
        "grace": {role: grace(objects, name) for role, name in ROLES.items()},
        **SCENES[request.param],
    }
    result = run_driver("tests.e2e.rollout_driver", json.dumps(spec), mount=True, timeout=300)
    result["rendered_pre_stop"] = {role: pre_stop(objects, name) for role, name in ROLES.items()}
    return {**result, "scene": SCENES[request.param]}


pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


def test_a_rollout_under_steady_load_fails_no_request(rollout: dict[str, Any]) -> None:
    assert rollout["failed"] == []
    phases = rollout["phases"]
    assert list(phases) == ["steady", "prefill", *rollout["scene"]["roll"]]
    before: dict[str, int] = {"split": 0, "classic": 0}
    for phase in phases:
        for kind in ("split", "classic"):
            assert phases[phase][kind] > before[kind], (phase, kind)  # requests were answered meanwhile
        before = phases[phase]


def test_every_pod_drained_and_exited_before_its_grace_period(rollout: dict[str, Any]) -> None:
    """The prefill pods, and two pods of each other rolled: decode, server, proxy, gate."""
    exits = rollout["exits"]
    scene = rollout["scene"]
    assert len(exits) == scene["prefill_pods"] + 2 * len(scene["roll"])
    assert [pod for pod in exits if pod["exit"] != 0] == []


def test_the_rendered_pre_stop_is_no_shorter_than_the_scenes(rollout: dict[str, Any]) -> None:
    """Every pod the scene rolls is rendered with a preStop (components/render/drain.py), and it leaves
    the load balancer at least the time the scene's does."""
    shorter = {
        role: seconds
        for role, seconds in rollout["rendered_pre_stop"].items()
        if seconds is None or seconds < SCENE_PRESTOP_SECONDS
    }
    assert shorter == {}
