"""fleetctl verify's wait for an endpoint scaled to zero: the proxy's 503 recognised by its error
type, each next request after the Retry-After it gave (front/relay.py answers
``Retry-After: <--retry-after-seconds>``), and the waits kept out of the run's deadline."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import pytest

from components.spec import Endpoint
from fleetctl.verify.client import CheckError, Client
from fleetctl.verify.incluster import Target, _unseen_request
from fleetctl.verify.kube import Pod
from fleetctl.verify.schemas import ScaledToZeroError, retry_after, vllm
from fleetctl.verify.wake import NotWaitedError, request_waking

from .stack_builders import placed_endpoint, with_mooncake

AT_ZERO = {
    "error": {
        "message": "prefill and decode scaled to zero: this request wakes them; retry in a few minutes",
        "type": "scaled_to_zero",
        "code": 503,
    }
}
ANSWER = {"choices": [{"index": 0, "text": " Paris."}]}


class Proxy(Client):
    """A proxy at zero for its first ``asleep`` completions; its waits recorded, not slept."""

    def __init__(self, asleep: int, headers: Mapping[str, str]) -> None:
        super().__init__(deadline=5)
        self.asleep, self.answer_headers = asleep, headers
        self.paused: list[float] = []

    def exchange(self, method: str, url: str, body: Any = None) -> tuple[int, Any, Mapping[str, str]]:
        if self.asleep:
            self.asleep -= 1
            return 503, AT_ZERO, self.answer_headers
        return 200, ANSWER, {}

    def pause(self, seconds: float) -> None:
        self.paused.append(seconds)


def ask(client: Client, address: str) -> str:
    return vllm(client, address, "qwen3-8b")


def test_the_proxys_503_at_zero_is_told_from_any_other_503() -> None:
    with pytest.raises(ScaledToZeroError) as zero:
        ask(Proxy(1, {"retry-after": "30"}), "http://route")
    assert (str(zero.value), zero.value.retry_after) == (
        "POST /v1/completions: HTTP 503 prefill and decode scaled to zero: this request wakes them; "
        "retry in a few minutes",
        30.0,
    )

    class Overloaded(Proxy):
        def exchange(self, method: str, url: str, body: Any = None) -> tuple[int, Any, Mapping[str, str]]:
            return 503, {"error": {"message": "no prefill engine", "type": "service_unavailable", "code": 503}}, {}

    with pytest.raises(CheckError) as other:
        ask(Overloaded(0, {}), "http://route")
    assert not isinstance(other.value, ScaledToZeroError)
    assert str(other.value) == "POST /v1/completions: HTTP 503"


def test_each_request_after_a_wake_follows_the_retry_after_the_proxy_gave() -> None:
    proxy = Proxy(3, {"retry-after": "30"})
    detail, zero = request_waking(ask, proxy, "http://route", wake_wait=900)
    assert proxy.paused == [30.0, 30.0, 30.0]
    assert detail.startswith(" Paris. (woke from zero ")
    assert detail.endswith(" s after the first request, asked 4 times)")
    assert zero is not None
    assert zero.state == "woke"


@pytest.mark.parametrize(("header", "wait"), [({}, 10.0), ({"retry-after": "0"}, 1.0), ({"retry-after": "x"}, 10.0)])
def test_without_a_usable_retry_after_it_asks_every_10_s_and_never_sooner_than_1_s(
    header: dict[str, str], wait: float
) -> None:
    proxy = Proxy(1, header)
    request_waking(ask, proxy, "http://route", wake_wait=900)
    assert proxy.paused == [wait]


def test_a_wake_wait_shorter_than_the_retry_after_bounds_the_wait() -> None:
    proxy = Proxy(1, {"retry-after": "30"})
    request_waking(ask, proxy, "http://route", wake_wait=5)
    (paused,) = proxy.paused
    assert paused <= 5


def test_an_awake_endpoint_is_asked_once_and_wake_wait_0_does_not_wait() -> None:
    assert request_waking(ask, Proxy(0, {}), "http://route", wake_wait=900) == (" Paris.", None)
    proxy = Proxy(1, {"retry-after": "30"})
    with pytest.raises(NotWaitedError, match=r"^scaled to zero; this request woke it \(--wake-wait 0"):
        request_waking(ask, proxy, "http://route", wake_wait=0)
    assert proxy.paused == []


def test_retry_after_is_read_as_seconds_or_an_http_date() -> None:
    now = datetime(2026, 12, 1, 13, 0, tzinfo=UTC)
    later = format_datetime(datetime(2026, 12, 1, 13, 1, 30, tzinfo=UTC), usegmt=True)
    assert retry_after({"retry-after": "30"}, now.timestamp()) == 30.0
    assert retry_after({"retry-after": later}, now.timestamp()) == 90.0
    assert retry_after({}, now.timestamp()) is None
    assert retry_after({"retry-after": "soon"}, now.timestamp()) is None


def test_a_pause_is_not_counted_in_the_deadline() -> None:
    client = Client(deadline=2)
    client.pause(2.5)
    assert client.left() > 0
    with pytest.raises(CheckError, match="the deadline of 2 s passed"):
        Client(deadline=2, _start=client._start).left()


class PodProxy:
    """The API server's pod proxy to a proxy pod of a set at zero for its first ``asleep`` posts."""

    def __init__(self, asleep: int, client: Client) -> None:
        self.asleep, self.client = asleep, client
        self.posted: list[str] = []

    def running_pods(self, namespace: str, labels: dict[str, str]) -> list[Pod]:
        return [Pod(f"{labels['app.kubernetes.io/name']}-proxy-0", ("proxy",))]

    def post(self, path: str, body: Any, answer: dict[str, str] | None = None) -> tuple[int, Any]:
        self.posted.append(path)
        if self.asleep:
            self.asleep -= 1
            if answer is not None:
                answer["retry-after"] = "30"
            return 503, AT_ZERO
        return 200, ANSWER


def direct_target(asleep: int, wake_wait: float) -> tuple[Target, PodProxy, Proxy]:
    client = Proxy(0, {})
    cluster = PodProxy(asleep, client)
    endpoint: Endpoint = placed_endpoint(
        with_mooncake({"canary": {"image": "vllm/vllm-openai:v0.33.0", "weight": 10}})
    ).spec
    target = Target(
        "chat",
        "us-east-1",
        endpoint,
        "http://route",
        "qwen3-8b",
        cluster,  # type: ignore[arg-type]
        client,
        0.0,
        True,
        wake_wait,
    )
    return target, cluster, client


def test_a_set_at_zero_that_a_direct_request_wakes_is_waited_for_too() -> None:
    """With a canary set the route may answer from the awake set: each set's KV checks post to its
    own proxy pod, which wakes its roles and is asked again after its Retry-After."""
    target, cluster, client = direct_target(2, wake_wait=900)
    _unseen_request(target)
    assert cluster.posted == ["/api/v1/namespaces/inference/pods/chat-proxy-0:8000/proxy/v1/completions"] * 3
    assert client.paused == [30.0, 30.0]
    target, cluster, client = direct_target(1, wake_wait=0)
    with pytest.raises(NotWaitedError):
        _unseen_request(target)
