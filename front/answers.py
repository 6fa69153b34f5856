"""The answers a front gives itself: errors in the OpenAI API's shape (as vLLM answers them), the
answer while its backends are at zero, and any whole answer it makes (a prefill's answer as events)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from front.listener import Reply

SCALED_TO_ZERO = "scaled_to_zero"
"""The error type of a request answered while its roles are at zero, and /health's key naming them."""
JSON = "application/json; charset=utf-8"


@dataclass(frozen=True)
class Own:
    """An answer of the front's own, whole."""

    status: int
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = ()

    def send(self, reply: Reply) -> None:
        reply.whole(self.status, self.body, [("Content-Type", self.content_type), *self.headers])

    @property
    def value(self) -> Any:
        """The body as JSON (for tests and logs)."""
        return json.loads(self.body)


def as_json(value: Any, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> Own:
    return Own(status, json.dumps(value).encode(), JSON, headers)


def error(status: int, message: str) -> Own:
    """An error in the OpenAI API's shape, as vLLM answers them."""
    kind = "invalid_request_error" if status < 500 else "service_unavailable"
    return as_json({"error": {"message": message, "type": kind, "code": status}}, status)


def scaled_to_zero(missing: Sequence[str], retry_after_seconds: int) -> Own:
    """The answer while ``missing`` (roles of --scale-to-zero) have no pod: this request wakes them."""
    roles = " and ".join(missing)
    woken = "them" if len(missing) > 1 else "it"
    message = f"{roles} scaled to zero: this request wakes {woken}; retry in a few minutes"
    value = {"error": {"message": message, "type": SCALED_TO_ZERO, "code": 503}}
    return as_json(value, 503, (("Retry-After", str(retry_after_seconds)),))
