"""Checks that need the cluster as well as the route: which workload answered (the canary's
share), and whether KV really moved through Mooncake (and over the intended transport).

The pods are reached through the Kubernetes API: metrics by the API server's pod proxy on the
server port (the one port every classic endpoint's NetworkPolicy opens), logs through the
kubelet (which no NetworkPolicy sees). A split Mooncake endpoint's share is counted at its
proxies (their /health says how many answers they relayed; the proxy port is open to all),
since its role pods admit only their proxy. A Mooncake endpoint with a canary set has each set's
KV evidence checked on its own: the request goes to that set's entry pod through the pod proxy,
not through the route, which would send it to either. Each check raises CheckError naming what
was wrong, or UnverifiedError when what it needs does not exist."""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from components import naming
from components.render.frameworks import flag_name
from components.render.mooncake_store import MASTER_CONTAINER
from components.render.pods import SERVER_CONTAINER
from components.render.proxy import PROXY_PORT
from components.spec import Endpoint
from fleetctl.verify import evidence
from fleetctl.verify.canary import p_value, tolerance
from fleetctl.verify.client import CheckError, Client, UnverifiedError
from fleetctl.verify.kube import Cluster, Pod
from fleetctl.verify.schemas import (
    ScaledToZeroError,
    TritonModel,
    completion_answer,
    completion_body,
    request_check,
    vllm,
)
from fleetctl.verify.wake import request_waking

T = TypeVar("T")
POLL_SECONDS = 2.0
CONCURRENT_REQUESTS = 8
FILLER = "Mooncake moves the key-value cache from the prefill pods to the decode pods. "
FILLER_REPEATS = 40
"""About 600 tokens: dozens of full KV blocks, so there is something to move and to store."""


@dataclass(frozen=True)
class Target:
    name: str
    region: str
    endpoint: Endpoint
    address: str
    model: str | None
    """The served model name requests send."""
    cluster: Cluster
    client: Client
    log_wait: float
    """Seconds to wait for the pods to log what a request did (vLLM and Mooncake log every 10 s)."""
    direct: bool = False
    """Requests go to the entry pod of the set named ``name`` through the pod proxy, not the route."""
    wake_wait: float = 0.0
    """Seconds to wait for a set scaled to zero that a direct request wakes (--wake-wait)."""

    @property
    def namespace(self) -> str:
        return self.endpoint.namespace

    def pods(self, role: naming.Role, name: str | None = None) -> list[Pod]:
        """The running pods of ``role`` of the set ``name`` (the target's own by default)."""
        owner = name or self.name
        pods = self.cluster.running_pods(self.namespace, naming.selector_labels(owner, role))
        if not pods:
            raise CheckError(f"no running {role} pods of {owner} in namespace {self.namespace}")
        return pods


def entry(endpoint: Endpoint) -> tuple[naming.Role, int]:
    """The role and port a set's requests enter by: a split Mooncake endpoint's proxy, else its server."""
    if endpoint.mooncake is not None and endpoint.mooncake.split:
        return "proxy", PROXY_PORT
    return "server", endpoint.port


@dataclass(frozen=True)
class Side:
    """One of the two workloads a route splits between, as the share check counts it."""

    label: str
    name: str
    role: naming.Role


def sides(target: Target) -> tuple[Side, Side]:
    """A classic endpoint's server and canary pods, or a Mooncake endpoint's entry pods and its canary set's."""
    if target.endpoint.mooncake is None:
        return Side("server", target.name, "server"), Side("canary", target.name, "canary")
    role, _ = entry(target.endpoint)
    return Side(role, target.name, role), Side("canary", naming.canary_set_name(target.name), role)


def canary_share(target: Target, requests: int, triton: TritonModel) -> str:
    """Send ``requests`` through the route and count, in the pods' own request counters, how
    many the canary answered; hold the count to the configured weight (exact binomial test)."""
    endpoint = target.endpoint
    assert endpoint.canary is not None
    split = endpoint.mooncake is not None and endpoint.mooncake.split
    sample = PROXY_ANSWERED if split else evidence.SERVED_COUNTERS.get(endpoint.framework)
    if sample is None:
        raise UnverifiedError(
            f"{endpoint.framework} serves its metrics off the server port, which the NetworkPolicy closes"
        )
    primary, canary = sides(target)
    by_label = {primary.label: primary, canary.label: canary}
    before = {label: _counters(target, side, sample) for label, side in by_label.items()}
    request = request_check(endpoint.framework, triton, target.model)
    with ThreadPoolExecutor(CONCURRENT_REQUESTS) as pool:
        sent = [pool.submit(request, target.client, target.address) for _ in range(requests)]
        try:
            for answer in sent:
                answer.result()
        except ScaledToZeroError as zero:
            pool.shutdown(cancel_futures=True)
            raise UnverifiedError(
                f"a set behind the route is scaled to zero ({zero}): the share cannot be measured until it is awake"
            ) from None
        except CheckError:
            pool.shutdown(cancel_futures=True)  # the first failure fails the check; send no more
            raise

    seen = 0

    def counted() -> dict[str, int] | None:
        """Requests each workload answered since ``before``, once they account for all sent."""
        nonlocal seen
        after = {label: _counters(target, side, sample) for label, side in by_label.items()}
        served = {}
        for role in by_label:
            if before[role].keys() != after[role].keys():
                raise CheckError(f"the {role} pods changed during the measurement; run verify again")
            served[role] = round(sum(after[role][pod] - before[role][pod] for pod in after[role]))
            if served[role] < 0:
                raise CheckError(f"a {role} pod's {sample} went down (a restart) during the measurement")
        seen = sum(served.values())
        return served if seen >= requests else None

    # A server may count a request a moment after it answered it.
    served = _await(target, counted, lambda: f"the pods counted {seen} of the {requests} requests sent ({sample})")
    total = served[primary.label] + served[canary.label]
    hits, weight = served[canary.label], endpoint.canary.weight
    low, high = tolerance(total, weight)
    detail = (
        f"canary answered {hits} of {total} requests ({hits / total:.1%}); weight {weight}% "
        f"accepts {low}..{high} (p={p_value(hits, total, weight):.3g})"
    )
    if not low <= hits <= high:
        raise CheckError(detail)
    return detail


PROXY_ANSWERED = "answered"
"""The proxy's count of decode answers it relayed, in its /health body (front/base.py)."""


def _counters(target: Target, side: Side, sample: str) -> dict[str, float]:
    counts = {}
    for pod in target.pods(side.role, side.name):
        if sample == PROXY_ANSWERED:
            counts[pod.name] = _answered(target, pod)
            continue
        port = target.endpoint.port
        value = evidence.counter_total(target.cluster.pod_metrics(target.namespace, pod.name, port), sample)
        if value is None:
            raise CheckError(f"pod {pod.name}: its /metrics on port {port} has no counter {sample}")
        counts[pod.name] = value
    return counts


def _answered(target: Target, pod: Pod) -> float:
    body = target.cluster.pod_get(target.namespace, pod.name, PROXY_PORT, "/health")
    try:
        value = json.loads(body).get(PROXY_ANSWERED)
    except (ValueError, AttributeError):
        value = None
    if not isinstance(value, int) or isinstance(value, bool):
        raise CheckError(f"pod {pod.name}: its /health on port {PROXY_PORT} holds no count '{PROXY_ANSWERED}'")
    return float(value)


ROUTED = "routed"
"""A routing front's per-backend counts of prompt blocks routed and believed cached, in its /health body
(front/base.py)."""
PREFIX_REQUESTS = 8
"""Requests sharing one long prefix: more than the fronts an endpoint runs, so one front sees it twice."""


def routed_counts(body: bytes | str, pod: str) -> dict[str, tuple[int, int]]:
    """(blocks routed, blocks believed cached) per backend, as a front's /health ``body`` holds them."""
    try:
        found = json.loads(body).get(ROUTED)
        counts = {backend: (count["blocks"], count["cached"]) for backend, count in found.items()}
    except (ValueError, AttributeError, KeyError, TypeError):
        counts = {}
    if not counts or not all(isinstance(value, int) for pair in counts.values() for value in pair):
        raise CheckError(f"pod {pod}: its /health on port {PROXY_PORT} holds no counts '{ROUTED}' (not routing)")
    return counts


def prefix_routing(target: Target) -> str:
    """Requests sharing a long prefix no front has seen, through the route; then, of the prompt blocks the
    endpoint's fronts (its proxies, a classic endpoint's gates) routed meanwhile, the share each believed
    its chosen engine or pod held: the hit rate of routing by prefix as the fronts observed it. None at all
    believed cached means the prefix was not followed."""
    role: naming.Role = "proxy" if entry(target.endpoint)[0] == "proxy" else "gate"
    pods = target.pods(role)

    def counts() -> dict[str, dict[str, tuple[int, int]]]:
        return {
            pod.name: routed_counts(target.cluster.pod_get(target.namespace, pod.name, PROXY_PORT, "/health"), pod.name)
            for pod in pods
        }

    before = counts()
    prefix = f"Conversation {secrets.token_hex(8)} from fleetctl verify. " + FILLER * FILLER_REPEATS
    for number in range(PREFIX_REQUESTS):
        _send(target, f"{prefix}Question {number}: what moves the cache?")
    totals: dict[str, list[int]] = {}
    for pod, backends in counts().items():
        for backend, (blocks, cached) in backends.items():
            old_blocks, old_cached = before.get(pod, {}).get(backend, (0, 0))
            if blocks < old_blocks:  # restarted meanwhile: it counts from zero again
                old_blocks = old_cached = 0
            total = totals.setdefault(backend, [0, 0])
            total[0] += blocks - old_blocks
            total[1] += cached - old_cached
    routed = {backend: total for backend, total in sorted(totals.items()) if total[0] > 0}
    if not routed:
        raise CheckError(f"the {role} pods routed no prompt blocks of the {PREFIX_REQUESTS} requests sent")
    detail = "; ".join(
        f"{backend}: {cached / blocks:.0%} of {blocks} blocks believed cached where routed"
        for backend, (blocks, cached) in routed.items()
    )
    if not any(cached for _, cached in routed.values()):
        raise CheckError(f"{PREFIX_REQUESTS} requests sharing a prefix, none of it believed cached ({detail})")
    return f"{PREFIX_REQUESTS} requests sharing a prefix: {detail}"


def kv_transfer(target: Target) -> str:
    """A prompt no pod has seen, through the proxy; then the prefill pods (which push the KV)
    must log a successful Mooncake transfer, and no role pod a failed one."""
    if any(flag_name(arg) == "--disable-log-stats" for arg in target.endpoint.args):
        raise UnverifiedError("--disable-log-stats in args: vLLM logs no KV transfer stats")
    since_request = _unseen_request(target)
    pods = {role: target.pods(role) for role in ("prefill", "decode")}

    def observed() -> str | None:
        since = since_request()
        logs = {
            role: [target.cluster.log(target.namespace, pod.name, SERVER_CONTAINER, since) for pod in each]
            for role, each in pods.items()
        }
        counts = {role: [evidence.transfers(log) for log in each] for role, each in logs.items()}
        failed = sum(count.failed for each in counts.values() for count in each)
        if failed:
            raise CheckError(f"the role pods' logs report {failed} failed KV transfers or receives")
        successful = sum(count.successful for count in counts["prefill"])
        return f"prefill pods logged {successful} successful Mooncake transfers" if successful else None

    return _await(
        target,
        observed,
        "no prefill pod logged a successful Mooncake transfer ('KV Transfer metrics') after the request",
    )


def kv_store(target: Target) -> str:
    """A prompt no pod has seen; then the endpoint's Mooncake master must log stored objects."""
    since_request = _unseen_request(target)
    masters = target.pods("store")

    def observed() -> str | None:
        since = since_request()
        logs = [target.cluster.log(target.namespace, pod.name, MASTER_CONTAINER, since) for pod in masters]
        return "the Mooncake master logged stored objects" if any(map(evidence.store_puts, logs)) else None

    return _await(
        target,
        observed,
        "the Mooncake master logged no stored object ('Master Admin Metrics' PutEnd) after the request",
    )


def engine_protocols(endpoint: Endpoint) -> set[str]:
    """The protocols of the endpoint's Mooncake transfer engines (P2P transfer, store client)."""
    mooncake = endpoint.mooncake
    if mooncake is None:
        return set()
    return ({mooncake.transfer.protocol} if mooncake.split else set()) | (
        {mooncake.store.protocol or mooncake.transfer.protocol} if mooncake.store_enabled else set()
    )


def kv_transport(target: Target) -> str:
    """Over rdma every transfer engine of the role pods must have found EFA devices; an
    engine that found none installed TCP, silently, and this check fails loudly."""
    mooncake = target.endpoint.mooncake
    assert mooncake is not None
    if engine_protocols(target.endpoint) != {"rdma"}:
        raise UnverifiedError("the transfer and the store use different protocols; their engines' logs look alike")
    roles: tuple[naming.Role, ...] = ("prefill", "decode") if mooncake.split else ("server",)
    engines = 0
    for role in roles:
        for pod in target.pods(role):
            for container in pod.containers:
                installed = evidence.transport(target.cluster.log(target.namespace, pod.name, container))
                if installed == "tcp":
                    raise CheckError(
                        f"RDMA NOT IN USE: pod {pod.name} container {container}: the Mooncake transfer engine found "
                        "no RDMA devices and installed TCP; KV moves over TCP, not EFA"
                    )
                engines += installed is not None
    if not engines:
        raise UnverifiedError("no role pod's log says which transport its Mooncake transfer engine installed")
    return f"{engines} transfer engines found RDMA devices, none installed TCP"


def _unseen_request(target: Target) -> Callable[[], int]:
    """Send a prompt no pod has seen through the route; return the log window (sinceSeconds)
    that reaches back to just before it, one second spare for the kubelet's rounding."""
    started = time.monotonic()
    _send(target, f"Request {secrets.token_hex(8)} from fleetctl verify. " + FILLER * FILLER_REPEATS)
    return lambda: math.ceil(time.monotonic() - started) + 1


def _send(target: Target, prompt: str) -> None:
    """One completion of ``prompt``: through the route, or to the set's entry pod (``direct``)."""
    if target.direct:
        role, port = entry(target.endpoint)
        pod = target.pods(role)[0]
        path = f"/api/v1/namespaces/{target.namespace}/pods/{pod.name}:{port}/proxy/v1/completions"

        def direct(_client: Client, _address: str) -> str:
            headers: dict[str, str] = {}
            status, answer = target.cluster.post(path, completion_body(target.model, prompt), headers)
            return completion_answer(status, answer, headers, f"POST /v1/completions to pod {pod.name} (the pod proxy)")

        # The route may have been answered by the other set while this one's roles are at zero.
        request_waking(direct, target.client, "", target.wake_wait)
    else:
        vllm(target.client, target.address, target.model, prompt)


def _await(target: Target, observed: Callable[[], T | None], missing: Callable[[], str] | str) -> T:
    """What ``observed`` finds, polling until it finds something or ``log_wait`` has passed."""
    waited_until = time.monotonic() + target.log_wait
    while True:
        found = observed()
        if found is not None:
            return found
        if time.monotonic() >= waited_until:
            raise CheckError(
                f"{missing() if callable(missing) else missing} within {target.log_wait:g} s of the requests"
            )
        time.sleep(min(POLL_SECONDS, target.client.left(), max(0.0, waited_until - time.monotonic())))
