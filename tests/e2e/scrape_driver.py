"""Runs inside a private network namespace (``unshare -n``): Debian's real Prometheus with the
scrape configuration the pinned chart renders from our values (tests/prometheus_config.py), its
Kubernetes discovery replaced by files holding the targets Kubernetes pod discovery would give
(every ``__meta_kubernetes_*`` label the relabelling reads), in front of stand-ins serving the
expositions of a vLLM server, a Triton server and the DCGM exporter. Prints, as JSON, every
series Prometheus stored, once each stand-in has been scraped.

argv: a JSON object: prometheus (the server binary), config (the rendered prometheus.yml, without
discovery files), expositions (stand-in name -> exposition text), targets (job -> list of {stand_in or port, labels}).
"""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from tests.prometheus_config import with_file_sd

WAIT_SECONDS = 90


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def serve(text: str) -> tuple[http.server.ThreadingHTTPServer, int]:
    body = text.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/metrics":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def query(port: int, promql: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as response:
        answer = json.load(response)
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def scraped_once(port: int, stand_ins: set[str]) -> bool:
    """Whether Prometheus on ``port`` has scraped every one of its active targets at least once, and
    some of them at each of ``stand_ins``' addresses (``/api/v1/targets``: a target not scraped yet
    has health "unknown")."""
    url = f"http://127.0.0.1:{port}/api/v1/targets?state=active"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            targets = json.load(response)["data"]["activeTargets"]
    except OSError:
        return False
    scraped = {target["labels"].get("instance") for target in targets if target["health"] == "up"}
    return all(target["health"] != "unknown" for target in targets) and stand_ins <= scraped


def start_prometheus(
    binary: str, config: dict[str, Any], groups: dict[str, list[dict[str, Any]]], work: Path
) -> tuple[subprocess.Popen[bytes], int]:
    """The real Prometheus (``binary``) on a free loopback port, running ``config`` with each job's
    targets read from a file of ``groups`` (file discovery standing in for Kubernetes'), scraping
    and evaluating every second; its data and log under ``work``."""
    for job, listed in groups.items():
        (work / f"{job}.json").write_text(json.dumps(listed))
    config = with_file_sd(config, str(work))
    config["global"] = {**config["global"], "scrape_interval": "1s", "evaluation_interval": "1s"}
    with (work / "prometheus.yml").open("w", encoding="utf-8") as handle:
        YAML(typ="safe", pure=True).dump(config, handle)
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=(work / "prometheus.log").open("ab"),
        stderr=subprocess.STDOUT,
    )
    return process, port


def main() -> None:
    scene = json.loads(sys.argv[1])
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    work = Path(tempfile.mkdtemp(prefix="scrape-"))
    servers = {name: serve(text) for name, text in scene["expositions"].items()}
    groups: dict[str, list[dict[str, Any]]] = {}
    for job, targets in scene["targets"].items():
        groups[job] = []
        for target in targets:
            port = servers[target["stand_in"]][1] if "stand_in" in target else free_port()
            labels = dict(target["labels"])
            for name, (_, stand_in_port) in servers.items():
                labels = {key: value.replace(f"{{port:{name}}}", str(stand_in_port)) for key, value in labels.items()}
            groups[job].append({"targets": [f"127.0.0.1:{port}"], "labels": labels})
    process, port = start_prometheus(scene["prometheus"], scene["config"], groups, work)
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        expected = {f"127.0.0.1:{servers[name][1]}" for name in scene["expositions"]}
        # Every target the relabelling kept scraped once (several targets may share one stand-in, as a
        # primary's proxy and its canary's do, so the stand-ins' addresses alone would not say).
        while not scraped_once(port, expected):
            if time.monotonic() > deadline:
                print((work / "prometheus.log").read_text()[-3000:], file=sys.stderr)
                raise TimeoutError("Prometheus did not scrape every target")
            time.sleep(0.5)
        series = query(port, '{__name__=~".+", __name__!="up", job!="prometheus"}')
        every_up = query(port, 'up{job!="prometheus"}')
        answers = {expr: query(port, expr) for expr in scene.get("queries", [])}
        print(
            json.dumps(
                {
                    "series": [entry["metric"] for entry in series],
                    "up": [s["metric"] for s in every_up],
                    "queries": {expr: [entry["value"][1] for entry in found] for expr, found in answers.items()},
                }
            )
        )
    finally:
        process.terminate()
        process.wait(timeout=30)
        for server, _ in servers.values():
            server.shutdown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
