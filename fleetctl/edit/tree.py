"""Comment-preserving inserts and deletes on ruamel round-trip mappings and sequences.

ruamel attaches a comment to the token before it: the end-of-line comment of an
entry's last line and every whole-line comment (and blank line) below it share one
token, stored with that last line. The comments above an entry therefore belong, in
the tree, to the entry before it. Deleting or appending naively would lose the
comments above the next entry, or slip the new entry below them; the helpers here
move that trailing block so it stays above the entry it describes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

Container = CommentedMap | CommentedSeq


def is_block(node: Any) -> bool:
    """A non-empty mapping or sequence written one entry per line (not ``{...}`` / ``[...]``)."""
    return isinstance(node, CommentedMap | CommentedSeq) and len(node) > 0 and not node.fa.flow_style()


def flow_map(values: dict[str, Any]) -> CommentedMap:
    node = CommentedMap(values)
    node.fa.set_flow_style()
    return node


def flow_seq(values: Sequence[Any]) -> CommentedSeq:
    node = CommentedSeq(values)
    node.fa.set_flow_style()
    return node


def set_entry(mapping: CommentedMap, key: str, value: Any, order: Sequence[str] = ()) -> None:
    """Set ``mapping[key]``: in place when present (its line, comment and quoting kept), else
    inserted after the last present key that ``order`` puts before it."""
    if key in mapping:
        mapping[key] = value
        return
    keys = list(mapping)
    position = _position(keys, key, order)
    if position == 0 and keys:
        # Comments above the first entry stay above the mapping's first line.
        mapping.insert(0, key, value)
        return
    previous = keys[position - 1] if position else None
    below = _take_trailing(mapping, previous) if previous is not None else None
    mapping.insert(position, key, value)
    if below is not None:
        _give_trailing(mapping, key, below)


def _position(keys: list[Any], key: str, order: Sequence[str]) -> int:
    """After the last present key that ``order`` puts before ``key``; last for a key ``order`` lacks."""
    if key not in order:
        return len(keys)
    rank = order.index(key)
    earlier = [index for index, present in enumerate(keys) if present in order and order.index(present) < rank]
    return max(earlier) + 1 if earlier else 0


def remove_entry(mapping: CommentedMap, key: str) -> None:
    """Delete ``mapping[key]`` with the comment lines directly above it; the comments below
    it (which describe the next entry) are kept."""
    keys = list(mapping)
    position = keys.index(key)
    below = _take_trailing(mapping, key)
    if position > 0:
        _drop_leading_block(mapping, keys[position - 1])
    else:
        _drop_leading_pre(mapping)
    del mapping[key]
    if below is None:
        return
    if position > 0:
        _give_trailing(mapping, keys[position - 1], below, append=True)
    elif mapping:
        # The deleted entry was first: what followed it now leads the mapping.
        _give_leading(mapping, below)


def append_item(sequence: CommentedSeq, value: Any) -> None:
    below = _take_trailing(sequence, len(sequence) - 1) if sequence else None
    sequence.append(value)
    if below is not None:
        _give_trailing(sequence, len(sequence) - 1, below)


def remove_item(sequence: CommentedSeq, index: int) -> None:
    """Delete ``sequence[index]`` the way :func:`remove_entry` deletes a key."""
    below = _take_trailing(sequence, index)
    if index > 0:
        _drop_leading_block(sequence, index - 1)
    else:
        _drop_leading_pre(sequence)
    del sequence[index]
    if below is None:
        return
    if index > 0:
        _give_trailing(sequence, index - 1, below, append=True)
    elif sequence:
        _give_leading(sequence, below)


# The token after an entry's last line: where it lives, and how to split it.


def _last_line_owner(container: Container, key: Any) -> tuple[Container, Any]:
    value = container[key]
    while is_block(value):
        container = value
        key = next(reversed(value)) if isinstance(value, CommentedMap) else len(value) - 1
        value = container[key]
    return container, key


def _slot(container: Container) -> int:
    return 2 if isinstance(container, CommentedMap) else 0


def _token(container: Container, key: Any) -> CommentToken | None:
    owner, owner_key = _last_line_owner(container, key)
    entry = owner.ca.items.get(owner_key)
    slot = _slot(owner)
    token = entry[slot] if entry is not None and len(entry) > slot else None
    return token if isinstance(token, CommentToken) else None


def _set_token(container: Container, key: Any, value: str) -> None:
    owner, owner_key = _last_line_owner(container, key)
    slot = _slot(owner)
    entry = owner.ca.items.setdefault(owner_key, [None, None, None, None])
    while len(entry) <= slot:
        entry.append(None)
    token = entry[slot]
    if isinstance(token, CommentToken):
        token.value = value
    else:
        entry[slot] = CommentToken(value, CommentMark(0), None)


def _take_trailing(container: Container, key: Any) -> str | None:
    """Cut the whole-line comments and blank lines below ``key``'s last line; return them."""
    token = _token(container, key)
    if token is None:
        return None
    line, newline, below = token.value.partition("\n")
    if not below:
        return None
    token.value = line + newline
    return below


def _give_trailing(container: Container, key: Any, below: str, *, append: bool = False) -> None:
    token = _token(container, key)
    current = token.value if token is not None else "\n"
    if not append:
        current = current.partition("\n")[0] + "\n"
    _set_token(container, key, current + below)


def _drop_leading_block(container: Container, key: Any) -> None:
    """Drop the comment lines directly above the entry after ``key`` (those with no blank
    line between them and it): they describe the entry being deleted."""
    token = _token(container, key)
    if token is None:
        return
    line, _, below = token.value.partition("\n")
    lines = below.splitlines(keepends=True)
    while lines and lines[-1].strip().startswith("#"):
        lines.pop()
    token.value = line + "\n" + "".join(lines)


def _drop_leading_pre(container: Container) -> None:
    """The first entry's comment lines sit in the container's own pre-comment tokens, one per
    line, a blank line after it folded into the token."""
    comment = container.ca.comment
    leading = comment[1] if comment is not None and len(comment) > 1 else None
    while leading and "\n\n" not in leading[-1].value:
        leading.pop()


def _give_leading(container: Container, below: str) -> None:
    lines = below.splitlines(keepends=True)
    while lines and not lines[0].strip():
        lines.pop(0)  # no blank line between a key and the first entry of its value
    if not lines:
        return
    comment = container.ca.comment
    if comment is None:
        container.ca.comment = comment = [None, None]
    while len(comment) < 2:
        comment.append(None)
    if comment[1] is None:
        comment[1] = []
    comment[1].append(CommentToken("".join(lines), CommentMark(0), None))
