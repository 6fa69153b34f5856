"""A small HTTP client for verification: per-request timeouts, one overall deadline, and
retries with backoff only when the connection itself fails (never on an answer)."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any


class CheckError(Exception):
    """A check failed; the message names what was wrong."""


@dataclass
class Client:
    timeout: float = 30.0
    """Seconds for one request."""
    deadline: float = 120.0
    """Seconds for everything this client does."""
    retries: int = 3
    headers: dict[str, str] = field(default_factory=dict)
    _start: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        """Seconds before the deadline; raises CheckError once it passed."""
        left = self.deadline - (time.monotonic() - self._start)
        if left <= 0:
            raise CheckError(f"the deadline of {self.deadline:g} s passed")
        return left

    def request(self, method: str, url: str, body: Any = None) -> tuple[int, Any]:
        """(status, decoded JSON or None) of one request; raises CheckError on a transport failure."""
        data = None if body is None else json.dumps(body).encode()
        status, raw = self.fetch(method, url, data, {"Content-Type": "application/json"} if data is not None else {})
        return status, _decode(raw)

    def fetch(
        self,
        method: str,
        url: str,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
        context: ssl.SSLContext | None = None,
    ) -> tuple[int, bytes]:
        """(status, body) of one request; raises CheckError on a transport failure."""
        headers = {**self.headers, **(headers or {})}
        delay = 0.5
        for attempt in range(self.retries + 1):
            timeout = min(self.timeout, self.left())
            request = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
                    return response.status, response.read()
            except urllib.error.HTTPError as error:
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


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
