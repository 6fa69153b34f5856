"""How problems are written for the person editing the stack file."""

from __future__ import annotations

import ast
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.spec import Problem, SpecError, parse_stack_config
from components.spec.errors import dotted

from .stack_builders import classic_endpoint, region, stack_config, with_classic

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
