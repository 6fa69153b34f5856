"""The node cache's fill, for real (tests/e2e/cache_driver.py): two processes running the init
container's program (components/render/model_cache_fill.py) on one cache directory at once, against
moto's S3 server on loopback, leave one whole copy made from one download; a new revision replaces it."""

from __future__ import annotations

import shutil
from functools import cache
from typing import Any

import pytest

from tests.e2e.namespace import run_driver

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


@cache
def filled() -> dict[str, Any]:
    return run_driver("tests.e2e.cache_driver", timeout=240)


def test_two_concurrent_fills_download_each_object_once() -> None:
    result = filled()
    assert sorted(answer["filled"] for answer in result["concurrent"]) == [False, True]
    assert set(result["gets"].values()) == {1}
    assert len(result["gets"]) == len(result["expected"])


def test_the_copy_both_fills_answer_with_is_whole() -> None:
    result = filled()
    assert {answer["path"] for answer in result["concurrent"]} == {result["again"]["path"]}
    assert result["files"] == result["expected"]
    assert not [entry for entry in result["entries"] if ".partial-" in entry]  # no half copy left behind


def test_a_filled_revision_is_never_downloaded_again() -> None:
    assert filled()["again"]["filled"] is False


def test_a_new_revision_is_filled_and_replaces_the_old_copy() -> None:
    result = filled()
    assert result["revised"]["filled"] is True
    assert result["revised"]["path"].endswith("/r2")
    assert result["revisions_after"] == ["r2", "r2.lock"]
