"""The bare registration: our plan's resources registered again under plain Pulumi mocks.

The floor (benchmarks/run.py) runs a replay of our plan.json through ``fleetctl.plan.run_program``:
the recording mocks, the plan's records, ``write_plan``. The bare registration runs the same replay
the way Pulumi's own unit-testing guide does: ``pulumi.runtime.mocks.set_mocks`` with mocks that echo
the inputs, the program's resources created, then the SDK's own ``wait_for_rpcs``. Nothing is
recorded and no file is written: what remains is what the SDK costs to register these resources.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks
from pulumi.runtime import stack as pulumi_stack


class EchoMocks(mocks.Mocks):
    """A resource's state is its inputs; the replay calls no function."""

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        return {}, []


def _alias(alias: dict[str, Any]) -> pulumi.Alias | str:
    """An alias as the plan records it: a URN, or a spec (the typed classes' old types)."""
    if "urn" in alias:
        return str(alias["urn"])
    spec = alias.get("spec", {})
    # A field the spec leaves out is the SDK's "inherit" (its default), not None (no parent/name).
    given = {key: spec[field] for key, field in (("name", "name"), ("type_", "type")) if spec.get(field)}
    return pulumi.Alias(**given)


def options_of(entry: dict[str, Any], by_urn: dict[str, pulumi.Resource]) -> pulumi.ResourceOptions:
    """The resource options the plan records for ``entry``, with URNs turned back into resources."""
    options = entry["options"]
    providers = [by_urn[urn] for urn in options.get("providers", {}).values() if urn in by_urn]
    timeouts = options.get("customTimeouts")
    return pulumi.ResourceOptions(
        parent=by_urn.get(entry["parent"]),
        provider=by_urn.get(entry.get("provider")),  # type: ignore[arg-type]
        providers=providers or None,  # type: ignore[arg-type]
        depends_on=[by_urn[urn] for urn in options.get("dependsOn", []) if urn in by_urn] or None,
        aliases=[_alias(alias) for alias in options.get("aliases", [])] or None,
        custom_timeouts=pulumi.CustomTimeouts(**timeouts) if timeouts else None,
        retain_on_delete=options.get("retainOnDelete"),
        protect=options.get("protect"),
        additional_secret_outputs=options.get("additionalSecretOutputs"),
    )


def register(entries: list[dict[str, Any]]) -> int:
    """Register ``entries`` (benchmarks.run.replay_entries: each after its parent, providers and what it
    depends on): the floor's program and the bare registration both run this. The number registered."""
    by_urn: dict[str, pulumi.Resource] = {}
    for entry in entries:
        opts = options_of(entry, by_urn)
        resource: pulumi.Resource
        if entry["type"].startswith("pulumi:providers:"):
            resource = pulumi.ProviderResource(entry["type"].split(":")[2], entry["name"], entry["inputs"], opts=opts)
        elif entry["custom"]:
            resource = pulumi.CustomResource(entry["type"], entry["name"], entry["inputs"], opts=opts)
        else:
            resource = pulumi.ComponentResource(entry["type"], entry["name"], None, opts=opts)
        by_urn[entry["urn"]] = resource
    return len(by_urn)


def child(replay: Path) -> dict[str, Any]:
    """Time the bare registration of the replay at ``replay`` in this (fresh) process."""
    entries = json.loads(replay.read_text())
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    start = time.perf_counter()
    mocks.set_mocks(EchoMocks(), project="inference-fleet", stack="bench", preview=False)
    count = register(entries)
    loop.run_until_complete(pulumi_stack.wait_for_rpcs())
    total = time.perf_counter() - start
    custom = sum(1 for entry in entries if entry["custom"])
    return {"total_s": total, "program_s": total, "write_s": 0.0, "resources": count + 1, "custom": custom, "types": {}}
