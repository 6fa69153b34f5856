"""Inside a private network namespace: a Kubernetes API stand-in (pods, the pod proxy's
/metrics, container logs, bearer-token auth) and a route in front of those pods, then
`fleetctl verify` against both. Prints the verify exit code and its JSON checks.

The pods behave per case (the endpoint's name): a route that splits at the canary's weight
or not, prefill pods that log Mooncake transfers or do not, a master that logs stored objects
or not, transfer engines that found RDMA devices or installed TCP. The TCP case's log is the
real Mooncake transfer engine's, asked for rdma in this namespace (which has no RDMA device).
Mooncake endpoints with a canary set (cases ``pdc-*``, ``storec-*``) have two sets of pods, the
canary's named ``<case>-canary``: the route picks a set at the weight, and a request posted
through the pod proxy to a proxy or server pod goes to that pod's set only; proxies count the
answers they relayed in their /health, as the real proxy program does. Split endpoints scaled to
zero (cases ``zero-*``) have a route that answers as their proxy does while the roles are at zero
(503, ``Retry-After``, error type ``scaled_to_zero``; /health 200 naming the roles) for their first
:data:`ASLEEP_REQUESTS` completions, and like ``pd-good`` once awake. Their ScaledObjects are the
ones the program renders for the stack file, with the status KEDA writes; their HPAs report
ScalingDisabled while the roles are at zero and a current value per metric once awake; the
region's Prometheus (through the service proxy) finds the proxy's series for the wake query (1
once a request was counted) and the roles' series only once they are awake. A classic endpoint scaled
to zero (case ``gated-wakes``) is the same scene behind its gate: the route answers as the gate does
(503 naming the server; the gate's /health 200, the server's own health path not served by the
route), its server's ScaledObject wakes on the gate's series.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, generate_latest

from components.render.endpoint import endpoint_objects
from components.render.placement import placed
from fleetctl.stackfile import load_stack
from fleetctl.verify.autoscaler import PROMETHEUS_QUERY
from fleetctl.verify.command import main as verify
from tests.e2e.store_driver import HOST_ADDRESS, private_network
from tests.e2e.verify_driver import reply, unknown_model

TOKEN = "k8s-aws-v1.verify-test-token"
NAMESPACE = "inference"
SHARES = {"canary-good": 0.10, "canary-tgi": 0.10, "canary-skewed": 0.5, "pdc-skewed": 0.5}
"""The share of requests the route really sends to the canary, per case."""
ASLEEP_REQUESTS = {"zero-wakes": 3, "zero-asleep": 10**9, "gated-wakes": 2}
"""Completions a case's proxy answers at zero before its roles serve (each one counted, as a wake)."""
RETRY_AFTER_SECONDS = 1
"""The proxy's --retry-after-seconds in these scenes (30 by default)."""

# What vLLM's stat logger prints for MooncakeConnector: "KVConnectorType: %s, KV Transfer metrics: %s",
# the fields of MooncakeKVConnectorStats.reduce() joined as "key=value, ...".
REDUCED = {
    "Num successful transfers": 1,
    "Avg xfer time (ms)": 2.113,
    "P90 xfer time (ms)": 2.113,
    "Avg MB per transfer": 36.0,
    "Throughput (MB/s)": 17037.387,
    "Avg number of descriptors": 36.0,
    "Num failed transfers": 0,
    "Num failed recvs": 0,
    "Num KV expired reqs": 0,
}
MASTER_SUMMARY = (
    "I1129 19:24:54.113147 30733 master_admin_service.cpp:301] Master Admin Metrics: role=leader, state=serving, "
    "service_ready=true, master={{Mem Storage: 2.93 KB / 64.00 MB (0.0%) | Keys: 3 (soft-pinned: 0) | Clients: 1 | "
    "Requests (Success/Total per sec): PutStart={rate}/{rate}, PutEnd={rate}/{rate}, PutRevoke=0.00/0.00, "
    "Get=0.00/0.00 | Batch Requests (per sec, Req=Success/PartialSuccess/Total, Item=Success/Total): "
    "PutStart:(Req=0.00/0.00/0.00, Item=0.00/0.00), PutEnd:(Req=0.00/0.00/0.00, Item=0.00/0.00)}}"
)
RDMA_FOUND = (
    "I1129 19:20:01.100000 41 transfer_engine_impl.cpp:259] Auto-discovering topology...\n"
    "I1129 19:20:01.300000 41 transfer_engine_impl.cpp:274] Topology discovery complete. Found 32 HCAs.\n"
    "I1129 19:20:01.300100 41 transfer_engine_impl.cpp:290] installTransport, type=rdma\n"
)


def vllm_log(fields: dict[str, Any]) -> str:
    joined = ", ".join(f"{key}={value}" for key, value in fields.items())
    return f"INFO 11-29 19:30:01 [loggers.py:248] KVConnectorType: MooncakeConnector, KV Transfer metrics: {joined}"


@dataclass
class Pod:
    name: str
    labels: dict[str, str]
    containers: tuple[str, ...] = ("server",)
    framework: str = "vllm"
    counted: bool = True
    lag: float = 0.0
    """Seconds after answering a request that the pod counts it."""
    logs: list[tuple[float, str, str]] = field(default_factory=list)
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    served: int = 0
    answered: int = 0
    """A proxy's count of relayed answers, in its /health body."""

    def __post_init__(self) -> None:
        self.counter = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            ["model_name", "engine", "finished_reason"],
            registry=self.registry,
        )
        self.counter.labels("/models/qwen3-8b", "0", "stop").inc(7)  # traffic before the run

    def serve(self) -> None:
        if not self.counted:
            return
        if self.lag:
            threading.Timer(self.lag, self.count).start()
        else:
            self.count()

    def count(self) -> None:
        self.served += 1
        self.counter.labels("/models/qwen3-8b", "0", "length").inc()

    def metrics(self) -> bytes:
        if self.framework == "tgi":  # the Rust metrics exporter: no _total suffix, no labels
            return f"# TYPE tgi_request_success counter\ntgi_request_success {7 + self.served}\n".encode()
        return generate_latest(self.registry)

    def log(self, container: str, text: str) -> None:
        self.logs += [(time.monotonic(), container, line) for line in text.splitlines()]


class Cluster:
    def __init__(self, cases: list[str], engine_log: str, stack_file: str = "") -> None:
        self.pods: dict[str, Pod] = {}
        self.scaled_objects: dict[str, tuple[str, dict[str, Any]]] = {}
        """Each at-zero case's ScaledObjects as rendered, by name, with the case they belong to."""
        self.counted: dict[str, int] = {}
        """Completions each at-zero case's proxy counted."""
        self.asleep: dict[str, int] = {}
        """Completions each case at zero answers 503 before its roles serve."""
        self.random = random.Random(20261129)
        for case in cases:
            if case.startswith("canary"):
                framework = "tgi" if case == "canary-tgi" else "vllm"
                options = {"framework": framework, "counted": case != "canary-uncounted"}
                options["lag"] = 1.0 if case == "canary-lagging" else 0.0
                for index in range(2):
                    self.add(case, "server", f"{case}-6d5f8-{index}", **options)
                self.add(case, "canary", f"{case}-canary-84c1a-0", **options)
            elif case.startswith("storec"):
                for name in (case, f"{case}-canary"):
                    self.add(name, "server", f"{name}-5c7d9-0")
                    self.add(name, "store", f"{name}-store-0", containers=("master",))
            elif case.startswith("pdc"):
                for name in (case, f"{case}-canary"):
                    self.add(name, "prefill", f"{name}-prefill-0")
                    self.add(name, "decode", f"{name}-decode-7b9c4-0")
                    for index in range(2):
                        self.add(name, "proxy", f"{name}-proxy-58f6d-{index}")
            elif case.startswith("store"):
                self.add(case, "server", f"{case}-5c7d9-0")
                master = self.add(case, "store", f"{case}-store-0", containers=("master",))
                master.log("master", MASTER_SUMMARY.format(rate="0.00"))
            elif case.startswith("zero"):  # the pods once awake: pd-good's
                for role, name in (("prefill", f"{case}-prefill-0"), ("decode", f"{case}-decode-7b9c4-0")):
                    self.add(case, role, name).log("server", RDMA_FOUND)
                self.asleep[case] = ASLEEP_REQUESTS[case]
                self.counted[case] = 0
            elif case.startswith("gated"):  # the server pod once awake
                self.add(case, "server", f"{case}-6d5f8-0")
                self.asleep[case] = ASLEEP_REQUESTS[case]
                self.counted[case] = 0
            elif case.startswith("rdma-group"):
                # Roles spanning two nodes: LeaderWorkerSet leaders <name>-<role>-0, workers <name>-<role>-0-1,
                # with the role's labels; the decode group's worker fell back to TCP.
                for role in ("prefill", "decode"):
                    self.add(case, role, f"{case}-{role}-0").log("server", RDMA_FOUND)
                    worker = engine_log if role == "decode" else RDMA_FOUND
                    self.add(case, role, f"{case}-{role}-0-1").log("server", worker)
            else:
                for role, name in (("prefill", f"{case}-prefill-0"), ("decode", f"{case}-decode-7b9c4-0")):
                    self.add(case, role, name).log("server", engine_log if case == "rdma-fallback" else RDMA_FOUND)
        if stack_file:
            _, spec = load_stack(Path(stack_file))
            for placement in spec.placements:
                if placement.endpoint in self.asleep:
                    for manifest in endpoint_objects(placed(spec, placement)).values():
                        if manifest["kind"] == "ScaledObject":
                            self.scaled_objects[manifest["metadata"]["name"]] = (placement.endpoint, manifest)

    def scaled_object(self, name: str) -> dict[str, Any] | None:
        """A ScaledObject with the status KEDA v2.20.2 writes (one External metric per prometheus trigger)."""
        if name not in self.scaled_objects:
            return None
        case, manifest = self.scaled_objects[name]
        triggers = manifest["spec"]["triggers"]
        active, reason = ("False", "ScalerNotActive") if self.asleep[case] else ("True", "ScalerActive")
        status = {
            "hpaName": name,
            "externalMetricNames": [f"s{i}-prometheus" for i, t in enumerate(triggers) if t["type"] == "prometheus"],
            "resourceMetricNames": [t["type"] for t in triggers if t["type"] != "prometheus"],
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "ScaledObjectReady"},
                {"type": "Active", "status": active, "reason": reason},
            ],
        }
        return {**manifest, "status": status}

    def hpa(self, name: str) -> dict[str, Any] | None:
        """The HPA KEDA made: ScalingDisabled at zero (kubernetes horizontal.go), else a value per metric."""
        scaled = self.scaled_object(name)
        if scaled is None:
            return None
        case, _ = self.scaled_objects[name]
        if self.asleep[case]:
            status: dict[str, Any] = {
                "desiredReplicas": 0,
                "conditions": [
                    {"type": "ScalingActive", "status": "False", "reason": "ScalingDisabled",
                     "message": "scaling is disabled since the replica count of the target is zero"},
                ],
            }  # fmt: skip
        else:
            current = [
                {"type": "External", "external": {"metric": {"name": metric}, "current": {"averageValue": "0"}}}
                for metric in scaled["status"]["externalMetricNames"]
            ]
            conditions = [{"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound"}]
            status = {"currentReplicas": 1, "desiredReplicas": 1, "currentMetrics": current, "conditions": conditions}
        return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
                "status": status}  # fmt: skip

    def prometheus(self, query: str) -> dict[str, Any]:
        """The wake query finds the proxy's (the gate's) series (1 once it counted a request); a role's
        own series exist only while it is awake."""
        result: list[dict[str, Any]] = []
        for case in self.counted:
            front = "gate" if case.startswith("gated") else "proxy"
            if f'endpoint="{case}",role="{front}"' in query:
                result = [{"metric": {}, "value": [time.time(), "1" if self.counted[case] else "0"]}]
            elif f'endpoint="{case}"' in query and not self.asleep[case]:
                result = [{"metric": {}, "value": [time.time(), "0"]}]
        return {"status": "success", "data": {"resultType": "vector", "result": result}}

    def add(self, case: str, role: str, name: str, **options: Any) -> Pod:
        labels = {"app.kubernetes.io/name": case, "app.kubernetes.io/component": role}
        self.pods[name] = Pod(name, labels, **options)
        return self.pods[name]

    def of(self, case: str, role: str) -> list[Pod]:
        wanted = {"app.kubernetes.io/name": case, "app.kubernetes.io/component": role}
        return [pod for pod in self.pods.values() if pod.labels == wanted]

    def route(self, case: str) -> bool:
        """One request through the case's route: which pods it reaches, and what they log.
        False when the pod that got it fails it (the broken canary's)."""
        if case.startswith(("pdc", "storec")):
            canary = self.random.random() < SHARES.get(case, 0.10)
            entry = "proxy" if case.startswith("pdc") else "server"
            self.entered(self.random.choice(self.of(f"{case}-canary" if canary else case, entry)))
            return True
        if case.startswith("canary"):
            canary = self.random.random() < SHARES.get(case, 0.10)
            if canary and case == "canary-broken":
                return False
            self.random.choice(self.of(case, "canary" if canary else "server")).serve()
            return True
        if case.startswith("gated"):
            self.of(case, "server")[0].serve()
            return True
        later = threading.Timer(0.5, self.after_request, (case,))
        later.daemon = True
        later.start()
        return True

    def entered(self, pod: Pod) -> None:
        """A request taken by a Mooncake set's entry pod (its proxy, or the store mode's server)."""
        name = pod.labels["app.kubernetes.io/name"]
        if pod.labels["app.kubernetes.io/component"] == "proxy":
            pod.answered += 1
        else:
            pod.serve()
        later = threading.Timer(0.5, self.after_set_request, (name,))
        later.daemon = True
        later.start()

    def after_set_request(self, name: str) -> None:
        """What a set of a Mooncake endpoint with a canary logs: the case pdc-crossed's canary set
        moves no KV (a canary whose engine cannot read what it is handed)."""
        if name.startswith("storec"):
            for master in self.of(name, "store"):
                master.log("master", MASTER_SUMMARY.format(rate="0.30"))
        elif name == "pdc-crossed-canary":
            for decode in self.of(name, "decode"):
                decode.log("server", vllm_log({**REDUCED, "Num successful transfers": 0, "Num failed recvs": 1}))
        else:
            for prefill in self.of(name, "prefill"):
                prefill.log("server", vllm_log(REDUCED))

    def after_request(self, case: str) -> None:
        """What the pods log a little later (vLLM and the master log every 10 s; here sooner)."""
        if case.startswith("store"):
            rate = "0.00" if case == "store-silent" else "0.30"
            for master in self.of(case, "store"):
                master.log("master", MASTER_SUMMARY.format(rate=rate))
            return
        if case == "pd-silent":
            return
        if case == "pd-failed":
            for decode in self.of(case, "decode"):
                decode.log("server", vllm_log({**REDUCED, "Num successful transfers": 0, "Num failed recvs": 1}))
            return
        for prefill in self.of(case, "prefill"):
            prefill.log("server", vllm_log(REDUCED))


class Api(BaseHTTPRequestHandler):
    cluster: Cluster

    def log_message(self, *args: Any) -> None:
        pass

    def status(self, code: int, message: str) -> None:
        body = {"kind": "Status", "status": "Failure", "message": message, "code": code}
        reply(self, code, json.dumps(body).encode())

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.status(401, "Unauthorized")
            return
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        pods = self.cluster.pods
        if (match := re.fullmatch(rf"/api/v1/namespaces/{NAMESPACE}/pods", url.path)) is not None:
            wanted = dict(term.split("=", 1) for term in query["labelSelector"].split(","))
            items = [
                {
                    "metadata": {"name": pod.name, "namespace": NAMESPACE, "labels": pod.labels},
                    "spec": {"containers": [{"name": name} for name in pod.containers]},
                    "status": {"phase": "Running"},
                }
                for pod in pods.values()
                if wanted.items() <= pod.labels.items()
            ]
            reply(self, 200, json.dumps({"kind": "PodList", "apiVersion": "v1", "items": items}).encode())
        elif match := re.fullmatch(rf"/api/v1/namespaces/{NAMESPACE}/pods/([^/:]+):8000/proxy/metrics", url.path):
            pod = pods.get(match.group(1))
            if pod is None:
                self.status(404, f'pods "{match.group(1)}" not found')
            else:
                reply(self, 200, pod.metrics(), "text/plain; version=0.0.4; charset=utf-8")
        elif match := re.fullmatch(rf"/api/v1/namespaces/{NAMESPACE}/pods/([^/:]+):8000/proxy/health", url.path):
            pod = pods.get(match.group(1))
            if pod is None or pod.labels["app.kubernetes.io/component"] != "proxy":
                self.status(404, "not found")
            else:
                body = {"prefill": {"10.0.1.7": {"0": "engine-a"}}, "decode": True, "answered": pod.answered}
                reply(self, 200, json.dumps(body).encode())
        elif match := re.fullmatch(rf"/apis/keda.sh/v1alpha1/namespaces/{NAMESPACE}/scaledobjects/([^/]+)", url.path):
            found = self.cluster.scaled_object(match.group(1))
            if found is None:
                self.status(404, "not found")
            else:
                reply(self, 200, json.dumps(found).encode())
        elif match := re.fullmatch(
            rf"/apis/autoscaling/v2/namespaces/{NAMESPACE}/horizontalpodautoscalers/([^/]+)", url.path
        ):
            found = self.cluster.hpa(match.group(1))
            if found is None:
                self.status(404, "not found")
            else:
                reply(self, 200, json.dumps(found).encode())
        elif url.path == PROMETHEUS_QUERY:
            reply(self, 200, json.dumps(self.cluster.prometheus(query["query"])).encode())
        elif match := re.fullmatch(rf"/api/v1/namespaces/{NAMESPACE}/pods/([^/]+)/log", url.path):
            pod = pods.get(match.group(1))
            if pod is None or query.get("container") not in pod.containers:
                self.status(404, "not found")
                return
            since = time.monotonic() - float(query.get("sinceSeconds", "inf"))
            lines = [line for at, container, line in pod.logs if container == query["container"] and at >= since]
            text = "".join(line + "\n" for line in lines).encode()
            reply(self, 200, text[: int(query.get("limitBytes", len(text)))], "text/plain")
        else:
            self.status(404, "the server could not find the requested resource")

    def do_POST(self) -> None:
        """A completion through the pod proxy, to the one pod named (its set's entry)."""
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.status(401, "Unauthorized")
            return
        request = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        pattern = rf"/api/v1/namespaces/{NAMESPACE}/pods/([^/:]+):8000/proxy/v1/completions"
        match = re.fullmatch(pattern, urllib.parse.urlsplit(self.path).path)
        pod = self.cluster.pods.get(match.group(1)) if match else None
        if pod is None or pod.labels["app.kubernetes.io/component"] not in ("proxy", "server"):
            self.status(404, "not found")
        elif (error := unknown_model(request)) is not None:
            reply(self, 404, json.dumps(error).encode())
        else:
            self.cluster.entered(pod)
            reply(self, 200, json.dumps({"choices": [{"index": 0, "text": " Paris."}]}).encode())


class Route(BaseHTTPRequestHandler):
    cluster: Cluster

    def log_message(self, *args: Any) -> None:
        pass

    def answer(self, body: Any, status: int = 200) -> None:
        reply(self, status, json.dumps(body).encode())

    def do_GET(self) -> None:
        case = self.path.lstrip("/").split("/")[0]
        if case.startswith("gated"):  # the gate answers its own /health; the server's path is not its own
            if not self.path.endswith("/health"):
                self.answer({"detail": "Not Found"}, status=404)
            elif self.cluster.asleep[case] > 0:
                self.answer({"server": False, "answered": 0, "scaled_to_zero": ["server"]})
            else:
                self.answer({"server": True, "answered": 1, "scaled_to_zero": []})
            return
        if self.cluster.asleep.get(case, 0) > 0 and self.path.endswith("/health"):
            self.answer({"prefill": {}, "decode": False, "answered": 0, "scaled_to_zero": ["prefill", "decode"]})
            return
        self.answer({})

    def do_POST(self) -> None:
        request = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        case = self.path.lstrip("/").split("/")[0]
        if self.path.endswith("/v1/completions") and (error := unknown_model(request)) is not None:
            self.answer(error, status=404)
        elif self.cluster.asleep.get(case, 0) > 0:
            self.cluster.asleep[case] -= 1
            self.cluster.counted[case] += 1
            message = "prefill and decode scaled to zero: this request wakes them; retry in a few minutes"
            if case.startswith("gated"):
                message = "server scaled to zero: this request wakes it; retry in a few minutes"
            body = json.dumps({"error": {"message": message, "type": "scaled_to_zero", "code": 503}}).encode()
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Retry-After", str(RETRY_AFTER_SECONDS))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.cluster.route(case):
            self.answer({"choices": [{"index": 0, "text": " Paris."}], "generated_text": " Paris."})
        else:
            self.answer({"object": "error", "message": "CUDA error: an illegal memory access"}, status=500)


def real_engine_log() -> str:
    """What the real Mooncake transfer engine logs when vLLM asks it for rdma on a host
    without RDMA devices (this namespace)."""
    program = (
        "from mooncake.engine import TransferEngine\n"
        "TransferEngine().initialize('192.0.2.10', 'P2PHANDSHAKE', 'efa', '')\n"
    )
    completed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True)
    return completed.stderr


def api_server() -> ThreadingHTTPServer:
    """The API stand-in: plain HTTP on loopback, or, with CLUSTER_DRIVER_TLS=<directory>:<host>,
    HTTPS like EKS's (server.pem, server.key) on <host>, a name this namespace resolves."""
    tls = os.environ.get("CLUSTER_DRIVER_TLS")
    if not tls:
        private_network([])
        return ThreadingHTTPServer(("127.0.0.1", 6443), Api)
    directory, host = tls.rsplit(":", 1)
    private_network([host])
    server = ThreadingHTTPServer((HOST_ADDRESS, 443), Api)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(f"{directory}/server.pem", f"{directory}/server.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    return server


def main() -> None:
    stack_file, outputs, cases, *extra = sys.argv[1:]
    servers = [api_server(), ThreadingHTTPServer(("127.0.0.1", 8080), Route)]
    cluster = Cluster(cases.split(","), real_engine_log(), stack_file)
    Api.cluster = Route.cluster = cluster
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = verify(["--stack-file", stack_file, "--outputs", outputs, "--output", "json", *extra])
    for server in servers:
        server.shutdown()
    print(
        json.dumps({"code": code, "checks": json.loads(printed.getvalue() or "[]"), "engine_log": cluster_log(cluster)})
    )


def cluster_log(cluster: Cluster) -> str:
    fallback = cluster.pods.get("rdma-fallback-prefill-0")
    return "\n".join(line for _, _, line in fallback.logs) if fallback else ""


if __name__ == "__main__":
    main()
