"""A bounded retry of one resource's create or update on one known, passing error, as a Pulumi
error hook.

Pulumi calls a resource's error hooks when an operation on it fails, with the errors seen so far,
newest first, and retries the operation while a hook answers True (``ErrorHook``,
``ResourceHookBinding(on_error=...)``, ``ErrorHookArgs.errors``: sdk/python/lib/pulumi/resource_hooks.py
of pulumi v3.272.0, the pinned SDK; the CLI must be as recent, since it runs the retries). A retry
here answers True only for the error it names and only ``attempts - 1`` times, waiting
``delay_seconds`` before each; then it logs what it waited for and gives the error back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

RETRIED_OPERATIONS = ("create", "update")


@dataclass(frozen=True)
class Retry:
    waiting_for: str
    """What the retries wait for, as the log says it (``the ALB of us-east-1 to be active``)."""
    matches: Callable[[str], bool]
    """Whether an error is the passing one this retry waits out."""
    attempts: int
    delay_seconds: float
    advice: str
    """What to check when the retries run out."""

    def should_retry(self, operation: str, errors: Sequence[str]) -> bool:
        """Retry a failed create or update whose newest error is the known one, while attempts remain."""
        if operation not in RETRIED_OPERATIONS or not errors or not self.matches(errors[0]):
            return False
        return len(errors) < self.attempts

    def exhausted(self, operation: str, errors: Sequence[str]) -> bool:
        return (
            operation in RETRIED_OPERATIONS
            and bool(errors)
            and self.matches(errors[0])
            and not (self.should_retry(operation, errors))
        )

    def budget(self) -> str:
        return f"{self.attempts} attempts, {self.delay_seconds:g}s apart"


Sleep = Callable[[float], Awaitable[None]]


def on_error(retry: Retry, sleep: Sleep = asyncio.sleep) -> Callable[[pulumi.ErrorHookArgs], Coroutine[Any, Any, bool]]:
    """The hook's callback: wait and answer True to retry, else log why not and answer False."""

    async def callback(args: pulumi.ErrorHookArgs) -> bool:
        errors = list(args.errors)
        if retry.should_retry(args.failed_operation, errors):
            pulumi.log.warn(
                f"{args.name}: waiting for {retry.waiting_for} (attempt {len(errors)} of {retry.attempts}; "
                f"retrying in {retry.delay_seconds:g}s): {errors[0]}"
            )
            await sleep(retry.delay_seconds)
            return True
        if retry.exhausted(args.failed_operation, errors):
            pulumi.log.error(
                f"{args.name}: gave up waiting for {retry.waiting_for} after {retry.budget()}: {retry.advice}"
            )
        return False

    return callback


def retrying(name: str, retry: Retry) -> pulumi.ResourceOptions:
    """Options binding a new error hook ``name`` (unique in the program) that runs ``retry``."""
    hook = pulumi.ErrorHook(name, on_error(retry))
    return pulumi.ResourceOptions(hooks=pulumi.ResourceHookBinding(on_error=[hook]))
