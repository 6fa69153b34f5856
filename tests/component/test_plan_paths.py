"""The fast paths of ``fleetctl plan`` give the plan of the plain path byte for byte, the same plan.json and
manifests: fleetctl/plan.py ``_outputs_settled``, the remembered validation of components/validation.py, and
the recording that leaves source positions out (fleetctl/mocks.py). Held on the example stacks and a generated
stack of every endpoint mode in two regions, so any resource another change adds is compared too, with no
golden file to regenerate."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from benchmarks.stacks import STACK, stack_config, write_stack_file
from components import validation
from fleetctl.plan import Plan, ProgramError, manifest_files, run_program
from fleetctl.stackfile import StackFile, read_stack_file, stack_path


def _files(plan: Plan) -> dict[str, str]:
    return {"plan.json": plan.to_json(), **manifest_files(plan)}


def _plain(stack_file: StackFile) -> Plan:
    validation.forget()
    return run_program(stack_file, plain=True)


def _fast(stack_file: StackFile) -> Plan:
    validation.validate_stack(stack_file.project_config, stack=stack_file.stack)  # as `fleetctl plan` does first
    return run_program(stack_file)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_fast_path_plans_the_example_stacks_byte_for_byte_as_the_plain_one(stack: str) -> None:
    stack_file = read_stack_file(stack_path(stack))
    assert _files(_fast(stack_file)) == _files(_plain(stack_file))


def test_the_fast_path_plans_a_stack_of_every_mode_in_two_regions_byte_for_byte_as_the_plain_one(
    tmp_path: Path,
) -> None:
    stack_file = read_stack_file(write_stack_file(tmp_path / f"Pulumi.{STACK}.yaml", stack_config(4, 2)))
    fast, plain = _files(_fast(stack_file)), _files(_plain(stack_file))
    assert len(fast) > 40  # plan.json and the manifests of four endpoints in two regions
    assert fast == plain


def test_a_failed_output_is_reported_by_both_paths_alike(tmp_path: Path) -> None:
    """The fast path waits for the Outputs first but leaves reporting to the SDK's own wait."""
    program = tmp_path / "program.py"
    program.write_text(
        textwrap.dedent(
            """\
            import pulumi
            import pulumi_kubernetes as k8s

            namespace = k8s.core.v1.Namespace("ns", metadata={"name": "ns"})
            namespace.metadata.apply(lambda _: {}["no such key"])
            """
        )
    )
    stack_file = StackFile(path=tmp_path / "Pulumi.test.yaml", stack="test", project_config={}, engine_config={})
    messages = []
    for plain in (False, True):
        with pytest.raises(ProgramError) as failure:
            run_program(stack_file, program=program, plain=plain)
        messages.append(str(failure.value))
    assert messages[0] == messages[1] == "'no such key'"
