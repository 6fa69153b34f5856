"""The real proxy program's /metrics and its behaviour while roles are at zero: three proxies
started as rendered (one for an endpoint whose prefill and decode autoscale from 0, one whose
prefill alone does, one with neither), in front of stand-ins that are absent, start, then lose
decode (tests/e2e/proxy_zero_driver.py). The exposition is parsed by prometheus_client's parser
and held to the names the rendering uses (components/metric_table.py)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from components.metric_table import (
    PROXY_ANSWERED,
    PROXY_IN_FLIGHT,
    PROXY_LAST_REQUEST,
    PROXY_REQUESTS,
    PROXY_UNSERVED,
)
from components.render.placement import PlacedEndpoint
from components.render.proxy import PROXY_METRICS_PORT, PROXY_PORT, REFRESH_SECONDS
from tests.e2e.namespace import run_driver
from tests.e2e.test_mooncake_proxy import ADMIN_KEY, PORT, rendered_proxy, split_endpoint
from tests.front.test_metrics import SERIES_AT_ZERO
from tests.unit.stack_builders import mooncake_endpoint, placed_endpoint, stack_config

RECOVERY_SECONDS = REFRESH_SECONDS + 3
"""A refresh period, plus room for one refresh and a busy test machine."""
EXPOSITION_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SCALED_TO_ZERO_TYPE = "scaled_to_zero"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def at_zero(roles: tuple[str, ...]) -> PlacedEndpoint:
    """The split endpoint of tests/e2e/test_mooncake_proxy.py with an autoscaler from 0 to 4 for each of
    ``roles`` (the others as they were)."""
    if not roles:
        return split_endpoint()
    mooncake = {
        "transfer": {"protocol": "tcp", "bootstrap_base_port": 8998},
        "proxy": {"admin_api_key_secret": "chat-admin"},
        "autoscaling": {
            "enabled": True,
            "prefill": {"min_replicas": 1, "max_replicas": 4},
            **{role: {"min_replicas": 0, "max_replicas": 4} for role in roles},
        },
    }
    spec = mooncake_endpoint({"node_group": "gpu", "port": PORT, "mooncake": mooncake})
    return placed_endpoint(stack_config(endpoints={"chat": spec}))


def samples(text: str) -> Samples:
    """Every sample of an exposition, by name and labels; the families' types checked on the way."""
    types = {
        PROXY_REQUESTS: "counter",
        PROXY_UNSERVED: "counter",
        PROXY_ANSWERED: "counter",
        PROXY_IN_FLIGHT: "gauge",
        PROXY_LAST_REQUEST: "gauge",
    }
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            assert types[sample.name] == family.type, (sample.name, family.type)
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def unserved(found: Samples, backend: str) -> float:
    return found[(PROXY_UNSERVED, (("backend", backend),))]


def counts(metrics: dict[str, Any]) -> dict[str, float]:
    found = samples(metrics["text"])
    return {
        "requests": found[(PROXY_REQUESTS, ())],
        "prefill": unserved(found, "prefill"),
        "decode": unserved(found, "decode"),
        "answered": found[(PROXY_ANSWERED, ())],
        "in_flight": found[(PROXY_IN_FLIGHT, ())],
    }


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    proxies = {}
    offset = {"both": 0, "prefill": 1, "plain": 2}
    for name, roles in {"both": ("prefill", "decode"), "prefill": ("prefill",), "plain": ()}.items():
        rendered = rendered_proxy(at_zero(roles), tmp_path_factory.mktemp(f"proxy-{name}"))
        # Three proxies in one namespace: each on ports of its own (the last of a repeated option wins).
        port, metrics_port = PROXY_PORT + offset[name], PROXY_METRICS_PORT + offset[name]
        rendered["argv"] += ["--port", str(port), "--metrics-port", str(metrics_port)]
        proxies[name] = {**rendered, "port": port, "metrics_port": metrics_port}
    spec = {
        "proxies": proxies,
        "path": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "prefill_service": "chat-prefill.inference.svc",
        "decode_host": "chat-decode.inference.svc",
        "port": PORT,
        "bootstrap_port": 8998,
        "api_key": ADMIN_KEY,
    }
    return run_driver("tests.e2e.proxy_zero_driver", json.dumps(spec), mount=True, timeout=180)


pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


def test_every_series_is_exported_at_zero_before_any_request(scene: dict[str, Any]) -> None:
    for metrics in scene["before_any_request"].values():
        assert metrics["content_type"] == EXPOSITION_TYPE
        assert samples(metrics["text"]) == SERIES_AT_ZERO


def test_at_zero_the_proxy_stays_healthy_and_answers_503_with_retry_after(scene: dict[str, Any]) -> None:
    assert scene["zero_health_seconds"] <= RECOVERY_SECONDS
    both = scene["at_zero"]["both"]
    assert both["health"]["status"] == 200
    assert both["health"]["body"]["scaled_to_zero"] == ["prefill", "decode"]
    request = both["request"]
    assert (request["status"], request["retry_after"]) == (503, "30")
    assert request["body"]["error"]["type"] == SCALED_TO_ZERO_TYPE
    assert request["body"]["error"]["code"] == 503
    assert request["body"]["error"]["message"].startswith("prefill and decode scaled to zero: this request wakes them")
    assert counts(both["metrics"]) == {"requests": 1, "prefill": 1, "decode": 1, "answered": 0, "in_flight": 0}
    # The time it came (Unix seconds): what the wake trigger reads.
    assert samples(both["metrics"]["text"])[(PROXY_LAST_REQUEST, ())] > 1.7e9


def test_a_role_at_zero_not_named_by_scale_to_zero_keeps_todays_503s_and_is_counted(scene: dict[str, Any]) -> None:
    """Without --scale-to-zero (and with prefill alone while decode is missing too): /health 503 with
    no scaled_to_zero, requests the program's present 503, both roles' unserved counted."""
    for name in ("plain", "prefill"):
        seen = scene["at_zero"][name]
        assert seen["health"]["status"] == 503
        assert seen["health"]["body"].get("scaled_to_zero", []) == []
        request = seen["request"]
        assert (request["status"], request["retry_after"]) == (503, None)
        assert request["body"]["error"] == {
            "message": "no prefill instance is available",
            "type": "service_unavailable",
            "code": 503,
        }
        assert counts(seen["metrics"]) == {"requests": 1, "prefill": 1, "decode": 1, "answered": 0, "in_flight": 0}
    assert "scaled_to_zero" not in scene["at_zero"]["plain"]["health"]["body"]


def test_woken_roles_serve_within_a_refresh_and_unserved_stops_growing(scene: dict[str, Any]) -> None:
    assert scene["woken_seconds"] <= RECOVERY_SECONDS
    for name, served in scene["served"].items():
        # Every attempt before the one served was refused for a role not seen yet (which one depends on
        # where the proxy's refresh stood as the stand-ins started).
        refused = served["attempts"] - 1
        seen = counts(served["after_unserved"])
        assert (seen["requests"], seen["answered"], seen["in_flight"]) == (1 + served["attempts"], 1, 0), name
        assert 1 <= seen["prefill"] <= 1 + refused, name
        assert 1 <= seen["decode"] <= 1 + refused, name
        assert seen["prefill"] + seen["decode"] >= 2 + refused, name
        woken = scene["woken"][name]
        assert woken["health"]["status"] == 200
        assert woken["requests"] == [200, 200, 200]
        assert woken["health"]["body"].get("scaled_to_zero", []) == []
        after = counts(scene["woken_metrics"][name])
        assert (after["prefill"], after["decode"]) == (seen["prefill"], seen["decode"]), name
        assert after["answered"] == seen["answered"] + 3 + (name == "plain")


def test_the_in_flight_gauge_falls_back_when_the_client_leaves_mid_stream(scene: dict[str, Any]) -> None:
    left = scene["left_mid_stream"]
    assert left["status"] == 200
    assert left["first_line"].startswith("data: ")
    assert left["in_flight_streaming"] == 1
    assert left["back_to_zero_seconds"] <= RECOVERY_SECONDS
    assert counts(scene["woken_metrics"]["plain"])["in_flight"] == 0


def test_decode_at_zero_while_prefill_runs_counts_only_decode(scene: dict[str, Any]) -> None:
    for name, seen in scene["decode_gone"].items():
        before, after = counts(scene["woken_metrics"][name]), counts(seen["metrics"])
        assert after["requests"] == before["requests"] + 1, name
        assert (after["prefill"], after["decode"]) == (before["prefill"], before["decode"] + 1), name
    both = scene["decode_gone"]["both"]
    assert both["health"]["status"] == 200
    assert both["health"]["body"]["scaled_to_zero"] == ["decode"]
    assert (both["request"]["status"], both["request"]["retry_after"]) == (503, "30")
    assert both["request"]["body"]["error"]["message"].startswith("decode scaled to zero: this request wakes it")
    for name in ("prefill", "plain"):  # decode is not theirs to be at zero: today's answers
        seen = scene["decode_gone"][name]
        assert seen["health"]["status"] == 503
        assert seen["request"]["status"] == 503
        assert seen["request"]["body"]["error"]["message"].startswith("decode is unreachable")


def test_a_bad_request_is_counted_received_and_not_unserved(scene: dict[str, Any]) -> None:
    assert scene["bad_body"] == 400
    before, after = counts(scene["decode_gone"]["both"]["metrics"]), counts(scene["bad_body_metrics"])
    assert after == {**before, "requests": before["requests"] + 1}
    assert scene["alive"]
