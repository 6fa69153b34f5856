"""Every `fleetctl` edit the update tests cover on dev (tests/cluster/test_updates.py EDITS), on dev
moved onto the local cluster: the steps the real engine's preview takes per URN are the verdicts
`fleetctl diff` gives (create, update, replace, delete), and the `up` converges. Where the two
disagree the engine is right: fleetctl/replacements.py is what to fix, and docs/real-engine.md
lists what was found."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetctl.cli import main as fleetctl
from fleetctl.diff.engine import CREATE, DELETE, REPLACE, UPDATE, diff_plans
from fleetctl.plan import run_program
from fleetctl.replacements import is_kubernetes_object
from fleetctl.stackfile import read_stack_file
from tests.cluster.kube import Kube
from tests.cluster.local_cluster import replace_nodes
from tests.cluster.stacks import spec_of
from tests.cluster.test_updates import EDITS
from tests.engine.engine import Engine
from tests.engine.present import install_crds, present_addons
from tests.engine.stacks import local_config, write_stack_file

pytestmark = pytest.mark.engine

PROGRAM = "tests.engine.programs:project"
PROJECT = "inference-fleet"
DEV_EDITS = [edit[1:] for edit in EDITS if edit[0] == "dev"]
ACTIONS = {
    "create": CREATE,
    "update": UPDATE,
    "delete": DELETE,
    "replace": REPLACE,
    "create-replacement": REPLACE,
    "delete-replaced": REPLACE,
}
"""The engine's step ops (pulumi.automation.OpType) as `fleetctl diff` names the action."""


def _config(stack_file: Path) -> dict[str, Any]:
    return {f"inference-fleet:{key}": value for key, value in read_stack_file(stack_file).project_config.items()}


def engine_actions(steps: list[dict[str, str]]) -> dict[str, str]:
    """URN -> the action of the engine's steps on each Kubernetes object it would change."""
    found: dict[str, str] = {}
    for step in steps:
        if step["op"] in ACTIONS and is_kubernetes_object(step["type"]):
            found[step["urn"]] = ACTIONS[step["op"]]
    return found


def diff_actions(base: Path, head: Path) -> dict[str, str]:
    """URN -> the action `fleetctl diff` gives each Kubernetes object (offline plans of both files)."""
    documents = [json.loads(run_program(read_stack_file(path)).to_json()) for path in (base, head)]
    return {c.urn: c.action for c in diff_plans(*documents).resources if is_kubernetes_object(c.type)}


@pytest.fixture(scope="module")
def dev_up(
    local_cluster: tuple[Kube, Engine], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Engine, Path]]:
    """Dev on the local cluster, up; destroyed after the module's tests."""
    kube, engine = local_cluster
    base = write_stack_file(local_config("dev"), tmp_path_factory.mktemp("dev") / "Pulumi.dev.yaml")
    replace_nodes(kube, spec_of(base).regions["us-west-2"])
    install_crds(kube)
    with present_addons(kube):
        engine.run(PROGRAM, "dev", "up", _config(base), project=PROJECT)
        yield engine, base
        engine.run(PROGRAM, "dev", "destroy", _config(base), project=PROJECT)


@pytest.mark.parametrize("edit", DEV_EDITS, ids=["-".join(edit[:2]) for edit in DEV_EDITS])
def test_the_engine_takes_the_steps_the_diff_promises(
    dev_up: tuple[Engine, Path],
    edit: tuple[str, ...],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine, base = dev_up
    head = tmp_path / "Pulumi.dev.yaml"
    shutil.copyfile(base, head)
    assert fleetctl([*edit, "--stack-file", str(head)]) == 0
    capsys.readouterr()
    promised = diff_actions(base, head)
    assert promised, "the edit changes no Kubernetes object"
    preview = engine.run(PROGRAM, "dev", "preview", _config(head), project=PROJECT)
    assert engine_actions(preview["steps"]) == promised
    try:
        engine.run(PROGRAM, "dev", "up", _config(head), project=PROJECT)
    finally:
        engine.run(PROGRAM, "dev", "up", _config(base), project=PROJECT)  # the next edit starts from dev again
