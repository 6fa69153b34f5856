"""Stand-ins for vLLM 0.33.0 prefill and decode servers under MooncakeConnector, speaking what
the proxy uses of them, for the proxy's end-to-end tests (tests/e2e/test_mooncake_proxy.py).

Their shapes come from vLLM 0.33.0 (vllm/distributed/kv_transfer/kv_connector/v1/mooncake/):

- prefill: ``/health``; the completions endpoints, which must get ``kv_transfer_params``
  ``{do_remote_decode: true, do_remote_prefill: false, transfer_id}`` with ``stream`` false and
  ``max_tokens`` 1 (what the connector's scheduler reads); the bootstrap server's ``GET /query``
  on its own port, ``{dp_rank: {"engine_id": ..., "worker_addr": {tp_rank: {pp_rank:
  "tcp://host:port"}}}}`` (mooncake_utils.py, ``MooncakeBootstrapServer.query``); and a side
  channel at that worker address that hands out each prefilled transfer once. A new process
  has a new engine id (``KVTransferConfig.engine_id`` is a fresh uuid4) and none of the old
  process's transfers; SIGUSR1 does the same in place (a restart faster than the proxy's refresh).
- decode: ``/health``; the completions endpoints, which must get ``{do_remote_prefill: true,
  do_remote_decode: false, remote_bootstrap_addr, remote_engine_id, transfer_id}``. Like the
  connector's ``handle_new_engine_id`` it asks ``remote_bootstrap_addr`` + ``/query`` for the
  engine, then pulls the transfer from that engine's worker; under the default
  ``kv_load_failure_policy`` "fail" a failed load is an error (vLLM: 500 Internal server error).

A streamed decode whose prompt is ``HOLD_PROMPT`` sends its first event, then holds the stream
open (an SSE comment every 100 ms, up to ``HOLD_SECONDS``) until the proxy goes away: a long
generation whose client leaves mid-stream.

Standard library only, so the proxy is tested against another HTTP implementation than its own.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMPLETION_PATHS = ("/v1/completions", "/v1/chat/completions")
HOLD_PROMPT = "hold the stream"
HOLD_SECONDS = 30.0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as vLLM's uvicorn

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_json(self, status: int, value: Any) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))

    def authorized(self) -> bool:
        key = os.environ.get("STANDIN_API_KEY")
        if key and self.headers.get("Authorization") != f"Bearer {key}":
            self.send_json(401, {"error": {"message": "Unauthorized", "code": 401}})
            return False
        return True

    def refuse(self, message: str) -> None:
        self.send_json(422, {"error": {"message": f"stand-in: {message}", "code": 422}})


class VllmServer(Handler):
    """What prefill and decode stand-ins share with vLLM's server: /health, and completions
    refused at an unknown path or without the key."""

    def do_GET(self) -> None:
        self.send_json(200 if self.path == "/health" else 404, {})

    def completion_request(self) -> Any:
        """The body of an authorized completion request, or None once the refusal is sent."""
        if self.path not in COMPLETION_PATHS:
            self.send_json(404, {})
            return None
        body = self.body()
        return body if self.authorized() else None


class Prefill:
    def __init__(self, host: str) -> None:
        self.host = host
        self.lock = threading.Lock()
        self.engine_id = str(uuid.uuid4())
        self.transfers: dict[str, str] = {}
        self.side_channel_port = 0
        self.queries = 0

    def restart_in_place(self, *_: Any) -> None:
        with self.lock:
            self.engine_id = str(uuid.uuid4())
            self.transfers.clear()

    def query(self) -> dict[str, Any]:
        worker = f"tcp://{self.host}:{self.side_channel_port}"
        return {"0": {"engine_id": self.engine_id, "worker_addr": {"0": {"0": worker}}}}


def prefill_handlers(prefill: Prefill) -> tuple[type[Handler], type[Handler], type[Handler]]:
    class Server(VllmServer):
        def do_POST(self) -> None:
            body = self.completion_request()
            if body is None:
                return
            params = body.get("kv_transfer_params") or {}
            transfer_id = params.get("transfer_id", "")
            wanted = {"do_remote_decode": True, "do_remote_prefill": False, "transfer_id": transfer_id}
            if params != wanted or not transfer_id.startswith("xfer-"):
                self.refuse(f"prefill kv_transfer_params {params}")
            elif body.get("stream") is not False or body.get("max_tokens") != 1 or "stream_options" in body:
                self.refuse(f"prefill request {body}")
            elif self.headers.get("X-data-parallel-rank") != "0":
                self.refuse("no data-parallel rank")
            else:
                with prefill.lock:
                    prefill.transfers[transfer_id] = prefill.engine_id
                self.send_json(200, {"object": "text_completion", "choices": [{"index": 0, "text": "x"}]})

    class Bootstrap(Handler):
        def do_GET(self) -> None:
            if self.path == "/query":
                with prefill.lock:
                    prefill.queries += 1
                    self.send_json(200, prefill.query())
            elif self.path == "/queries":  # for the tests: how often /query was asked
                with prefill.lock:
                    self.send_json(200, {"queries": prefill.queries})
            else:
                self.send_json(404, {})

    class SideChannel(Handler):
        def do_GET(self) -> None:
            transfer_id = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("transfer_id", [""])[0]
            with prefill.lock:
                engine_id = prefill.transfers.pop(transfer_id, None)
            if engine_id is None:
                self.send_json(404, {"error": f"no transfer {transfer_id}"})
            else:
                self.send_json(200, {"engine_id": engine_id})

    return Server, Bootstrap, SideChannel


def get_json(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as failure:
        return failure.code, None
    except OSError:  # nothing listens: the connector logs it and finds no engine
        return 0, None


class Decode(VllmServer):
    def do_POST(self) -> None:
        body = self.completion_request()
        if body is None:
            return
        params = body.get("kv_transfer_params") or {}
        keys = {"do_remote_decode", "do_remote_prefill", "remote_bootstrap_addr", "remote_engine_id", "transfer_id"}
        if set(params) != keys or params["do_remote_decode"] is not False or params["do_remote_prefill"] is not True:
            self.refuse(f"decode kv_transfer_params {params}")
            return
        bootstrap, engine_id = params["remote_bootstrap_addr"], params["remote_engine_id"]
        _, engines = get_json(f"{bootstrap}/query")
        entry = next((e for e in (engines or {}).values() if e["engine_id"] == engine_id), None)
        failure = None
        if entry is None:
            failure = f"remote engine_id {engine_id} not found from bootstrap server {bootstrap}"
        else:
            worker = entry["worker_addr"]["0"]["0"].removeprefix("tcp://")
            transfer = urllib.parse.quote(params["transfer_id"])
            status, pulled = get_json(f"http://{worker}/pull?transfer_id={transfer}")
            if status != 200 or pulled["engine_id"] != engine_id:
                failure = f"transfer {params['transfer_id']} failed: {status}"
        error = {"error": {"message": failure, "type": "InternalServerError", "code": 500}}
        kv = {"engine_id": engine_id, "bootstrap": bootstrap, "transfer_id": params["transfer_id"]}
        if not body.get("stream"):
            # A failed load finishes the generation with an error: 500 Internal server error.
            answer = {"model": body.get("model"), "choices": [{"index": 0, "text": "decoded"}], "kv": kv}
            if failure:
                self.send_json(500, error)
            else:
                self.send_json(200, answer)
            return
        # A stream has answered 200 before the load fails: vLLM sends the error as an event.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        events: list[dict[str, Any]] = [error] if failure else []
        for index, text in enumerate(() if failure else ("de", "co", "ded")):
            first = kv if index == 0 else None
            events.append({"model": body.get("model"), "choices": [{"index": 0, "text": text}], "kv": first})
        for event in events:
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
            if body.get("prompt") == HOLD_PROMPT:
                self.hold()
                return
        self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True

    def hold(self) -> None:
        """Keeps the stream open until the reader is gone (a write fails) or HOLD_SECONDS pass."""
        deadline = time.monotonic() + HOLD_SECONDS
        self.close_connection = True
        try:
            while time.monotonic() < deadline:
                time.sleep(0.1)
                self.wfile.write(b": hold\n\n")
                self.wfile.flush()
        except OSError:
            pass


def serve(server: ThreadingHTTPServer) -> None:
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["prefill", "decode"])
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bootstrap-port", type=int)
    arguments = parser.parse_args()
    handler: type[Handler] = Decode
    if arguments.role == "prefill":
        prefill = Prefill(arguments.host)
        handler, bootstrap, side_channel = prefill_handlers(prefill)
        side = ThreadingHTTPServer((arguments.host, 0), side_channel)
        prefill.side_channel_port = side.server_address[1]
        serve(side)
        serve(ThreadingHTTPServer((arguments.host, arguments.bootstrap_port), bootstrap))
        signal.signal(signal.SIGUSR1, prefill.restart_in_place)
    serve(ThreadingHTTPServer((arguments.host, arguments.port), handler))
    print("serving", flush=True)
    # Until SIGTERM's default action ends the process. Not signal.pause(): the kernel may hand SIGUSR1 to
    # a server thread, which leaves the main thread paused and the Python handler never run; a short
    # sleep lets the main thread run it within 50 ms wherever the signal landed.
    while True:
        time.sleep(0.05)


if __name__ == "__main__":
    main()
