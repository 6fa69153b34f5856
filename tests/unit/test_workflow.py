"""The pull-request workflow is valid YAML that uses only real, pinned actions and the
project's own commands."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "pull-request.yml"

# Each with the inputs this workflow may pass (from the action's action.yml).
ACTIONS: dict[str, set[str]] = {
    "actions/checkout@v4": {"fetch-depth"},
    "actions/setup-python@v5": {"python-version"},
    "actions/github-script@v7": {"script"},
    "aws-actions/configure-aws-credentials@v4": {"role-to-assume", "aws-region"},
    "pulumi/actions@v6": {"command", "stack-name", "diff", "comment-on-pr", "policyPacks"},
}


def workflow() -> dict[str, Any]:
    document: dict[str, Any] = YAML(typ="safe", pure=True).load(WORKFLOW.read_text())
    return document


def steps() -> list[dict[str, Any]]:
    return [step for job in workflow()["jobs"].values() for step in job["steps"]]


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))


def test_it_runs_on_pull_requests_with_read_only_contents_by_default() -> None:
    document = workflow()
    assert document["on"] == {"pull_request": {"branches": ["main"]}}
    assert document["permissions"] == {"contents": "read"}
    assert set(document["jobs"]) == {"test", "offline-plan-diff", "preview"}


def test_every_action_is_a_known_release_given_only_inputs_it_takes() -> None:
    for step in steps():
        if "uses" in step:
            assert step["uses"] in ACTIONS, step["uses"]
            assert set(step.get("with", {})) <= ACTIONS[step["uses"]], step


def test_every_command_is_one_of_the_projects_own() -> None:
    targets = make_targets()
    for step in steps():
        script = step.get("run", "")
        for target in re.findall(r"\bmake ([a-z][a-z-]*)", script):
            assert target in targets, target
        for command in re.findall(r"\.venv/bin/fleetctl (\w+)", script):
            assert command in {"diff", "plan", "validate"}, command
        if ".ci/run" in script:
            assert (ROOT / ".ci" / "run").exists()


def test_the_real_preview_runs_the_policy_pack_only_where_credentials_are_configured() -> None:
    preview = workflow()["jobs"]["preview"]
    assert "vars.AWS_ROLE_ARN" in preview["if"]
    pulumi = next(step for step in preview["steps"] if step.get("uses", "").startswith("pulumi/actions"))
    assert pulumi["with"]["policyPacks"] == "policy"
    assert (ROOT / "policy" / "PulumiPolicy.yaml").exists()
    assert pulumi["env"] == {"PULUMI_ACCESS_TOKEN": "${{ secrets.PULUMI_ACCESS_TOKEN }}"}


def test_every_run_script_is_valid_bash() -> None:
    for step in steps():
        if "run" in step:
            checked = subprocess.run(["bash", "-n"], input=step["run"], text=True, capture_output=True, check=False)
            assert checked.returncode == 0, checked.stderr


def plan_diff_script() -> str:
    job = workflow()["jobs"]["offline-plan-diff"]
    return str(next(step["run"] for step in job["steps"] if step.get("name", "").startswith("Plan every")))


BOTH = ["stacks/Pulumi.dev.yaml", "stacks/Pulumi.prod.yaml"]


@pytest.mark.parametrize(
    ("changed", "diffed"),
    [
        ("components/render/route.py", BOTH),
        ("config/pins.yaml", BOTH),
        ("requirements.txt", BOTH),
        ("constraints.txt", BOTH),
        ("__main__.py", BOTH),
        ("fleetctl/mocks.py", BOTH),
        ("stacks/Pulumi.dev.yaml", ["stacks/Pulumi.dev.yaml"]),
        ("README.md", []),
    ],
)
def test_the_offline_plan_diff_plans_every_stack_when_what_a_plan_depends_on_changed(
    changed: str, diffed: list[str], tmp_path: Path
) -> None:
    repository = tmp_path / "repo"
    files = [*BOTH, "components/render/route.py", "config/pins.yaml", "requirements.txt", "constraints.txt"]
    for name in [*files, "__main__.py", "fleetctl/mocks.py", "README.md"]:
        (repository / name).parent.mkdir(parents=True, exist_ok=True)
        (repository / name).write_text("before\n")
    fleetctl = repository / ".venv" / "bin" / "fleetctl"
    fleetctl.parent.mkdir(parents=True)
    fleetctl.write_text('#!/bin/sh\necho "$*" >> "$FLEETCTL_CALLS"\nexit 2\n')
    fleetctl.chmod(0o755)

    def git(*arguments: str) -> None:
        command = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *arguments]
        subprocess.run(command, cwd=repository, check=True, capture_output=True)

    git("init", "--quiet")
    git("add", "--", *files, "__main__.py", "fleetctl/mocks.py", "README.md")
    git("commit", "--quiet", "-m", "base")
    git("branch", "base")
    (repository / changed).write_text("after\n")
    git("commit", "--quiet", "-am", "change")
    calls = tmp_path / "calls"
    calls.touch()
    environment = {**os.environ, "BASE": "base", "FLEETCTL_CALLS": str(calls)}
    ran = subprocess.run(
        ["bash", "-e", "-c", plan_diff_script()], cwd=repository, env=environment, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    assert calls.read_text().splitlines() == [f"diff --base-ref base {name} --output markdown" for name in diffed]
    summary = (repository / "diff.md").read_text()
    assert ("every stack is planned" in summary) == (diffed == BOTH and not changed.startswith("stacks/"))
