"""How a pod of an endpoint stops without losing a request: the timings every server, role, proxy
and gate pod is rendered with, named here so the tests and the rollout scenario read them from the
pod spec rather than repeat them (docs/deploying.md, "How a rollout drains").

A pod being deleted (a rollout, a scale-in, a node drain) is taken out of its Service's ready
endpoints at once, and the load balancer controller then deregisters it from its target group; but
the ALB, kube-proxy on every node and the cluster DNS cache (EKS's CoreDNS ``cache 30``, which the
proxy's lookup of the prefill pods goes through) go on sending to it for a while. So:

1. ``preStop`` sleeps ``PRESTOP_SECONDS``: the pod keeps serving, untouched, while everything in
   front of it stops sending new requests;
2. then SIGTERM: the server stops taking new requests and finishes the ones it has for up to
   ``SERVER_DRAIN_SECONDS`` (vLLM ``--shutdown-timeout``, TGI ``--graceful-termination-timeout``,
   Triton ``--exit-timeout-secs``; SGLang drains until done: ``drain_flag`` in frameworks.py);
3. the kubelet kills what is left ``terminationGracePeriodSeconds`` after the deletion, which is
   above both plus the engine's own teardown.

The route's target groups get ``deregistration_delay.timeout_seconds`` = ``DEREGISTRATION_DELAY_SECONDS``
(route.py), the time a pod serves after its deregistration starts (preStop, then drain): the ALB holds
a draining target's in-flight requests exactly as long as the pod finishes them, and the 300 s
default of ELBv2 target groups (aws-load-balancer-controller v3.4.2 sets no other) would hold a
connection to a pod that has already gone. The preStop is derived from the same budget:
``DEREGISTRATION_DELAY_SECONDS - SERVER_DRAIN_SECONDS``.
"""

from __future__ import annotations

from typing import Any

SERVER_DRAIN_SECONDS = 120
"""How long a server finishes its in-flight generations after SIGTERM (vLLM 0.33.0
``--shutdown-timeout``: vllm/config/vllm.py ``shutdown_timeout``, default 0; v1/engine/core.py
``_handle_shutdown`` then runs mode ``drain``, refusing new requests and stepping the ones it has,
instead of mode ``abort``, which finishes every one ``FINISHED_ABORTED``). A prefill's drain also
waits for the KV its finished requests still hold until their decoders pull it (the scheduler's
``has_finished_requests`` keeps the engine stepping). Anything still running then is aborted."""

DEREGISTRATION_DELAY_SECONDS = 160
"""The route's target groups hold a deregistered pod's in-flight requests this long (ELBv2
``deregistration_delay.timeout_seconds``; the controller's default is the ALB's 300 s)."""

PRESTOP_SECONDS = DEREGISTRATION_DELAY_SECONDS - SERVER_DRAIN_SECONDS
"""What is left of the target group's delay before the drain: the time the ALB (controller reconcile,
DeregisterTargets, the ALB's own propagation), kube-proxy and the DNS cache (30 s on EKS, plus the
proxy's 2 s refresh) take to stop sending the pod new requests."""

ENGINE_TEARDOWN_SECONDS = 30
"""After the drain, the engine process frees its GPUs and exits (vLLM's process manager gives
EngineCore a teardown window of its own: vllm/v1/engine/utils.py)."""

SERVER_GRACE_SECONDS = PRESTOP_SECONDS + SERVER_DRAIN_SECONDS + ENGINE_TEARDOWN_SECONDS
"""The server and role pods' ``terminationGracePeriodSeconds``: above the preStop and the drain."""

FRONT_DRAIN_SECONDS = SERVER_DRAIN_SECONDS
"""How long the proxy or the gate finishes its streams after SIGTERM: a stream through it lasts as
long as the server's generation behind it, so as long as the server's drain."""

FRONT_EXIT_SECONDS = 10
"""The proxy's and gate's margin after their drain to close their sessions and exit."""

FRONT_GRACE_SECONDS = PRESTOP_SECONDS + FRONT_DRAIN_SECONDS + FRONT_EXIT_SECONDS
"""The proxy's and gate's ``terminationGracePeriodSeconds``."""


def pre_stop() -> dict[str, Any]:
    """A container's ``lifecycle``: sleep ``PRESTOP_SECONDS`` before SIGTERM. The kubelet's own sleep
    action (PodLifecycleSleepAction, on by default since Kubernetes 1.30), so no image needs a shell."""
    return {"preStop": {"sleep": {"seconds": PRESTOP_SECONDS}}}


def sidecar_pre_stop() -> dict[str, Any]:
    """A sidecar the server uses until it has drained (the offload-disk store client): it gets SIGTERM
    with the server, after its own preStop, so it sleeps through the server's preStop and drain."""
    return {"preStop": {"sleep": {"seconds": PRESTOP_SECONDS + SERVER_DRAIN_SECONDS}}}
