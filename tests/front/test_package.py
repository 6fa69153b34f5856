"""The front as a program of its own: it runs in the engines' images, which carry the standard library
and aiohttp (vLLM's requirements/common.txt, SGLang's wheel), and nothing of ours."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import front

MODULES = sorted(Path(front.__file__).parent.glob("*.py"))


def test_every_module_needs_only_the_standard_library_aiohttp_and_the_package_itself() -> None:
    tops: set[str] = set()
    for module in MODULES:
        tree = ast.parse(module.read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
        tops |= {name.split(".")[0] for name in imported}
    assert tops - set(sys.stdlib_module_names) - {"__future__"} == {"aiohttp", "front"}


def test_the_package_imports_no_module_by_a_relative_name() -> None:
    """Run from a directory (the pods' way) the package is ``front`` as here: absolute imports only."""
    relative = [
        module.name
        for module in MODULES
        for node in ast.walk(ast.parse(module.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level > 0
    ]
    assert relative == []
