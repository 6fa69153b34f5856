"""The ``routing`` field of an endpoint: how its front chooses the engine of each request, and the rules
of that field against the rest of the endpoint.

The front (the package ``front/``, docs/front.md) takes ``--routing MODE`` (front/serve.py; the modes are
``front/router.py`` ``MODES``, the policies ``front/routing.py``'s). A split Mooncake endpoint's proxy is
always there to choose; a classic endpoint has nothing in front of its Service but the load balancer, so
routing gives it the gate of ``min_replicas: 0`` (components/render/gate.py), which runs the program on
the endpoint's own image.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic_core import PydanticCustomError

from components.spec.autoscaling import GATELESS
from components.spec.base import fail

if TYPE_CHECKING:
    from components.spec.endpoint import Endpoint

Routing = Literal["prefix", "least-load", "random"]
"""front/router.py ``MODES``, in its order."""

ROUTING_DESCRIPTION = (
    "How the endpoint's front chooses the engine of each request (docs/front.md, 'Routing'). prefix: the front "
    "keeps an approximate index of what it sent each engine (the prompt's text in blocks, a bounded LRU per "
    "engine) and sends a request to the engine holding its longest prefix, among the engines whose requests in "
    "flight stay within 1.25 times the mean (the least loaded always may): prefix-cache hits for shared system "
    "prompts and conversations, for the index's memory and a hash of each prompt in the front, and a load "
    "uneven up to that bound; each front replica knows only what it sent. least-load: the engine with the "
    "fewest requests in flight from this front. random: any engine, no state. A split Mooncake endpoint's "
    "proxy chooses the prefill engine and the decode pod (through the headless Service <name>-decode-pods "
    "instead of the decode Service); a canary set's proxy chooses within its own set. A classic vLLM or SGLang "
    "endpoint gets a gate (<name>-gate: two small pods and one more hop, as at autoscaling.min_replicas 0) that "
    "chooses among the server's pods (the headless Service <name>-pods); with a canary the route splits by "
    "weight first, and the gate chooses among the primary's pods only, the canary's share going to its Service "
    "as before. Unset: the proxy takes prefill engines in turn and decode through its Service, and a classic "
    "endpoint's Service picks a pod at random. Refused on mode 'store' (one server), on TGI and Triton (their "
    "images cannot run the gate) and on a classic endpoint that never runs more than one pod."
)


def most_replicas(endpoint: Endpoint) -> int:
    """The most pods a classic endpoint's primary server runs: its autoscaler's ceiling, else ``replicas``."""
    scaling = endpoint.autoscaling
    if scaling is not None and scaling.enabled:
        return scaling.max_replicas
    return endpoint.replicas if endpoint.replicas is not None else 1


def routing_rules(endpoint: Endpoint) -> Iterator[PydanticCustomError]:
    """``routing`` only where its front has engines to choose between and can run."""
    mode = endpoint.routing
    if mode is None:
        return
    mooncake = endpoint.mooncake
    if mooncake is not None:
        if not mooncake.split:
            yield fail(
                "routing_store",
                "mode 'store' runs one server behind the route, with no proxy in front of it: nothing to choose "
                "between; drop routing (routing chooses the prefill engine and decode pod of modes "
                "'disaggregated' and 'both')",
                at="routing",
            )
        return
    if endpoint.framework in GATELESS:
        yield fail(
            "routing_gate",
            "{mode!r} needs a gate in front of the server to choose its pod, which runs python3 with aiohttp on "
            "the endpoint's image, and {reason}; drop routing, or serve with vLLM or SGLang",
            at="routing",
            mode=mode,
            reason=GATELESS[endpoint.framework],
        )
    most = most_replicas(endpoint)
    if most <= 1:
        scaling = endpoint.autoscaling
        autoscaled = scaling is not None and scaling.enabled
        yield fail(
            "routing_one_pod",
            "{mode!r} chooses one of the server's pods for each request, and this endpoint never runs more than "
            "{most} ({bound}): nothing to choose between; raise {field} above 1, or drop routing",
            at="routing",
            mode=mode,
            most=most,
            bound=f"autoscaling.max_replicas {most}" if autoscaled else f"replicas {most}, no autoscaling",
            field="autoscaling.max_replicas" if autoscaled else "replicas",
        )
