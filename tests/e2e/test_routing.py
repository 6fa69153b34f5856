"""The real proxy program of a split endpoint with ``routing: prefix``, started exactly as its Deployment
renders it (``--routing prefix --decode-pods http://chat-decode-pods.<ns>.svc:<port>``), in front of two
prefill and two decode stand-ins (tests/e2e/routing_driver.py): each conversation keeps to the engine and
the pod that hold its prefix, both are used, /metrics says what it believed cached, and a decode pod that
dies between two refreshes costs no request."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from prometheus_client.parser import text_string_to_metric_families

from components.render.placement import PlacedEndpoint
from components.render.proxy import PROXY_METRICS_PORT, PROXY_PORT
from components.spec.server_args import flag_value
from fleetctl.verify.evidence import counter_total
from fleetctl.verify.incluster import routed_counts
from front.metrics import ROUTED_BLOCKS, ROUTED_CACHED_BLOCKS
from tests.e2e.namespace import run_driver
from tests.e2e.test_mooncake_proxy import ADMIN_KEY, PORT, rendered_proxy
from tests.unit.stack_builders import mooncake_endpoint, placed_endpoint, stack_config

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


def routed_endpoint() -> PlacedEndpoint:
    """2P2D over TCP with routing by prefix, the role servers holding an admin key."""
    mooncake = {
        "topology": {"prefill": 2, "decode": 2},
        "transfer": {"protocol": "tcp", "bootstrap_base_port": 8998},
        "proxy": {"admin_api_key_secret": "chat-admin"},
    }
    spec = mooncake_endpoint({"node_group": "gpu", "port": PORT, "routing": "prefix", "mooncake": mooncake})
    return placed_endpoint(stack_config(endpoints={"chat": spec}))


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    endpoint = routed_endpoint()
    proxy = rendered_proxy(endpoint, tmp_path_factory.mktemp("proxy-program"))
    assert flag_value(tuple(proxy["argv"]), "--routing") == "prefix"
    decode_pods = urlsplit(flag_value(tuple(proxy["argv"]), "--decode-pods") or "")
    assert (decode_pods.hostname, decode_pods.port) == (f"chat-decode-pods.{endpoint.namespace}.svc", PORT)
    spec = {
        "proxy": proxy,
        "path": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "prefill_service": f"chat-prefill.{endpoint.namespace}.svc",
        "decode_host": f"chat-decode.{endpoint.namespace}.svc",
        "decode_pods_host": decode_pods.hostname,
        "port": PORT,
        "bootstrap_port": 8998,
        "proxy_port": PROXY_PORT,
        "metrics_port": PROXY_METRICS_PORT,
        "api_key": ADMIN_KEY,
    }
    return run_driver("tests.e2e.routing_driver", json.dumps(spec), mount=True, timeout=240)


def test_every_conversation_returns_to_the_engine_and_the_pod_that_hold_its_prefix(scenario: dict[str, Any]) -> None:
    first, *later = scenario["rounds"]
    assert all(answer["status"] == 200 for round_ in scenario["rounds"] for answer in round_.values()), scenario
    for round_ in later:
        assert round_ == first, scenario["proxy_log"][-2000:]


def test_at_no_load_every_question_goes_where_the_shared_system_prompt_is(scenario: dict[str, Any]) -> None:
    """One request at a time: nothing is in flight, so the longest prefix decides alone, and every
    question after the first finds the system prompt on the engine and the pod the first one went to."""
    first = scenario["rounds"][0].values()
    assert len({answer["prefill"] for answer in first}) == 1
    assert len({answer["decode"] for answer in first}) == 1


def test_requests_at_once_are_spread_over_both_engines_and_both_pods_within_the_balance(
    scenario: dict[str, Any],
) -> None:
    """The same prompt eight times at once, each holding both roles half a second: the longest prefix
    alone would put all eight on one engine; front/routing.py's balance (1.25 times the mean in flight)
    allows at most five of the eight on either."""
    burst = scenario["burst"]
    assert [answer["status"] for answer in burst] == [200] * len(burst), burst
    for role in ("prefill", "decode"):
        counts = Counter(answer[role] for answer in burst)
        assert len(counts) == 2, (role, counts)
        assert max(counts.values()) <= 5, (role, counts)


def backend_total(metrics: str, name: str, backend: str) -> float:
    """The sample of ``name`` labelled only with ``backend``, read by prometheus_client's parser."""
    (value,) = [
        sample.value
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == name and sample.labels == {"backend": backend}
    ]
    return value


def test_the_metrics_say_how_much_of_the_routed_prompts_the_front_believed_cached(scenario: dict[str, Any]) -> None:
    """Three rounds of the same eight questions: the second and third find every block of theirs cached,
    the first at least the system prompt after its first request."""
    metrics = scenario["metrics"]
    routed = counter_total(metrics, ROUTED_BLOCKS)
    cached = counter_total(metrics, ROUTED_CACHED_BLOCKS)
    assert routed is not None, metrics
    assert cached is not None, metrics
    assert routed > 0
    assert cached / routed > 0.6, metrics


def test_fleetctl_verify_reads_the_counts_the_metrics_carry_in_the_serving_ports_health(
    scenario: dict[str, Any],
) -> None:
    """The metrics port admits only the region's Prometheus, so fleetctl verify reads a front's routing
    counts in its /health on the serving port, through the API server's pod proxy."""
    counts = routed_counts(scenario["health"], "chat-proxy-0")
    metrics = scenario["metrics"]
    for backend in ("prefill", "decode"):
        assert counts[backend] == (
            int(backend_total(metrics, ROUTED_BLOCKS, backend)),
            int(backend_total(metrics, ROUTED_CACHED_BLOCKS, backend)),
        )


def test_a_decode_pod_killed_between_two_refreshes_costs_no_request(scenario: dict[str, Any]) -> None:
    """Its connection refused, the proxy sends the request to the other decode pod."""
    after = scenario["after_kill"]
    assert after["status"] == 200, after
    assert after["decode"] != scenario["killed"]
