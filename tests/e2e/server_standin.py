"""A stand-in for a classic endpoint's server behind its gate (tests/e2e/test_gate.py): its health
path answers 200; ``POST /v1/completions`` with ``"stream": true`` answers server-sent events (three
chunks, then ``data: [DONE]``), and with the prompt ``HOLD_PROMPT`` sends one event and holds the
stream open until the gate goes away, counting the streams cut that way (``GET /standin/cut``);
every other request is echoed as JSON (method, path, query, body, headers) with the status the
path ``/status/<code>`` names (200 otherwise) and a header ``X-Standin: echo``; ``GET /gzip`` answers
a text gzip-compressed when the request accepts gzip, plain otherwise.

SIGTERM drains as vLLM 0.33.0 does with ``--shutdown-timeout`` (tests/e2e/pd_standins.py says how):
the server goes on accepting, answers a new completion 500 "cannot schedule new futures after
shutdown" as real vLLM does (front/refusals.py), finishes the requests in flight, then exits. Streams
are chunked and keep their connection open after their end, as uvicorn's do (pd_standins.py,
``EventStream``).

Standard library only, so the gate is tested against another HTTP implementation than its own.
"""

from __future__ import annotations

import argparse
import gzip
import json
import signal
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from front.refusals import DRAINING_ERROR
from tests.e2e.pd_standins import Counted, EventStream, answered_in_flight

HOLD_PROMPT = "hold the stream"
HOLD_SECONDS = 30.0
CUT = {"streams": 0}
DRAINING = threading.Event()
LOCK = threading.Lock()


def handler(health_path: str) -> type[BaseHTTPRequestHandler]:
    class Server(Counted, EventStream, BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def send_json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
            body = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, header in (headers or {}).items():
                self.send_header(name, header)
            self.end_headers()
            self.wfile.write(body)

        def body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length", "0")))

        def echo(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            body = self.body()
            status = int(url.path.removeprefix("/status/")) if url.path.startswith("/status/") else 200
            seen = {
                "method": self.command,
                "path": url.path,
                "query": url.query,
                "body": body.decode(),
                "headers": {name.lower(): value for name, value in self.headers.items()},
            }
            self.send_json(status, seen, {"X-Standin": "echo"})

        def do_GET(self) -> None:
            if self.path == health_path:
                self.send_json(200, {})
            elif self.path == "/gzip":
                text = ("compressible " * 64).encode()
                packed = "gzip" in self.headers.get("Accept-Encoding", "")
                body = gzip.compress(text) if packed else text
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                if packed:
                    self.send_header("Content-Encoding", "gzip")
                self.end_headers()
                self.wfile.write(body)
            elif self.path == "/standin/cut":
                with LOCK:
                    self.send_json(200, dict(CUT))
            else:
                self.echo()

        def do_DELETE(self) -> None:
            self.echo()

        def do_PUT(self) -> None:
            self.echo()

        def do_POST(self) -> None:
            if self.path != "/v1/completions":
                return self.echo()
            request = json.loads(self.body())
            if DRAINING.is_set():  # refused before it is tokenized, streamed or not (front/refusals.py)
                return self.send_json(500, {"error": {"message": DRAINING_ERROR, "type": "InternalServerError"}})
            if not request.get("stream"):
                return self.send_json(200, {"choices": [{"text": "hello back"}]})
            self.start_events()
            try:
                if request.get("prompt") == HOLD_PROMPT:
                    self.event({"choices": [{"text": "first"}]})
                    self.close_connection = True
                    until = time.monotonic() + HOLD_SECONDS
                    while time.monotonic() < until:
                        time.sleep(0.1)
                        self.write_chunk(b": still generating\n\n")
                    return
                for index in range(3):
                    self.event({"choices": [{"text": f"part {index}"}]})
                    time.sleep(0.05)
                self.end_events()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                with LOCK:
                    CUT["streams"] += 1

    return Server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--health-path", required=True)
    arguments = parser.parse_args()
    server = ThreadingHTTPServer((arguments.host, arguments.port), handler(arguments.health_path))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: DRAINING.set())
    while not DRAINING.wait(0.05):  # the main thread runs the handler wherever the signal landed
        pass
    answered_in_flight()


if __name__ == "__main__":
    main()
