"""Running an end-to-end driver in a private network namespace (and mount namespace, for a
private /etc/hosts): nothing it starts can reach or be reached from outside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_driver(
    module: str, *args: str, mount: bool = False, env: dict[str, str] | None = None, timeout: float = 120
) -> dict[str, Any]:
    """``python -m module args`` under ``unshare``; the JSON object its last line prints."""
    assert os.geteuid() == 0, "the end-to-end tests make private network namespaces: run them as root"
    namespaces = ["-n", "-m"] if mount else ["-n"]
    completed = subprocess.run(
        ["unshare", *namespaces, sys.executable, "-m", module, *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result
