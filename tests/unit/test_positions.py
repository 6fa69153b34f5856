"""Problems placed in their stack file: a dotted path walked down ruamel's round-trip tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.spec import Problem
from fleetctl.positions import locate

STACK = """\
# a comment line
config:
  aws:profile: inference-platform
  inference-fleet:regions:
    us-east-1:
      vpc: {cidr: 10.0.0.0/16, availability_zones: [us-east-1a, us-east-1b]}
      node_groups:
        gpu:
          instance_types:
            - g6e.12xlarg
  endpoints:
    chat:
      nod_group: gpu
      labels: {app.kubernetes.io/name: chat}
    7: {}
"""


@pytest.mark.parametrize(
    ("path", "place"),
    [
        ("regions", (4, 3)),
        ("regions.us-east-1.vpc.availability_zones[1]", (6, 65)),
        ("regions.us-east-1.vpc.cidr", (6, 13)),
        ("regions.us-east-1.node_groups.gpu.instance_types[0]", (10, 15)),
        ("endpoints.chat.nod_group", (13, 7)),
        ("endpoints.chat.labels['app.kubernetes.io/name']", (14, 16)),
        ("endpoints.7", (15, 5)),
        # A missing key is placed at the mapping that lacks it.
        ("endpoints.chat.model", (12, 5)),
    ],
    ids=[
        "namespaced project key",
        "flow list item",
        "flow mapping key",
        "block list item",
        "unknown key",
        "key with dots",
        "integer key",
        "missing key at its parent",
    ],
)
def test_a_config_path_is_placed_at_its_key_or_item(path: str, place: tuple[int, int], tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(STACK)
    [located] = locate([Problem(path, "m")], stack)
    assert (located.file, located.line, located.column) == (str(stack), *place)


@pytest.mark.parametrize(
    "path",
    ["endpoints.embed.model", "regions.us-east-1.vpc.availability_zones[3].x", "zones", "", "a..b"],
    ids=["two levels missing", "below an index past the end", "absent project key", "no path", "not a dotted path"],
)
def test_a_path_the_file_does_not_hold_gets_no_position(path: str, tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(STACK)
    assert locate([Problem(path, "m")], stack) == (Problem(path, "m"),)
    assert locate([Problem(path, "m")], stack)[0].position == ""


def test_a_file_that_does_not_parse_or_exist_leaves_problems_as_they_were(tmp_path: Path) -> None:
    problems = [Problem("endpoints.chat", "m")]
    assert locate(problems, tmp_path / "missing.yaml") == tuple(problems)
    broken = tmp_path / "broken.yaml"
    broken.write_text("config: [unclosed\n")
    assert locate(problems, broken) == tuple(problems)


def test_the_bytes_given_are_placed_not_the_file_on_disk(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text("config: {}\n")
    [located] = locate([Problem("endpoints.chat.nod_group", "m")], stack, STACK.encode())
    assert (located.line, located.column) == (13, 7)
