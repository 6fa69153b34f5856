"""The real Pulumi engine, driven from the tests: each operation runs tests/engine/driver.py in the
local cluster's network namespace (``nsenter --net``), with the CLI and the Kubernetes provider
that tools/engine/build.sh built first on PATH, a file backend and a passphrase secrets provider
under the session's work directory, and nothing fetched (automatic plugin acquisition off)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster.namespace import ROOT

PASSPHRASE = "engine-tests-passphrase"
OPERATION_SECONDS = 900
"""Far above any operation here (an `up` of a region's workloads takes under a minute); the
provider's own awaits time out at 10 minutes, and their message is what a failing test shows."""


class EngineError(AssertionError):
    """The engine refused or failed an operation; the message is the CLI's."""


@dataclass(frozen=True)
class Engine:
    build: Path
    """tools/engine/build.sh's directory: bin/ holds pulumi and pulumi-resource-kubernetes."""
    namespace_pid: int
    kubeconfig: Path
    work: Path

    @property
    def state(self) -> Path:
        """The file backend's directory: every stack's state (``.pulumi/stacks/<project>/<stack>.json``)."""
        return self.work / "state"

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "PATH": f"{self.build / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "PULUMI_BACKEND_URL": f"file://{self.state}",
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_HOME": str(self.work / "home"),
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "KUBECONFIG": str(self.kubeconfig),
        }

    def run(
        self,
        program: str,
        stack: str,
        operation: str,
        config: Mapping[str, Any] | None = None,
        secrets: Collection[str] = (),
        project: str = "engine-tests",
    ) -> dict[str, Any]:
        """``operation`` on ``stack`` of ``program`` (``module:function``); the driver's result.
        Raises EngineError with the CLI's output if the engine failed."""
        self.state.mkdir(parents=True, exist_ok=True)
        request = {
            "program": program,
            "project": project,
            "stack": stack,
            "work": str(self.work / "projects" / project),
            "config": dict(config or {}),
            "secrets": sorted(secrets),
            "operation": operation,
            "result": str(self.work / "result.json"),
        }
        (self.work / "result.json").unlink(missing_ok=True)
        finished = subprocess.run(
            ["nsenter", f"--net=/proc/{self.namespace_pid}/ns/net", sys.executable, "-m", "tests.engine.driver"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=self.environment(),
            timeout=OPERATION_SECONDS,
            check=False,
        )
        if finished.returncode != 0:
            raise EngineError(f"the driver failed ({finished.returncode}):\n{finished.stderr[-6000:]}")
        result: dict[str, Any] = json.loads((self.work / "result.json").read_text())
        if "error" in result:
            raise EngineError(f"pulumi {operation} of {stack} failed:\n{result['error'][-6000:]}")
        return result


def changed(result: Mapping[str, Any]) -> dict[str, str]:
    """URN -> op of every step that is not ``same`` (what the engine would do, or did)."""
    return {step["urn"]: step["op"] for step in result["steps"] if step["op"] != "same"}
