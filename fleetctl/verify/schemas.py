"""One small, deterministic request per framework, and the exact fields its answer must hold."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from components.spec.images import Framework
from fleetctl.verify.client import CheckError, Client

PROMPT = "The capital of France is"
MAX_TOKENS = 8
TRITON_DATA = [1, 2, 3, 4]


@dataclass(frozen=True)
class TritonModel:
    name: str = "identity"
    input: str = "INPUT0"
    output: str = "OUTPUT0"


SCALED_TO_ZERO = "scaled_to_zero"
"""The error type of the 503 a split endpoint's proxy (a classic endpoint's gate) answers while its
roles (its server) are at zero, and the key of its /health body naming them
(front/relay.py; the program runs alone in its pod and imports nothing of ours)."""


class ScaledToZeroError(CheckError):
    """The endpoint answered that it is scaled to zero (the request woke it)."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        """Seconds the proxy asked to wait before the next request (its Retry-After), if it said."""


def retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """An answer's Retry-After in seconds from ``now`` (a POSIX time): delay-seconds or an HTTP-date
    (RFC 9110, 10.2.3); None when absent or unreadable."""
    value = headers.get("retry-after", "").strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _field(document: Any, *path: str | int) -> Any:
    value = document
    for step in path:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            raise CheckError(f"{_dotted(path)}: missing from the answer") from None
    return value


def _dotted(path: tuple[str | int, ...]) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


def _text(document: Any, *path: str | int) -> str:
    value = _field(document, *path)
    if not isinstance(value, str) or not value.strip():
        raise CheckError(f"{_dotted(path)}: expected non-empty text, got {value!r}")
    return value


def _ok(status: int, body: Any, what: str) -> Any:
    if status != 200:
        raise CheckError(f"{what}: HTTP {status}")
    if body is None:
        raise CheckError(f"{what}: the answer is not JSON")
    return body


def vllm(client: Client, address: str, model: str | None, prompt: str = PROMPT) -> str:
    """A completion naming the served model, as clients do (the bundled split-endpoint proxy serves no /v1/models)."""
    status, answer, headers = client.exchange("POST", f"{address}/v1/completions", completion_body(model, prompt))
    return completion_answer(status, answer, headers, "POST /v1/completions")


def completion_answer(status: int, answer: Any, headers: Mapping[str, str], what: str) -> str:
    """The generated text of a completion's answer; ScaledToZeroError when a split endpoint's proxy
    answered that its roles are at zero, CheckError when the answer is not a completion."""
    if status == 503 and _error_type(answer) == SCALED_TO_ZERO:
        message = str(answer["error"].get("message") or "scaled to zero")
        raise ScaledToZeroError(f"{what}: HTTP 503 {message}", retry_after(headers, time.time()))
    return completion_text(status, answer, what)


def _error_type(answer: Any) -> Any:
    error = answer.get("error") if isinstance(answer, dict) else None
    return error.get("type") if isinstance(error, dict) else None


def completion_body(model: str | None, prompt: str = PROMPT) -> dict[str, Any]:
    """A vLLM /v1/completions request naming the served model."""
    if model is None:
        raise CheckError("no served model name in the engine record or the stack file to send")
    return {"model": model, "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0}


def completion_text(status: int, answer: Any, what: str) -> str:
    """The generated text of a vLLM completion's answer; CheckError when it is not one."""
    return _text(_ok(status, answer, what), "choices", 0, "text")


def sglang(client: Client, address: str) -> str:
    body = {"text": PROMPT, "sampling_params": {"max_new_tokens": MAX_TOKENS, "temperature": 0}}
    return _text(_ok(*client.request("POST", f"{address}/generate", body), "POST /generate"), "text")


def tgi(client: Client, address: str) -> str:
    body = {"inputs": PROMPT, "parameters": {"max_new_tokens": MAX_TOKENS, "do_sample": False}}
    return _text(_ok(*client.request("POST", f"{address}/generate", body), "POST /generate"), "generated_text")


def triton(client: Client, address: str, model: TritonModel) -> str:
    """KServe v2 inference on an identity model: the output must echo the input."""
    body = {"inputs": [{"name": model.input, "shape": [1, len(TRITON_DATA)], "datatype": "INT32", "data": TRITON_DATA}]}
    url = f"{address}/v2/models/{model.name}/infer"
    answer = _ok(*client.request("POST", url, body), f"POST /v2/models/{model.name}/infer")
    name = _field(answer, "outputs", 0, "name")
    if name != model.output:
        raise CheckError(f"outputs[0].name: expected {model.output!r}, got {name!r}")
    data = _field(answer, "outputs", 0, "data")
    if data != TRITON_DATA:
        raise CheckError(f"outputs[0].data: expected {TRITON_DATA} (the identity of the input), got {data!r}")
    return f"{name}={data}"


def request_check(framework: Framework, triton_model: TritonModel, model: str | None) -> Callable[[Client, str], str]:
    """The request of ``framework``; vLLM's names ``model``, the endpoint's served model name."""
    if framework == "triton":
        return lambda client, address: triton(client, address, triton_model)
    if framework == "vllm":
        return lambda client, address: vllm(client, address, model)
    checks: dict[Framework, Callable[[Client, str], str]] = {"sglang": sglang, "tgi": tgi}
    return checks[framework]
