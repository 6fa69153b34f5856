"""A pod network inside the driver's private network namespace: each "pod" is a network namespace
of its own with one address on a bridge, as a Kubernetes pod has, so two vLLM servers can each bind
the ports vLLM hard-codes on every address (the Mooncake bootstrap server on ``0.0.0.0``:
vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py) and the proxy reaches
them by address. The cluster's DNS is the driver's /etc/hosts, a private bind mount the Services'
names are written into; ``ip netns exec`` keeps it (it binds /etc/netns/<name>/ files only when they
exist).

Run only inside ``unshare -n -m`` (tests/e2e/namespace.py): nothing here is seen from the host.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BRIDGE = "pods0"
SUBNET = "10.88.0"
GATEWAY = f"{SUBNET}.1"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True)


@dataclass
class Pod:
    name: str
    address: str
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()


@dataclass
class PodNetwork:
    logs: Path
    hosts: Path = field(init=False)
    pods: dict[str, Pod] = field(default_factory=dict)
    names: dict[str, list[str]] = field(default_factory=dict)
    _next: int = 10

    def __post_init__(self) -> None:
        ip("link", "set", "lo", "up")
        ip("link", "add", BRIDGE, "type", "bridge")
        ip("addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
        ip("link", "set", BRIDGE, "up")
        self.hosts = self.logs / "hosts"
        self.hosts.write_text("")
        subprocess.run(["mount", "--bind", str(self.hosts), "/etc/hosts"], check=True)
        self.publish()

    def pod(self, name: str) -> Pod:
        """A new pod's namespace, on the bridge at the next free address."""
        self._next += 1
        address = f"{SUBNET}.{self._next}"
        ip("netns", "add", name)
        ip("link", "add", f"v{self._next}", "type", "veth", "peer", "name", "eth0", "netns", name)
        ip("link", "set", f"v{self._next}", "master", BRIDGE, "up")
        ip("-n", name, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", name, "link", "set", "eth0", "up")
        ip("-n", name, "link", "set", "lo", "up")
        ip("-n", name, "route", "add", "default", "via", GATEWAY)
        pod = self.pods[name] = Pod(name, address)
        return pod

    def start(self, pod: Pod, argv: Sequence[str], env: Mapping[str, str]) -> None:
        """``argv`` in ``pod``'s namespace, its output in ``<logs>/<pod>.log``."""
        pod.log = self.logs / f"{pod.name}.log"
        with pod.log.open("ab") as log:
            pod.process = subprocess.Popen(
                ["ip", "netns", "exec", pod.name, *argv],
                env=dict(env),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def terminate(self, pod: Pod) -> None:
        """SIGTERM to the pod's first process, as the kubelet sends it to the container's (after preStop)."""
        assert pod.process is not None
        pod.process.send_signal(signal.SIGTERM)

    def kill(self, pod: Pod, timeout: float = 30) -> None:
        """Every process of the pod killed at once (a crashed container, or what is left at the end)."""
        if pod.process is not None and pod.process.poll() is None:
            os.killpg(pod.process.pid, signal.SIGKILL)
        if pod.process is not None:
            pod.process.wait(timeout)

    def delete(self, pod: Pod) -> None:
        """The pod's processes killed, its namespace and its addresses under every name gone."""
        self.kill(pod)
        ip("netns", "delete", pod.name)
        self.pods.pop(pod.name, None)
        for addresses in self.names.values():
            if pod.address in addresses:
                addresses.remove(pod.address)
        self.publish()

    def name(self, dns_name: str, pods: Sequence[Pod]) -> None:
        """``dns_name`` answers the addresses of ``pods`` (a Service's ready endpoints)."""
        self.names[dns_name] = [pod.address for pod in pods]
        self.publish()

    def publish(self) -> None:
        lines = ["127.0.0.1 localhost"]
        lines += [f"{address} {name}" for name, addresses in self.names.items() for address in addresses]
        with open("/etc/hosts", "w") as hosts:  # in place: the bind mount keeps the inode
            hosts.write("\n".join(lines) + "\n")

    def close(self) -> None:
        for pod in list(self.pods.values()):
            self.delete(pod)
