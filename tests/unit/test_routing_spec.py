"""The ``routing`` field of an endpoint (components/spec/routing.py): its modes are the front's, it is
unset by default, and each refusal names the field and the fix: mode 'store', a framework whose image
cannot run the gate, and a classic endpoint that never runs more than one pod."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from components.spec import Problem, SpecError, parse_stack_config
from components.spec.autoscaling import GATELESS
from components.spec.routing import Routing
from front.router import MODES

from .stack_builders import DELETE, with_classic, with_mooncake

TRITON = {"image": "nvcr.io/nvidia/tritonserver:25.10-py3", "model": DELETE, "model_path": "/models/repository"}
TGI = {"image": "ghcr.io/huggingface/text-generation-inference:3.3.7"}


def rejected(config: dict[str, Any]) -> tuple[Problem, ...]:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(config)
    return caught.value.problems


def test_the_modes_are_the_fronts() -> None:
    assert get_args(Routing) == MODES


def test_routing_is_unset_by_default() -> None:
    for config in (with_classic(), with_mooncake()):
        assert parse_stack_config(config).endpoints["chat"].routing is None


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_is_accepted_on_a_split_endpoint_and_a_classic_one_of_several_pods(mode: str) -> None:
    assert parse_stack_config(with_mooncake({"routing": mode})).endpoints["chat"].routing == mode
    assert parse_stack_config(with_classic({"routing": mode, "replicas": 2})).endpoints["chat"].routing == mode


@pytest.mark.parametrize(
    "fields",
    [
        {"autoscaling": {"min_replicas": 1, "max_replicas": 2}},
        {"autoscaling": {"min_replicas": 0, "max_replicas": 2, "metrics": ["queue:4"]}},
        {"replicas": 3, "autoscaling": {"enabled": False}},
    ],
)
def test_a_classic_endpoint_that_may_run_two_pods_may_route(fields: dict[str, Any]) -> None:
    parse_stack_config(with_classic({"routing": "least-load", **fields}))


def test_an_unknown_mode_is_refused_naming_the_modes() -> None:
    (problem,) = rejected(with_classic({"routing": "round-robin", "replicas": 2}))
    assert problem.path == "endpoints.chat.routing"
    assert problem.message == "must be one of {least-load, prefix, random}, got 'round-robin'"


def test_mode_store_has_nothing_to_choose_between() -> None:
    (problem,) = rejected(with_mooncake({"routing": "prefix", "mooncake": {"mode": "store", "topology": DELETE}}))
    assert problem.path == "endpoints.chat.routing"
    assert problem.message == (
        "mode 'store' runs one server behind the route, with no proxy in front of it: nothing to choose between; "
        "drop routing (routing chooses the prefill engine and decode pod of modes 'disaggregated' and 'both')"
    )


@pytest.mark.parametrize(
    ("fields", "reason"),
    [(TGI, GATELESS["tgi"]), (TRITON, GATELESS["triton"])],
)
def test_a_framework_whose_image_cannot_run_the_gate_is_refused_naming_why(fields: dict[str, Any], reason: str) -> None:
    (problem,) = rejected(with_classic({"routing": "random", "replicas": 2, **fields}))
    assert problem.path == "endpoints.chat.routing"
    assert problem.message == (
        "'random' needs a gate in front of the server to choose its pod, which runs python3 with aiohttp on the "
        f"endpoint's image, and {reason}; drop routing, or serve with vLLM or SGLang"
    )


@pytest.mark.parametrize(
    ("fields", "bound", "field"),
    [
        ({}, "replicas 1, no autoscaling", "replicas"),
        ({"replicas": 0}, "replicas 0, no autoscaling", "replicas"),
        ({"replicas": 4, "autoscaling": {"max_replicas": 1}}, "autoscaling.max_replicas 1", "autoscaling.max_replicas"),
        ({"autoscaling": {"enabled": False}}, "replicas 1, no autoscaling", "replicas"),
    ],
)
def test_a_classic_endpoint_of_one_pod_at_most_has_nothing_to_choose_between(
    fields: dict[str, Any], bound: str, field: str
) -> None:
    (problem,) = rejected(with_classic({"routing": "prefix", **fields}))
    assert problem.path == "endpoints.chat.routing"
    most = bound.split(" ")[1].rstrip(",")
    assert problem.message == (
        f"'prefix' chooses one of the server's pods for each request, and this endpoint never runs more than {most} "
        f"({bound}): nothing to choose between; raise {field} above 1, or drop routing"
    )


def test_a_classic_canary_does_not_count_as_a_pod_to_choose() -> None:
    """The gate chooses among the primary's pods only; the canary's share comes from the route."""
    (problem,) = rejected(with_classic({"routing": "prefix", "canary": {"image": "vllm/vllm-openai:v0.34.0"}}))
    assert problem.path == "endpoints.chat.routing"
    assert "nothing to choose between" in problem.message


def test_a_gateless_endpoint_of_one_pod_gets_both_problems() -> None:
    problems = rejected(with_classic({"routing": "prefix", **TGI}))
    assert [problem.path for problem in problems] == ["endpoints.chat.routing"] * 2
    assert sorted("needs a gate" in p.message for p in problems) == [False, True]
