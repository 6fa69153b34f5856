"""Bounded retries through Pulumi error hooks (components/platform/retries.py) for the two passing
errors of a first ``pulumi up``: Global Accelerator refusing an ALB still ``provisioning``, and the API
server failing closed while LeaderWorkerSet's webhooks do not serve yet."""

from __future__ import annotations

import asyncio

import pulumi

from components.platform.global_front import ALB_ACTIVE_ATTEMPTS, alb_active_retry, alb_not_active
from components.platform.leader_worker_set import WEBHOOK_ATTEMPTS, webhook_not_serving, webhook_retry
from components.platform.retries import on_error

ALB = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/k8s-inferencefleet-1a2b3c/50dc6c495c0c9188"
GA_REFUSAL = (
    "creating Global Accelerator Endpoint Group: operation error Global Accelerator: CreateEndpointGroup, "
    f"https response error StatusCode: 400, RequestID: 8e31686a, InvalidArgumentException: '{ALB}' is not a "
    "valid load balancer ARN"
)
"""terraform-provider-aws's wording of CreateEndpointGroup's refusal (hashicorp/terraform-provider-aws#28536
shows the same InvalidArgumentException naming the load balancer's ARN)."""
WEBHOOK_REFUSAL = (
    'Internal error occurred: failed calling webhook "mleaderworkerset.kb.io": failed to call webhook: Post '
    '"https://lws-webhook-service.lws-system.svc:443/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset'
    '?timeout=10s": tls: failed to verify certificate: x509: certificate signed by unknown authority'
)
"""The API server's ``ErrCallingWebhook`` (k8s.io/apiserver pkg/admission/plugin/webhook/errors) for LWS
v0.10.0's mutating webhook, before its manager has written its certificates."""


def args(operation: str, errors: list[str]) -> pulumi.ErrorHookArgs:
    return pulumi.ErrorHookArgs(
        urn="urn:pulumi:prod::inference-fleet::t::x",
        id="",
        name="x",
        type="t",
        failed_operation=operation,
        errors=errors,
    )


def test_the_albs_refusal_is_known_and_nothing_else_is() -> None:
    assert alb_not_active(GA_REFUSAL)
    assert not alb_not_active("creating Global Accelerator Endpoint Group: AccessDeniedException: not authorized")
    assert not alb_not_active("InvalidArgumentException: weight must be between 0 and 255")


def test_lws_webhook_refusals_are_known_and_other_webhooks_are_not() -> None:
    assert webhook_not_serving(WEBHOOK_REFUSAL)
    assert webhook_not_serving(
        'failed calling webhook "vleaderworkerset.kb.io": failed to call webhook: Post '
        '"https://lws-webhook-service.lws-system.svc:443/validate": no endpoints available for service'
    )
    assert not webhook_not_serving('failed calling webhook "vingress.elbv2.k8s.aws": connection refused')
    assert not webhook_not_serving('admission webhook "vleaderworkerset.kb.io" denied the request: size must be >= 1')


def test_a_known_error_is_retried_until_the_attempts_run_out() -> None:
    retry = alb_active_retry("us-east-1")
    assert retry.should_retry("create", [GA_REFUSAL])
    assert retry.should_retry("update", [GA_REFUSAL] * (ALB_ACTIVE_ATTEMPTS - 1))
    assert not retry.should_retry("create", [GA_REFUSAL] * ALB_ACTIVE_ATTEMPTS)
    assert retry.exhausted("create", [GA_REFUSAL] * ALB_ACTIVE_ATTEMPTS)
    assert not retry.should_retry("delete", [GA_REFUSAL])
    # Only the newest error decides: a different failure after a wait is given back at once.
    assert not retry.should_retry("create", ["AccessDeniedException", GA_REFUSAL])


def test_the_hook_waits_then_retries_and_finally_says_what_it_waited_for(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    slept: list[float] = []
    logged: list[tuple[str, str]] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *_, **__: logged.append(("warn", message)))
    monkeypatch.setattr(pulumi.log, "error", lambda message, *_, **__: logged.append(("error", message)))

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    callback = on_error(webhook_retry("us-east-1"), sleep)
    assert asyncio.run(callback(args("create", [WEBHOOK_REFUSAL]))) is True
    assert slept == [15.0]
    assert logged[-1][0] == "warn"
    assert f"attempt 1 of {WEBHOOK_ATTEMPTS}" in logged[-1][1]
    assert asyncio.run(callback(args("create", [WEBHOOK_REFUSAL] * WEBHOOK_ATTEMPTS))) is False
    assert slept == [15.0]
    level, message = logged[-1]
    assert level == "error"
    assert "gave up waiting for LeaderWorkerSet's webhooks in us-east-1 to answer after 20 attempts" in message
    assert "kubectl -n lws-system logs deploy/lws-controller-manager" in message
    assert asyncio.run(callback(args("create", ["Unauthorized"]))) is False
    assert len(logged) == 2
