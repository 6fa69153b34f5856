"""``fleetctl verify`` against the real proxy program of a split endpoint scaled to zero: rendered
for prefill and decode at ``min_replicas: 0`` and started with no role pod, it answers /health 200
naming the roles and each completion 503 ``scaled_to_zero`` with a Retry-After, counting it; verify
waits for the wake (a KEDA stand-in starts the roles once the proxy counted a request), gives up
after --wake-wait, or does not wait. Every request verify sent is one the proxy counted."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from components.metric_table import PROXY_ANSWERED, PROXY_REQUESTS, PROXY_UNSERVED
from fleetctl.verify.evidence import counter_total
from tests.e2e.namespace import run_driver
from tests.e2e.test_mooncake_proxy import rendered_proxy
from tests.e2e.test_verify import write_stack
from tests.unit.stack_builders import mooncake_endpoint, placed_endpoint, stack_config

PORT = 8080
RETRY_AFTER_SECONDS = 1
"""The scenes' --retry-after-seconds (appended to the rendered arguments; the last one counts)."""


def at_zero() -> dict[str, Any]:
    """A role's autoscaling from zero (a fresh object each: stack files take no YAML aliases)."""
    return {"min_replicas": 0, "max_replicas": 2, "metrics": ["queue:4"]}


ENDPOINT = mooncake_endpoint(
    {
        "node_group": "gpu",
        "port": PORT,
        "mooncake": {
            "transfer": {"protocol": "tcp", "bootstrap_base_port": 8998},
            "autoscaling": {"enabled": True, "prefill": at_zero(), "decode": at_zero()},
        },
    }
)

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


def scene(tmp_path: Path, wake: bool, *arguments: str) -> dict[str, Any]:
    endpoint = placed_endpoint(stack_config(endpoints={"chat": ENDPOINT}))
    program_dir = tmp_path / "program"
    program_dir.mkdir()
    proxy = rendered_proxy(endpoint, program_dir)
    argv = proxy["argv"]
    assert [argv[i + 1] for i, arg in enumerate(argv) if arg == "--scale-to-zero"] == ["prefill", "decode"]
    metrics_port = int(argv[argv.index("--metrics-port") + 1])
    proxy["argv"] = [*argv, "--retry-after-seconds", str(RETRY_AFTER_SECONDS)]
    stack = write_stack(tmp_path, {"chat": ENDPOINT})
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"endpoints": {"chat": {"us-east-1": {"address": "http://127.0.0.1:8000"}}}}))
    spec = {
        "proxy": proxy,
        "path": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "prefill_service": f"chat-prefill.{endpoint.namespace}.svc",
        "decode_host": f"chat-decode.{endpoint.namespace}.svc",
        "port": PORT,
        "bootstrap_port": 8998,
        "proxy_port": 8000,
        "metrics_port": metrics_port,
        "api_key": "",
        "wake": wake,
        "verify": ["--stack-file", str(stack), "--outputs", str(outputs), "--timeout", "5", *arguments],
    }
    return run_driver("tests.e2e.wake_driver", json.dumps(spec), mount=True, timeout=240)


def check(result: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [item for item in result["checks"] if item["check"] == name]
    assert len(found) == 1, (result["checks"], result["errors"])
    return found[0]


def counted(result: dict[str, Any], name: str, backend: str | None = None) -> float:
    lines = result["metrics"].splitlines()
    if backend is not None:
        lines = [line for line in lines if not line.startswith(name) or f'backend="{backend}"' in line]
    value = counter_total("\n".join(lines) + "\n", name)
    assert value is not None, result["metrics"]
    return value


def test_verify_waits_for_the_wake_and_every_request_it_sent_was_counted(tmp_path: Path) -> None:
    result = scene(tmp_path, True, "--wake-wait", "60")
    assert result["health_at_zero"]["scaled_to_zero"] == ["prefill", "decode"]
    assert check(result, "health") == {**check(result, "health"), "status": "passed"}
    assert check(result, "health")["detail"] == "HTTP 200 (scaled to zero: prefill, decode)"
    request = check(result, "request")
    assert request["status"] == "passed", request
    match = re.fullmatch(
        r"decoded \(woke from zero \d+ s after the first request, asked (\d+) times\)", request["detail"]
    )
    assert match is not None, request["detail"]
    asked = int(match.group(1))
    assert asked >= 2
    assert result["woke"] == {"counted_first_request": True, "roles_started": True}
    assert counted(result, PROXY_REQUESTS) == asked
    assert counted(result, PROXY_ANSWERED) == 1
    # Each 503 counted every role it found missing: both at first, maybe one as they came up.
    unserved = [counted(result, PROXY_UNSERVED, role) for role in ("prefill", "decode")]
    assert max(unserved) == asked - 1
    assert min(unserved) >= 1


def test_an_endpoint_that_does_not_wake_within_the_wait_fails_and_each_request_was_counted(tmp_path: Path) -> None:
    result = scene(tmp_path, False, "--wake-wait", "3")
    request = check(result, "request")
    assert request["status"] == "failed"
    match = re.match(
        r"scaled to zero and not awake within --wake-wait 3 s: (\d+) requests answered 503", request["detail"]
    )
    assert match is not None, request["detail"]
    assert request["detail"].endswith(
        "(the last: POST /v1/completions: HTTP 503 prefill and decode scaled to zero: this request wakes them; "
        "retry in a few minutes)"
    )
    asked = int(match.group(1))
    assert asked >= 2  # one at once, then one after each Retry-After within the 3 s
    assert counted(result, PROXY_REQUESTS) == asked
    assert counted(result, PROXY_UNSERVED, "prefill") == counted(result, PROXY_UNSERVED, "decode") == asked
    assert result["code"] == 1


def test_with_wake_wait_0_the_one_request_that_woke_it_is_unverified(tmp_path: Path) -> None:
    result = scene(tmp_path, False, "--wake-wait", "0")
    request = check(result, "request")
    assert (request["status"], request["detail"]) == (
        "unverified",
        "scaled to zero; this request woke it (--wake-wait 0: not waited for)",
    )
    assert counted(result, PROXY_REQUESTS) == 1
    assert result["code"] == 1
