"""A stack file as an editable round-trip document, and the rules an edit obeys on disk.

An edit renders the whole file again with ruamel's round-trip dumper, set to the
file's own indentation, so every line the edit does not touch comes out byte for
byte as it went in (a file for which that does not hold is refused, not
reformatted). The result is validated like ``fleetctl validate`` validates, and
written atomically only if the file is still what was read.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import re
import stat
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from components.spec.errors import Problem, dotted
from components.validation import validate_stack
from fleetctl import interrupt
from fleetctl.stackfile import StackFileError, parse_stack_bytes, read_stack_file, stack_name

Operation = Callable[[CommentedMap], Sequence[str]]
"""An edit of a stack file's ``config:`` mapping; returns notes for the user (may be empty)."""

# Wide enough that no long image reference or comment is ever re-wrapped.
_WIDTH = 4096


@dataclass(frozen=True)
class Indentation:
    """ruamel's three indentation settings: nested mapping step, sequence item step, dash offset."""

    mapping: int = 2
    sequence: int = 4
    offset: int = 2


_OPENER = re.compile(r"^(?P<indent> *)(?P<dash>- +)?[^\s#-][^#]*:$")
_DASH = re.compile(r"^(?P<indent> *)- +")


def detect_indentation(text: str) -> Indentation:
    """The indentation most of the file uses (the examples: 2; ``- item`` two past its key)."""
    mappings: Counter[int] = Counter()
    sequences: Counter[tuple[int, int]] = Counter()
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    for line, following in itertools.pairwise(lines):
        opener = _OPENER.match(_without_comment(line))
        if opener is None:
            continue
        key_column = len(opener["indent"]) + len(opener["dash"] or "")
        dash = _DASH.match(following)
        if dash is not None:
            offset = len(dash["indent"]) - key_column
            if offset >= 0:
                sequences[(dash.end() - key_column, offset)] += 1
        else:
            step = len(following) - len(following.lstrip(" ")) - key_column
            if step > 0:
                mappings[step] += 1
    mapping = mappings.most_common(1)[0][0] if mappings else 2
    if sequences:
        sequence, offset = sequences.most_common(1)[0][0]
        return Indentation(mapping, sequence, offset)
    return Indentation(mapping, mapping + 2, mapping)


def _without_comment(line: str) -> str:
    return line.split(" #", 1)[0].rstrip()


def round_trip_yaml(indentation: Indentation) -> YAML:
    yaml = YAML(typ="rt", pure=True)
    yaml.preserve_quotes = True
    yaml.width = _WIDTH
    yaml.indent(mapping=indentation.mapping, sequence=indentation.sequence, offset=indentation.offset)
    return yaml


@dataclass
class StackDocument:
    """A stack file loaded for editing: the bytes read and the round-trip tree made from them."""

    path: Path
    original: bytes
    project_config: dict[str, Any]
    """The project's keys as read, before any edit."""
    root: CommentedMap
    yaml: YAML
    newline: str
    final_newline: bool

    @classmethod
    def read(cls, path: Path) -> StackDocument:
        stack_file = read_stack_file(path)  # the checks and messages of `fleetctl validate`
        try:
            original = path.read_bytes()
            text = original.decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise StackFileError([Problem(str(path), f"cannot read the stack file: {error}")]) from None
        newline = "\r\n" if "\r\n" in text else "\n"
        text = text.replace("\r\n", "\n")
        yaml = round_trip_yaml(detect_indentation(text))
        try:
            root = yaml.load(text)
        except YAMLError as error:
            raise StackFileError([Problem(str(path), f"is not valid YAML: {error}")]) from None
        document = cls(path, original, stack_file.project_config, root, yaml, newline, text.endswith("\n"))
        document._check_round_trip()
        return document

    @property
    def stack(self) -> str:
        return stack_name(self.path)

    @property
    def config(self) -> CommentedMap:
        config = self.root["config"]
        assert isinstance(config, CommentedMap)  # read_stack_file refuses anything else
        return config

    def render(self) -> bytes:
        return self._render_text().replace("\n", self.newline).encode("utf-8")

    def _render_text(self) -> str:
        buffer = io.StringIO()
        self.yaml.dump(self.root, buffer)
        text = buffer.getvalue()
        return text if self.final_newline else text.removesuffix("\n")

    def _check_round_trip(self) -> None:
        """Refuse a file that round-trip rendering would reformat outside the edit."""
        if self.render() == self.original:
            return
        before, after = self.original.decode("utf-8").splitlines(), self.render().decode("utf-8").splitlines()
        number = next(
            (index for index, (old, new) in enumerate(zip(before, after, strict=False)) if old != new),
            min(len(before), len(after)),
        )
        old = before[number] if number < len(before) else "(end of file)"
        new = after[number] if number < len(after) else "(end of file)"
        raise StackFileError(
            [
                Problem(
                    str(self.path),
                    f"cannot be edited without reformatting lines the edit does not touch: line {number + 1} "
                    f"{old!r} would be written as {new!r}; use one indentation step and one kind of line end "
                    "throughout (and no '---' or tabs), or edit the file by hand",
                )
            ]
        )

    def write(self, data: bytes) -> None:
        """Replace the file with ``data`` atomically, unless it changed since it was read."""
        write_atomically(self.path, data, expected=self.original)


def refuse_read_only(path: Path) -> None:
    """Refuse a stack file the user may not write, as an editor or the shell would: no write
    permission for this user, or no write bit at all (``chmod 444``: the owner's "do not change",
    honoured for root too, whom the permission check alone would let through)."""
    try:
        mode = stat.S_IMODE(path.resolve().stat().st_mode)
    except OSError:
        return  # the write says why
    if mode & 0o222 == 0 or not os.access(path, os.W_OK):
        raise StackFileError(
            [
                Problem(
                    str(path),
                    f"is read-only (mode {mode:04o}); nothing was written: make it writable "
                    f"(chmod u+w {path}) to edit it, or use --dry-run",
                )
            ]
        )


def write_atomically(path: Path, data: bytes, *, expected: bytes) -> None:
    """Temp file beside the target, fsync, the file's own mode, owner and group, then one rename: the
    old file or the new, never half of either, and no temp file left behind. Refused if the file is
    read-only (:func:`refuse_read_only`) or no longer holds ``expected``. Where the temp file cannot
    get the file's owner and group (a user editing a file of another owner or group it may write),
    the file is rewritten in place instead, as editors do, keeping its identity."""
    refuse_read_only(path)
    target = path.resolve()  # a symlinked stack file stays a symlink
    temporary: str | None = None

    def remove_temporary() -> None:
        if temporary is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)

    try:
        with interrupt.cleanup(remove_temporary):  # Ctrl-C while it is written: no temp file left
            status = target.stat()
            descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            if not _same_owner(temporary, status):
                os.unlink(temporary)
                temporary = None
                _write_in_place(path, target, data, expected)
                return
            os.chmod(temporary, stat.S_IMODE(status.st_mode))
            with interrupt.held():
                interrupt.checkpoint()  # Ctrl-C came: the file stays as it was
                if target.read_bytes() != expected:
                    raise StackFileError(
                        [
                            Problem(
                                str(path),
                                "changed on disk while this edit was being made (another edit or an editor); "
                                "nothing was written: re-run the command",
                            )
                        ]
                    )
                os.replace(temporary, target)
                interrupt.finish()  # written: the command ends saying so
    except BaseException as error:
        if temporary is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        if isinstance(error, OSError):
            raise StackFileError(
                [Problem(str(path), f"cannot write the stack file, left as it was: {error}")]
            ) from None
        raise
    _sync_directory(target.parent)


def _same_owner(temporary: str, status: os.stat_result) -> bool:
    """Give the temp file the stack file's owner and group; False where this user may not."""
    current = os.stat(temporary)
    if (current.st_uid, current.st_gid) == (status.st_uid, status.st_gid):
        return True
    try:
        os.chown(temporary, status.st_uid, status.st_gid)
    except PermissionError:
        return False
    return True


def _write_in_place(path: Path, target: Path, data: bytes, expected: bytes) -> None:
    """Rewrite the file's own bytes (its inode, so its owner, group and mode stay), under Ctrl-C held."""
    with interrupt.held(), target.open("r+b") as handle:
        interrupt.checkpoint()
        if handle.read() != expected:
            raise StackFileError(
                [
                    Problem(
                        str(path),
                        "changed on disk while this edit was being made (another edit or an editor); "
                        "nothing was written: re-run the command",
                    )
                ]
            )
        handle.seek(0)
        handle.write(data)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())
        interrupt.finish()


def _sync_directory(directory: Path) -> None:
    """Make the rename itself durable (POSIX; a no-op where directories cannot be opened)."""
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


# What an edit changed, in config terms.

ABSENT: Any = object()
"""The side of a change where the key does not exist."""


@dataclass(frozen=True)
class Change:
    path: str
    before: Any = ABSENT
    after: Any = ABSENT

    @property
    def action(self) -> str:
        if self.before is ABSENT:
            return "added"
        return "removed" if self.after is ABSENT else "changed"

    def as_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"path": self.path, "action": self.action}
        if self.before is not ABSENT:
            record["before"] = self.before
        if self.after is not ABSENT:
            record["after"] = self.after
        return record


def config_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """Leaf-level differences of two project configs; lists compare whole."""
    changes: list[Change] = []
    _compare([], before, after, changes)
    return changes


def _compare(path: list[str | int], before: Any, after: Any, changes: list[Change]) -> None:
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in [*before, *(key for key in after if key not in before)]:
            _compare([*path, str(key)], before.get(key, ABSENT), after.get(key, ABSENT), changes)
    elif before != after:
        changes.append(Change(dotted(path), before, after))


@dataclass(frozen=True)
class Edit:
    """An edit made in memory and validated; nothing is written until :meth:`write`."""

    document: StackDocument
    after: bytes
    notes: tuple[str, ...]
    changes: tuple[Change, ...]

    @property
    def changed(self) -> bool:
        return self.after != self.document.original

    def write(self) -> None:
        self.document.write(self.after)


def prepare_edit(path: Path, operation: Operation) -> Edit:
    """Apply ``operation`` to the file at ``path`` in memory and validate the whole result.

    Raises StackFileError (the file), EditError (the operation) or SpecError (the result).
    """
    document = StackDocument.read(path)
    notes = tuple(operation(document.config))
    after = document.render()
    if after == document.original:
        return Edit(document, after, notes or ("the stack file already says so",), ())
    edited = parse_stack_bytes(path, after)
    validate_stack(edited.project_config, stack=edited.stack)
    changes = tuple(config_changes(document.project_config, edited.project_config))
    return Edit(document, after, notes, changes)
