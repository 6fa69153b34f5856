"""The front's ``/metrics``: what it counts since it started, and the Prometheus text exposition
(format 0.0.4, written here: no client library) of five series, every one present from start: the
requests received (on arrival, whatever their answer), those answered 503 because a backend had no
serving pod (per ``backend``), the backend answers relayed (``answered``), the requests in flight and
the time the last request arrived."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from front.watch import ROLES

REQUESTS = "inference_fleet_proxy_requests_total"
UNSERVED = "inference_fleet_proxy_unserved_requests_total"
ANSWERED = "inference_fleet_proxy_answered_total"
IN_FLIGHT = "inference_fleet_proxy_requests_in_flight"
LAST_REQUEST = "inference_fleet_proxy_last_request_timestamp_seconds"
ROUTED_BLOCKS = "inference_fleet_proxy_routed_blocks_total"
ROUTED_CACHED_BLOCKS = "inference_fleet_proxy_routed_cached_blocks_total"
BACKEND_IN_FLIGHT = "inference_fleet_proxy_backend_requests_in_flight"
"""The series of /metrics (components/metric_table.py holds the same names for the rendering; a test
holds them equal: this program runs alone in its pod and imports nothing of ours)."""
EXPOSITION_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Counts:
    """What /metrics exports, since this process started."""

    requests: int = 0
    """Completion requests received, counted on arrival whatever their answer."""
    answered: int = 0
    """Requests whose decode answer this process relayed."""
    in_flight: int = 0
    last_request: float = 0.0
    """Unix time of the last request received (0 before any): what wakes a backend at zero, a gauge
    so that a request is seen even when it came before this process's first scrape."""
    unserved: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    """Per backend (role, or the gate's server): requests answered 503 because it had no serving pod."""

    def unserved_by(self, roles: Sequence[str]) -> None:
        for role in roles:
            self.unserved[role] += 1


@dataclass(frozen=True)
class Routed:
    """What one router (front/router.py) counted, for /metrics: ``backend`` is its role."""

    backend: str
    blocks: float
    cached: float
    in_flight: Mapping[str, float]
    """Per target (a prefill engine ``address/rank/engine id``, a pod's address) it chose lately."""


def routing_families(routed: Sequence[Routed]) -> list[tuple[str, str, str, list[tuple[str, float]]]]:
    """The routing series (only with ``--routing``): prompt blocks routed and those the chosen backend was
    believed to hold (their ratio is the prefix index's expected hit rate), and each target's load."""
    if not routed:
        return []
    in_flight = [
        (f'{{backend="{r.backend}",target="{target}"}}', value)
        for r in routed
        for target, value in sorted(r.in_flight.items())
    ]
    return [
        (
            ROUTED_BLOCKS,
            "counter",
            "Blocks of the prompts routed (64 characters each).",
            [(f'{{backend="{r.backend}"}}', r.blocks) for r in routed],
        ),
        (
            ROUTED_CACHED_BLOCKS,
            "counter",
            "Blocks of the prompts routed that the chosen backend was believed to hold (prefix routing).",
            [(f'{{backend="{r.backend}"}}', r.cached) for r in routed],
        ),
        (BACKEND_IN_FLIGHT, "gauge", "Requests this front holds in flight on the target.", in_flight),
    ]


def exposition(counts: Counts, routed: Sequence[Routed] = ()) -> str:
    """The Prometheus text exposition format 0.0.4 of ``counts``: every series, zeros included; the
    routing series with ``routed``."""
    families: list[tuple[str, str, str, list[tuple[str, float]]]] = [
        (REQUESTS, "counter", "Requests received, whatever their answer.", [("", counts.requests)]),
        (
            UNSERVED,
            "counter",
            "Requests answered 503 because the backend had no serving pod.",
            [(f'{{backend="{backend}"}}', value) for backend, value in counts.unserved.items()],
        ),
        (ANSWERED, "counter", "Backend answers relayed to clients.", [("", counts.answered)]),
        (IN_FLIGHT, "gauge", "Requests being answered.", [("", counts.in_flight)]),
        (LAST_REQUEST, "gauge", "Unix time of the last request received, 0 before any.", [("", counts.last_request)]),
        *routing_families(routed),
    ]
    lines = []
    for name, kind, meaning, samples in families:
        lines += [f"# HELP {name} {meaning}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{labels} {value}" for labels, value in samples]
    return "\n".join(lines) + "\n"
