"""How a pod stops (components/render/drain.py): every pod that serves requests (classic servers of each
framework, Mooncake prefill, decode and store servers, single pods and LWS groups, the proxy and the gate)
sleeps in preStop until the ALB, kube-proxy and DNS stop sending, drains on SIGTERM, and is killed only after
both; the route's target groups hold in-flight requests exactly as long as the pod serves them.

Before the drain these failed: no container had a ``lifecycle``, no vLLM server a ``--shutdown-timeout``
(vLLM 0.33.0 then aborts every running request on SIGTERM: v1/engine/core.py ``_handle_shutdown`` mode
``abort``), the route no ``target-group-attributes``, and the proxy's grace was 60 s."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from components.render.classic import classic_objects
from components.render.drain import (
    DEREGISTRATION_DELAY_SECONDS,
    FRONT_DRAIN_SECONDS,
    PRESTOP_SECONDS,
    SERVER_DRAIN_SECONDS,
)
from components.render.mooncake import mooncake_objects
from components.render.route import ALB
from components.spec import SpecError, parse_stack_config

from .stack_builders import DELETE, placed_endpoint, with_classic, with_mooncake

SCALE_TO_ZERO = {"autoscaling": {"min_replicas": 0, "max_replicas": 3, "metrics": ["queue:4"]}}
TCP = {"transfer": {"protocol": "tcp"}, "store": {"protocol": "tcp"}}
CLASSIC: dict[str, dict[str, Any]] = {
    "vllm": {},
    "vllm-gated": SCALE_TO_ZERO,
    "sglang": {"image": "lmsysorg/sglang:v0.5.6"},
    "tgi": {"image": "ghcr.io/huggingface/text-generation-inference:3.3.6"},
    "triton": {"image": "nvcr.io/nvidia/tritonserver:25.10-py3", "model": DELETE, "model_path": "/models/repository"},
}
MOONCAKE: dict[str, dict[str, Any]] = {
    "disaggregated": {},
    "both": {"node_group": "gpu", "gpu_count": 1, "mooncake": {"mode": "both", **TCP}},
    "store-disk": {
        "node_group": "gpu",
        "gpu_count": 1,
        "mooncake": {"mode": "store", "topology": DELETE, **TCP, "store": {"offload": "disk"}},
    },
    "two-node-decode": {"mooncake": {"roles": {"decode": {"nodes": 2}}}},
}
DRAIN_FLAGS = {
    "vllm": ["--shutdown-timeout", str(SERVER_DRAIN_SECONDS)],
    "tgi": ["--graceful-termination-timeout", str(SERVER_DRAIN_SECONDS)],
    "triton": [f"--exit-timeout-secs={SERVER_DRAIN_SECONDS}"],
}


def rendered(case: str) -> dict[str, dict[str, Any]]:
    if case in CLASSIC:
        return classic_objects(placed_endpoint(with_classic(CLASSIC[case])))
    return rendered_with(MOONCAKE[case])


def rendered_with(mooncake: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return mooncake_objects(placed_endpoint(with_mooncake(mooncake)), None)


def pod_specs(objects: dict[str, dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(part, pod spec) of every workload: Deployments, StatefulSets, and each template of an LWS."""
    for part, manifest in objects.items():
        spec = manifest.get("spec", {})
        if "template" in spec:
            yield part, spec["template"]["spec"]
        for which in ("leaderTemplate", "workerTemplate"):
            if which in spec.get("leaderWorkerTemplate", {}):
                yield f"{part}/{which}", spec["leaderWorkerTemplate"][which]["spec"]


def serving(objects: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Every pod that takes requests: all but the store's master, whose pool a restart empties anyway."""
    return [(part, pod) for part, pod in pod_specs(objects) if not part.startswith("store-master")]


CASES = [*CLASSIC, *MOONCAKE]


@pytest.mark.parametrize("case", CASES)
def test_every_serving_container_sleeps_until_nothing_sends_then_drains_within_its_grace(case: str) -> None:
    pods = serving(rendered(case))
    assert pods
    for part, pod in pods:
        for container in pod["containers"]:
            pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
            front = container["name"] == "proxy"
            drain = FRONT_DRAIN_SECONDS if front else SERVER_DRAIN_SECONDS
            if container["name"] == "store-client":
                # The server reads its segments until it has drained: the sidecar outlives it.
                assert pre_stop == PRESTOP_SECONDS + SERVER_DRAIN_SECONDS, part
            else:
                assert pre_stop == PRESTOP_SECONDS, part
            assert pod["terminationGracePeriodSeconds"] > PRESTOP_SECONDS + drain, part


@pytest.mark.parametrize("case", ["vllm", "tgi", "triton"])
def test_each_framework_with_a_drain_flag_is_told_how_long_to_drain(case: str) -> None:
    (pod,) = (pod for part, pod in pod_specs(rendered(case)) if part == "deployment")
    args = pod["containers"][0]["args"]
    flags = DRAIN_FLAGS[case]
    assert any(args[i : i + len(flags)] == flags for i in range(len(args))), args


@pytest.mark.parametrize("case", list(MOONCAKE))
def test_every_vllm_role_drains_rather_than_aborts(case: str) -> None:
    for part, pod in serving(rendered(case)):
        server = pod["containers"][0]
        if server["name"] == "server":
            args = server["args"]
            assert args[args.index("--shutdown-timeout") + 1] == str(SERVER_DRAIN_SECONDS), part


@pytest.mark.parametrize("case", ["vllm", "vllm-gated", "disaggregated", "store-disk"])
def test_the_routes_target_groups_hold_in_flight_requests_as_long_as_the_pod_serves_them(case: str) -> None:
    annotations = rendered(case)["route"]["metadata"]["annotations"]
    assert annotations[f"{ALB}/target-group-attributes"] == (
        f"deregistration_delay.timeout_seconds={DEREGISTRATION_DELAY_SECONDS}"
    )
    assert DEREGISTRATION_DELAY_SECONDS == PRESTOP_SECONDS + SERVER_DRAIN_SECONDS


def test_the_fronts_drain_lasts_as_long_as_the_server_streams_behind_it() -> None:
    assert FRONT_DRAIN_SECONDS >= SERVER_DRAIN_SECONDS


@pytest.mark.parametrize("arg", ["--shutdown-timeout", "--shutdown-timeout=5"])
def test_a_drain_flag_in_args_is_refused_naming_why(arg: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(with_classic({"args": [arg] if "=" in arg else [arg, "5"]}))
    (problem,) = caught.value.problems
    assert problem.path.endswith("args[0]")
    assert "grace period" in problem.message
    assert "docs/deploying.md" in problem.message


def test_a_terminating_prefill_leaves_the_name_the_proxy_resolves() -> None:
    """Under publishNotReadyAddresses a terminating pod's endpoint stays ready (the EndpointSlice API's
    EndpointConditions.ready), so DNS would list a draining prefill through its whole preStop."""
    service = rendered("disaggregated")["prefill-service"]["spec"]
    assert service["clusterIP"] == "None"
    assert not service.get("publishNotReadyAddresses", False)


def test_a_role_of_one_group_starts_a_new_group_before_it_stops_the_old_one() -> None:
    """LWS v0.10.0's default roll (maxSurge 0, maxUnavailable 1) leaves a one-group role with no group."""
    objects = rendered("two-node-decode")
    assert objects["decode"]["kind"] == "LeaderWorkerSet"
    assert objects["decode"]["spec"]["replicas"] == 1
    rolling = objects["decode"]["spec"]["rolloutStrategy"]
    assert rolling == {"type": "RollingUpdate", "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0}}


@pytest.mark.parametrize("mode", ["disaggregated", "both"])
def test_a_prefill_of_one_replica_starts_its_successor_before_it_stops(mode: str) -> None:
    """A Deployment with maxSurge 1 and maxUnavailable 0: the new pod loads its model while the old one
    serves. A StatefulSet (prefill's kind before) rolls a pod down first: apps/v1
    RollingUpdateStatefulSetStrategy has no maxSurge, so dev's chat-pd lost its only prefill each roll."""
    endpoint = MOONCAKE[mode] | {
        "mooncake": {**MOONCAKE[mode].get("mooncake", {}), "topology": {"prefill": 1, "decode": 1}}
    }
    prefill = rendered_with(endpoint)["prefill"]
    assert prefill["kind"] == "Deployment"
    assert prefill["spec"]["replicas"] == 1
    assert prefill["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
