"""Runs inside a private network and mount namespace (``unshare -n -m``): the real proxy program,
started with the rendered command, arguments and environment, in front of prefill and decode
stand-ins (tests/e2e/pd_standins.py) that restart, come and go; prints what it saw as JSON.

The cluster's DNS is this namespace's /etc/hosts (a private bind mount): the headless prefill
Service's name resolves to every prefill "pod" listed there, the decode Service's name to the
decode stand-in. Each pod is a loopback address of its own; the proxy listens on the rendered
0.0.0.0 and the client calls it on 127.0.0.1.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.pd_standins import EOS_PROMPT, LOAD_FAILS_ONCE_PROMPT, SLOW_PROMPT

PREFILL_A = "127.0.0.11"
PREFILL_B = "127.0.0.12"
NEVER_UP = "127.0.0.13"
"""Listed under the prefill Service from the start, never serving: a pod that cannot start."""
DECODE = "127.0.0.20"
WAIT_SECONDS = 20.0


class Scene:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.logs = Path(tempfile.mkdtemp())
        self.hosts = self.logs / "hosts"
        self.prefill: dict[str, list[str]] = {}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.proxy_url = f"http://127.0.0.1:{spec['proxy_port']}"
        self.standin_env = {**os.environ, "STANDIN_API_KEY": spec["api_key"]}

    def network(self, prefill: list[str]) -> None:
        """Loopback up; the Services' names as the cluster's DNS would answer them."""
        if not self.hosts.exists():
            subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
            self.hosts.write_text("")
            subprocess.run(["mount", "--bind", str(self.hosts), "/etc/hosts"], check=True)
        lines = ["127.0.0.1 localhost", f"{DECODE} {self.spec['decode_host']}"]
        lines += [f"{address} {self.spec['prefill_service']}" for address in prefill]
        with open("/etc/hosts", "w") as hosts:  # in place: the bind mount keeps the inode
            hosts.write("\n".join(lines) + "\n")

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = (self.logs / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)

    def stop(self, name: str) -> None:
        process = self.processes.pop(name)
        process.send_signal(signal.SIGKILL)  # as a crashed or evicted pod: nothing said goodbye
        process.wait()

    def start_standin(self, role: str, address: str) -> None:
        argv = [sys.executable, "-m", "tests.e2e.pd_standins", role, "--host", address]
        argv += ["--port", str(self.spec["port"]), "--stall-file", str(self.stall_file(address))]
        if role == "prefill":
            argv += ["--bootstrap-port", str(self.spec["bootstrap_port"])]
        self.start(address, argv, self.standin_env)
        check = f"http://{address}:{self.spec['port']}/health"
        wait_until(lambda: get(check)[0] == 200, f"stand-in {role} {address} serving")

    def stall_file(self, address: str) -> Path:
        """While it exists, the stand-in at ``address`` answers /health late."""
        return self.logs / f"{address}.stalled"

    def engine_id(self, address: str) -> str:
        status, body = get(f"http://{address}:{self.spec['bootstrap_port']}/query")
        assert status == 200, status
        return str(body["0"]["engine_id"])

    def queries(self, address: str) -> int:
        return int(get(f"http://{address}:{self.spec['bootstrap_port']}/queries")[1]["queries"])

    def health(self) -> int:
        return get(f"{self.proxy_url}/health")[0]

    def request(self, stream: bool = False, chat: bool = False, prompt: str = "hello") -> dict[str, Any]:
        """One request through the proxy: its status, and which engine's KV decode pulled."""
        path = "/v1/chat/completions" if chat else "/v1/completions"
        payload: dict[str, Any] = {"model": "Qwen/Qwen3-8B", "max_tokens": 8, "stream": stream}
        if chat:
            payload["messages"] = [{"role": "user", "content": prompt}]
        else:
            payload["prompt"] = prompt
        if stream:
            payload["stream_options"] = {"include_usage": True}
        status, text = post(f"{self.proxy_url}{path}", payload)
        result: dict[str, Any] = {"status": status}
        if status != 200:
            return result | {"body": text[:300]}
        if not stream:
            body = json.loads(text)
            return result | {"engine_id": body["kv"]["engine_id"], "bootstrap": body["kv"]["bootstrap"]}
        events = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]", text
        chunks = [json.loads(event) for event in events[:-1]]
        if "error" in chunks[0]:
            return result | {"stream_error": chunks[0]["error"]["message"]}
        texts = "".join(chunk["choices"][0]["text"] for chunk in chunks)
        return result | {"engine_id": chunks[0]["kv"]["engine_id"], "text": texts}

    def close(self) -> None:
        for name in list(self.processes):
            self.stop(name)


def call(url: str, payload: Any = None, method: str = "POST") -> dict[str, Any]:
    """One request: its status and its body (JSON when it is, else the events' data lines)."""
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as failure:
        status, text = failure.code, failure.read().decode()
    try:
        return {"status": status, "body": json.loads(text)}
    except ValueError:
        events = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
        return {"status": status, "events": [event if event == "[DONE]" else json.loads(event) for event in events]}


def shapes(scene: Scene) -> dict[str, Any]:
    """Request shapes a client sends that one prefill and one decode answer differently from vLLM alone."""
    url = f"{scene.proxy_url}/v1/completions"
    base = {"model": "Qwen/Qwen3-8B", "max_tokens": 8, "prompt": "hello"}
    chat = {"model": "Qwen/Qwen3-8B", "max_tokens": 8, "messages": [{"role": "user", "content": EOS_PROMPT}]}
    stream = {"stream": True, "stream_options": {"include_usage": True}}
    return {
        "eos_first": call(url, {**base, "prompt": EOS_PROMPT}),
        "eos_first_chat": call(f"{scene.proxy_url}/v1/chat/completions", chat),
        "min_tokens": call(url, {**base, "min_tokens": 4}),
        "stop_string": call(url, {**base, "stop": ["x"]}),
        "stop_string_stream": call(url, {**base, "stop": ["x"], **stream}),
        "stop_string_chat_stream": call(f"{scene.proxy_url}/v1/chat/completions", {**chat, "stop": ["x"], **stream}),
        "n": call(url, {**base, "n": 2}),
        "prompts": call(url, {**base, "prompt": ["hello", "world"]}),
        "one_prompt_in_a_list": call(url, {**base, "prompt": ["hello"]}),
        "token_ids": call(url, {**base, "prompt": [9707, 1879]}),
        "models": call(f"{scene.proxy_url}/v1/models", method="GET"),
        "tokenize": call(f"{scene.proxy_url}/tokenize", {"model": "Qwen/Qwen3-8B", "prompt": "hello"}),
        "detokenize": call(f"{scene.proxy_url}/detokenize", {"model": "Qwen/Qwen3-8B", "tokens": [9707]}),
        "responses": call(f"{scene.proxy_url}/v1/responses", {"model": "Qwen/Qwen3-8B", "input": "hello"}),
        "sleep": call(f"{scene.proxy_url}/sleep", {}),
        "lora": call(f"{scene.proxy_url}/v1/load_lora_adapter", {"lora_name": "x", "lora_path": "/x"}),
    }


def stalled(scene: Scene, seconds: float, addresses: list[str]) -> dict[str, Any]:
    """``addresses``' /health stalls for ``seconds`` while requests go on: what the
    proxy's /health answered meanwhile and how many requests failed."""
    for address in addresses:
        scene.stall_file(address).touch()
    started, statuses, failed, requests = time.monotonic(), [], [], 0
    while time.monotonic() - started < seconds:
        statuses.append(scene.health())
        answer = scene.request()
        requests += 1
        if answer["status"] != 200:
            failed.append(answer)
        time.sleep(0.1)
    for address in addresses:
        scene.stall_file(address).unlink()
    first_503 = statuses.index(503) if 503 in statuses else None
    return {"statuses": sorted(set(statuses)), "requests": requests, "failed": failed[:3], "first_503": first_503}


def drained(scene: Scene) -> dict[str, Any]:
    """SIGTERM to the proxy while a long stream is in flight: the stream ends whole, the proxy refuses
    new connections meanwhile, and exits."""
    payload = {"model": "Qwen/Qwen3-8B", "max_tokens": 8, "prompt": SLOW_PROMPT, "stream": True}
    result: dict[str, Any] = {}

    def long_stream() -> None:
        result["stream"] = call(f"{scene.proxy_url}/v1/completions", payload)

    reader = threading.Thread(target=long_stream)
    reader.start()
    time.sleep(0.5)  # the stream has started
    proxy = scene.processes["proxy"]
    signalled = time.monotonic()
    proxy.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    result["health_while_draining"] = scene.health()
    reader.join()
    result["exit"] = proxy.wait(timeout=30)
    result["exit_seconds"] = round(time.monotonic() - signalled, 3)
    scene.processes.pop("proxy")
    return result


def get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as failure:
        return failure.code, None
    except OSError:
        return 0, None


def post(url: str, payload: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as failure:
        return failure.code, failure.read().decode()
    except (OSError, http.client.HTTPException) as failure:  # refused, or cut off mid-answer
        return 0, repr(failure)


def reported(logs: Path, scenario: Callable[[], dict[str, Any]], close: Callable[[], None]) -> dict[str, Any]:
    """What ``scenario()`` returned; when it failed, the tail of every log under ``logs`` went to
    stderr first (a driver's output is all its test sees). ``close`` runs either way."""
    try:
        return scenario()
    except BaseException:
        for log in sorted(logs.glob("*.log")):
            print(f"--- {log.name}\n{log.read_text()[-3000:]}", file=sys.stderr)
        raise
    finally:
        close()


def wait_until(condition: Callable[[], bool], what: str, seconds: float = WAIT_SECONDS) -> float:
    """Seconds until ``condition`` held (checked every 50 ms)."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > seconds:
            raise TimeoutError(f"not within {seconds} s: {what}")
        time.sleep(0.05)
    return round(time.monotonic() - start, 3)


def right_after_a_refresh(scene: Scene, address: str) -> None:
    """Returns as the proxy has just read ``address``'s engine ids (its next look is a refresh away)."""
    seen = scene.queries(address)
    wait_until(lambda: scene.queries(address) > seen, "the proxy's next refresh")


def restart_in_place(scene: Scene, address: str) -> str:
    """SIGUSR1 to the prefill stand-in, and its new engine id once it answers with it: the stand-in
    handles the signal on its main thread, so an id read at once may still be the old one."""
    before = scene.engine_id(address)
    scene.processes[address].send_signal(signal.SIGUSR1)
    wait_until(lambda: scene.engine_id(address) != before, "the stand-in's restart in place")
    return scene.engine_id(address)


def scenario(scene: Scene) -> dict[str, Any]:
    out: dict[str, Any] = {}
    scene.network([PREFILL_A, NEVER_UP])
    scene.start_standin("decode", DECODE)
    scene.start_standin("prefill", PREFILL_A)
    proxy = scene.spec["proxy"]
    scene.start("proxy", proxy["argv"], {**os.environ, "PATH": scene.spec["path"], **proxy["env"]})
    out["ready_seconds"] = wait_until(lambda: scene.health() == 200, "proxy ready")
    out["health"] = get(f"{scene.proxy_url}/health")[1]
    first = scene.engine_id(PREFILL_A)
    out["first_engine"] = first
    out["first"] = scene.request()
    out["first_stream"] = scene.request(stream=True, chat=True)
    out["health_after_two"] = get(f"{scene.proxy_url}/health")[1]
    out["detail"] = get(f"http://127.0.0.1:{scene.spec['metrics_port']}/health")[1]
    out["shapes"] = shapes(scene)
    out["load_fails_once"] = {
        "plain": scene.request(prompt=LOAD_FAILS_ONCE_PROMPT),
        "stream": scene.request(stream=True, prompt=LOAD_FAILS_ONCE_PROMPT),
    }
    # Both roles' /health slower than the probe's timeout: shorter than the misses that take a peer
    # out, then longer.
    out["stall"] = stalled(scene, 6.0, [DECODE, PREFILL_A])
    out["long_stall"] = stalled(scene, 20.0, [DECODE])
    wait_until(lambda: scene.health() == 200, "proxy ready after the stall")

    # A restart the refresh has not seen yet (SIGUSR1: new engine id, old transfers gone).
    right_after_a_refresh(scene, PREFILL_A)
    new_engine = restart_in_place(scene, PREFILL_A)
    out["unseen_restart"] = scene.request() | {"new_engine": new_engine}
    # A stream too: its opening (the error event after its 200) is read before the client gets any of it.
    right_after_a_refresh(scene, PREFILL_A)
    renewed = restart_in_place(scene, PREFILL_A)
    started = time.monotonic()
    streams: list[dict[str, Any]] = []
    while not streams or streams[-1].get("engine_id") != renewed:
        streams.append(scene.request(stream=True))
        assert time.monotonic() - started < WAIT_SECONDS, streams[-5:]
    out["unseen_restart_stream"] = {
        "recovered_seconds": round(time.monotonic() - started, 3),
        "failed": [stream for stream in streams if stream.get("engine_id") != renewed],
    }

    # The prefill process replaced at once (a container restart): a new process, a new engine id.
    scene.stop(PREFILL_A)
    scene.start_standin("prefill", PREFILL_A)
    restarted, replaced_at = scene.engine_id(PREFILL_A), time.monotonic()
    attempts: list[dict[str, Any]] = []
    while not attempts or attempts[-1].get("engine_id") != restarted:
        attempts.append(scene.request(stream=True))
        assert time.monotonic() - replaced_at < WAIT_SECONDS, attempts[-5:]
    out["process_restart"] = {
        "recovered_seconds": round(time.monotonic() - replaced_at, 3),
        "statuses": [attempt["status"] for attempt in attempts],
        "engine_id": attempts[-1]["engine_id"],
        "old_engine": renewed,
    }
    out["process_restart_plain"] = scene.request()

    # Every prefill pod down: the proxy says so, and is back once one serves again.
    scene.stop(PREFILL_A)
    out["all_prefill_down"] = {
        "unready_seconds": wait_until(lambda: scene.health() == 503, "proxy unready"),
        "request": scene.request(),
    }
    scene.start_standin("prefill", PREFILL_A)
    back = scene.engine_id(PREFILL_A)
    out["prefill_back"] = {
        "ready_seconds": wait_until(lambda: scene.health() == 200, "proxy ready again"),
        "request": scene.request(),
        "engine_id": back,
    }

    # The autoscaler adds a prefill pod: it is found by name and takes its turn.
    scene.start_standin("prefill", PREFILL_B)
    added = scene.engine_id(PREFILL_B)
    scene.network([PREFILL_A, PREFILL_B, NEVER_UP])
    added_at = time.monotonic()
    seen: set[str] = set()
    while added not in seen:
        seen.add(scene.request().get("engine_id", ""))
        assert time.monotonic() - added_at < WAIT_SECONDS
    out["scale_up"] = {
        "found_seconds": round(time.monotonic() - added_at, 3),
        "turns": [scene.request().get("engine_id") for _ in range(4)],
        "engines": {PREFILL_A: back, PREFILL_B: added},
    }
    # ... and removes it: the pod goes first, its name a moment later; no request fails.
    scene.stop(PREFILL_B)
    removed_at = time.monotonic()
    after: list[dict[str, Any]] = []
    while time.monotonic() - removed_at < 1:
        after.append(scene.request())
    scene.network([PREFILL_A, NEVER_UP])
    while time.monotonic() - removed_at < 4:
        after.append(scene.request())
    out["scale_down"] = {
        "requests": len(after),
        "failed": [request for request in after if request["status"] != 200],
        "engines": sorted({request.get("engine_id", "") for request in after}),
    }

    # Decode down and back.
    scene.stop(DECODE)
    out["decode_down"] = {
        "unready_seconds": wait_until(lambda: scene.health() == 503, "proxy unready without decode"),
        "request": scene.request(),
    }
    scene.start_standin("decode", DECODE)
    out["decode_back"] = {
        "ready_seconds": wait_until(lambda: scene.health() == 200, "proxy ready with decode again"),
        "request": scene.request(),
    }
    out["proxy_alive"] = scene.processes["proxy"].poll() is None
    out["drain"] = drained(scene)
    return out


def main() -> None:
    """argv: a JSON object: proxy {argv, env}, path (PATH for the proxy), prefill_service,
    decode_host, port, bootstrap_port, proxy_port, metrics_port, api_key."""
    scene = Scene(json.loads(sys.argv[1]))
    result = reported(scene.logs, lambda: scenario(scene), scene.close)
    result["proxy_log"] = (scene.logs / "proxy.log").read_text()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
