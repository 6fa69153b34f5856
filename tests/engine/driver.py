"""One operation of the real Pulumi engine on an inline program, run by tests/engine/engine.py
inside the local cluster's network namespace: the Automation API serves the program to the
``pulumi`` CLI on a loopback port of this process, and the CLI and the Kubernetes provider it
starts reach the API server on the namespace's loopback, so the whole process lives there.

    python -m tests.engine.driver < request.json

The request names the program (``module:function``, called with no arguments inside the
engine's run), the project, stack and workspace directory, the stack's config and the operation
(``preview``, ``up``, ``destroy``, ``refresh``); the result holds each step the engine took or
would take (URN and op, from its own engine events; ``log`` also says when each finished), the
outputs, and the CLI's output. Nothing here decides anything: tests/engine/ judges the result.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pulumi import automation as auto


def _program(reference: str) -> Callable[[], None]:
    module, _, function = reference.partition(":")
    found: Callable[[], None] = getattr(importlib.import_module(module), function)
    return found


def run(request: dict[str, Any]) -> dict[str, Any]:
    work = Path(request["work"])
    work.mkdir(parents=True, exist_ok=True)
    stack = auto.create_or_select_stack(
        request["stack"],
        project_name=request["project"],
        program=_program(request["program"]),
        opts=auto.LocalWorkspaceOptions(
            work_dir=str(work),
            project_settings=auto.ProjectSettings(name=request["project"], runtime="python"),
        ),
    )
    config = {
        key: auto.ConfigValue(
            value=value if isinstance(value, str) else json.dumps(value), secret=key in request.get("secrets", ())
        )
        for key, value in request.get("config", {}).items()
    }
    if config:
        stack.set_all_config(config)
    steps: list[dict[str, str]] = []
    log: list[dict[str, str]] = []

    def on_event(event: auto.EngineEvent) -> None:
        for phase, happened in (("began", event.resource_pre_event), ("done", event.res_outputs_event)):
            if happened is not None:
                step = {
                    "urn": happened.metadata.urn,
                    "op": str(happened.metadata.op.value),
                    "type": happened.metadata.type,
                }
                log.append({**step, "phase": phase})
                if phase == "began":
                    steps.append(step)

    operation = request["operation"]
    result: dict[str, Any] = {"steps": steps, "log": log}
    if operation == "preview":
        preview = stack.preview(on_event=on_event, diff=True)
        result["stdout"] = preview.stdout
        result["summary"] = {str(k.value if hasattr(k, "value") else k): v for k, v in preview.change_summary.items()}
    elif operation == "up":
        up = stack.up(on_event=on_event)
        result["stdout"] = up.stdout
        result["summary"] = dict(up.summary.resource_changes or {})
        result["outputs"] = {key: value.value for key, value in up.outputs.items() if not value.secret}
    elif operation == "destroy":
        destroyed = stack.destroy(on_event=on_event)
        result["stdout"] = destroyed.stdout
        result["summary"] = dict(destroyed.summary.resource_changes or {})
    elif operation == "refresh":
        refreshed = stack.refresh(on_event=on_event)
        result["stdout"] = refreshed.stdout
        result["summary"] = dict(refreshed.summary.resource_changes or {})
    else:
        raise ValueError(f"unknown operation {operation}")
    return result


def main() -> int:
    request = json.load(sys.stdin)
    try:
        result = run(request)
    except auto.CommandError as error:
        result = {"error": str(error)}
    # To a file of its own: the program runs in this process and may print.
    Path(request["result"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
