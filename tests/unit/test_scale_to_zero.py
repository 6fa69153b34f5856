"""Scale to zero (``min_replicas: 0``): accepted for the prefill and decode roles of a split Mooncake
endpoint, whose proxy counts requests and so can wake them (a classic endpoint's gate: test_gate.py);
refused, naming the field and why, where nothing would (mode 'store', a classic TGI endpoint). What an
accepted one renders: the user's triggers, plus the wake trigger on the proxy's request counter and an
explicit cooldown, held to KEDA's CRD."""

from __future__ import annotations

from typing import Any

import pytest

from components import naming
from components.metric_table import PROXY_IN_FLIGHT, PROXY_LAST_REQUEST
from components.render.autoscaling import COOLDOWN_SECONDS, PAUSED_REPLICAS
from components.render.mooncake import mooncake_objects
from components.spec import Problem, SpecError, parse_stack_config
from tests import custom_resources

from .stack_builders import DELETE, merged, placed_endpoint, with_classic, with_mooncake

PROXY_SELECTOR = '{namespace="inference",endpoint="chat",role="proxy"}'

PREFILL = {"min_replicas": 0, "max_replicas": 3, "metrics": ["queue:4", "ttft_p90_ms:800"]}
DECODE = {"min_replicas": 1, "max_replicas": 2, "metrics": ["running:32"]}


def split(mode: str = "disaggregated", **fields: Any) -> dict[str, Any]:
    scaling = {"enabled": True, "prefill": PREFILL, "decode": DECODE}
    return with_mooncake({"mooncake": {"mode": mode, "autoscaling": scaling}, **fields})


def rejected(config: dict[str, Any]) -> tuple[Problem, ...]:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(config)
    return caught.value.problems


@pytest.mark.parametrize("mode", ["disaggregated", "both"])
def test_a_split_role_at_zero_wakes_on_its_proxys_requests_beside_its_own_metrics(mode: str) -> None:
    objects = mooncake_objects(placed_endpoint(split(mode)), None)
    prefill = objects["prefill-autoscaler"]
    spec = prefill["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"], spec["cooldownPeriod"]) == (0, 3, COOLDOWN_SECONDS)
    assert [t["name"] for t in spec["triggers"]] == ["queue", "ttft-p90-ms", "wake"]
    wake = spec["triggers"][-1]
    assert wake == {
        "type": "prometheus",
        "name": "wake",
        "metricType": "AverageValue",
        "metadata": {
            "serverAddress": naming.prometheus_query_url(),
            "query": f"clamp_max((time() - max({PROXY_LAST_REQUEST}{PROXY_SELECTOR}) < bool 300) + "
            f"sum({PROXY_IN_FLIGHT}{PROXY_SELECTOR}), 1)",
            "threshold": "1",
            "activationThreshold": "0",
        },
    }
    assert custom_resources.problems(prefill) == []


def test_a_role_kept_at_one_or_more_has_no_wake_trigger_and_keedas_default_cooldown() -> None:
    decode = mooncake_objects(placed_endpoint(split()), None)["decode-autoscaler"]["spec"]
    assert [t["name"] for t in decode["triggers"]] == ["running"]
    assert "cooldownPeriod" not in decode


def test_a_stopped_endpoint_at_zero_stays_paused_at_zero() -> None:
    prefill = mooncake_objects(placed_endpoint(split(desired_state="stopped")), None)["prefill-autoscaler"]
    assert prefill["metadata"]["annotations"][PAUSED_REPLICAS] == "0"
    assert custom_resources.problems(prefill) == []


def test_the_canary_set_of_an_endpoint_at_zero_has_no_autoscaler() -> None:
    config = split(canary={"image": "vllm/vllm-openai:v0.34.0", "weight": 10})
    objects = mooncake_objects(placed_endpoint(config), None)
    assert objects["prefill-autoscaler"]["spec"]["minReplicaCount"] == 0
    assert not [part for part in objects if part.startswith("canary-") and part.endswith("-autoscaler")]
    assert "canary-proxy" in objects


def test_a_classic_endpoint_whose_image_cannot_run_the_gate_is_refused_naming_the_field_and_the_fix() -> None:
    """A classic vLLM or SGLang endpoint at zero gets a gate (tests/unit/test_gate.py); TGI's image cannot run it."""
    tgi = {"image": "ghcr.io/huggingface/text-generation-inference:3.3.7"}
    (problem,) = rejected(with_classic({"autoscaling": {"min_replicas": 0, "max_replicas": 2}, **tgi}))
    assert problem.path == "endpoints.chat.autoscaling.min_replicas"
    assert "TGI's image" in problem.message
    assert "keep min_replicas at 1 or more" in problem.message


def test_a_store_mode_role_at_zero_is_refused_saying_no_proxy_counts_its_requests() -> None:
    config = merged(split("store"), {"endpoints": {"chat": {"mooncake": {"topology": DELETE}}}})
    problems = rejected(config)
    (problem,) = [p for p in problems if p.path.endswith(".min_replicas")]
    assert problem.path == "endpoints.chat.mooncake.autoscaling.prefill.min_replicas"
    assert "mode 'store' has no proxy" in problem.message


def test_a_disabled_autoscaler_at_zero_is_not_checked_as_before() -> None:
    """An autoscaling block switched off renders nothing, so its bounds are not held (unchanged)."""
    config = with_classic({"autoscaling": {"enabled": False, "min_replicas": 0, "max_replicas": 2}})
    assert parse_stack_config(config).endpoints["chat"].autoscaling is not None
