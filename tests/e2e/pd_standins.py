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

Sampling as vLLM 0.33.0 does it, as far as the proxy can tell: ``min_tokens`` above ``max_tokens`` is
refused 400 (vllm/sampling_params.py, ``_verify_args``); a completion whose prompt is ``EOS_PROMPT``
samples EOS first unless ``min_tokens`` masks it (v1/sample/logits_processor/builtin.py,
``MinTokensLogitsProcessor``), and a prefill so stopped (``check_stop``, v1/core/sched/utils.py:
``FINISHED_STOPPED``) keeps no KV (mooncake_connector.py, ``request_finished`` keeps it only for
``FINISHED_LENGTH_CAPPED``); a prefill's one token "x" ends on a stop string "x" ("stop", its KV kept:
the engine capped it at its length first). ``n`` > 1 and a list of prompts make several engine
requests under the one transfer id (v1/engine/parallel_sampling.py, completion/serving.py): the
prefill keeps one transfer for them and the decode pulls it once per engine request, so every pull but
the first fails. Both stand-ins serve the routes the proxy forwards unsplit: ``GET /v1/models``
(models/api_router.py), ``POST /tokenize`` and ``/detokenize`` (serve/tokenize/api_router.py),
``POST /v1/responses``, the ``/v1`` ones behind the key as vLLM's ``AuthenticationMiddleware`` guards
them (serve/middleware/authenticate.py, ``GUARDED_PREFIX``).

While the file ``--stall-file`` names exists, ``/health`` answers after ``STALL_SECONDS`` (a saturated
server) and completions are served as before. A file, not a signal: the kernel keeps one pending signal of
a kind (two sent back to back run a toggle once) and delivers pending real-time signals lowest first, so
"stall" and "answer again" sent in one breath could land in either order.

SIGTERM drains as vLLM 0.33.0 does with ``--shutdown-timeout`` (entrypoints/launchers/launcher.py
``handle_shutdown``: the engine client drains first, the HTTP server stops only after): the server goes on
accepting and ``/health`` on answering 200 (the engine is alive), but every new request is refused 500
"cannot schedule new futures after shutdown" (v1/engine/async_llm.py ``AsyncLLM.shutdown`` stops the
tokenizer pool before the engine drains: front/refusals.py; what a real vLLM 0.32.0 answered in
tests/vllm/); the requests in flight finish, a prefill keeps its bootstrap server and side channel
until the KV of its finished requests is pulled (the engine steps while it has them), then every connection
closes and the process exits.

Streams keep their connection open after the last event, as vLLM's uvicorn does: a StreamingResponse
has no length, so uvicorn sends it ``Transfer-Encoding: chunked`` and the connection stays for the next
request (uvicorn 0.35.0 protocols/http/httptools_impl.py and h11_impl.py ``send``: chunked when neither
length nor encoding is set, closed only on ``Connection: close`` or an HTTP/1.0 request). So a front's
pooled connection to a pod that is draining is reused, and its next request is refused.

A decode whose prompt is ``LOAD_FAILS_ONCE_PROMPT`` fails its first load of it (per process, streamed
and not apart) though the transfer is there, as a real vLLM 0.32.0 decode did when the Mooncake
transfer engine returned -1 on a starved machine (tests/vllm/, a prefill rollout under load).

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

from front.refusals import DRAINING_ERROR

COMPLETION_PATHS = ("/v1/completions", "/v1/chat/completions")
HOLD_PROMPT = "hold the stream"
HOLD_SECONDS = 30.0
EOS_PROMPT = "say nothing"
LOAD_FAILS_ONCE_PROMPT = "a flaky transfer"
FAILED_LOADS: set[bool] = set()
"""Whether the ``LOAD_FAILS_ONCE_PROMPT`` load failed already, by ``stream``."""
SLOW_PROMPT = "take your time"
"""A streamed decode of this prompt sends an event every ``SLOW_EVENT_SECONDS`` (a long generation)."""
SLOW_EVENT_SECONDS = 0.1
SLOW_EVENTS = 15
BUSY_PROMPT = "keep the engine busy"
"""Both roles answer a request whose last message (or prompt) is this ``BUSY_SECONDS`` late: requests in
flight at once, as a router's balance sees them."""
BUSY_SECONDS = 0.5
STALL_SECONDS = 3.0
"""Longer than the proxy's 2 s probe timeout."""
KEEP_KV_SECONDS = 10.0
"""How long a draining prefill waits for its KV to be pulled (vLLM: VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT)."""
DRAIN_SECONDS = 1.0
"""A drain lasts at least this long: some generation is always in flight on a busy server."""
STATE = {"draining": False, "in_flight": 0}
STALL_FILE: list[str] = []
"""``--stall-file``, once parsed."""
STATE_LOCK = threading.Lock()


class EventStream(BaseHTTPRequestHandler):
    """Server-sent events as vLLM's uvicorn sends them: chunked, the connection kept after their end."""

    def start_events(self) -> None:
        """A 200 of server-sent events, chunked and kept alive after its end (uvicorn's StreamingResponse)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def event(self, value: Any) -> None:
        self.write_chunk(f"data: {json.dumps(value)}\n\n".encode())

    def end_events(self) -> None:
        """``[DONE]`` and the last chunk: the connection stays open for the next request."""
        self.write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class Handler(EventStream):
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
            # vLLM's AuthenticationMiddleware (serve/middleware/authenticate.py): a bare string, not an ErrorResponse.
            self.send_json(401, {"error": "Unauthorized"})
            return False
        return True

    def refuse(self, message: str) -> None:
        self.send_json(422, {"error": {"message": f"stand-in: {message}", "code": 422}})

    def vllm_error(self, status: int, message: str) -> None:
        """vLLM's ErrorResponse (entrypoints/serve/engine/protocol.py)."""
        kind = "BadRequestError" if status == 400 else "InternalServerError"
        self.send_json(status, {"error": {"message": message, "type": kind, "param": None, "code": status}})


def aborted(handler: Handler, body: dict[str, Any], chat: bool) -> bool:
    """While draining: the server refused the request, as real vLLM does (front/refusals.py: 500 from its
    tokenizer pool, shut down before the engine drains, streamed or not); else False."""
    if not STATE["draining"]:
        return False
    handler.vllm_error(500, DRAINING_ERROR)
    return True


def sampling_error(body: dict[str, Any]) -> str | None:
    """What vLLM 0.33.0's SamplingParams._verify_args says of the token limits (sampling_params.py)."""
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    low = body.get("min_tokens") or 0
    if limit is not None and low > limit:
        return f"min_tokens must be less than or equal to max_tokens={limit}, got {low}."
    return None


def engine_requests(body: dict[str, Any]) -> int:
    """How many engine requests vLLM makes of the request: ``n`` per prompt."""
    prompt = body.get("prompt")
    prompts = len(prompt) if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) else 1
    return prompts * int(body.get("n") or 1)


def prompt_text(body: dict[str, Any]) -> str:
    if "messages" in body:
        return str(body["messages"][-1]["content"])
    return str(body.get("prompt"))


def answer(body: dict[str, Any], text: str, finish: str, chat: bool) -> dict[str, Any]:
    """A whole completion as vLLM answers one (completion/protocol.py, chat_completion/protocol.py)."""
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish, "stop_reason": None}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    kind = "chat.completion" if chat else "text_completion"
    return {"id": "cmpl-standin", "object": kind, "created": 1, "model": body.get("model"), "choices": [choice]} | {
        "usage": usage,
        "kv_transfer_params": None,
    }


class Counted(BaseHTTPRequestHandler):
    """Counts the requests being answered (``STATE["in_flight"]``): a connection kept alive between two
    requests holds none, so a drain waits for requests, not for idle connections."""

    counted = False

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        if parsed:
            with STATE_LOCK:
                STATE["in_flight"] += 1
            self.counted = True
        return parsed

    def handle_one_request(self) -> None:
        self.counted = False
        try:
            super().handle_one_request()
        finally:
            if self.counted:
                with STATE_LOCK:
                    STATE["in_flight"] -= 1


def answered_in_flight() -> None:
    """Returns once the requests in flight are answered, ``DRAIN_SECONDS`` at the soonest (a generation
    of another client's is in flight on a busy server, and a request that came before the signal is
    counted by then)."""
    time.sleep(DRAIN_SECONDS)
    while STATE["in_flight"] > 0:
        time.sleep(0.02)


class VllmServer(Counted, Handler):
    """What prefill and decode stand-ins share with vLLM's server: /health, the routes that need no KV,
    and completions refused at an unknown path or without the key."""

    def do_GET(self) -> None:
        if self.path == "/health":
            if any(os.path.exists(path) for path in STALL_FILE):
                time.sleep(STALL_SECONDS)
            self.send_json(200, {})
        elif self.path == "/v1/models" and self.authorized():
            self.send_json(200, {"object": "list", "data": [{"id": "Qwen/Qwen3-8B", "object": "model"}]})
        elif self.path != "/v1/models":
            self.send_json(404, {"detail": "Not Found"})

    def unsplit(self) -> bool:
        """Answers a POST route that needs no KV; False when the path is a completion's."""
        if self.path in COMPLETION_PATHS:
            return False
        if self.path.startswith("/v1") and not self.authorized():
            return True
        body = self.body()
        if self.path == "/tokenize":
            self.send_json(200, {"count": 2, "max_model_len": 32768, "tokens": [9707, 1879], "token_strs": None})
        elif self.path == "/detokenize":
            self.send_json(200, {"prompt": "hello" if body.get("tokens") else ""})
        elif self.path == "/v1/responses":
            self.send_json(200, {"object": "response", "status": "completed", "output_text": "unsplit"})
        else:
            self.send_json(404, {"detail": "Not Found"})
        return True

    def completion_request(self) -> Any:
        """The body of an authorized completion request, or None once the answer is sent."""
        if self.unsplit():
            return None
        body = self.body()
        if not self.authorized():
            return None
        if failure := sampling_error(body):
            self.vllm_error(400, failure)
            return None
        if aborted(self, body, self.path == "/v1/chat/completions"):
            return None
        return body


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
                eos = prompt_text(body) == EOS_PROMPT and not body.get("min_tokens")
                stopped = eos or "x" in (body.get("stop") or [])
                if not eos:  # FINISHED_LENGTH_CAPPED: the KV is kept for the decoder
                    with prefill.lock:
                        prefill.transfers[transfer_id] = prefill.engine_id
                text = "" if stopped else "x"
                finish = "stop" if stopped else "length"
                if prompt_text(body) == BUSY_PROMPT:
                    time.sleep(BUSY_SECONDS)
                self.send_json(200, answer(body, text, finish, self.path == "/v1/chat/completions"))

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
            for _ in range(engine_requests(body)):  # each engine request pulls the one transfer id
                status, pulled = get_json(f"http://{worker}/pull?transfer_id={transfer}")
                if status != 200 or pulled["engine_id"] != engine_id:
                    failure = f"transfer {params['transfer_id']} failed: {status}"
            stream = bool(body.get("stream"))
            if prompt_text(body) == LOAD_FAILS_ONCE_PROMPT and stream not in FAILED_LOADS:
                FAILED_LOADS.add(stream)
                failure = f"pulling kv_caches of {params['transfer_id']} failed: transfer engine returned -1"
        error = {"error": {"message": failure, "type": "InternalServerError", "code": 500}}
        kv = {"engine_id": engine_id, "bootstrap": bootstrap, "transfer_id": params["transfer_id"]}
        kv["decode"] = self.headers.get("Host", "").rsplit(":", 1)[0]  # which decode pod answered (routing by pod)
        if prompt_text(body) == BUSY_PROMPT:
            time.sleep(BUSY_SECONDS)
        if not body.get("stream"):
            # A failed load finishes the generation with an error: 500 Internal server error.
            answer = {"model": body.get("model"), "choices": [{"index": 0, "text": "decoded"}], "kv": kv}
            if failure:
                self.send_json(500, error)
            else:
                self.send_json(200, answer)
            return
        # A stream has answered 200 before the load fails: vLLM sends the error as an event.
        self.start_events()
        events: list[dict[str, Any]] = [error] if failure else []
        for index, text in enumerate(() if failure else ("de", "co", "ded")):
            first = kv if index == 0 else None
            events.append({"model": body.get("model"), "choices": [{"index": 0, "text": text}], "kv": first})
        if events and body.get("prompt") == SLOW_PROMPT:
            events[1:-1] = (
                events[1:-1]
                + [{"model": body.get("model"), "choices": [{"index": 0, "text": ""}], "kv": None}] * SLOW_EVENTS
            )
        for event in events:
            self.event(event)
            if body.get("prompt") == HOLD_PROMPT:
                self.hold()
                return
            if body.get("prompt") == SLOW_PROMPT:
                time.sleep(SLOW_EVENT_SECONDS)
        self.end_events()

    def hold(self) -> None:
        """Keeps the stream open until the reader is gone (a write fails) or HOLD_SECONDS pass."""
        deadline = time.monotonic() + HOLD_SECONDS
        self.close_connection = True
        try:
            while time.monotonic() < deadline:
                time.sleep(0.1)
                self.write_chunk(b": hold\n\n")
        except OSError:
            pass


def serve(server: ThreadingHTTPServer) -> ThreadingHTTPServer:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def drain(prefill: Prefill | None) -> None:
    """vLLM's drain (STATE["draining"] set: new requests refused): the requests in flight finish and a
    prefill's KV is pulled; then the process exits, closing every connection."""
    answered_in_flight()
    deadline = time.monotonic() + KEEP_KV_SECONDS
    while prefill is not None and prefill.transfers and time.monotonic() < deadline:
        time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["prefill", "decode"])
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bootstrap-port", type=int)
    parser.add_argument("--stall-file", default="")
    arguments = parser.parse_args()
    STALL_FILE[:] = [arguments.stall_file] if arguments.stall_file else []
    handler: type[Handler] = Decode
    prefill = None
    if arguments.role == "prefill":
        prefill = Prefill(arguments.host)
        handler, bootstrap, side_channel = prefill_handlers(prefill)
        side = ThreadingHTTPServer((arguments.host, 0), side_channel)
        prefill.side_channel_port = side.server_address[1]
        serve(side)
        serve(ThreadingHTTPServer((arguments.host, arguments.bootstrap_port), bootstrap))
        signal.signal(signal.SIGUSR1, prefill.restart_in_place)
    serve(ThreadingHTTPServer((arguments.host, arguments.port), handler))
    signal.signal(signal.SIGTERM, lambda *_: STATE.update(draining=True))
    print("serving", flush=True)
    # Until SIGTERM. Not signal.pause(): the kernel may hand a signal to a server thread, which leaves the
    # main thread paused and the Python handler never run; a short sleep lets the main thread run it
    # within 50 ms wherever the signal landed.
    while not STATE["draining"]:
        time.sleep(0.05)
    drain(prefill)


if __name__ == "__main__":
    main()
