"""The engine the real-engine tests run: built by `make test` and never by `make plan`, from the
versions pinned in tools/engine/*/go.mod, held to the Python SDKs requirements.txt pins."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.cluster.namespace import ROOT
from tests.engine.conftest import BUILD, engine_build
from tests.unit.test_makefile import planned_commands

MODULES = BUILD.parent
DOCS = ROOT / "docs" / "real-engine.md"


def _required(go_mod: Path, module: str) -> str:
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(module)} v(\S+)", go_mod.read_text(), re.MULTILINE)
    assert found, f"{go_mod} requires no {module}"
    return found.group(1)


def _pinned(package: str) -> str:
    found = re.search(rf"^{re.escape(package)}==(\S+)", (ROOT / "requirements.txt").read_text(), re.MULTILINE)
    assert found, f"requirements.txt pins no {package}"
    return found.group(1)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


CLI = _required(MODULES / "cli" / "go.mod", "github.com/pulumi/pulumi/pkg/v3")
PROVIDER = _required(MODULES / "provider" / "go.mod", "github.com/pulumi/pulumi-kubernetes/sdk/v4")


def test_make_test_builds_the_engine_and_make_plan_never_does() -> None:
    assert "tools/engine/build.sh" in planned_commands("test")
    assert "tools/engine/build.sh" not in planned_commands("plan")


def test_the_cli_is_at_least_as_new_as_the_python_sdk() -> None:
    """The CLI must understand what the SDK the program runs with asks of it (Pulumi supports a CLI
    newer than the SDK, not the reverse); the Automation API checks only its own floor (3.1.0)."""
    assert _release(CLI) >= _release(_pinned("pulumi"))


def test_the_provider_and_the_sdk_differ_only_as_docs_say() -> None:
    """The provider the Go module proxy serves (4.25.0) is older than the SDK the program pins: the
    tests run the program's own SDK against it, and docs/real-engine.md says what that leaves
    untested. Moving either pin fails here until the page is revisited."""
    sdk = _pinned("pulumi-kubernetes")
    assert _release(PROVIDER)[0] == _release(sdk)[0]
    assert _release(PROVIDER) <= _release(sdk)
    text = DOCS.read_text()
    assert f"provider {PROVIDER}" in text
    assert f"SDK {sdk}" in text


def test_the_binaries_are_the_pinned_releases() -> None:
    build = engine_build()
    printed = subprocess.run([str(build / "bin" / "pulumi"), "version"], capture_output=True, text=True, check=True)
    assert printed.stdout.strip() == f"v{CLI}"
    # The schema the provider embeds carries its release (tools/engine/provider/embed/main.go).
    provider = build / "bin" / "pulumi-resource-kubernetes"
    found = subprocess.run(
        ["grep", "-c", "-F", f'"version":"{PROVIDER}"', str(provider)], capture_output=True, check=False
    )
    assert found.returncode == 0, f"{provider} embeds no schema of version {PROVIDER}"
