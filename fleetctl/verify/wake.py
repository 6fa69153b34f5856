"""Endpoints scaled to zero. A split Mooncake endpoint whose roles autoscale from ``min_replicas: 0``
keeps its proxy up while they are at zero: it answers a completion at once with 503, a
``Retry-After`` and the error type ``scaled_to_zero``, and notes the request, which wakes the
roles (KEDA reads its time through the ScaledObject's ``wake`` trigger). The request check
meets that answer; by default it waits for the wake, asking again after each ``Retry-After``
for at most ``--wake-wait`` seconds (a wait the run's ``--deadline`` does not count), and the
checks after it run on the woken endpoint."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from fleetctl.verify.client import CheckError, Client, UnverifiedError
from fleetctl.verify.schemas import ScaledToZeroError

DEFAULT_RETRY_SECONDS = 10.0
"""How long to wait between requests when the answer gives no usable Retry-After."""
MIN_RETRY_SECONDS = 1.0
"""Never ask again sooner than this, whatever Retry-After says."""

State = Literal["woke", "not waited", "asleep"]


@dataclass(frozen=True)
class Zero:
    """What the request check found of an endpoint that answered it was scaled to zero."""

    state: State
    """``woke``: it answered after waking; ``not waited``: --wake-wait 0; ``asleep``: it did not
    wake within --wake-wait."""
    detail: str

    def unverified(self) -> str | None:
        """Why the checks that need served requests cannot be made, or None once it woke."""
        if self.state == "woke":
            return None
        return f"{self.detail}: no request was served to check"


class NotWaitedError(UnverifiedError):
    """At zero and told not to wait (--wake-wait 0): the request woke it, nothing was served."""

    zero = Zero("not waited", "scaled to zero, not waited for (--wake-wait 0)")


class AsleepError(CheckError):
    """At zero and not awake within --wake-wait."""

    def __init__(self, message: str, wake_wait: float) -> None:
        super().__init__(message)
        self.zero = Zero("asleep", f"scaled to zero and not awake within --wake-wait {wake_wait:g} s")


def request_waking(
    request: Callable[[Client, str], str], client: Client, address: str, wake_wait: float
) -> tuple[str, Zero | None]:
    """The request check's detail, and what it found of the endpoint at zero (None: it was awake).
    Raises NotWaitedError when told not to wait, AsleepError when it did not wake in time."""
    try:
        return request(client, address), None
    except ScaledToZeroError as first:
        zero = first
    if wake_wait <= 0:
        raise NotWaitedError("scaled to zero; this request woke it (--wake-wait 0: not waited for)")
    started = time.monotonic()
    asked = 1
    while (left := wake_wait - (time.monotonic() - started)) > 0:
        after = DEFAULT_RETRY_SECONDS if zero.retry_after is None else zero.retry_after
        client.pause(min(max(after, MIN_RETRY_SECONDS), left))
        try:
            answer = request(client, address)
        except ScaledToZeroError as again:
            zero, asked = again, asked + 1
            continue
        took = time.monotonic() - started
        woke = f"woke from zero {took:.0f} s after the first request"
        return f"{answer} ({woke}, asked {asked + 1} times)", Zero("woke", woke)
    raise AsleepError(
        f"scaled to zero and not awake within --wake-wait {wake_wait:g} s: {asked} requests answered "
        f"503 scaled_to_zero (the last: {zero})",
        wake_wait,
    )
