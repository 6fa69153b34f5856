"""Files vendored from upstream repositories, held to them by git blob id."""

from __future__ import annotations

import hashlib
import re


def git_blob_id(data: bytes) -> str:
    """The id git gives ``data`` as a blob: what `git ls-tree` shows for the upstream file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def vendored_parts(text: str, directory: str, *, separator: str = "---\n") -> tuple[str, dict[tuple[str, str], str]]:
    """A vendored multi-part file: the header before its first part, and each part by (upstream path,
    blob id), each part opening with ``<separator># part <directory>/<file> blob <id>``."""
    header = rf"^{re.escape(separator)}# part ({re.escape(directory)}/[\w.-]+) blob ([0-9a-f]{{40}})\n"
    parts = re.split(header, text, flags=re.MULTILINE)
    return parts[0], {(parts[i], parts[i + 1]): parts[i + 2] for i in range(1, len(parts), 3)}
