"""The prefill/decode proxy of a split Mooncake endpoint: the request path.

A request: prefill on one prefill engine (``max_tokens`` 1, ``min_tokens`` 1, ``kv_transfer_params``
with ``do_remote_decode`` and a transfer id), then decode through the decode Service with that
engine's bootstrap address and engine id (``do_remote_prefill``), the decode's answer
streamed back. The decoder pulls the KV from the very engine that prefilled it. A prefill that
finished other than at its length is the answer; ``n`` > 1 and prompt lists are refused 400
(``unsplittable``); the rest of vLLM's client surface goes to decode as it came (``FORWARDED_PATHS``).
A draining engine refuses new requests (refusals.py): a refusing prefill pod is left for
another, a refused decode is sent again on a fresh connection (another decode pod), under the same
transfer, before the client gets any of it. A decode that fails before any output (a 5xx, or a stream
opening on an error: ``failed_before_output``) is run again once from the prefill, under a new transfer."""

from __future__ import annotations

import argparse
import json
import logging
import os
import uuid
from typing import Any

from front.answers import Own, as_json, error, scaled_to_zero
from front.base import Front
from front.listener import Incoming, Reply
from front.metrics import Routed
from front.refusals import (
    COMPLETION_PATHS,
    EVENT_STREAM,
    RESENT_ON_ABORT,
    draining_error,
    failed_before_output,
    refused_by_engine,
)
from front.relay import forwarded_headers, relayed
from front.router import PodChoice, Router, prompt_of, text_blocks
from front.upstream import Answer, Pool, UpstreamError, request
from front.watch import ROLES, Engine, Peers

LOG = logging.getLogger("mooncake-proxy")
FORWARDED_PATHS = frozenset({"/tokenize", "/detokenize", "/tokenizer_info", "/version"})
FORWARDED_PREFIX = "/v1/"
NOT_FORWARDED = frozenset({"/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/v1/realtime"})
"""What the proxy sends to decode as it came, unsplit (decode computes its own prefill): every route of
vLLM 0.33.0's OpenAI surface under ``/v1/`` (models, responses, messages, embeddings, audio, ...:
entrypoints/openai/*/api_router.py, anthropic/, pooling/, speech_to_text/) and the tokenizer's
(serve/tokenize/api_router.py), but the LoRA loading of one decode pod (an administrator's, and the
other pods would not have it) and the realtime WebSocket. vLLM's other routes (sleep, profiling, weight
updates, cache resets) are its operators', not a client's: 404 here."""
PREFILL_FINISHED_FOR_DECODE = "length"
"""The prefill's finish_reason when it kept the KV for decode: the connector keeps a prefill's blocks only
for ``FINISHED_LENGTH_CAPPED`` (vLLM 0.33.0 mooncake/mooncake_connector.py,
``MooncakeConnectorScheduler.request_finished``), which the OpenAI layer answers as "length"."""


def unsplittable(path: str, body: dict[str, Any]) -> str | None:
    """Why a completion request cannot go through one prefill and one decode, naming its field; None
    when it can. vLLM makes several engine requests of ``n`` > 1 (v1/engine/parallel_sampling.py: child
    requests with the parent's sampling parameters, ``kv_transfer_params`` included), of a list of
    prompts (completion/serving.py: one per prompt) and of beam search; the Mooncake connector keys a
    transfer by its id (mooncake_connector.py, ``reqs_need_send[transfer_id]``), so they would overwrite
    one another's KV on the prefill and wait for it on the decode."""
    n = body.get("n")
    if n is not None and n != 1:
        return f"n is {n!r}: a split endpoint answers one choice per request (n 1); send n requests"
    if body.get("use_beam_search"):
        return "use_beam_search is not supported on a split endpoint"
    if path == "/v1/completions":
        prompt, embeds = body.get("prompt"), body.get("prompt_embeds")
        texts = len(prompt) if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) else 1
        counts = {"prompt": texts if prompt not in (None, "") else 0}
        counts["prompt_embeds"] = len(embeds) if isinstance(embeds, list) else 1 if embeds else 0
        if (prompts := sum(counts.values())) > 1:
            fields = " and ".join(name for name, count in counts.items() if count)
            verb = "hold" if " and " in fields else "holds"
            return f"{fields} {verb} {prompts} prompts: a split endpoint answers one prompt per request"
    return None


def prefill_body(body: dict[str, Any], request_id: str) -> dict[str, Any]:
    """The client's request as the prefill gets it: one token, whatever the client asked, never streamed.
    ``min_tokens`` 1 (the client's replaced: vLLM 0.33.0 sampling_params.py ``_verify_args`` refuses
    ``min_tokens`` above ``max_tokens``) keeps the one token from being EOS or a stop token: vLLM masks
    them until ``min_tokens`` tokens are out (v1/sample/logits_processor, ``MinTokensLogitsProcessor``),
    and ``check_stop`` (v1/core/sched/utils.py) would otherwise finish the request ``FINISHED_STOPPED``,
    whose KV the connector frees at once. The decode still samples its first token under the client's
    own limits."""
    payload = {
        **body,
        "kv_transfer_params": {
            "do_remote_decode": True,
            "do_remote_prefill": False,
            "transfer_id": f"xfer-{request_id}",
        },
        "stream": False,
        "max_tokens": 1,
        "min_tokens": 1,
    }
    if "max_completion_tokens" in payload:
        payload["max_completion_tokens"] = 1
    payload.pop("stream_options", None)
    return payload


def finished_for_decode(answer: Any) -> bool:
    """Whether the prefill's answer says it kept the KV for decode: every choice finished at its length."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices:
        return True  # not a completion we can read: decode answers (and says what went wrong)
    return all(isinstance(c, dict) and c.get("finish_reason") == PREFILL_FINISHED_FOR_DECODE for c in choices)


def as_events(path: str, answer: dict[str, Any], body: dict[str, Any]) -> bytes:
    """A whole completion (vLLM's non-streamed answer) as the server-sent events vLLM streams for it:
    one chunk per choice (chat: ``chat.completion.chunk`` with the message as its ``delta``), a usage
    chunk when the client asked for it (``stream_options.include_usage``), then ``[DONE]``."""
    chat = path == "/v1/chat/completions"
    kind = "chat.completion.chunk" if chat else "text_completion"
    common: dict[str, Any] = {key: answer[key] for key in ("id", "created", "model") if key in answer}
    chunks: list[dict[str, Any]] = []
    for choice in answer.get("choices", []):
        part: dict[str, Any]
        if chat:
            delta = dict(choice.get("message") or {})
            part = {"index": choice.get("index", 0), "delta": delta, "logprobs": choice.get("logprobs")}
            part |= {"finish_reason": choice.get("finish_reason"), "stop_reason": choice.get("stop_reason")}
        else:
            part = dict(choice)
        chunks.append({**common, "object": kind, "choices": [part]})
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") and "usage" in answer:
        chunks.append({**common, "object": kind, "choices": [], "usage": answer["usage"]})
    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
    return "".join(events).encode()


class Proxy(Front):
    def __init__(self, arguments: argparse.Namespace, peers: Peers, pool: Pool) -> None:
        super().__init__(arguments, peers, ROLES)
        self.pool = pool
        self.decode = arguments.decode
        self.peers = peers
        self.key = os.environ.get("VLLM_API_KEY")
        routing = arguments.routing
        self.prefill_router = None if routing is None else Router(routing)
        """With ``--routing``: the prefill engine of each request (else: in turn)."""
        self.decode_router = None if routing is None or peers.decode_pods is None else Router(routing)
        """With ``--routing`` and ``--decode-pods``: the decode pod of each request (else: the Service's choice)."""

    def routing_counts(self) -> list[Routed]:
        routers = {"prefill": self.prefill_router, "decode": self.decode_router}
        return [router.routed(role) for role, router in routers.items() if router is not None]

    def headers(self, request_id: str) -> list[tuple[str, str]]:
        """A prefill's or a decode's headers: its body is JSON, the request's id, the servers' key."""
        headers = [("Content-Type", "application/json"), ("X-Request-Id", request_id)]
        if self.key:
            headers.append(("Authorization", f"Bearer {self.key}"))
        return headers

    async def answer(self, incoming: Incoming, reply: Reply) -> Own | None:
        if incoming.path not in COMPLETION_PATHS or incoming.method != "POST":
            return await self.unsplit(incoming, reply)
        try:
            body = json.loads(incoming.body)
        except ValueError:  # UnicodeDecodeError included
            body = None
        if not isinstance(body, dict):
            return error(400, "the request body must be a JSON object")
        if refused := unsplittable(incoming.path, body):
            return error(400, refused)
        if at_zero := self.at_zero():
            self.counts.unserved_by(at_zero)
            return scaled_to_zero(at_zero, self.retry_after_seconds)
        routed = self.prefill_router is not None and self.prefill_router.mode == "prefix"
        blocks = text_blocks(prompt_of(incoming.path, body)) if routed else []
        choice = None
        if self.decode_router is not None and self.peers.decode_pods is not None:
            choice = PodChoice(self.peers.decode_pods, self.decode_router, blocks)
        try:
            return await self.split(incoming, reply, body, blocks, choice)
        finally:
            if choice is not None:
                choice.release()

    async def split(
        self, incoming: Incoming, reply: Reply, body: dict[str, Any], blocks: list[int], choice: PodChoice | None
    ) -> Own | None:
        """The request prefilled, then decoded (on ``choice``'s pod, or through the Service), the answer
        relayed; run again once from the prefill when decode fails before any output."""
        retried = False
        while True:
            request_id = uuid.uuid4().hex
            prefilled = await self.prefill(incoming.path, body, request_id, blocks)
            if isinstance(prefilled, Own):
                return prefilled
            engine, prefill_answer = prefilled
            if not finished_for_decode(prefill_answer):
                # Finished before its length (a stop string in its one token): the prefill freed the KV,
                # and the answer is whole. vLLM would have answered the client just this.
                self.counts.answered += 1
                if body.get("stream"):
                    return Own(200, as_events(incoming.path, prefill_answer, body), EVENT_STREAM)
                return as_json(prefill_answer)
            decoded = await self.decoded(incoming.path, body, engine, request_id, choice)
            if isinstance(decoded, Own):
                return decoded
            answer, head = decoded
            if not retried and failed_before_output(answer.status, answer.content_type, head):
                # Decode failed before the client got anything: its KV load failed (the prefill pod
                # restarted since the last refresh, so decode found no engine under the id we named;
                # or the transfer itself failed). Prefill and decode again, once, under a new transfer.
                answer.close()
                retried = True
                if choice is not None:  # that pod may take it again: the fault may be the prefill's
                    choice.release()
                    choice.tried.clear()
                restarted = not await self.peers.still_current(engine)
                cause = f"prefill {engine.host} restarted" if restarted else "decode failed before any output"
                LOG.warning("%s under request %s: prefilling again", cause, request_id)
                continue
            self.counts.answered += 1
            await relayed(incoming, reply, answer, head, forward_headers=False)
            return None

    async def decoded(
        self, path: str, body: dict[str, Any], engine: Engine, request_id: str, choice: PodChoice | None
    ) -> tuple[Answer, bytes] | Own:
        """Decode's answer to the request ``engine`` prefilled and what was read of it (``Front.unrefused``),
        or the answer to give the client; sent to ``choice``'s pod, or to the decode Service without one."""
        payload = {
            **body,
            "kv_transfer_params": {
                "do_remote_decode": False,
                "do_remote_prefill": True,
                "remote_bootstrap_addr": self.peers.bootstrap_url(engine.host),
                "remote_engine_id": engine.engine_id,
                "transfer_id": f"xfer-{request_id}",
            },
        }
        headers = self.headers(request_id)
        data = json.dumps(payload).encode()

        async def send(fresh: bool) -> Answer:
            if choice is None:
                return await request(self.pool, self.decode, "POST", path, headers, data, fresh)
            return await choice.send(lambda base: request(self.pool, base, "POST", path, headers, data, fresh))

        try:
            unrefused = await self.unrefused(send, f"request {request_id}")
        except UpstreamError as failure:
            return self.decode_unreachable(failure)
        if unrefused is None:
            self.counts.unserved_by(["decode"])
            return error(503, f"decode refused the request {RESENT_ON_ABORT + 1} times: its pods are draining")
        return unrefused

    def decode_unreachable(self, failure: Exception) -> Own:
        self.peers.decode_up = False
        self.peers.wake.set()
        self.counts.unserved_by(["decode"])
        return error(503, f"decode is unreachable: {failure}")

    def routed(self, path: str) -> bool:
        forwarded = path.startswith(FORWARDED_PREFIX) or path in FORWARDED_PATHS
        return path in COMPLETION_PATHS or (forwarded and path not in NOT_FORWARDED)

    async def unsplit(self, incoming: Incoming, reply: Reply) -> Own | None:
        """A route of vLLM's surface that needs no prefill (``FORWARDED_PATHS``): to decode as it came,
        with the proxy's key in place of the client's when the role servers require one."""
        if "decode" in self.at_zero():
            self.counts.unserved_by(["decode"])
            return scaled_to_zero(["decode"], self.retry_after_seconds)
        headers = forwarded_headers(incoming)
        if self.key:
            headers = [(k, v) for k, v in headers if k.lower() != "authorization"]
            headers.append(("Authorization", f"Bearer {self.key}"))
        head = incoming.head
        try:
            answer = await request(self.pool, self.decode, head.method, head.target, headers, incoming.body)
        except UpstreamError as failure:
            return self.decode_unreachable(failure)
        self.counts.answered += 1
        await relayed(incoming, reply, answer, b"", forward_headers=True)
        return None

    def next_prefill(self, tried: set[str], blocks: list[int]) -> Engine | None:
        """The engine that prefills next, of a pod not ``tried``: in turn, or by ``--routing`` (then held in
        flight on its router until ``Router.done``)."""
        if self.prefill_router is None:
            return self.peers.pick(tried)
        candidates = {engine_key(engine): engine for engine in self.peers.candidates(tried)}
        self.prefill_router.keep(engine_key(e) for engines in self.peers.engines.values() for e in engines)
        chosen = self.prefill_router.choose(list(candidates), blocks)
        return None if chosen is None else candidates[chosen]

    async def prefill(
        self, path: str, body: dict[str, Any], request_id: str, blocks: list[int]
    ) -> tuple[Engine, dict[str, Any]] | Own:
        """The engine that prefilled the request and its answer, or the answer to give the client."""
        payload = prefill_body(body, request_id)
        tried: set[str] = set()
        while (engine := self.next_prefill(tried, blocks)) is not None:
            tried.add(engine.host)
            try:
                return await self.prefill_on(engine, path, payload, request_id)
            except PrefillError as failure:
                LOG.warning("prefill %s failed (%s): taken out of rotation", engine.host, failure)
                self.peers.suspect(engine.host)
            finally:
                if self.prefill_router is not None:
                    self.prefill_router.done(engine_key(engine))
        self.counts.unserved_by(["prefill"] if self.peers.decode_up else ["prefill", "decode"])
        return error(503, "no prefill instance is available")

    async def prefill_on(
        self, engine: Engine, path: str, payload: dict[str, Any], request_id: str
    ) -> tuple[Engine, dict[str, Any]] | Own:
        """``engine``'s prefill of ``payload`` and its answer, or the client's error to answer; raises
        ``PrefillError`` when another pod should take it."""
        headers = [*self.headers(request_id), ("X-data-parallel-rank", str(engine.rank))]
        data = json.dumps(payload).encode()
        try:
            answer = await request(self.pool, self.peers.prefill_url(engine.host), "POST", path, headers, data)
            try:
                content = await answer.read()
            finally:
                if not answer.ended:
                    answer.close()
        except UpstreamError as failure:
            raise PrefillError(str(failure) or type(failure).__name__) from failure
        try:
            prefilled = json.loads(content)
        except ValueError:
            prefilled = {}
        if answer.status < 400 and not refused_by_engine(prefilled):
            return engine, prefilled
        if 400 <= answer.status < 500:  # the request itself: no other prefill pod would take it
            return Own(answer.status, content, answer.headers.get("Content-Type") or "application/octet-stream")
        if answer.status < 400 or draining_error(prefilled):
            self.peers.refused(engine.host)
            raise PrefillError("its engine refused the request (draining)")
        raise PrefillError(f"answered {answer.status}")


class PrefillError(Exception):
    """A prefill pod failed the request in a way another pod may not: unreachable, draining, a 5xx."""


def engine_key(engine: Engine) -> str:
    """A prefill engine as its router knows it: a restarted engine (a new id) is a new backend."""
    return f"{engine.host}/{engine.rank}/{engine.engine_id}"
