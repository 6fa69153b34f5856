"""The front's ``/metrics``: what it counts since it started, and the Prometheus text exposition
(format 0.0.4, written here: no client library) of five series, every one present from start: the
requests received (on arrival, whatever their answer), those answered 503 because a backend had no
serving pod (per ``backend``), the backend answers relayed (``answered``), the requests in flight and
the time the last request arrived."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from front.watch import ROLES

REQUESTS = "inference_fleet_proxy_requests_total"
UNSERVED = "inference_fleet_proxy_unserved_requests_total"
ANSWERED = "inference_fleet_proxy_answered_total"
IN_FLIGHT = "inference_fleet_proxy_requests_in_flight"
LAST_REQUEST = "inference_fleet_proxy_last_request_timestamp_seconds"
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


def exposition(counts: Counts) -> str:
    """The Prometheus text exposition format 0.0.4 of ``counts``: every series, zeros included."""
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
    ]
    lines = []
    for name, kind, meaning, samples in families:
        lines += [f"# HELP {name} {meaning}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{labels} {value}" for labels, value in samples]
    return "\n".join(lines) + "\n"
