"""Every `fleetctl` edit the update tests cover (tests/cluster/test_updates.py EDITS), on dev and on prod's
first region moved onto the local cluster (tests/engine/stacks.py): the steps the real engine's preview
takes per URN are the verdicts `fleetctl diff` gives (create, update, replace, delete), and the `up`
converges. Where the two disagree the engine is right: fleetctl/replacements.py is what to fix, and
docs/real-engine.md lists what was found."""

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
from tests.engine.present import install_present, present_addons
from tests.engine.stacks import SECRETS, engine_config, local_config, write_stack_file

pytestmark = pytest.mark.engine

PROGRAM = "tests.engine.programs:project"
PROJECT = "inference-fleet"
REGION = {"dev": "us-west-2", "prod": "us-east-1"}
"""The region of each stack the edits run on (the local cluster is one region)."""
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
    config = {f"inference-fleet:{key}": value for key, value in read_stack_file(stack_file).project_config.items()}
    return engine_config(config)


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


def edits_of(stack: str) -> list[tuple[str, ...]]:
    return [edit[1:] for edit in EDITS if edit[0] == stack]


def ids_of(stack: str) -> list[str]:
    return ["-".join(edit[:2]) for edit in edits_of(stack)]


@pytest.fixture(scope="class")
def stack_up(
    request: pytest.FixtureRequest, local_cluster: tuple[Kube, Engine], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Engine, str, Path]]:
    """The class's stack (its region) on the local cluster, up; destroyed after the class's edits."""
    kube, engine = local_cluster
    stack: str = request.cls.STACK
    base = write_stack_file(local_config(stack, REGION[stack]), tmp_path_factory.mktemp(stack) / f"Pulumi.{stack}.yaml")
    replace_nodes(kube, spec_of(base).regions[REGION[stack]])
    install_present(kube)
    with present_addons(kube):
        engine.run(PROGRAM, stack, "up", _config(base), SECRETS, project=PROJECT)
        yield engine, stack, base
        engine.run(PROGRAM, stack, "destroy", _config(base), SECRETS, project=PROJECT)


class EditsOfAStack:
    STACK: str

    def test_the_engine_takes_the_steps_the_diff_promises(
        self,
        stack_up: tuple[Engine, str, Path],
        edit: tuple[str, ...],
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        engine, stack, base = stack_up
        head = tmp_path / base.name
        shutil.copyfile(base, head)
        assert fleetctl([*edit, "--stack-file", str(head)]) == 0
        capsys.readouterr()
        promised = diff_actions(base, head)
        assert promised, "the edit changes no Kubernetes object"
        preview = engine.run(PROGRAM, stack, "preview", _config(head), SECRETS, project=PROJECT)
        assert engine_actions(preview["steps"]) == promised
        try:
            engine.run(PROGRAM, stack, "up", _config(head), SECRETS, project=PROJECT)
        finally:  # the next edit starts from the stack as it was
            engine.run(PROGRAM, stack, "up", _config(base), SECRETS, project=PROJECT)


@pytest.mark.parametrize("edit", edits_of("dev"), ids=ids_of("dev"))
class TestDev(EditsOfAStack):
    STACK = "dev"


@pytest.mark.parametrize("edit", edits_of("prod"), ids=ids_of("prod"))
class TestProd(EditsOfAStack):
    STACK = "prod"
