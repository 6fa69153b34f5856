"""Keys that are not the project's but look like it are refused, not planned as an empty fleet."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetctl.namespaces import edit_distance, foreign_key_problems
from fleetctl.stackfile import StackFileError, parse_stack_bytes, stack_path


def test_a_misspelled_namespace_of_the_endpoints_is_refused_naming_the_key_meant() -> None:
    text = stack_path("dev").read_text()
    assert text.count("inference-fleet:endpoints:") == 1
    misspelled = text.replace("inference-fleet:endpoints:", "inference_fleet:endpoints:").encode()
    with pytest.raises(StackFileError) as refused:
        parse_stack_bytes(Path("Pulumi.dev.yaml"), misspelled)
    line = text.splitlines().index("  inference-fleet:endpoints:") + 1
    assert [str(problem) for problem in refused.value.problems] == [
        f"error: Pulumi.dev.yaml:{line}:3: inference_fleet:endpoints: the namespace 'inference_fleet' is not "
        "this project's 'inference-fleet', so the program would never read this key; "
        "did you mean 'inference-fleet:endpoints'?"
    ]


@pytest.mark.parametrize(
    "key",
    [
        "inference_fleet:endpoints",
        "inferencefleet:regions",
        "Inference-Fleet:endpoints",
        "inference-fleet::endpoints",
        "infrence-flet:regions",
        "fleet:endpoints",
        "aws:endpoints",
        "inference:regions",
    ],
)
def test_keys_that_look_like_ours_are_refused(key: str) -> None:
    [problem] = foreign_key_problems([key])
    assert problem.path == key
    assert f"'inference-fleet:{key.rpartition(':')[2]}'" in problem.message


@pytest.mark.parametrize(
    "key", ["aws:region", "aws:profile", "kubernetes:context", "pulumi:tags", "regions", "inference-fleet:endpoints"]
)
def test_other_projects_keys_and_ours_pass(key: str) -> None:
    assert foreign_key_problems([key]) == []


def test_a_stack_file_with_none_of_our_keys_is_refused() -> None:
    text = b"config:\n  aws:profile: ops\n  other:thing: 1\n"
    with pytest.raises(StackFileError) as refused:
        parse_stack_bytes(Path("Pulumi.dev.yaml"), text)
    assert [str(problem) for problem in refused.value.problems] == [
        "error: Pulumi.dev.yaml: sets none of the project's keys (inference-fleet:regions, "
        "inference-fleet:endpoints, inference-fleet:global, inference-fleet:secrets): is it this project's stack file?"
    ]


def test_a_stack_file_with_only_regions_is_still_a_fleet_without_endpoints() -> None:
    text = b"config:\n  inference-fleet:regions: {}\n"
    assert parse_stack_bytes(Path("Pulumi.dev.yaml"), text).project_config == {"regions": {}}


@pytest.mark.parametrize(
    ("first", "second", "distance"),
    [("", "", 0), ("abc", "", 3), ("inference_fleet", "inference-fleet", 1), ("kitten", "sitting", 3)],
)
def test_edit_distance_counts_insertions_deletions_and_substitutions(first: str, second: str, distance: int) -> None:
    assert edit_distance(first, second) == distance
    assert edit_distance(second, first) == distance
