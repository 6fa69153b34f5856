"""Runs the pack's policies, built with the real pulumi-policy SDK, over the resources of
offline plans (plan.json), the way the engine hands a stack to a stack policy. Prints one
JSON object: plan path -> [[policy, urn, message], ...]. Run with the pack's virtualenv."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pack import policies
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    StackValidationArgs,
)


def policy_resources(entries: list[dict[str, Any]]) -> list[PolicyResource]:
    by_urn: dict[str, PolicyResource] = {}
    for entry in entries:
        options = PolicyResourceOptions(
            protect=bool(entry["options"].get("protect", False)),
            ignore_changes=[],
            delete_before_replace=None,
            aliases=[],
            custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
            additional_secret_outputs=[],
            parent=entry.get("parent"),
        )
        provider = None
        if entry.get("provider"):
            provider = PolicyProviderResource("pulumi:providers", {}, entry["provider"], entry["provider"])
        by_urn[entry["urn"]] = PolicyResource(
            entry["type"], entry["inputs"], entry["urn"], entry["name"], options, provider, None, [], {}
        )
    for entry in entries:
        parent = entry.get("parent")
        if parent in by_urn:
            by_urn[entry["urn"]].parent = by_urn[parent]
    return list(by_urn.values())


def violations(resources: list[PolicyResource]) -> list[list[str | None]]:
    found: list[list[str | None]] = []
    for policy in policies():

        def report(message: str, urn: str | None = None, name: str = policy.name) -> None:
            found.append([name, urn, message])

        policy.validate(StackValidationArgs(resources), report)
    return found


def main() -> None:
    results = {
        path: violations(policy_resources(json.loads(Path(path).read_text())["resources"])) for path in sys.argv[1:]
    }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
