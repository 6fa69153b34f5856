"""Runs inside a private network and mount namespace (``unshare -n -m``): the real proxy program as a
classic endpoint's gate renders it (``--forward`` to the server Service), in front of a stand-in server
(tests/e2e/server_standin.py) that is first absent (the server at zero), then starts, then goes away;
prints what the gate answered and exported on /metrics as JSON.

The network: /etc/hosts as the cluster's DNS (the server Service's name at a loopback address of its
own, port 80 as the Service's), the gate on the ports it is rendered with.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.e2e.proxy_driver import WAIT_SECONDS, reported, wait_until
from tests.e2e.server_standin import HOLD_PROMPT

SERVER = "127.0.0.2"
SERVER_PORT = 80


class Gate:
    def __init__(self, port: int, metrics_port: int) -> None:
        self.port = port
        self.metrics_port = metrics_port

    def call(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """One request on a connection of its own: status, headers (lower-cased names) and body text."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            body = response.read()
            text = body.decode() if response.getheader("Content-Encoding") is None else f"{len(body)} bytes"
            names = {name.lower(): value for name, value in response.getheaders()}
            return {"status": response.status, "reason": response.reason, "headers": names, "text": text}
        finally:
            connection.close()

    def json(self, method: str, path: str, body: bytes | None = None, **headers: str) -> dict[str, Any]:
        answer = self.call(method, path, body, headers)
        return {**answer, "body": json.loads(answer["text"]) if answer["text"] else None}

    def health(self) -> dict[str, Any]:
        return self.json("GET", "/health")

    def listening(self) -> bool:
        try:
            self.health()
            return True
        except OSError:
            return False

    def metrics(self) -> dict[str, Any]:
        connection = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=5)
        try:
            connection.request("GET", "/metrics")
            response = connection.getresponse()
            return {"content_type": response.getheader("Content-Type"), "text": response.read().decode()}
        finally:
            connection.close()

    def in_flight(self) -> float:
        lines = self.metrics()["text"].splitlines()
        (line,) = [line for line in lines if line.startswith("inference_fleet_proxy_requests_in_flight ")]
        return float(line.split()[1])

    def stream(self, prompt: str, leave_after_first: bool = False) -> dict[str, Any]:
        """A streamed completion: its content type and events; or, leaving after the first, that event."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        body = json.dumps({"model": "m", "prompt": prompt, "stream": True})
        connection.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        seen: dict[str, Any] = {"status": response.status, "content_type": response.getheader("Content-Type")}
        if leave_after_first:
            seen["first"] = response.readline().decode()
            seen["in_flight_streaming"] = self.in_flight()
            response.close()
            connection.close()
            return seen
        events = [line.decode().strip() for line in response.read().splitlines() if line.startswith(b"data: ")]
        connection.close()
        return {**seen, "events": events}


def start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)


def scenario(spec: dict[str, Any], logs: Path, processes: dict[str, subprocess.Popen[bytes]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    hosts = logs / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n{SERVER} {spec['server_host']}\n")
    subprocess.run(["mount", "--bind", str(hosts), "/etc/hosts"], check=True)
    gate = Gate(spec["port"], spec["metrics_port"])
    processes["gate"] = start(spec["argv"], {**os.environ, "PATH": spec["path"]}, logs / "gate.log")
    wait_until(gate.listening, "gate listening")
    out["before_any_request"] = gate.metrics()

    # The server at zero: the gate stays healthy and answers every request 503 scaled_to_zero.
    out["zero_health_seconds"] = wait_until(lambda: gate.health()["status"] == 200, "healthy at zero")
    out["at_zero"] = {
        "health": gate.health(),
        "get": gate.json("GET", "/v1/models"),
        "post": gate.json("POST", "/v1/completions", b'{"prompt": "hi"}', **{"Content-Type": "application/json"}),
        "metrics": gate.metrics(),
    }

    # The autoscaler woke the server: served within a refresh.
    standin = [sys.executable, "-m", "tests.e2e.server_standin", "--host", SERVER, "--port", str(SERVER_PORT)]
    standin += ["--health-path", spec["health_path"]]
    processes["server"] = start(standin, dict(os.environ), logs / "server.log")
    woken = time.monotonic()
    attempts: list[int] = []
    while not attempts or attempts[-1] != 200:
        attempts.append(gate.call("GET", "/v1/models")["status"])
        assert time.monotonic() - woken < WAIT_SECONDS, attempts[-3:]
        time.sleep(0.05)
    out["woken"] = {"seconds": round(time.monotonic() - woken, 3), "attempts": attempts}
    headers = {"X-Custom": "kept", "Connection": "keep-alive, X-Drop", "X-Drop": "hop", "Keep-Alive": "timeout=5"}
    out["get"] = gate.json("GET", "/v1/models?limit=2&after=a%20b", None, **headers)
    out["post"] = gate.json(
        "POST", "/anything/deep?q=1", b"raw \x00 bytes", **{"Content-Type": "application/octet-stream"}
    )
    out["teapot"] = gate.json("POST", "/status/418", b"{}", **{"Content-Type": "application/json"})
    out["put"] = gate.json("PUT", "/v1/things/1", b"x")
    out["delete"] = gate.json("DELETE", "/v1/things/1")
    out["post_health"] = gate.json("POST", "/health", b"{}")
    out["stream"] = gate.stream("hello")
    gzipped = gate.call("GET", "/gzip", headers={"Accept-Encoding": "gzip"})
    out["gzip"] = {"accepted": gzipped, "plain": gate.call("GET", "/gzip")}
    out["left"] = gate.stream(HOLD_PROMPT, leave_after_first=True)
    cut_queries: list[int] = []

    def cut() -> bool:  # asked of the server through the gate, so each one is counted too
        cut_queries.append(gate.json("GET", "/standin/cut")["body"]["streams"])
        return cut_queries[-1] == 1

    out["left"]["upstream_cut_seconds"] = wait_until(cut, "the server's stream cut")
    out["left"]["cut_queries"] = len(cut_queries)
    out["left"]["in_flight_back_to_zero_seconds"] = wait_until(lambda: gate.in_flight() == 0, "in flight 0")
    out["served_health"] = gate.health()
    out["served_metrics"] = gate.metrics()

    # Back to zero: the server's pod goes away.
    processes.pop("server").send_signal(signal.SIGKILL)
    wait_until(lambda: gate.health()["body"]["server"] is False, "the gate sees the server gone")
    out["gone"] = {"health": gate.health(), "post": gate.json("POST", "/v1/completions", b"{}")}
    out["gone"]["metrics"] = gate.metrics()
    out["alive"] = processes["gate"].poll() is None
    return out


def main() -> None:
    """argv: a JSON object: argv (the gate's command line), path, server_host, health_path, port,
    metrics_port."""
    spec = json.loads(sys.argv[1])
    logs = Path(tempfile.mkdtemp())
    processes: dict[str, subprocess.Popen[bytes]] = {}

    def close() -> None:
        for process in processes.values():
            process.send_signal(signal.SIGKILL)
            process.wait()

    result = reported(logs, lambda: scenario(spec, logs, processes), close)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
