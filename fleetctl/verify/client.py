"""A small HTTP client for verification: per-request timeouts, one overall deadline, and
retries with backoff only when the connection itself fails (never on an answer)."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class CheckError(Exception):
    """A check failed; the message names what was wrong."""


class UnverifiedError(Exception):
    """The check cannot be made for this endpoint (not a pass); the message says why."""


@dataclass
class Client:
    timeout: float = 30.0
    """Seconds for one request."""
    deadline: float = 120.0
    """Seconds for everything this client does."""
    retries: int = 3
    headers: dict[str, str] = field(default_factory=dict)
    _start: float = field(default_factory=time.monotonic)
    _paused: float = 0.0
    """Seconds spent in :meth:`pause`, which the deadline does not count."""

    def left(self) -> float:
        """Seconds before the deadline; raises CheckError once it passed."""
        left = self.deadline - (time.monotonic() - self._start - self._paused)
        if left <= 0:
            raise CheckError(f"the deadline of {self.deadline:g} s passed")
        return left

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` outside the deadline: a wait with its own bound (a wake from zero)."""
        started = time.monotonic()
        time.sleep(max(0.0, seconds))
        self._paused += time.monotonic() - started

    def request(self, method: str, url: str, body: Any = None) -> tuple[int, Any]:
        """(status, decoded JSON or None) of one request; raises CheckError on a transport failure."""
        status, answer, _ = self.exchange(method, url, body)
        return status, answer

    def exchange(self, method: str, url: str, body: Any = None) -> tuple[int, Any, Mapping[str, str]]:
        """(status, decoded JSON or None, response headers) of one JSON request."""
        data = None if body is None else json.dumps(body).encode()
        headers: dict[str, str] = {}
        status, raw = self.fetch(
            method, url, data, {"Content-Type": "application/json"} if data is not None else {}, answer=headers
        )
        return status, _decode(raw), headers

    def fetch(
        self,
        method: str,
        url: str,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
        context: ssl.SSLContext | None = None,
        answer: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """(status, body) of one request, its headers into ``answer`` when given (names lower-cased);
        raises CheckError on a transport failure."""
        headers = {**self.headers, **(headers or {})}
        delay = 0.5
        for attempt in range(self.retries + 1):
            timeout = min(self.timeout, self.left())
            request = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
                    _keep(answer, response.headers.items())
                    return response.status, response.read()
            except urllib.error.HTTPError as error:
                _keep(answer, error.headers.items())
                return error.code, error.read()
            except urllib.error.URLError as error:
                if isinstance(error.reason, TimeoutError):
                    raise CheckError(f"{method} {url}: no answer within {timeout:.1f} s") from None
                if isinstance(error.reason, ssl.SSLError):  # not transient: no retry
                    raise CheckError(f"{method} {url}: TLS failed ({error.reason})") from None
                if attempt == self.retries:
                    raise CheckError(f"{method} {url}: cannot connect ({error.reason})") from None
            except TimeoutError:
                raise CheckError(f"{method} {url}: no answer within {timeout:.1f} s") from None
            except ConnectionError as error:
                if attempt == self.retries:
                    raise CheckError(f"{method} {url}: connection failed ({error})") from None
            time.sleep(min(delay, self.left()))
            delay *= 2
        raise AssertionError("unreachable")


def _keep(answer: dict[str, str] | None, headers: list[tuple[str, str]]) -> None:
    if answer is not None:
        answer.update((name.lower(), value) for name, value in headers)


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
