"""What the pods themselves say: request counters in their metrics, and the lines the pinned
vLLM and Mooncake releases log about KV transfers. Pure functions over text, so each is
held to the exact shape the real software prints."""

from __future__ import annotations

import re
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from components.spec.images import Framework

SERVED_COUNTERS: dict[Framework, str] = {
    "vllm": "vllm:request_success",
    "sglang": "sglang:num_requests",
    "tgi": "tgi_request_success",
}
"""The counter of requests a pod finished, on its server port's /metrics (vLLM and SGLang
expose it with a ``_total`` suffix, TGI's Rust exporter without; SGLang only with
--enable-metrics, which the framework adapter renders). Triton serves its metrics on another
port (8002), which the endpoint's NetworkPolicy closes."""


def counter_total(exposition: str, counter: str) -> float | None:
    """The sum of a counter's samples over all their labels in a Prometheus text exposition
    (None when absent); ``_created`` timestamps are not counts."""
    values = [
        sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name in (counter, f"{counter}_total")
    ]
    return sum(values) if values else None


# vLLM's stat logger, every 10 s while a connector has stats, from the prefill (pushing) side:
#   KVConnectorType: MooncakeConnector, KV Transfer metrics: Num successful transfers=1, ...
# Under MultiConnector the fields nest per connector (a dict's repr: 'Num successful transfers': 1).
_TRANSFER_LINE = "KV Transfer metrics:"
_SUCCESSFUL = re.compile(r"Num successful transfers'?\s*[=:]\s*(\d+)")
_FAILED = re.compile(r"Num failed (?:transfers|recvs)'?\s*[=:]\s*(\d+)")


@dataclass(frozen=True)
class Transfers:
    successful: int
    failed: int


def transfers(log: str) -> Transfers:
    """KV transfers a vLLM log reports in its connector stats lines."""
    lines = [line for line in log.splitlines() if _TRANSFER_LINE in line]
    return Transfers(
        sum(int(count) for line in lines for count in _SUCCESSFUL.findall(line)),
        sum(int(count) for line in lines for count in _FAILED.findall(line)),
    )


# The Mooncake master's admin summary, every 10 s (rates per second over the last interval):
#   Master Admin Metrics: ... Requests (Success/Total per sec): PutStart=0.30/0.30, PutEnd=0.30/0.30, ...
#   | Batch Requests (...): PutStart:(Req=0.00/0.00/0.00, Item=0.00/0.00), PutEnd:(Req=...
_MASTER_LINE = "Master Admin Metrics:"
_PUT_END = re.compile(r"\bPutEnd=([\d.]+)/|\bPutEnd:\(Req=([\d.]+)/")


def store_puts(log: str) -> bool:
    """Whether a Mooncake master log shows any object stored (a successful put end)."""
    return any(
        float(single or batch) > 0
        for line in log.splitlines()
        if _MASTER_LINE in line
        for single, batch in _PUT_END.findall(line)
    )


# Mooncake's transfer engine auto-discovers devices whatever protocol it is given: with none
# it installs the TCP transport without a warning of its own.
#   transfer_engine_impl.cpp] Topology discovery complete. Found 0 HCAs.
#   tcp_transport.cpp] TcpTransport: listen on port 16217
_DEVICES = re.compile(r"Topology discovery complete(?: with specified devices)?\. Found (\d+) HCAs")
_TCP = "TcpTransport: listen on port"


def transport(log: str) -> str | None:
    """``tcp`` or ``rdma``: the transport a Mooncake transfer engine installed, as its log
    says (None when the log does not say: not started yet, or rotated away)."""
    if _TCP in log:
        return "tcp"
    devices = [int(count) for count in _DEVICES.findall(log)]
    if not devices:
        return None
    return "rdma" if min(devices) > 0 else "tcp"
