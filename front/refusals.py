"""What a draining engine answers in place of running a request, and how a front sees it before its
client does, so that it can send the request to another pod.

A vLLM 0.33.0 server given SIGTERM with ``--shutdown-timeout`` drains its engine before its HTTP
server (entrypoints/launchers/launcher.py ``serve_http``, ``handle_shutdown``: ``engine_client.shutdown``
runs first, ``server.should_exit`` is set only after it). For up to the drain, the server accepts and
keeps its keep-alive connections (a stream's too: uvicorn sends a ``StreamingResponse`` chunked and
keeps the connection, uvicorn protocols/http/httptools_impl.py ``RequestResponseCycle.send``), and its
/health answers 200. Meanwhile it refuses every new request:

- ``AsyncLLM.shutdown`` (v1/engine/async_llm.py) shuts the renderer's tokenizer pool down before it drains
  the engine, so a new completion fails in tokenization (renderers/base.py ``_SwappableExecutor.submit``,
  concurrent.futures' "cannot schedule new futures after shutdown"), answered 500 with that message
  (:data:`DRAINING_ERROR`). This is what a real vLLM 0.32.0 answered in the real-engine suite
  (tests/vllm/), for the whole drain; 0.33.0's code there is the same;
- a request already tokenized when the drain began reaches an engine that finishes it at once "abort":
  ``_reject_add_in_shutdown`` (v1/engine/core.py) sends ``FinishReason.ABORT`` before the request reaches
  the scheduler, answered 200 (a whole completion, or a stream whose choice finishes "abort", after the
  role for a chat: chat_completion/serving.py ``first_iteration``).

The proxy and the gate reach decode and the server through their Services, on pooled connections;
kube-proxy chose a connection's pod when it opened, and a connection in use does not idle the 3 s after
which the pool drops it (serve.KEEPALIVE_TO_PEERS_SECONDS), so under steady load a connection to a pod
whose deletion started is used on through its preStop into its drain. Capping a connection's lifetime
below the preStop (components/render/drain.py) would be a prediction (of the preStop, of kube-proxy's
and the endpoints' propagation), would need aiohttp's private connector (its TCPConnector has an idle
timeout, no lifetime) and would still not cover a connection opened just before a node's kube-proxy
dropped the pod. The refusal itself is certain and cheap (the engine refuses before it schedules), so
the front acts on it: a request refused so before anything reached the client is sent again on a
fresh connection (``RESENT_ON_ABORT`` times at most; then 503, which clients retry), which the Service
sends to a pod still serving, and the connection that brought the refusal is closed so the pool never
hands it out again: each pooled connection to a draining pod costs at most one refused round trip.

A whole answer is read before it is passed on; a stream's opening events are, up to the first that
carries a token or a finish (``opening``): what a client would see of a refused stream is a role and an
empty choice finished "abort". A decode refused so never saw the request, so its prefill still holds the
KV (``_reject_add_in_shutdown`` frees nothing, unlike ``_reject_add_while_paused`` beside it): another
decode pod pulls it under the same transfer id. A decode refused with the 500 asks its engine to drop the
transfer, which an engine already signalled refuses too; one refused in the moment between the tokenizer
pool's stop and that signal frees the prefill's KV, and its resend fails its pull: the proxy runs that
request again from the prefill (``failed_before_output``; docs/mooncake-proxy.md, Limits)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from front.upstream import Answer

COMPLETION_PATHS = ("/v1/completions", "/v1/chat/completions")
"""The completion routes (vLLM 0.33.0 entrypoints/openai/completion/api_router.py and
chat_completion/api_router.py): those the proxy splits into a prefill and a decode, and whose answers
a front reads for a refusal."""
ABORT = "abort"
DRAINING_ERROR = "cannot schedule new futures after shutdown"
"""The message of the 500 a draining vLLM answers a new request with (above)."""
DRAINING_ERROR_BYTES = DRAINING_ERROR.encode()
QUOTED_ABORT = b'"abort"'
RESENT_ON_ABORT = 2
"""How many times a request refused "abort" is sent again, each on a fresh connection."""
OPENING_BYTES = 64 * 2**10
"""A stream's opening is passed on as it is once this long, decided or not (vLLM's role chunk is ~200 bytes)."""
EVENT_STREAM = "text/event-stream"


def finishes(value: Any) -> set[str]:
    """The finish reasons of a completion's (or a stream chunk's) choices."""
    choices = value.get("choices") if isinstance(value, dict) else None
    if not isinstance(choices, list):
        return set()
    return {str(c["finish_reason"]) for c in choices if isinstance(c, dict) and c.get("finish_reason") is not None}


def refused_by_engine(answer: Any) -> bool:
    """Whether the engine finished the request without running it: "abort" (a draining vLLM) or "error".
    Another pod may run it."""
    return bool(finishes(answer) & {ABORT, "error"})


def draining_error(value: Any) -> bool:
    """Whether an error answer is a draining vLLM's refusal of a new request (:data:`DRAINING_ERROR`)."""
    error = value.get("error") if isinstance(value, dict) else None
    return isinstance(error, dict) and error.get("message") == DRAINING_ERROR


def carries_output(chunk: Any) -> bool:
    """Whether a stream chunk carries generated output: a completion's text or tokens, a chat delta's
    content, reasoning or tool calls (not the role alone, which vLLM sends before the first token)."""
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict):
            continue
        if choice.get("text") or choice.get("token_ids"):
            return True
        delta = choice.get("delta")
        if isinstance(delta, dict) and any(value for key, value in delta.items() if key != "role"):
            return True
    return False


@dataclass(frozen=True)
class Opening:
    head: bytes
    """What was read of the stream, passed on first."""
    refused: bool
    """The stream's first decisive event finished a choice "abort"."""


def event_data(event: list[bytes]) -> bytes:
    """A server-sent event's data, its lines joined (empty for a comment)."""
    return b"\n".join(line.removeprefix(b"data:").strip() for line in event if line.startswith(b"data:"))


def decided(event: list[bytes]) -> bool | None:
    """What one server-sent event says: True, refused ("abort"); False, the stream goes on to the client
    (a token, another finish, an error, ``[DONE]``, something unreadable); None, nothing yet (a role,
    a usage chunk, a comment)."""
    data = event_data(event)
    if not data:
        return None
    if data == b"[DONE]":
        return False
    try:
        chunk = json.loads(data)
    except ValueError:
        return False
    if not isinstance(chunk, dict) or "error" in chunk:
        return False
    if reasons := finishes(chunk):
        return ABORT in reasons
    return False if carries_output(chunk) else None


def failed_before_output(status: int, content_type: str, head: bytes) -> bool:
    """Whether a completion's answer failed before any output, from its status, type and what was read of
    it (``read_ahead``):
    a 5xx, or a stream whose opening ended on an error, an event vLLM sends after its 200 when the request
    fails before its first token (a KV load that failed under ``kv_load_failure_policy`` "fail"), or on a
    choice finished "error" with nothing generated. Nothing of it has reached the client, so the request
    may be run again."""
    if status >= 500:
        return True
    if status != 200 or content_type != EVENT_STREAM:
        return False
    events = [chunk for chunk in head.split(b"\n\n") if chunk.strip()]
    try:
        last = json.loads(event_data(events[-1].split(b"\n"))) if events else None
    except ValueError:
        return False
    if not isinstance(last, dict):
        return False
    return "error" in last or ("error" in finishes(last) and not carries_output(last))


async def opening(answer: Answer) -> Opening:
    """A stream read up to its first event that carries a token or a finish (or its end, or
    ``OPENING_BYTES``)."""
    head = bytearray()
    event: list[bytes] = []
    while len(head) < OPENING_BYTES:
        line = await answer.readline()
        if not line:
            break
        head += line
        if line.strip():
            event.append(line.strip())
            continue
        verdict = decided(event)
        event = []
        if verdict is not None:
            return Opening(bytes(head), verdict)
    return Opening(bytes(head), False)


async def read_ahead(answer: Answer) -> bytes | None:
    """What of a completion's ``answer`` is read before the client gets any of it: the whole of a JSON
    answer or of a 500's, a stream's opening; None when the engine refused the request (a draining
    vLLM's 500, or "abort"), the answer's connection closed then. Any other answer (another error
    status, compressed, another type) is left unread (b"")."""
    if answer.headers.get("Content-Encoding"):
        return b""
    if answer.content_type == "application/json" and answer.status in (200, 500):
        head = await answer.read()
        # Parsed only when it can be a refusal: a JSON encoder writes these ASCII words as they are.
        if (DRAINING_ERROR_BYTES if answer.status == 500 else QUOTED_ABORT) not in head:
            return head
        try:
            value = json.loads(head)
        except ValueError:
            value = None
        refused = draining_error(value) if answer.status == 500 else ABORT in finishes(value)
    elif answer.status == 200 and answer.content_type == EVENT_STREAM:
        start = await opening(answer)
        head, refused = start.head, start.refused
    else:
        return b""
    if not refused:
        return head
    # A whole answer read to its end gave its connection back to the pool: ``close`` takes it out again,
    # so the connection that brought a refusal never carries another request (front/upstream.py).
    answer.close()
    return None
