"""How problems are written for the person editing the stack file."""

from __future__ import annotations

import ast
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.spec import Problem, SpecError, parse_stack_config
from components.spec.errors import dotted, root_causes, undotted, within

from .stack_builders import DELETE, classic_endpoint, region, stack_config, with_classic

fast = settings(max_examples=200, deadline=None)
plain_keys = st.from_regex(r"\A[A-Za-z0-9_-]{1,12}\Z")
_LINE = re.compile(r"^error: (?P<path>\S+): (?P<message>.+)$")


def problems_of(config: dict[str, object]) -> tuple[Problem, ...]:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(config)
    return caught.value.problems


def test_a_problem_is_one_line_error_path_message() -> None:
    assert str(Problem("endpoints.chat.gpu_count", "must be an integer >= 0, got -1 (a number)")) == (
        "error: endpoints.chat.gpu_count: must be an integer >= 0, got -1 (a number)"
    )


def test_a_problem_without_a_path_is_error_message() -> None:
    assert str(Problem("", "the stack file is empty")) == "error: the stack file is empty"


def test_spec_error_text_is_one_line_per_problem_in_order() -> None:
    error = SpecError([Problem("a", "first"), Problem("b.c", "second")])
    assert str(error) == "error: a: first\nerror: b.c: second"
    assert error.problems == (Problem("a", "first"), Problem("b.c", "second"))


def test_every_line_of_a_real_error_has_the_format() -> None:
    config = stack_config(
        regions={"us-east-1": region({"kubernetes_version": 1.33}), "mars-1": region(name="mars-1")},
        endpoints={"chat": classic_endpoint({"gpu_count": "8", "args": ["--x", 5]})},
    )
    with pytest.raises(SpecError) as caught:
        parse_stack_config(config)
    lines = str(caught.value).splitlines()
    assert len(lines) == len(caught.value.problems) == 4
    for line, problem in zip(lines, caught.value.problems, strict=True):
        match = _LINE.match(line)
        assert match is not None, line
        assert (match["path"], match["message"]) == (problem.path, problem.message)


@pytest.mark.parametrize(
    ("parts", "path"),
    [
        (["regions", "us-east-1", "node_groups", "p5", "max_size"], "regions.us-east-1.node_groups.p5.max_size"),
        (["endpoints", "chat", "args", 0], "endpoints.chat.args[0]"),
        (["endpoints", "chat", "target_regions", 1, "x"], "endpoints.chat.target_regions[1].x"),
        ([0, "a"], "[0].a"),
        (["endpoints", "chat", "labels", "app.kubernetes.io/name"], "endpoints.chat.labels['app.kubernetes.io/name']"),
        (["env", "A B"], "env['A B']"),
        (["env", ""], "env['']"),
        (["labels", "it's"], 'labels["it\'s"]'),
        (["m", "a[0]"], "m['a[0]']"),
        (["x.y"], "['x.y']"),
    ],
    ids=[
        "names_join_with_dots",
        "list_index_in_brackets",
        "index_then_name",
        "leading_index",
        "key_with_dots_bracketed_and_quoted",
        "key_with_space",
        "empty_key",
        "key_with_a_quote",
        "key_with_brackets",
        "leading_key_with_a_dot",
    ],
)
def test_dotted_paths(parts: list[str | int], path: str) -> None:
    assert dotted(parts) == path


@fast
@given(st.lists(plain_keys, min_size=1, max_size=6))
def test_plain_keys_join_with_dots(keys: list[str]) -> None:
    assert dotted(keys) == ".".join(keys)


@fast
@given(plain_keys, st.integers(min_value=0, max_value=10_000))
def test_list_indices_render_in_brackets(key: str, index: int) -> None:
    assert dotted([key, index]) == f"{key}[{index}]"


@fast
@given(plain_keys, st.text(max_size=12).filter(lambda key: not key or any(c in key for c in ". []\"'")))
def test_keys_that_would_be_ambiguous_render_as_a_quoted_literal(parent: str, key: str) -> None:
    path = dotted([parent, key])
    assert path.startswith(f"{parent}[")
    assert path.endswith("]")
    assert ast.literal_eval(path[len(parent) + 1 : -1]) == key


def test_model_errors_render_list_indices_in_brackets() -> None:
    [problem] = problems_of(with_classic({"args": ["--max-model-len", 4096]}))
    assert str(problem) == "error: endpoints.chat.args[1]: must be a string, got 4096 (a number); quote it"


def test_model_errors_render_dotted_map_keys_bracketed() -> None:
    [problem] = problems_of(with_classic({"node_selector": {"topology.kubernetes.io/zone": 1}}))
    assert problem.path == "endpoints.chat.node_selector['topology.kubernetes.io/zone']"


def test_problems_are_sorted_by_path() -> None:
    config = stack_config(
        regions={"us-east-1": region(), "zz-top-1": region(name="zz-top-1")},
        endpoints={
            "zeta": classic_endpoint({"gpu_count": 5, "target_regions": ["us-east-1"]}),
            "alpha": classic_endpoint({"port": 0}),
            "mid": classic_endpoint({"replicas": True}),
        },
    )
    paths = [problem.path for problem in problems_of(config)]
    assert paths == [
        "endpoints.alpha.port",
        "endpoints.mid.replicas",
        "endpoints.zeta.gpu_count",
        "regions.zz-top-1",
    ]


def test_problems_sharing_a_path_are_ordered_by_message() -> None:
    names = ["us-east-1", "us-east-2", "us-west-1", "us-west-2", "eu-west-1", "eu-west-2", "eu-central-1", "ap-south-1"]
    config = stack_config(
        regions={name: region(name=name) for name in names},
        endpoints={"wide": classic_endpoint({"gpu_count": 5})},
    )
    problems = problems_of(config)
    assert len(problems) == len(names)
    assert list(problems) == sorted(problems)


def test_identical_problems_are_reported_once() -> None:
    # YAML can give both the int key 1 and the string key "1"; both fail the same name rule.
    problems = problems_of(stack_config(endpoints={1: classic_endpoint(), "1": classic_endpoint()}))  # type: ignore[dict-item]
    assert [str(problem) for problem in problems if "DNS-1035" in problem.message] == [
        "error: endpoints.1: endpoint name '1' must be a DNS-1035 label (lowercase letters, digits and '-', starting "
        "with a letter) of at most 44 characters, so that '<name>-prefill' fits a StatefulSet name"
    ]
    assert len(problems) == len(set(problems)) == 2


# Positions: a problem placed in its file leads with file:line:column, as compilers write it.


def test_a_placed_problem_leads_with_file_line_and_column() -> None:
    problem = Problem("endpoints.chat.nod_group", "unknown key", file="Pulumi.dev.yaml", line=12, column=7)
    assert str(problem) == "error: Pulumi.dev.yaml:12:7: endpoints.chat.nod_group: unknown key"
    assert problem.as_json() == {
        "path": "endpoints.chat.nod_group",
        "message": "unknown key",
        "file": "Pulumi.dev.yaml",
        "line": 12,
        "column": 7,
    }


def test_a_problem_of_the_file_itself_names_the_file_once() -> None:
    problem = Problem("x.yaml", "is not valid YAML: found a tab", file="x.yaml", line=3, column=1)
    assert str(problem) == "error: x.yaml:3:1: is not valid YAML: found a tab"


def test_a_position_does_not_make_two_problems_differ() -> None:
    placed = Problem("a.b", "m", file="f", line=1, column=2)
    assert placed == Problem("a.b", "m")
    assert len({placed, Problem("a.b", "m")}) == 1
    assert Problem("a.b", "m").as_json() == {"path": "a.b", "message": "m"}


@fast
@given(st.lists(st.one_of(st.integers(min_value=0, max_value=10_000), st.text(max_size=8)), min_size=1, max_size=6))
def test_undotted_reads_back_what_dotted_wrote(parts: list[str | int]) -> None:
    assert undotted(dotted(parts)) == parts


@pytest.mark.parametrize("text", [".a", "a..b", "a.", "a[x]", "a[0]b", "a['unclosed", "a[", "a['x'"])
def test_undotted_refuses_what_dotted_never_writes(text: str) -> None:
    assert undotted(text) is None


# Suggestions.


def test_an_unknown_key_close_to_an_allowed_one_names_it() -> None:
    [problem] = problems_of(with_classic({"node_group": "gpu", "nod_group": "gpu"}))
    assert str(problem) == "error: endpoints.chat.nod_group: unknown key; did you mean 'node_group'?"


def test_a_misspelled_instance_type_names_the_catalog_type_it_resembles() -> None:
    config = stack_config(region_overrides={"node_groups": {"gpu": {"instance_types": ["g6e.12xlarg"]}}})
    [problem] = problems_of(config)
    assert problem.path == "regions.us-east-1.node_groups.gpu.instance_types[0]"
    assert "unknown instance type 'g6e.12xlarg'" in problem.message
    assert problem.message.endswith("(did you mean 'g6e.12xlarge'?)")


def test_a_misspelled_region_code_names_the_region_it_resembles() -> None:
    [problem] = problems_of(stack_config(regions={"us-esat-1": region(name="us-esat-1")}))
    assert problem.message == "'us-esat-1' is not an AWS region code (did you mean 'us-east-1'?)"


# One cause, one error: what follows from a problem is not reported beside it.


def test_an_unknown_instance_type_is_reported_alone_not_after_what_follows_from_it() -> None:
    """The GPU group's type is misspelled; three endpoints default to it. Before, the three
    "no GPU node group to default to" lines came first (they sort earlier), the cause last."""
    config = stack_config(
        region_overrides={"node_groups": {"p5": DELETE, "gpu": {"instance_types": ["g6e.12xlarg"]}}},
        endpoints={name: classic_endpoint({"node_group": DELETE}) for name in ("a", "b", "c")},
    )
    problems = problems_of(config)
    assert [problem.path for problem in problems] == ["regions.us-east-1.node_groups.gpu.instance_types[0]"]
    assert "to default to" not in str(SpecError(problems))


def test_a_system_group_of_unknown_type_is_not_also_reported_missing() -> None:
    config = stack_config(region_overrides={"node_groups": {"system": {"instance_types": ["m7i.xlarg"]}}})
    assert [problem.path for problem in problems_of(config)] == [
        "regions.us-east-1.node_groups.system.instance_types[0]"
    ]


def test_a_misspelled_vpc_zone_is_not_also_a_node_group_zone_outside_the_vpc() -> None:
    config = stack_config(region_overrides={"vpc": {"availability_zones": ["us-east-1a", "us-east1b"]}})
    config["regions"]["us-east-1"]["node_groups"]["gpu"]["availability_zone"] = "us-east-1b"
    assert [problem.path for problem in problems_of(config)] == ["regions.us-east-1.vpc.availability_zones[1]"]


def test_a_consequence_is_reported_when_nothing_it_follows_from_is_wrong() -> None:
    config = stack_config(
        region_overrides={"node_groups": {"p5": DELETE, "gpu": DELETE}},
        endpoints={"chat": classic_endpoint({"node_group": DELETE})},
    )
    [problem] = problems_of(config)
    assert problem.message.startswith("us-east-1 has no nvidia GPU node group to default to")


def test_root_causes_drops_a_problem_only_for_another_at_or_below_what_it_follows_from() -> None:
    cause = Problem("regions.r.node_groups.gpu.instance_types[0]", "unknown")
    consequence = Problem("endpoints.a.node_group", "no group", follows_from=("regions.r.node_groups.gpu",))
    unrelated = Problem("endpoints.b.node_group", "no group", follows_from=("regions.r.node_groups.gp",))
    assert root_causes([consequence, cause, unrelated]) == [cause, unrelated]
    assert root_causes([consequence]) == [consequence]
    assert [within(path, "a") for path in ("a.b", "a[0]", "a", "ab", "b.a")] == [True, True, True, False, False]
    assert not within("a.bc", "a.b")
