"""Runs inside a private network and mount namespace (``unshare -n -m``): starts the real
mooncake_master with the rendered command, then a real store client configured from the
rendered mooncake.json exactly as vLLM reads it, and prints what the client saw as JSON: with
the TCP ports every started process listens on (read from /proc, so nothing is assumed about
how a process picks them), and, for offload disk, a read that only the store-client's SSD tier
can answer.

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
OFFLOAD_SECONDS = 40
"""Long enough for the store-client's offload heartbeat (every 10 s) to write queued objects."""
LEASE_SECONDS = 10
"""mooncake_master's default_kv_lease_ttl: an object read, written or looked up (its replica list)
within it is not evicted."""
FILL_BYTES = 3 * 256 * 2**20
"""Written after the objects under test: three times the test pool (256 MiB), so the master has to
evict their memory copies."""
LISTEN = "0A"
"""TCP_LISTEN in /proc/net/tcp's st column."""


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


def listening_ports(pid: int) -> list[int]:
    """The TCP ports ``pid`` listens on: its sockets (/proc/<pid>/fd) matched by inode against the
    namespace's listening sockets (/proc/net/tcp and tcp6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target.removeprefix("socket:[").removesuffix("]"))
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def new_store(config: mooncake_reader.StoreConfig) -> tuple[Any, object]:
    """A store client set up as vLLM sets it up; (client, setup's return or the error it raised)."""
    from mooncake.store import MooncakeDistributedStore  # the real client, from the real wheel

    store = MooncakeDistributedStore()
    try:
        setup: object = store.setup(
            HOST_ADDRESS,  # vLLM registers the pod IP
            config.metadata_server,
            config.global_segment_size,
            config.local_buffer_size,
            config.protocol,
            config.device_name,
            config.master_server_address,
        )
    except MemoryError as error:  # the client's std::bad_alloc
        setup = f"{type(error).__name__}: {error}"
    return store, setup


def exercise(config_path: Path, object_size: int) -> dict[str, object]:
    config = mooncake_reader.read(config_path)
    store, setup = new_store(config)
    result: dict[str, object] = {"mode": config.mode, "setup": setup}
    if setup != 0:
        return result
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


def exercise_disk_tier(config_path: Path, preferred_segment: str, object_size: int) -> dict[str, object]:
    """vLLM's puts with its MOONCAKE_PREFERRED_SEGMENT, then reads of objects that by then live only
    in the store-client's SSD tier: they reach it through the port its disk reads are served on."""
    from mooncake.store import ReplicateConfig

    store, setup = new_store(mooncake_reader.read(config_path))
    assert setup == 0, setup
    placement = ReplicateConfig()
    placement.preferred_segment = preferred_segment
    early = {f"chat/disk/block{index}": bytes([index + 1]) * object_size for index in range(4)}
    result: dict[str, object] = {"put": [store.put(key, value, placement) for key, value in early.items()]}
    result["segments"] = sorted(
        {
            replica.get_memory_descriptor().buffer_descriptor.transport_endpoint
            for key in early
            for replica in store.get_replica_desc(key)
            if replica.is_memory_replica()
        }
    )

    def on_disk(key: str) -> bool:
        return any(replica.is_local_disk_replica() for replica in store.get_replica_desc(key))

    def in_memory(key: str) -> bool:
        return any(replica.is_memory_replica() for replica in store.get_replica_desc(key))

    written = time.monotonic()
    while time.monotonic() - written < OFFLOAD_SECONDS and not all(on_disk(key) for key in early):
        time.sleep(0.5)
    result["offloaded"] = [on_disk(key) for key in early]
    # Once the lease of that last look-up is over, fill the pool: the master evicts their memory copies.
    time.sleep(LEASE_SECONDS + 1)
    filler = b"\x07" * object_size
    for index in range(FILL_BYTES // object_size):
        store.put(f"chat/fill/block{index}", filler, placement)
    time.sleep(1)
    result["memory_copies_left"] = [in_memory(key) for key in early]
    reads_before: int = store.get_offload_rpc_read_count()
    result["get_equal"] = [store.get(key) == value for key, value in early.items()]
    result["disk_reads"] = store.get_offload_rpc_read_count() - reads_before
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


def capture_stderr(log: Path) -> None:
    """This process's own stderr (where the in-process store client logs) into ``log``."""
    sys.stderr.flush()
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(descriptor, 2)
    os.close(descriptor)


def main() -> None:
    """argv: a JSON list of processes ({argv, env, port}) started in order (the master
    first), mooncake.json, the KV object size, then the cluster names to resolve to this host.
    With STORE_DRIVER_MASTER_SUMMARY set, the master's log before and after the puts too; with
    STORE_DRIVER_DISK_TIER set to vLLM's MOONCAKE_PREFERRED_SEGMENT, the SSD tier's reads."""
    processes, config_path, object_size, *hostnames = sys.argv[1:]
    private_network(hostnames)
    started: list[subprocess.Popen[bytes]] = []
    deadline = time.monotonic() + DEADLINE_SECONDS
    logs = Path(tempfile.mkdtemp())
    capture_stderr(logs / "client.log")
    try:
        for index, process in enumerate(json.loads(processes)):
            started.append(start(process, logs / f"{index}.log", deadline))
        listening = [listening_ports(popen.pid) for popen in started]
        summary = bool(os.environ.get("STORE_DRIVER_MASTER_SUMMARY"))
        before = first_summary(logs / "0.log", deadline) if summary else ""
        result = exercise(Path(config_path), int(object_size))
        result["listening"] = listening
        if summary:
            result["master_log_before"] = before
            result["master_log"] = wait_for_summary(logs / "0.log", len(before))
        disk_tier = os.environ.get("STORE_DRIVER_DISK_TIER")
        if disk_tier:
            segment = disk_tier.replace("$(VLLM_HOST_IP)", HOST_ADDRESS)
            result["disk_tier"] = exercise_disk_tier(Path(config_path), segment, int(object_size))
        result["client_log"] = (logs / "client.log").read_text(errors="replace")[-20000:]
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
