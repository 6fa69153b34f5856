"""Sections of benchmarks/RESULTS.md that a benchmark of their own writes between two HTML comment markers,
the rest of the file left as it is (the routing simulation, the virtualenv install)."""

from __future__ import annotations


def spliced(existing: str, section: str, begin: str, end: str) -> str:
    """``existing`` with its section from ``begin`` to ``end`` replaced by ``section`` (appended if it has none)."""
    if begin in existing and end in existing:
        before, rest = existing.split(begin, 1)
        after = rest.split(end, 1)[1].lstrip("\n")
        return before + section + ("\n" + after if after else "")
    return existing.rstrip("\n") + "\n\n" + section


def section_of(existing: str, begin: str, end: str) -> str:
    """The section of ``existing`` between ``begin`` and ``end``, markers included (empty when it has none)."""
    if begin not in existing or end not in existing:
        return ""
    return begin + existing.split(begin, 1)[1].split(end, 1)[0] + end + "\n"
