"""The files under config/ are read with ruamel's C parser (components/catalog.py ``_loader``): it must
read every one of them to the values, and the types, the pure parser reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from components.catalog import CONFIG_DIR, _loader


def _typed(value: Any) -> Any:
    """``value`` with every scalar's type beside it: ``1``, ``1.0`` and ``True`` compare equal in Python."""
    if isinstance(value, dict):
        return {(type(key).__name__, key): _typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    return (type(value).__name__, value)


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda path: path.name)
def test_the_c_parser_reads_each_config_file_as_the_pure_one_does(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    pure = list(YAML(typ="safe", pure=True).load_all(text))
    fast = list(_loader().load_all(text))
    assert pure  # the file holds documents
    assert _typed(fast) == _typed(pure)


def test_the_loader_is_the_c_one() -> None:
    """Without ruamel.yaml.clib the loader would quietly fall back to the pure parser."""
    import _ruamel_yaml  # type: ignore[import-not-found]  # the C extension itself

    assert _loader().Parser is _ruamel_yaml.CParser
