"""Inside a private network and mount namespace (``unshare -n -m``): the real proxy program, started
as the proxy Deployment renders it for a split endpoint whose prefill and decode autoscale from
``min_replicas: 0``, with no role pod (at zero); then ``fleetctl verify`` against it. With ``wake``,
a stand-in for KEDA reads the proxy's /metrics as Prometheus would and, once it counts a request,
starts the prefill and decode stand-ins (tests/e2e/pd_standins.py) and lists them under their
Services, as scaling the workloads from zero would. Prints verify's exit code and checks, and the
proxy's exposition after the run, as JSON."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import threading
import time
import urllib.request
from typing import Any

from fleetctl.verify.command import main as verify
from tests.e2e.proxy_driver import DECODE, PREFILL_A, Scene, get, reported, wait_until

POLL_SECONDS = 0.2


def exposition(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


def keda(scene: Scene, metrics_url: str, woke: dict[str, Any]) -> None:
    """Scale both roles from zero once the proxy has counted a request (what the wake trigger reads)."""
    while not any(
        line.startswith("inference_fleet_proxy_requests_total") and float(line.split()[-1]) >= 1
        for line in exposition(metrics_url).splitlines()
    ):
        time.sleep(POLL_SECONDS)
    woke["counted_first_request"] = True
    scene.start_standin("decode", DECODE)
    scene.start_standin("prefill", PREFILL_A)
    scene.network([PREFILL_A])
    woke["roles_started"] = True


def scenario(scene: Scene, spec: dict[str, Any]) -> dict[str, Any]:
    metrics_url = f"http://127.0.0.1:{spec['metrics_port']}/metrics"
    woke: dict[str, Any] = {}
    scene.network([])
    proxy = spec["proxy"]
    scene.start("proxy", proxy["argv"], {**os.environ, "PATH": spec["path"], **proxy["env"]})
    wait_until(lambda: scene.health() == 200, "the proxy ready at zero")
    health = get(f"{scene.proxy_url}/health")[1]
    if spec["wake"]:
        threading.Thread(target=keda, args=(scene, metrics_url, woke), daemon=True).start()
    printed, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
        code = verify([*spec["verify"], "--output", "json"])
    return {
        "code": code,
        "checks": json.loads(printed.getvalue() or "[]"),
        "errors": errors.getvalue(),
        "health_at_zero": health,
        "metrics": exposition(metrics_url),
        "woke": woke,
    }


def main() -> None:
    """argv: a JSON object: proxy {argv, env}, path, prefill_service, decode_host, port,
    bootstrap_port, proxy_port, metrics_port, api_key, verify (its arguments), wake (bool)."""
    spec = json.loads(sys.argv[1])
    scene = Scene(spec)
    print(json.dumps(reported(scene.logs, lambda: scenario(scene, spec), scene.close)))


if __name__ == "__main__":
    main()
