"""fleetctl verify's "prefix routing" check (fleetctl/verify/incluster.py): requests sharing a prefix go
through the route, and the check reads, in each front pod's /health, the blocks routed and those believed
cached. Here the fronts are the front's own routers (front/router.py) under the body front/base.py writes;
tests/e2e/test_routing.py holds the real proxy's /health to the same reading."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import takewhile
from typing import Any

import pytest

from components.render.proxy import PROXY_PORT
from components.spec import parse_stack_config
from fleetctl.verify import incluster
from fleetctl.verify.client import CheckError, Client
from fleetctl.verify.incluster import PREFIX_REQUESTS, Target, prefix_routing, routed_counts
from fleetctl.verify.kube import Cluster, Pod
from front.router import Router, prompt_of, text_blocks

from .stack_builders import classic_endpoint, mooncake_endpoint, stack_config

ENGINES = ["10.0.1.7/0/engine-a", "10.0.1.8/0/engine-b"]


@dataclass(frozen=True)
class Fronts(Cluster):
    """The API server's view of an endpoint's front pods: each a router of its own, its /health what
    front/base.py answers; ``routing`` False for fronts started without --routing."""

    routers: dict[str, Router] = field(default_factory=dict)
    role: str = "proxy"
    backend: str = "prefill"
    routing: bool = True
    taken: list[str] = field(default_factory=list)

    def running_pods(self, namespace: str, labels: dict[str, str]) -> list[Pod]:
        assert labels["app.kubernetes.io/component"] == self.role
        return [Pod(name, ("proxy",)) for name in sorted(self.routers)]

    def pod_get(self, namespace: str, pod: str, port: int, path: str) -> bytes:
        assert (port, path) == (PROXY_PORT, "/health")
        state: dict[str, Any] = {"prefill": {}, "decode": True, "answered": 0}
        if self.routing:
            routed = self.routers[pod].routed(self.backend)
            state["routed"] = {routed.backend: {"blocks": int(routed.blocks), "cached": int(routed.cached)}}
        return json.dumps(state).encode()

    def take(self, prompt: str) -> None:
        """One completion through the route: the load balancer picks a front in turn, the front an engine."""
        names = sorted(self.routers)
        router = self.routers[names[len(self.taken) % len(names)]]
        self.taken.append(prompt)
        engine = router.choose(ENGINES, text_blocks(prompt_of("/v1/completions", {"prompt": prompt})))
        assert engine is not None
        router.done(engine)


def target(fronts: Fronts, spec: dict[str, Any]) -> Target:
    endpoint = parse_stack_config(stack_config(endpoints={"chat": spec})).endpoints["chat"]
    return Target("chat", "us-east-1", endpoint, "https://chat.example", None, fronts, Client(), 0.0)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    prompts: list[str] = []

    def send(target: Target, prompt: str) -> None:
        prompts.append(prompt)
        assert isinstance(target.cluster, Fronts)
        target.cluster.take(prompt)

    monkeypatch.setattr(incluster, "_send", send)
    return prompts


SPLIT = mooncake_endpoint({"routing": "prefix", "mooncake": {"topology": {"prefill": 2, "decode": 1}}})


def test_two_proxies_routing_by_prefix_report_the_share_they_believed_cached(sent: list[str]) -> None:
    fronts = Fronts("", Client(), routers={"chat-proxy-0": Router("prefix"), "chat-proxy-1": Router("prefix")})
    # Traffic before the check: its counts are left out.
    for number in range(5):
        fronts.take(f"an earlier request {number} " * 20)
    detail = prefix_routing(target(fronts, SPLIT))
    assert len(sent) == PREFIX_REQUESTS
    assert len({prompt[:80] for prompt in sent}) == 1
    blocks = sum(len(text_blocks(prompt)) for prompt in sent)
    # Each proxy's first request of the prefix finds nothing; every later one finds the whole shared prefix.
    first, second = text_blocks(sent[0]), text_blocks(sent[1])
    shared = len(list(takewhile(lambda pair: pair[0] == pair[1], zip(first, second, strict=False))))
    cached = (PREFIX_REQUESTS - 2) * shared
    assert detail == (
        f"{PREFIX_REQUESTS} requests sharing a prefix: prefill: {cached / blocks:.0%} of {blocks} blocks "
        "believed cached where routed"
    )


def test_fronts_that_follow_no_prefix_fail_the_check(sent: list[str]) -> None:
    fronts = Fronts("", Client(), routers={"chat-proxy-0": Router("least-load")})
    with pytest.raises(CheckError, match="requests sharing a prefix, none of it believed cached"):
        prefix_routing(target(fronts, SPLIT))


def test_a_front_without_routing_counts_fails_naming_the_pod(sent: list[str]) -> None:
    fronts = Fronts("", Client(), routers={"chat-proxy-0": Router("prefix")}, routing=False)
    with pytest.raises(CheckError, match="pod chat-proxy-0: its /health on port 8000 holds no counts 'routed'"):
        prefix_routing(target(fronts, SPLIT))
    assert sent == []  # nothing sent before every front was read


def test_a_classic_endpoint_is_read_at_its_gates(sent: list[str]) -> None:
    fronts = Fronts("", Client(), routers={"chat-gate-0": Router("prefix")}, role="gate", backend="server")
    spec = classic_endpoint({"routing": "prefix", "replicas": 2})
    assert prefix_routing(target(fronts, spec)).startswith(f"{PREFIX_REQUESTS} requests sharing a prefix: server: ")


@pytest.mark.parametrize(
    "body",
    [
        b"{}",
        b"[]",
        b"not json",
        b'{"routed": {"prefill": {"blocks": 3}}}',
        b'{"routed": {"prefill": {"blocks": "3", "cached": 1}}}',
    ],
)
def test_a_health_body_without_the_counts_is_refused(body: bytes) -> None:
    with pytest.raises(CheckError, match="holds no counts 'routed'"):
        routed_counts(body, "chat-proxy-0")
