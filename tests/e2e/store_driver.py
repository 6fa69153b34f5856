"""Runs inside a private network and mount namespace (``unshare -n -m``): starts the real
mooncake_master with the rendered command, then a real store client configured from the
rendered mooncake.json exactly as vLLM reads it, and prints what the client saw as JSON.

Nothing can leave the namespace: its only interfaces are loopback and a veth pair whose
two ends are both inside it, carrying one documentation address (the transfer engine
refuses a host whose only interface is loopback).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fleetctl.verify import evidence
from tests.e2e import mooncake_reader

HOST_ADDRESS = "192.0.2.10"
DEADLINE_SECONDS = 30
SUMMARY_SECONDS = 10
"""How often mooncake_master logs its admin summary ('Master Admin Metrics: ...')."""


def run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True)


def private_network(hostnames: list[str]) -> None:
    run("ip", "link", "set", "lo", "up")
    run("ip", "link", "add", "mc0", "type", "veth", "peer", "name", "mc1")
    run("ip", "addr", "add", f"{HOST_ADDRESS}/32", "dev", "mc0")
    run("ip", "link", "set", "mc0", "up")
    run("ip", "link", "set", "mc1", "up")
    # The rendered addresses are cluster DNS names: resolve them to this host, in this namespace only.
    hosts = Path(tempfile.mkdtemp()) / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + "".join(f"{HOST_ADDRESS} {name}\n" for name in hostnames))
    run("mount", "--bind", str(hosts), "/etc/hosts")


def wait_for_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex((HOST_ADDRESS, port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {HOST_ADDRESS}:{port}")


def exercise(config_path: Path, object_size: int) -> dict[str, object]:
    from mooncake.store import MooncakeDistributedStore  # the real client, from the real wheel

    config = mooncake_reader.read(config_path)
    store = MooncakeDistributedStore()
    result: dict[str, object] = {
        "mode": config.mode,
        "setup": store.setup(
            HOST_ADDRESS,  # vLLM registers the pod IP
            config.metadata_server,
            config.global_segment_size,
            config.local_buffer_size,
            config.protocol,
            config.device_name,
            config.master_server_address,
        ),
    }
    blocks = {f"chat/layer0/block{index}": bytes([index]) * object_size for index in range(4)}
    result["put"] = [store.put(key, value) for key, value in blocks.items()]
    result["exists"] = [store.is_exist(key) for key in blocks]
    result["get_equal"] = [store.get(key) == value for key, value in blocks.items()]
    spare = "chat/unread"
    result["spare_put"] = store.put(spare, b"\x07" * object_size)
    result["remove"] = store.remove(spare)
    result["exists_after_remove"] = store.is_exist(spare)
    store.close()
    return result


def start(process: dict[str, Any], log: Path, deadline: float) -> subprocess.Popen[bytes]:
    """One rendered container: its command and args, its environment ($(POD_IP) is this host),
    its log (glog writes to stderr) in ``log``."""
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, **process["env"]}
    argv = [arg.replace("$(POD_IP)", HOST_ADDRESS) for arg in process["argv"]]
    with log.open("wb") as stderr:
        popen = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    wait_for_port(process["port"], deadline)
    return popen


def first_summary(log: Path, deadline: float) -> str:
    """The master's log once it printed its first admin summary (as its admin server starts)."""
    while "Master Admin Metrics:" not in log.read_text():
        if time.monotonic() > deadline:
            raise TimeoutError("mooncake_master printed no admin summary")
        time.sleep(0.1)
    return log.read_text()


def wait_for_summary(log: Path, after: int) -> str:
    """The master's log once it printed its admin summary of stored objects (every 10 s)
    past offset ``after``, or after two summaries' time without one."""
    deadline = time.monotonic() + 2 * SUMMARY_SECONDS + 5
    while time.monotonic() < deadline and not evidence.store_puts(log.read_text()[after:]):
        time.sleep(0.5)
    return log.read_text()


def main() -> None:
    """argv: a JSON list of processes ({argv, env, port}) started in order (the master
    first), mooncake.json, the KV object size, then the cluster names to resolve to this host.
    With STORE_DRIVER_MASTER_SUMMARY set, the master's log before and after the puts too."""
    processes, config_path, object_size, *hostnames = sys.argv[1:]
    private_network(hostnames)
    started: list[subprocess.Popen[bytes]] = []
    deadline = time.monotonic() + DEADLINE_SECONDS
    logs = Path(tempfile.mkdtemp())
    try:
        for index, process in enumerate(json.loads(processes)):
            started.append(start(process, logs / f"{index}.log", deadline))
        summary = bool(os.environ.get("STORE_DRIVER_MASTER_SUMMARY"))
        before = first_summary(logs / "0.log", deadline) if summary else ""
        result = exercise(Path(config_path), int(object_size))
        if summary:
            result["master_log_before"] = before
            result["master_log"] = wait_for_summary(logs / "0.log", len(before))
    finally:
        for popen in reversed(started):
            popen.terminate()
            try:
                popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()
    result["exits"] = [popen.returncode for popen in started]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
