"""Runs inside a private network and mount namespace (``unshare -n -m``): the real proxy program, started
with the rendered command and arguments of a split endpoint with ``routing: prefix``, in front of two
prefill and two decode stand-ins (tests/e2e/pd_standins.py); prints what it saw as JSON.

As in tests/e2e/proxy_driver.py, the cluster's DNS is this namespace's /etc/hosts: the headless prefill
Service's name resolves to both prefill "pods", the headless decode Service's to both decode "pods",
each a loopback address of its own.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.e2e.pd_standins import BUSY_PROMPT
from tests.e2e.proxy_driver import PREFILL_A, PREFILL_B, Scene, call, get, wait_until

DECODE_A = "127.0.0.20"
DECODE_B = "127.0.0.21"
SYSTEM = "You are a careful assistant who answers in one short sentence and never makes things up. " * 8
"""A system prompt of about 700 characters (11 blocks of the front's 64), shared by every conversation."""
QUESTIONS = [f"Question {n}: what is {n} times {n + 1}, and why does it matter? " * 3 for n in range(8)]
BURST = 8
"""Requests sent at once, each holding both roles ``BUSY_SECONDS``: the same prompt, so only the balance
spreads them."""


class RoutingScene(Scene):
    def network(self, prefill: list[str], decode: list[str] | None = None) -> None:
        super().network(prefill)
        lines = [f"{address} {self.spec['decode_pods_host']}" for address in decode or []]
        with open("/etc/hosts", "a") as hosts:
            hosts.write("\n".join(lines) + "\n")


def chat(scene: Scene, question: str) -> dict[str, Any]:
    """One chat completion through the proxy: its status, and which prefill engine and decode pod served it."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    answer = call(f"{scene.proxy_url}/v1/chat/completions", {"model": "m", "max_tokens": 8, "messages": messages})
    if answer["status"] != 200:
        return {"status": answer["status"], "body": str(answer.get("body"))[:300]}
    kv = answer["body"]["kv"]
    return {"status": 200, "prefill": kv["bootstrap"], "decode": kv["decode"]}


def metrics(scene: Scene) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{scene.spec['metrics_port']}/metrics", timeout=10) as response:
        return str(response.read().decode())


def scenario(scene: RoutingScene) -> dict[str, Any]:
    out: dict[str, Any] = {}
    scene.network([PREFILL_A, PREFILL_B], [DECODE_A, DECODE_B])
    for address in (DECODE_A, DECODE_B):
        scene.start_standin("decode", address)
    for address in (PREFILL_A, PREFILL_B):
        scene.start_standin("prefill", address)
    proxy = scene.spec["proxy"]
    scene.start("proxy", proxy["argv"], {**os.environ, "PATH": scene.spec["path"], **proxy["env"]})
    detail = f"http://127.0.0.1:{scene.spec['metrics_port']}/health"

    def every_pod_known() -> bool:
        state = get(detail)[1] or {}
        return len(state.get("prefill", {})) == 2 and len(state.get("decode_pods", [])) == 2

    wait_until(every_pod_known, "both prefill engines and both decode pods known")
    # Each question asked three times, each time after the others: the same question must come back to
    # the engine and the pod that hold its prefix.
    out["rounds"] = [{question[:12]: chat(scene, question) for question in QUESTIONS} for _ in range(3)]
    out["metrics"] = metrics(scene)
    with urllib.request.urlopen(f"{scene.proxy_url}/health", timeout=10) as response:  # fleetctl verify's reading
        out["health"] = response.read().decode()
    with ThreadPoolExecutor(BURST) as pool:
        out["burst"] = list(pool.map(lambda _: chat(scene, BUSY_PROMPT), range(BURST)))
    # The decode pod of the first question killed between two refreshes: the next request finds its
    # connection refused and goes to the other pod, never to the client as an error.
    first = out["rounds"][0][QUESTIONS[0][:12]]["decode"]
    scene.stop(first)
    out["killed"] = first
    out["after_kill"] = chat(scene, QUESTIONS[0])
    out["proxy_log"] = (scene.logs / "proxy.log").read_text()
    return out


def main() -> None:
    scene = RoutingScene(json.loads(sys.argv[1]))
    try:
        out = scenario(scene)
    finally:
        scene.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
