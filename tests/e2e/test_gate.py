"""The real proxy program as the gate of a classic endpoint autoscaled from min_replicas 0, started
exactly as its Deployment renders it (the ConfigMap's program, the container's command and arguments),
in front of a stand-in server that is absent (at zero), starts (woken), then goes away
(tests/e2e/gate_driver.py). The server's health path is not the gate's own /health, so which one the
gate reads is seen."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from components.metric_table import (
    PROXY_ANSWERED,
    PROXY_IN_FLIGHT,
    PROXY_LAST_REQUEST,
    PROXY_REQUESTS,
    PROXY_UNSERVED,
)
from components.render.classic import classic_objects
from components.render.proxy import PROXY_METRICS_PORT, PROXY_PORT
from tests.e2e.namespace import run_driver
from tests.e2e.test_mooncake_proxy import RECOVERY_SECONDS, mounted_front
from tests.e2e.test_proxy_scale_to_zero import EXPOSITION_TYPE, SCALED_TO_ZERO_TYPE, samples
from tests.unit.stack_builders import placed_endpoint, with_classic

HEALTH_PATH = "/ready"
SCALING = {"min_replicas": 0, "max_replicas": 2, "metrics": ["queue:4"]}


def rendered_gate(program_dir: Path) -> dict[str, Any]:
    endpoint = placed_endpoint(with_classic({"autoscaling": SCALING, "health_check_path": HEALTH_PATH}))
    argv, container = mounted_front(classic_objects(endpoint), "gate", program_dir)
    assert "env" not in container
    return {"argv": argv, "server_host": f"chat.{endpoint.namespace}.svc"}


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    spec = {
        **rendered_gate(tmp_path_factory.mktemp("gate-program")),
        # python3 is the image's interpreter; here the test's, which has aiohttp as the image does.
        "path": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "health_path": HEALTH_PATH,
        "port": PROXY_PORT,
        "metrics_port": PROXY_METRICS_PORT,
    }
    return run_driver("tests.e2e.gate_driver", json.dumps(spec), mount=True, timeout=180)


pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


def counts(metrics: dict[str, Any]) -> dict[str, float]:
    found = samples(metrics["text"])
    return {
        "requests": found[(PROXY_REQUESTS, ())],
        "server": found[(PROXY_UNSERVED, (("backend", "server"),))],
        "answered": found[(PROXY_ANSWERED, ())],
        "in_flight": found[(PROXY_IN_FLIGHT, ())],
    }


def test_every_series_is_exported_at_zero_with_the_server_as_the_one_backend(scene: dict[str, Any]) -> None:
    metrics = scene["before_any_request"]
    assert metrics["content_type"] == EXPOSITION_TYPE
    assert samples(metrics["text"]) == {
        (PROXY_REQUESTS, ()): 0,
        (PROXY_UNSERVED, (("backend", "server"),)): 0,
        (PROXY_ANSWERED, ()): 0,
        (PROXY_IN_FLIGHT, ()): 0,
        (PROXY_LAST_REQUEST, ()): 0,
    }


def test_at_zero_the_gate_stays_healthy_and_answers_every_request_503_with_retry_after(
    scene: dict[str, Any],
) -> None:
    assert scene["zero_health_seconds"] <= RECOVERY_SECONDS
    seen = scene["at_zero"]
    assert (seen["health"]["status"], seen["health"]["body"]) == (
        200,
        {"server": False, "answered": 0, "scaled_to_zero": ["server"]},
    )
    for answer in (seen["get"], seen["post"]):
        assert (answer["status"], answer["headers"]["retry-after"]) == (503, "30")
        assert answer["body"]["error"] == {
            "message": "server scaled to zero: this request wakes it; retry in a few minutes",
            "type": SCALED_TO_ZERO_TYPE,
            "code": 503,
        }
    assert counts(seen["metrics"]) == {"requests": 2, "server": 2, "answered": 0, "in_flight": 0}


def test_the_woken_server_is_served_within_a_refresh(scene: dict[str, Any]) -> None:
    woken = scene["woken"]
    assert woken["seconds"] <= RECOVERY_SECONDS
    assert set(woken["attempts"][:-1]) <= {503}
    assert scene["served_health"]["status"] == 200
    assert scene["served_health"]["body"]["server"] is True
    assert scene["served_health"]["body"]["scaled_to_zero"] == []


def test_a_get_goes_through_with_its_query_and_headers_and_without_hop_by_hop_ones(scene: dict[str, Any]) -> None:
    answer = scene["get"]
    assert answer["status"] == 200
    assert answer["headers"]["x-standin"] == "echo"  # the server's own headers come back
    seen = answer["body"]
    assert (seen["method"], seen["path"], seen["query"]) == ("GET", "/v1/models", "limit=2&after=a%20b")
    assert seen["headers"]["x-custom"] == "kept"
    assert seen["headers"]["x-forwarded-for"] == "127.0.0.1"
    assert seen["headers"]["host"] == "chat.inference.svc"
    assert seen["headers"]["accept-encoding"] == "identity"  # as http.client sent it
    # Connection, Keep-Alive and what Connection names are the client's connection's, not the request's;
    # nor does the gate add headers of its own client library, nor a length to a request without a body.
    for name in ("x-drop", "keep-alive", "accept", "user-agent", "content-length"):
        assert name not in seen["headers"], name


def test_any_method_path_and_body_goes_through_with_the_servers_status(scene: dict[str, Any]) -> None:
    post = scene["post"]["body"]
    assert (post["method"], post["path"], post["query"], post["body"]) == (
        "POST",
        "/anything/deep",
        "q=1",
        "raw \x00 bytes",
    )
    assert post["headers"]["content-type"] == "application/octet-stream"
    assert post["headers"]["content-length"] == str(len(b"raw \x00 bytes"))
    teapot = scene["teapot"]
    assert (teapot["status"], teapot["body"]["path"]) == (418, "/status/418")
    assert (scene["put"]["body"]["method"], scene["put"]["body"]["body"]) == ("PUT", "x")
    assert (scene["delete"]["body"]["method"], scene["delete"]["body"]["path"]) == ("DELETE", "/v1/things/1")
    # Only GET /health is the gate's own: a POST there is the server's.
    assert (scene["post_health"]["body"]["method"], scene["post_health"]["body"]["path"]) == ("POST", "/health")


def test_server_sent_events_stream_through(scene: dict[str, Any]) -> None:
    stream = scene["stream"]
    assert (stream["status"], stream["content_type"]) == (200, "text/event-stream")
    texts = [json.loads(event.removeprefix("data: "))["choices"][0]["text"] for event in stream["events"][:-1]]
    assert texts == ["part 0", "part 1", "part 2"]
    assert stream["events"][-1] == "data: [DONE]"


def test_an_answer_comes_back_compressed_only_when_the_client_asked(scene: dict[str, Any]) -> None:
    """The gate neither decompresses the server's answer nor asks for compression the client did not."""
    accepted = scene["gzip"]["accepted"]
    assert accepted["headers"]["content-encoding"] == "gzip"
    assert accepted["text"] == f"{accepted['headers']['content-length']} bytes"
    assert int(accepted["headers"]["content-length"]) < len("compressible " * 64)
    plain = scene["gzip"]["plain"]
    assert "content-encoding" not in plain["headers"]
    assert plain["text"] == "compressible " * 64


def test_a_client_going_away_mid_stream_cancels_the_servers_stream(scene: dict[str, Any]) -> None:
    left = scene["left"]
    assert left["first"].startswith("data: ")
    assert left["in_flight_streaming"] == 1
    assert left["upstream_cut_seconds"] <= RECOVERY_SECONDS
    assert left["in_flight_back_to_zero_seconds"] <= RECOVERY_SECONDS


def test_every_forwarded_request_is_counted_and_answered_none_unserved_while_served(scene: dict[str, Any]) -> None:
    """After the 2 at zero: the attempts while waking (those refused counted unserved), then get, post,
    teapot, put, delete, post_health, stream, the two gzip ones and left (10) and the queries of the
    server's cut count, every one answered."""
    attempts = scene["woken"]["attempts"]
    forwarded = 10 + scene["left"]["cut_queries"]
    assert counts(scene["served_metrics"]) == {
        "requests": 2 + len(attempts) + forwarded,
        "server": 2 + len(attempts) - 1,
        "answered": 1 + forwarded,
        "in_flight": 0,
    }


def test_a_server_gone_again_is_answered_scaled_to_zero_and_counted(scene: dict[str, Any]) -> None:
    gone = scene["gone"]
    assert gone["health"]["status"] == 200
    assert gone["health"]["body"]["scaled_to_zero"] == ["server"]
    assert (gone["post"]["status"], gone["post"]["headers"]["retry-after"]) == (503, "30")
    assert gone["post"]["body"]["error"]["type"] == SCALED_TO_ZERO_TYPE
    before, after = counts(scene["served_metrics"]), counts(gone["metrics"])
    assert after == {**before, "requests": before["requests"] + 1, "server": before["server"] + 1}
    assert scene["alive"]
