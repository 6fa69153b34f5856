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
import subprocess
import sys
import time
from typing import Any

from ruamel.yaml import YAML

from tests.e2e.proxy_driver import Scene, get, post, wait_until
from tests.e2e.scrape_driver import free_port, query
from tests.prometheus_config import with_file_sd

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
    for job, targets in spec["targets"].items():
        groups = [{"targets": [f"127.0.0.1:{t['port']}"], "labels": t["labels"]} for t in targets]
        (scene.logs / f"{job}.json").write_text(json.dumps(groups))
    config = with_file_sd(spec["config"], str(scene.logs))
    config["global"] = {**config["global"], "scrape_interval": "1s", "evaluation_interval": "1s"}
    with (scene.logs / "prometheus.yml").open("w", encoding="utf-8") as handle:
        YAML(typ="safe", pure=True).dump(config, handle)
    port = free_port()
    log = (scene.logs / "prometheus.log").open("ab")
    scene.processes["prometheus"] = subprocess.Popen(
        [
            spec["prometheus"],
            f"--config.file={scene.logs / 'prometheus.yml'}",
            f"--storage.tsdb.path={scene.logs / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
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
    try:
        result = scenario(scene, spec)
    except BaseException:
        for log in sorted(scene.logs.glob("*.log")):
            print(f"--- {log.name}\n{log.read_text()[-3000:]}", file=sys.stderr)
        raise
    finally:
        scene.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
