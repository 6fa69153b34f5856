"""Runs inside a private network and mount namespace (``unshare -n -m``): a rollout of every pod of a split
endpoint (prefill, decode, proxy) and of a classic endpoint with a gate (server, gate) under steady load,
through the real proxy program started as both fronts render it, in front of stand-ins that drain on
SIGTERM as vLLM does with ``--shutdown-timeout`` (tests/e2e/pd_standins.py, server_standin.py); prints
every request's failure, every pod's exit, as JSON.

What Kubernetes does around a pod is played here, in its order (docs/deploying.md, "How a rollout drains"):

- the load balancer: the load itself, which sends each request to one of the fronts registered as its
  targets (a new connection each), and stops choosing a front once it is deregistered;
- a Service (decode's, the server's): ``Balancer``, which, as kube-proxy, sends each new connection to
  one of the ready endpoints and leaves established connections where they are;
- the headless prefill Service: /etc/hosts, which lists a deleted prefill pod until it is gone: the
  Service drops it at once, but the cluster DNS caches its answers (CoreDNS ``cache 30`` on EKS), and
  the worst case is the whole drain;
- a Deployment (prefill, decode, server, proxy, gate) rolls with a surge: the new pod starts, is
  registered once ready, then the old one is deleted;
- deleting a pod: its endpoints are removed, the preStop sleeps, SIGTERM, and SIGKILL once the pod's
  ``terminationGracePeriodSeconds`` (read from the rendered pod spec) have passed since the deletion.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.e2e.proxy_driver import reported, wait_until

PREFILL = ("127.0.0.11", "127.0.0.12")
SUCCESSORS = ("127.0.0.13", "127.0.0.14")
DECODE_SERVICE = "127.0.0.20"
SERVER_SERVICE = "127.0.0.2"
SERVER_PORT = 80


class Balancer:
    """A Service's virtual address as kube-proxy serves it: each new connection to one ready endpoint."""

    def __init__(self, address: str, port: int) -> None:
        self.endpoints: list[tuple[str, int]] = []
        self.turn = 0
        self.listener = socket.create_server((address, port))
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            endpoints = list(self.endpoints)
            if not endpoints:
                client.close()
                continue
            self.turn += 1
            threading.Thread(
                target=self.carry, args=(client, endpoints[self.turn % len(endpoints)]), daemon=True
            ).start()

    def carry(self, client: socket.socket, endpoint: tuple[str, int]) -> None:
        try:
            upstream = socket.create_connection(endpoint, timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
        back.start()
        pipe(client, upstream)
        back.join()
        client.close()
        upstream.close()


def pipe(source: socket.socket, sink: socket.socket) -> None:
    """Bytes from ``source`` to ``sink`` until ``source`` ends; then ``sink``'s write side ends too."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_RDWR)


class Scene:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.logs = Path(tempfile.mkdtemp())
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.prefill: list[str] = []
        self.targets: dict[str, list[str]] = {"split": [], "classic": []}
        self.exits: list[dict[str, Any]] = []
        self.standin_env = {**os.environ, "STANDIN_API_KEY": spec["api_key"]}
        self.serial = 0

    def network(self) -> None:
        lines = ["127.0.0.1 localhost", f"{DECODE_SERVICE} {self.spec['decode_host']}"]
        lines += [f"{SERVER_SERVICE} {self.spec['server_host']}"]
        lines += [f"{address} {self.spec['prefill_service']}" for address in self.prefill]
        with open("/etc/hosts", "w") as hosts:  # in place: the bind mount keeps the inode
            hosts.write("\n".join(lines) + "\n")

    def start(self, name: str, argv: list[str], env: dict[str, str], health: str) -> None:
        log = (self.logs / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        wait_until(lambda: status(health) == 200, f"{name} ready")

    def standin(self, role: str, address: str) -> str:
        port = SERVER_PORT if role == "server" else self.spec["port"]
        if role == "server":
            argv = [sys.executable, "-m", "tests.e2e.server_standin", "--health-path", self.spec["health_path"]]
        else:
            argv = [sys.executable, "-m", "tests.e2e.pd_standins", role]
            if role == "prefill":
                argv += ["--bootstrap-port", str(self.spec["bootstrap_port"])]
        self.serial += 1
        name = f"{role}-{self.serial}@{address}"
        argv += ["--host", address, "--port", str(port)]
        health = self.spec["health_path"] if role == "server" else "/health"
        self.start(name, argv, self.standin_env, f"http://{address}:{port}{health}")
        return name

    def front(self, kind: str, address: str) -> str:
        """A proxy (``split``) or gate (``classic``) pod at ``address``: its rendered command line, but for
        the address it listens on (each pod has its own here, where the pods share one network)."""
        rendered = self.spec["fronts"][kind]
        argv = list(rendered["argv"])
        argv[argv.index("--host") + 1] = address
        env = {**os.environ, "PATH": self.spec["path"], **rendered["env"]}
        self.serial += 1
        name = f"{kind}-front-{self.serial}@{address}"
        self.start(name, argv, env, f"http://{address}:{self.spec['proxy_port']}/health")
        return name

    def delete(self, name: str, grace: float) -> None:
        """The pod's endpoints are gone already; its preStop, SIGTERM, and SIGKILL at the grace period."""
        deleted = time.monotonic()
        time.sleep(self.spec["prestop_seconds"])
        process = self.processes.pop(name)
        process.send_signal(signal.SIGTERM)
        try:
            code: int | str = process.wait(timeout=max(0.0, grace - (time.monotonic() - deleted)))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = "killed at the grace period"
        self.exits.append({"pod": name, "exit": code, "seconds": round(time.monotonic() - deleted, 3)})

    def close(self) -> None:
        for process in self.processes.values():
            process.kill()
            process.wait()


def status(url: str) -> int:
    try:
        connection = http.client.HTTPConnection(url.split("/")[2], timeout=5)
        connection.request("GET", "/" + url.split("/", 3)[3])
        return connection.getresponse().status
    except OSError:
        return 0


class Load:
    """Steady requests from a few clients to each endpoint's registered fronts, as the load balancer sends them."""

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answered: dict[str, int] = {"split": 0, "classic": 0}
        self.failed: list[dict[str, Any]] = []
        self.threads = [
            threading.Thread(target=self.client, args=(kind, turn), daemon=True)
            for kind in ("split", "classic")
            for turn in range(3)
        ]

    def client(self, kind: str, turn: int) -> None:
        count = 0
        while not self.stop.is_set():
            count += 1
            targets = self.scene.targets[kind]
            target = targets[count % len(targets)]
            stream = (count + turn) % 2 == 0
            try:
                problem = self.one(kind, target, stream)
            except (OSError, http.client.HTTPException, ValueError) as failure:
                problem = repr(failure)
            with self.lock:
                if problem is None:
                    self.answered[kind] += 1
                else:
                    self.failed.append({"kind": kind, "front": target, "stream": stream, "problem": problem[:300]})

    def one(self, kind: str, target: str, stream: bool) -> str | None:
        """One request; what was wrong with its answer, None when nothing was."""
        body: dict[str, Any] = {"model": "Qwen/Qwen3-8B", "max_tokens": 8, "prompt": "hello", "stream": stream}
        connection = http.client.HTTPConnection(target, self.scene.spec["proxy_port"], timeout=30)
        try:
            connection.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
            response = connection.getresponse()
            text = response.read().decode()
        finally:
            connection.close()
        if response.status != 200:
            return f"{response.status} {text}"
        if not stream:
            answer = json.loads(text)
            expected = "decoded" if kind == "split" else "hello back"
            return None if answer["choices"][0]["text"] == expected else text
        events = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
        if not events or events[-1] != "[DONE]":
            return f"a stream cut short: {text}"
        chunks = [json.loads(event) for event in events[:-1]]
        texts = "".join(chunk["choices"][0]["text"] for chunk in chunks if "choices" in chunk)
        expected = "decoded" if kind == "split" else "part 0part 1part 2"
        return None if texts == expected else text

    def phase(self) -> dict[str, int]:
        with self.lock:
            return dict(self.answered)


def surge(scene: Scene, old: str, start: Any, register: Any, deregister: Any, grace: float) -> str:
    """A Deployment's step: the new pod started and registered once ready, then the old one deleted."""
    new = start()
    register(new)
    deregister(old)
    scene.delete(old, grace)
    return str(new)


def scenario(scene: Scene, load: Load) -> dict[str, Any]:
    spec = scene.spec
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    hosts = scene.logs / "hosts"
    hosts.write_text("")
    subprocess.run(["mount", "--bind", str(hosts), "/etc/hosts"], check=True)
    decode_service = Balancer(DECODE_SERVICE, spec["port"])
    server_service = Balancer(SERVER_SERVICE, SERVER_PORT)
    scene.network()
    pods = spec["prefill_pods"]
    prefill = {address: scene.standin("prefill", address) for address in PREFILL[:pods]}
    scene.prefill = list(PREFILL[:pods])
    scene.network()
    decode = [scene.standin("decode", f"127.0.3.{index}") for index in (1, 2)]
    decode_service.endpoints = [(name.split("@")[1], spec["port"]) for name in decode]
    servers = [scene.standin("server", f"127.0.4.{index}") for index in (1, 2)]
    server_service.endpoints = [(name.split("@")[1], SERVER_PORT) for name in servers]
    fronts = {
        kind: [scene.front(kind, f"127.0.{net}.{index}") for index in (1, 2)]
        for kind, net in (("split", 1), ("classic", 2))
    }
    for kind, names in fronts.items():
        scene.targets[kind] = [name.split("@")[1] for name in names]
    for thread in load.threads:
        thread.start()
    phases: dict[str, dict[str, int]] = {"steady": {}}
    time.sleep(2)
    phases["steady"] = load.phase()

    # The prefill Deployment: the successor started and listed once ready, then the old pod deleted, which
    # the DNS cache goes on answering until it is gone.
    for address, successor in zip(PREFILL[:pods], SUCCESSORS[:pods], strict=True):
        prefill[successor] = scene.standin("prefill", successor)
        scene.prefill.append(successor)
        scene.network()
        scene.delete(prefill.pop(address), spec["grace"]["prefill"])
        scene.prefill.remove(address)
        scene.network()
    phases["prefill"] = load.phase()

    def endpoint_of(name: str, port: int) -> tuple[str, int]:
        return (name.split("@")[1], port)

    def rolled(service: Balancer, role: str, names: list[str], net: int, port: int) -> list[str]:
        fresh = []
        for index, old in enumerate(names, start=3):
            fresh.append(
                surge(
                    scene,
                    old,
                    lambda index=index: scene.standin(role, f"127.0.{net}.{index}"),
                    lambda new: service.endpoints.append(endpoint_of(new, port)),
                    lambda old: service.endpoints.remove(endpoint_of(old, port)),
                    spec["grace"][role],
                )
            )
        return fresh

    if "decode" in spec["roll"]:
        rolled(decode_service, "decode", decode, 3, spec["port"])
        phases["decode"] = load.phase()
    if "server" in spec["roll"]:
        rolled(server_service, "server", servers, 4, SERVER_PORT)
        phases["server"] = load.phase()
    for kind, net in (("split", 1), ("classic", 2)):
        if f"{kind}_fronts" not in spec["roll"]:
            continue
        for index, old in enumerate(fronts[kind], start=3):
            surge(
                scene,
                old,
                lambda kind=kind, net=net, index=index: scene.front(kind, f"127.0.{net}.{index}"),
                lambda new, kind=kind: scene.targets[kind].append(new.split("@")[1]),
                lambda old, kind=kind: scene.targets[kind].remove(old.split("@")[1]),
                spec["grace"][kind],
            )
        phases[f"{kind}_fronts"] = load.phase()
    time.sleep(1)
    load.stop.set()
    for thread in load.threads:
        thread.join()
    return {"answered": load.phase(), "phases": phases, "failed": load.failed, "exits": scene.exits}


def main() -> None:
    """argv: a JSON object: fronts {split, classic: {argv, env}}, path, prefill_service, decode_host,
    server_host, health_path, port, bootstrap_port, proxy_port, api_key, prestop_seconds, grace {role: s},
    prefill_pods (1 or 2), roll (the phases after prefill's: decode, server, split_fronts, classic_fronts)."""
    scene = Scene(json.loads(sys.argv[1]))
    load = Load(scene)

    def close() -> None:
        load.stop.set()
        scene.close()

    print(json.dumps(reported(scene.logs, lambda: scenario(scene, load), close)))


if __name__ == "__main__":
    main()
