"""The pure middle of fleetctl's edits: indentation, comment-preserving tree edits,
the operations on a round-trip mapping, and the change list."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml.comments import CommentedMap

from fleetctl.edit import operations
from fleetctl.edit.document import (
    Change,
    Indentation,
    StackDocument,
    config_changes,
    detect_indentation,
    round_trip_yaml,
)
from fleetctl.edit.operations import EditError
from fleetctl.edit.tree import append_item, remove_entry, remove_item, set_entry
from fleetctl.stackfile import stack_path


def edited(text: str, edit: Callable[[CommentedMap], Any]) -> str:
    """``text`` after ``edit`` of its round-trip root, rendered as fleetctl renders it."""
    yaml = round_trip_yaml(detect_indentation(text))
    root = yaml.load(text)
    edit(root)
    buffer = io.StringIO()
    yaml.dump(root, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a:\n  b:\n    c: 1\n", Indentation(mapping=2, sequence=4, offset=2)),
        ("a:\n    b:\n        c: 1\n", Indentation(mapping=4, sequence=6, offset=4)),
        ("a:\n  b:\n    - x\n    - y\n", Indentation(mapping=2, sequence=4, offset=2)),
        ("a:\n  b:\n  - x\n  - y\n", Indentation(mapping=2, sequence=2, offset=0)),
        (
            "a:   # note\n  b:\n  # a comment at another depth\n      - x\n",
            Indentation(mapping=2, sequence=6, offset=4),
        ),
    ],
    ids=["two", "four", "indented items", "flush items", "comments ignored"],
)
def test_indentation_is_read_from_the_file(text: str, expected: Indentation) -> None:
    assert detect_indentation(text) == expected


@pytest.mark.parametrize("stack", ["dev", "prod", "existing"])
def test_the_example_stacks_render_byte_for_byte_unedited(stack: str) -> None:
    document = StackDocument.read(stack_path(stack))
    assert document.render() == stack_path(stack).read_bytes()


@pytest.mark.parametrize(
    "variant",
    [lambda text: text.replace("\n", "\r\n"), lambda text: text.rstrip("\n")],
    ids=["crlf line ends", "no final newline"],
)
def test_line_ends_and_the_final_newline_are_kept(variant: Callable[[str], str], tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_bytes(variant(stack_path("dev").read_text()).encode())
    document = StackDocument.read(path)
    operations.scale(document.config, "assistant", 2)
    expected = variant(stack_path("dev").read_text().replace("replicas: 1", "replicas: 2")).encode()
    assert document.render() == expected


# Comment-preserving tree edits.

COMMENTED = """\
items:
  # about a
  a: 1   # a's own
  # about b
  b: 2
  # about c
  c: 3
list:
  - x   # first
  # about what follows the list
end: true
"""


def test_removing_an_entry_takes_its_comment_and_keeps_the_next_entrys() -> None:
    result = edited(COMMENTED, lambda root: remove_entry(root["items"], "b"))
    assert result == COMMENTED.replace("  # about b\n  b: 2\n", "")


def test_removing_the_first_entry_keeps_the_comment_of_the_second() -> None:
    result = edited(COMMENTED, lambda root: remove_entry(root["items"], "a"))
    assert result == COMMENTED.replace("  # about a\n  a: 1   # a's own\n", "")


def test_removing_the_first_list_item_takes_its_comment_and_keeps_the_seconds() -> None:
    text = "list:\n  # about x\n  - x   # x's own\n  # about y\n  - y\nend: true\n"
    assert edited(text, lambda root: remove_item(root["list"], 0)) == "list:\n  # about y\n  - y\nend: true\n"


def test_an_appended_entry_goes_above_the_comments_that_follow_its_mapping() -> None:
    result = edited(COMMENTED, lambda root: append_item(root["list"], "y"))
    assert result == COMMENTED.replace("  - x   # first\n", "  - x   # first\n  - y\n")


def test_a_new_key_lands_after_the_keys_its_order_puts_before_it() -> None:
    result = edited(COMMENTED, lambda root: set_entry(root["items"], "ab", 9, order=("a", "ab", "b", "c")))
    assert result == COMMENTED.replace("  a: 1   # a's own\n", "  a: 1   # a's own\n  ab: 9\n")


def test_setting_a_present_key_keeps_its_end_of_line_comment() -> None:
    result = edited(COMMENTED, lambda root: set_entry(root["items"], "a", 10))
    assert result == COMMENTED.replace("  a: 1   # a's own\n", "  a: 10  # a's own\n")


# Operations on a round-trip config.

STORE_STACK = """\
config:
  inference-fleet:endpoints:
    kv:
      mooncake:
        mode: both
        topology: {prefill: 1, decode: 1}
        store:
          global_segment_size: '4096'
"""


def test_store_sizes_are_written_as_given_in_the_quotes_found() -> None:
    def configure(root: CommentedMap) -> None:
        operations.configure_store(root["config"], "kv", global_segment_size=" 2KiB", local_buffer_size="0010")

    assert edited(STORE_STACK, configure) == STORE_STACK.replace(
        "'4096'\n", "'2KiB'\n" + '          local_buffer_size: "0010"\n'
    )


@pytest.mark.parametrize("size", ["4096", "4KiB", " 4 KiB ", "0004096"])
def test_a_store_size_equal_to_the_files_keeps_the_files_spelling(size: str) -> None:
    def configure(root: CommentedMap) -> None:
        operations.configure_store(root["config"], "kv", global_segment_size=size)

    assert edited(STORE_STACK, configure) == STORE_STACK


def test_a_store_size_with_a_unit_is_written_plain_and_reads_back_as_a_string() -> None:
    text = STORE_STACK.replace("global_segment_size: '4096'", "global_segment_size: 4096")

    def configure(root: CommentedMap) -> None:
        operations.configure_store(root["config"], "kv", global_segment_size="32GiB", local_buffer_size="512")

    result = edited(text, configure)
    assert result == text.replace("4096\n", "32GiB\n" + '          local_buffer_size: "512"\n')
    mooncake = round_trip_yaml(Indentation()).load(result)["config"]["inference-fleet:endpoints"]["kv"]["mooncake"]
    assert mooncake["store"] == {"global_segment_size": "32GiB", "local_buffer_size": "512"}


def test_store_options_equal_to_their_defaults_add_no_lines() -> None:
    def configure(root: CommentedMap) -> None:
        operations.configure_store(root["config"], "kv", cold_tier=False, offload="cpu", enabled=True)

    assert edited(STORE_STACK, configure) == STORE_STACK


def test_a_store_block_is_not_left_behind_empty() -> None:
    without_store = STORE_STACK.replace("        store:\n          global_segment_size: '4096'\n", "")

    def configure(root: CommentedMap) -> None:
        operations.configure_store(root["config"], "kv", cold_tier=False)

    assert edited(without_store, configure) == without_store


def test_a_size_that_is_not_a_byte_size_is_refused_before_any_edit() -> None:
    config = round_trip_yaml(Indentation()).load(STORE_STACK)["config"]
    with pytest.raises(EditError) as refused:
        operations.configure_store(config, "kv", global_segment_size="1.5GiB", local_buffer_size="4GB")
    assert [problem.path for problem in refused.value.problems] == [
        "endpoints.kv.mooncake.store.global_segment_size",
        "endpoints.kv.mooncake.store.local_buffer_size",
    ]
    assert dict(config["inference-fleet:endpoints"]["kv"]["mooncake"]["store"]) == {"global_segment_size": "4096"}


def test_removing_the_only_endpoint_removes_the_endpoints_key() -> None:
    text = "config:\n  inference-fleet:regions: {}\n  inference-fleet:endpoints:\n    a: {image: x}\n"
    assert edited(text, lambda root: operations.remove_endpoint(root["config"], "a")) == (
        "config:\n  inference-fleet:regions: {}\n"
    )


def test_the_first_endpoint_creates_the_endpoints_key() -> None:
    text = "config:\n  inference-fleet:regions: {}\n"
    assert edited(text, lambda root: operations.add_endpoint(root["config"], "a", image="x")) == (
        text + "  inference-fleet:endpoints:\n    a:\n      image: x\n"
    )


def test_endpoints_under_the_bare_key_are_edited_there() -> None:
    text = "config:\n  endpoints:\n    a:\n      image: x\n"
    assert edited(text, lambda root: operations.scale(root["config"], "a", 2)) == text + "      replicas: 2\n"


# What changed, in config terms.


def test_changes_name_each_changed_leaf_by_its_dotted_path() -> None:
    before = {"endpoints": {"a": {"replicas": 1, "target_regions": ["x", "y"], "env": {"K": "v"}}}}
    after = {
        "endpoints": {"a": {"replicas": 2, "target_regions": ["x"], "env": {"K": "v"}, "desired_state": "stopped"}}
    }
    assert config_changes(before, after) == [
        Change("endpoints.a.replicas", 1, 2),
        Change("endpoints.a.target_regions", ["x", "y"], ["x"]),
        Change("endpoints.a.desired_state", after="stopped"),
    ]


def test_a_removed_endpoint_is_one_change_holding_all_of_it() -> None:
    change = config_changes({"endpoints": {"a": {"image": "x"}, "b": {}}}, {"endpoints": {"b": {}}})
    assert [record.as_json() for record in change] == [
        {"path": "endpoints.a", "action": "removed", "before": {"image": "x"}}
    ]


PD_STACK = """\
config:
  inference-fleet:endpoints:
    pd:
      mooncake:
        mode: disaggregated
        topology: {prefill: 2, decode: 2}
"""


def test_a_mooncake_canary_starts_with_the_counts_given_or_the_endpoints_and_a_topology_edit_sizes_it() -> None:
    def start(root: CommentedMap) -> None:
        operations.start_canary(root["config"], "pd", image="v:2", weight=5, prefill=1)

    started = edited(PD_STACK, start)
    canary = "      canary:\n        image: v:2\n        weight: 5\n        topology: {prefill: 1, decode: 2}\n"
    assert started == PD_STACK.replace("      mooncake:\n", canary + "      mooncake:\n")

    def resize(root: CommentedMap) -> None:
        assert operations.set_topology(root["config"], "pd", prefill=None, decode=3, canary=True) == []

    assert edited(started, resize) == started.replace("{prefill: 1, decode: 2}", "{prefill: 1, decode: 3}")


def test_the_same_mooncake_canary_asked_again_is_no_change_and_another_count_is_refused() -> None:
    config = round_trip_yaml(Indentation()).load(PD_STACK)["config"]
    assert operations.start_canary(config, "pd", image="v:2", weight=5, decode=1) == []
    assert operations.start_canary(config, "pd", image="v:2", weight=5, decode=1) == ["pd already has this canary"]
    with pytest.raises(EditError) as refused:
        operations.start_canary(config, "pd", image="v:2", weight=5, decode=2)
    assert "already exists" in str(refused.value)


def test_a_canary_topology_edit_needs_a_canary_and_a_split_mode() -> None:
    config = round_trip_yaml(Indentation()).load(PD_STACK)["config"]
    with pytest.raises(EditError) as refused:
        operations.set_topology(config, "pd", prefill=1, decode=None, canary=True)
    assert [problem.path for problem in refused.value.problems] == ["endpoints.pd.canary"]
    store = round_trip_yaml(Indentation()).load(STORE_STACK)["config"]
    store["inference-fleet:endpoints"]["kv"]["mooncake"]["mode"] = "store"
    with pytest.raises(EditError) as refused:
        operations.set_topology(store, "kv", prefill=1, decode=None, canary=True)
    assert [problem.path for problem in refused.value.problems] == ["endpoints.kv.canary.topology"]


def test_autoscaling_an_endpoint_removes_its_replicas_line_and_says_so() -> None:
    text = "config:\n  endpoints:\n    a:\n      image: x\n      replicas: 3\n"
    notes: list[str] = []

    def autoscale(root: CommentedMap) -> None:
        notes.extend(operations.set_autoscaling(root["config"], "a", min_replicas=1, max_replicas=4))

    after = edited(text, autoscale)
    assert "replicas: 3" not in after
    assert "min_replicas: 1" in after
    assert notes[-1].startswith("replicas (3) is removed: the autoscaler sets the count")


def test_a_disabled_autoscaler_keeps_the_replicas_that_then_apply() -> None:
    text = (
        "config:\n  endpoints:\n    a:\n      image: x\n      replicas: 3\n      autoscaling:\n        enabled: false\n"
    )
    after = edited(text, lambda root: operations.set_autoscaling(root["config"], "a", max_replicas=4))
    assert "replicas: 3" in after
    assert "enabled: false" in after
    assert "max_replicas: 4" in after
