"""The suite's HTTP client (standard library): JSON requests, server-sent event streams, and the
Prometheus text a vLLM server exposes, read as the proxy's clients and Prometheus read them."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

Answer = dict[str, Any]


def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    parts = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=timeout), parts.path or "/"


def request(
    url: str,
    body: Mapping[str, Any] | None = None,
    *,
    key: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> Answer:
    """One request (POST with ``body``, else GET): status, the JSON (or text) answered, seconds taken;
    a stream's events under ``events``, its text joined under ``text``."""
    started = time.monotonic()
    connection, path = _connection(url, timeout)
    sent = {"Content-Type": "application/json", **(headers or {})}
    if key:
        sent["Authorization"] = f"Bearer {key}"
    try:
        if body is None:
            connection.request("GET", path, headers=sent)
        else:
            connection.request("POST", path, body=json.dumps(body), headers=sent)
        response = connection.getresponse()
        raw = response.read().decode(errors="replace")
    except OSError as error:
        return {"status": None, "error": f"{type(error).__name__}: {error}", "seconds": time.monotonic() - started}
    finally:
        connection.close()
    answer: Answer = {"status": response.status, "seconds": time.monotonic() - started}
    if response.getheader("Content-Type", "").startswith("text/event-stream"):
        answer["events"] = events = _events(raw)
        answer["text"] = "".join(_event_text(event) for event in events)
        answer["finish_reason"] = next(
            (c.get("finish_reason") for e in events for c in e.get("choices", []) if c.get("finish_reason")), None
        )
        answer["errors"] = [e["error"] for e in events if "error" in e]
        return answer
    try:
        answer["json"] = parsed = json.loads(raw)
    except json.JSONDecodeError:
        answer["body"] = raw
        return answer
    if isinstance(parsed, dict) and parsed.get("choices"):
        choice = parsed["choices"][0]
        answer["text"] = choice.get("text", choice.get("message", {}).get("content"))
        answer["finish_reason"] = choice.get("finish_reason")
    return answer


def _events(raw: str) -> list[dict[str, Any]]:
    events = []
    for line in raw.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            events.append(json.loads(line[len("data: ") :]))
    return events


def _event_text(event: Mapping[str, Any]) -> str:
    text = ""
    for choice in event.get("choices", []):
        text += choice.get("text") or (choice.get("delta") or {}).get("content") or ""
    return text


def metric(url: str, name: str, labels: Mapping[str, str] | None = None) -> float:
    """The sum of a family's samples named ``name`` (with ``labels`` among theirs) at ``url``/metrics."""
    answer = request(f"{url}/metrics", timeout=30)
    total = 0.0
    for line in answer.get("body", "").splitlines():
        if not line.startswith(name):
            continue
        series, _, value = line.rpartition(" ")
        sample, _, rest = series.partition("{")
        if sample != name:
            continue
        if labels and not all(f'{k}="{v}"' in rest for k, v in labels.items()):
            continue
        total += float(value)
    return total


def wait_until(check: Callable[[], bool], what: str, seconds: float, every: float = 1.0) -> float:
    """Seconds until ``check()`` held; AssertionError naming ``what`` after ``seconds``."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            if check():
                return time.monotonic() - started
        except OSError:
            pass
        time.sleep(every)
    raise AssertionError(f"{what}: not within {seconds:.0f} s")


def healthy(url: str) -> bool:
    return request(f"{url}/health", timeout=5).get("status") == 200
