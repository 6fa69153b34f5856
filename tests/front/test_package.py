"""The front as a program of its own: it runs in the engines' images, which carry the standard library
and aiohttp (vLLM's requirements/common.txt, SGLang's wheel), and nothing of ours; uvloop where the
image has it.

One module goes further: front/kv_events.py, the precise routing mode's reader of vLLM's KV events,
needs msgspec (what vLLM encodes them with) and pyzmq (their transport). Both are in vLLM's own
requirements (requirements/common.txt at 0.33.0: ``pyzmq >= 25.0.0``, ``msgspec``), so in its image,
the only one that publishes those events; SGLang's need not carry them. So no other module imports it:
the proxy and the gate start without either library, and only the precise mode, once wired, imports it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import front

MODULES = sorted(Path(front.__file__).parent.glob("*.py"))
KV_EVENTS = "kv_events.py"
OPTIONAL = "uvloop"
VLLM_ONLY = {"msgspec", "zmq"}
"""What front/kv_events.py may import beyond the rest: vLLM's image carries both."""


def _imported(module: Path) -> set[str]:
    tree = ast.parse(module.read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
    return imported


def _tops(names: set[str]) -> set[str]:
    return {name.split(".")[0] for name in names} - set(sys.stdlib_module_names) - {"__future__"}


def test_every_module_needs_only_the_standard_library_aiohttp_and_the_package_itself() -> None:
    tops = set().union(*(_tops(_imported(module)) for module in MODULES if module.name != KV_EVENTS))
    assert tops == {"aiohttp", "front", OPTIONAL}


def test_uvloop_is_taken_only_where_the_image_has_it() -> None:
    """uvloop (in vLLM's image with uvicorn, and a requirement of SGLang's wheel) is imported in one place,
    under a ``try`` whose ``except ImportError`` runs the front on asyncio's own loop instead."""
    guarded = []
    for module in MODULES:
        for node in ast.walk(ast.parse(module.read_text())):
            if not isinstance(node, ast.Try):
                continue
            imports = {a.name for n in node.body if isinstance(n, ast.Import) for a in n.names}
            catches = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
            if OPTIONAL in imports and "ImportError" in catches:
                guarded.append(module.name)
    importers = [module.name for module in MODULES if OPTIONAL in _imported(module)]
    assert importers == guarded == ["serve.py"]


def test_the_kv_events_reader_needs_only_what_vllms_image_adds_and_no_other_module_imports_it() -> None:
    (kv_events,) = (module for module in MODULES if module.name == KV_EVENTS)
    assert _tops(_imported(kv_events)) == {"front", *VLLM_ONLY}
    importers = [module.name for module in MODULES if "front.kv_events" in _imported(module)]
    assert importers == []


def test_the_package_imports_no_module_by_a_relative_name() -> None:
    """Run from a directory (the pods' way) the package is ``front`` as here: absolute imports only."""
    relative = [
        module.name
        for module in MODULES
        for node in ast.walk(ast.parse(module.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level > 0
    ]
    assert relative == []
