"""Runs inside a private network and mount namespace (``unshare -n -m``): three copies of the real
proxy program, as rendered, in front of the same prefill and decode stand-ins
(tests/e2e/pd_standins.py) that are at first absent (both roles at zero), then start, then lose
decode; prints what each proxy answered and exported on /metrics as JSON.

The proxies differ only in ``--scale-to-zero`` (and their ports): ``both`` names prefill and
decode, ``prefill`` names prefill alone, ``plain`` names none (today's behaviour). The network is
tests/e2e/proxy_driver.py's: /etc/hosts as the cluster's DNS, a loopback address per pod.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from tests.e2e.pd_standins import HOLD_PROMPT
from tests.e2e.proxy_driver import DECODE, PREFILL_A, Scene, get, reported, wait_until

PAYLOAD = {"model": "Qwen/Qwen3-8B", "prompt": "hello", "max_tokens": 8}


class Proxy:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.port = int(spec["port"])
        self.url = f"http://127.0.0.1:{self.port}"
        self.metrics_url = f"http://127.0.0.1:{spec['metrics_port']}/metrics"

    def health(self) -> dict[str, Any]:
        """/health's status and body, a 503's included."""
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=5) as response:
                return {"status": response.status, "body": json.loads(response.read())}
        except urllib.error.HTTPError as failure:
            return {"status": failure.code, "body": json.loads(failure.read())}

    def request(self, body: bytes = json.dumps(PAYLOAD).encode()) -> dict[str, Any]:
        """One completion (``body``, by default a valid one): its status, Retry-After and body."""
        sent = {"Content-Type": "application/json"}
        request = urllib.request.Request(f"{self.url}/v1/completions", data=body, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, headers, text = response.status, response.headers, response.read().decode()
        except urllib.error.HTTPError as failure:
            status, headers, text = failure.code, failure.headers, failure.read().decode()
        return {"status": status, "retry_after": headers.get("Retry-After"), "body": json.loads(text)}

    def metrics(self) -> dict[str, Any]:
        """The exposition as served: its Content-Type and text (the test parses it)."""
        with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
            return {"content_type": response.headers["Content-Type"], "text": response.read().decode()}

    def in_flight(self) -> float:
        lines = self.metrics()["text"].splitlines()
        (line,) = [line for line in lines if line.startswith("inference_fleet_proxy_requests_in_flight ")]
        return float(line.split()[1])

    def listening(self) -> bool:
        return get(f"{self.url}/health")[0] != 0

    def decode_gone(self) -> bool:
        return self.health()["body"]["decode"] is False


def left_mid_stream(proxy: Proxy) -> dict[str, Any]:
    """A streamed request whose client goes away after the first event, decode still generating:
    the in-flight gauge while it streams, and whether it falls back to 0."""
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    body = json.dumps({**PAYLOAD, "prompt": HOLD_PROMPT, "stream": True})
    connection.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    first = response.readline().decode()
    streaming = proxy.in_flight()
    response.close()  # the client goes away mid-stream
    connection.close()
    return {
        "status": response.status,
        "first_line": first,
        "in_flight_streaming": streaming,
        "back_to_zero_seconds": wait_until(lambda: proxy.in_flight() == 0, "in-flight back to 0"),
    }


def scenario(scene: Scene, proxies: dict[str, Proxy]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    scene.network([PREFILL_A])  # the Service's name resolves, but no role runs
    for name, spec in scene.spec["proxies"].items():
        scene.start(f"proxy-{name}", spec["argv"], {**os.environ, "PATH": scene.spec["path"], **spec["env"]})
    for proxy in proxies.values():
        wait_until(proxy.listening, "proxy listening")
    out["before_any_request"] = {name: proxy.metrics() for name, proxy in proxies.items()}

    # Both roles at zero.
    out["zero_health_seconds"] = wait_until(lambda: proxies["both"].health()["status"] == 200, "healthy at zero")
    out["at_zero"] = {
        name: {"health": proxy.health(), "request": proxy.request(), "metrics": proxy.metrics()}
        for name, proxy in proxies.items()
    }

    # The autoscaler woke both roles: within a refresh the same request is served.
    scene.start_standin("decode", DECODE)
    scene.start_standin("prefill", PREFILL_A)
    woken = time.monotonic()
    served = {}
    for name, proxy in proxies.items():
        attempts: list[dict[str, Any]] = []
        while not attempts or attempts[-1]["status"] != 200:
            attempts.append(proxy.request())
            assert time.monotonic() - woken < 20, attempts[-3:]
        served[name] = {"attempts": len(attempts), "after_unserved": proxy.metrics()}
    out["woken_seconds"] = round(time.monotonic() - woken, 3)
    out["served"] = served
    out["woken"] = {
        name: {"health": proxy.health(), "requests": [proxy.request()["status"] for _ in range(3)]}
        for name, proxy in proxies.items()
    }
    out["left_mid_stream"] = left_mid_stream(proxies["plain"])
    out["woken_metrics"] = {name: proxy.metrics() for name, proxy in proxies.items()}

    # Decode scaled to zero while prefill runs.
    scene.stop(DECODE)
    for name, proxy in proxies.items():
        wait_until(proxy.decode_gone, f"{name} sees decode gone")
    out["decode_gone"] = {
        name: {"health": proxy.health(), "request": proxy.request(), "metrics": proxy.metrics()}
        for name, proxy in proxies.items()
    }
    out["bad_body"] = proxies["both"].request(b"[]")["status"]
    out["bad_body_metrics"] = proxies["both"].metrics()
    out["alive"] = all(scene.processes[f"proxy-{name}"].poll() is None for name in proxies)
    return out


def main() -> None:
    """argv: a JSON object: proxies {name: {argv, env, port, metrics_port}}, path, prefill_service,
    decode_host, port, bootstrap_port, api_key."""
    spec = json.loads(sys.argv[1])
    scene = Scene({**spec, "proxy_port": 0})
    proxies = {name: Proxy(proxy) for name, proxy in spec["proxies"].items()}
    result = reported(scene.logs, lambda: scenario(scene, proxies), scene.close)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
