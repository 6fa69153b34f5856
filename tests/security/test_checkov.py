"""checkov over every rendered manifest of both example stacks: no finding but the
documented, reasoned skips of checkov_skips.yaml (and no skip that matches nothing)."""

from __future__ import annotations

import json
import subprocess
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from fleetctl.plan import write_plan
from tests.component.programs import example_plan

ROOT = Path(__file__).resolve().parents[2]
CHECKOV = ROOT / "tools" / "checkov" / "venv" / "bin" / "checkov"
SKIPS = Path(__file__).with_name("checkov_skips.yaml")


def skips() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = YAML(typ="safe", pure=True).load(SKIPS.read_text())
    return entries


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, str]]:
    """(check, component, resource) of every failed check."""
    if not CHECKOV.exists():
        pytest.fail("tools/checkov/venv is missing: `make test` builds checkov's virtualenv")
    root = tmp_path_factory.mktemp("manifests")
    for stack in ("dev", "prod"):
        write_plan(example_plan(stack), root / stack)
    completed = subprocess.run(
        [str(CHECKOV), "-d", str(root), "--framework", "kubernetes", "--quiet", "--compact", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode in (0, 1), completed.stderr[-2000:]  # 1: some check failed
    reports = json.loads(completed.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    assert sum(report["summary"]["passed"] for report in reports) > 500  # it really scanned
    found = []
    for report in reports:
        for failure in report["results"]["failed_checks"]:
            manifest = YAML(typ="safe", pure=True).load((root / failure["file_path"].lstrip("/")).read_text())
            component = manifest["metadata"]["labels"].get("app.kubernetes.io/component", "")
            found.append((failure["check_id"], component, failure["resource"]))
    return found


def skipped(check: str, component: str) -> bool:
    return any(
        entry["check"] == check and any(fnmatch(component, pattern) for pattern in entry["components"])
        for entry in skips()
    )


def test_no_finding_but_the_documented_skips(findings: list[tuple[str, str, str]]) -> None:
    unexplained = sorted({finding for finding in findings if not skipped(finding[0], finding[1])})
    assert unexplained == []


def test_every_skip_is_needed_and_gives_its_reason(findings: list[tuple[str, str, str]]) -> None:
    for entry in skips():
        assert len(entry["reason"]) > 40, entry["check"]
        assert any(check == entry["check"] for check, _, _ in findings), f"{entry['check']} matches nothing: remove it"


def test_the_helpers_pass_the_checks_the_servers_are_excused_from(findings: list[tuple[str, str, str]]) -> None:
    helpers = {(check, resource) for check, component, resource in findings if component == "proxy"}
    assert not {check for check, _ in helpers} & {"CKV_K8S_22", "CKV_K8S_23", "CKV_K8S_40"}
