"""Inside a private network namespace: local servers answering like each framework (and
wrongly, in every way the checks must catch), then `fleetctl verify` against them.
Prints the verify exit code and its JSON checks."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fleetctl.verify.command import main as verify
from tests.unit.stack_builders import MODEL

SLOW_SECONDS = 3
SERVED_MODEL = MODEL
"""What every vLLM stand-in serves: like vLLM 0.33, it answers a completion naming another model with 404."""

GOOD: dict[tuple[str, str], Any] = {
    ("GET", "/health"): {},
    ("GET", "/v2/health/ready"): {},
    ("POST", "/v1/completions"): {
        "id": "cmpl-1",
        "choices": [{"index": 0, "text": " Paris.", "finish_reason": "length"}],
    },
    ("POST", "/generate"): {"text": " Paris.", "generated_text": " Paris."},
    ("POST", "/v2/models/identity/infer"): {
        "model_name": "identity",
        "outputs": [{"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 4], "data": [1, 2, 3, 4]}],
    },
}

# case -> (method, path) -> (status, body bytes or JSON, delay)
BROKEN: dict[str, dict[tuple[str, str], Any]] = {
    "vllm-empty": {("POST", "/v1/completions"): (200, {"choices": [{"text": ""}]}, 0)},
    "vllm-malformed": {("POST", "/v1/completions"): (200, b"<html>oops", 0)},
    "vllm-wrong-schema": {("POST", "/v1/completions"): (200, {"choices": []}, 0)},
    "vllm-slow": {("POST", "/v1/completions"): (200, GOOD[("POST", "/v1/completions")], SLOW_SECONDS)},
    "vllm-unhealthy": {("GET", "/health"): (503, {}, 0)},
    "sglang-wrong-schema": {("POST", "/generate"): (200, {"output": "Paris"}, 0)},
    "tgi-wrong-schema": {("POST", "/generate"): (200, [{"generated_text": " Paris."}], 0)},
    "triton-not-identity": {
        ("POST", "/v2/models/identity/infer"): (200, {"outputs": [{"name": "OUTPUT0", "data": [4, 3, 2, 1]}]}, 0)
    },
    "triton-wrong-output": {
        ("POST", "/v2/models/identity/infer"): (200, {"outputs": [{"name": "OUT", "data": [1, 2, 3, 4]}]}, 0)
    },
}


def unknown_model(body: bytes) -> dict[str, Any] | None:
    """vLLM's answer to a completion whose model it does not serve; None when it does serve it."""
    requested = json.loads(body or b"{}").get("model")
    if requested == SERVED_MODEL:
        return None
    message = f"The model `{requested}` does not exist. Valid aliases: {SERVED_MODEL}."
    return {"error": {"message": message, "type": "NotFoundError", "param": "model", "code": 404}}


def reply(handler: BaseHTTPRequestHandler, status: int, body: bytes, kind: str = "application/json") -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def answer(self, method: str) -> None:
        case, _, rest = self.path.lstrip("/").partition("/")
        path = "/" + rest
        length = int(self.headers.get("Content-Length") or 0)
        request = self.rfile.read(length) if length else b""
        if (method, path) == ("POST", "/v1/completions") and (error := unknown_model(request)) is not None:
            reply(self, 404, json.dumps(error).encode())
            return
        status, body, delay = BROKEN.get(case, {}).get((method, path), (200, GOOD.get((method, path)), 0))
        if body is None:
            status, body = 404, {"detail": "Not Found"}
        time.sleep(delay)
        reply(self, status, body if isinstance(body, bytes) else json.dumps(body).encode())

    def do_GET(self) -> None:
        self.answer("GET")

    def do_POST(self) -> None:
        self.answer("POST")


def main() -> None:
    stack_file, outputs, *extra = sys.argv[1:]
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    server = ThreadingHTTPServer(("127.0.0.1", 8080), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = verify(["--stack-file", stack_file, "--outputs", outputs, "--output", "json", "--timeout", "1", *extra])
    server.shutdown()
    print(json.dumps({"code": code, "checks": json.loads(printed.getvalue() or "[]")}))


if __name__ == "__main__":
    main()
