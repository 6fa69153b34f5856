"""Runs inside a private network and mount namespace (``unshare -n -m``): the real proxy program,
started as rendered for an endpoint whose prefill and decode autoscale from 0, with neither role
running; Debian's real Prometheus with the rendered scrape configuration, given the targets
Kubernetes pod discovery would give for the rendered proxy pod; and the rendered wake queries asked
of that Prometheus before and after one request reaches the proxy, or (request_first) once, the
request having reached the proxy before Prometheus first scraped it. Prints what it saw as JSON.

argv: a JSON object: prometheus (the server binary), config (the rendered prometheus.yml, without
discovery files), targets (job -> list of {port, labels}), proxy ({argv, env}), path, queries (the
wake queries), gauge (the PromQL of the series they read), request_first, proxy_port, and the Scene's prefill_service,
decode_host, port, bootstrap_port, api_key.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from tests.e2e.proxy_driver import Scene, get, post, reported, wait_until
from tests.e2e.scrape_driver import query, start_prometheus

WAKE_SECONDS = 30.0
"""Scrapes here are every second: a wake visible to the query takes a scrape or two."""


def values(port: int, queries: list[str]) -> list[list[float]]:
    """Each query's samples now (none when it finds no series)."""
    return [[float(sample["value"][1]) for sample in query(port, promql)] for promql in queries]


def request(spec: dict[str, Any]) -> dict[str, Any]:
    status, body = post(f"http://127.0.0.1:{spec['proxy_port']}/v1/completions", {"model": "m", "prompt": "hi"})
    return {"status": status, "body": json.loads(body)}


def scenario(scene: Scene, spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    scene.network([])  # the prefill Service resolves to no pod, decode's name to nothing listening
    env = {**os.environ, "PATH": spec["path"], **spec["proxy"]["env"]}
    scene.start("proxy", spec["proxy"]["argv"], env)
    if spec["request_first"]:  # the request reaches the proxy before Prometheus ever scraped it
        wait_until(lambda: get(f"http://127.0.0.1:{spec['proxy_port']}/health")[0] == 200, "the proxy is ready")
        out["request"] = request(spec)
    groups = {
        job: [{"targets": [f"127.0.0.1:{t['port']}"], "labels": t["labels"]} for t in targets]
        for job, targets in spec["targets"].items()
    }
    scene.processes["prometheus"], port = start_prometheus(spec["prometheus"], spec["config"], groups, scene.logs)
    queries: list[str] = spec["queries"]

    def answered() -> bool:
        try:
            return all(values(port, queries))
        except OSError:
            return False

    wait_until(answered, "every wake query answers", seconds=WAKE_SECONDS)
    out["before"] = values(port, queries)
    out["targets"] = [up["metric"] for up in query(port, 'up{job!="prometheus"}')]
    if not spec["request_first"]:
        out["request"] = request(spec)
    out["woken_seconds"] = wait_until(
        lambda: values(port, queries) == [[1.0]] * len(queries), "the wake queries read 1", seconds=WAKE_SECONDS
    )
    time.sleep(3)  # more scrapes of the same count: still 1
    out["after"] = values(port, queries)
    out["series"] = [entry["metric"] for entry in query(port, spec["gauge"])]
    return out


def main() -> None:
    spec = json.loads(sys.argv[1])
    scene = Scene(spec)
    result = reported(scene.logs, lambda: scenario(scene, spec), scene.close)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
