"""The framework metric table against what each release prints on /metrics (tests/data/exposition/,
recorded from the releases' sources), parsed by prometheus_client's own parser."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest
from prometheus_client.parser import text_string_to_metric_families

from components.metric_table import SIGNAL_OF_METRIC, TABLE, Series
from components.spec.images import Framework

EXPOSITION = Path(__file__).resolve().parent.parent / "data" / "exposition"
RELEASES = {"vllm": "vllm-0.33.0", "sglang": "sglang-0.5.6", "tgi": "tgi-3.3.7", "triton": "triton-25.10"}


def exposition(framework: str) -> str:
    return (EXPOSITION / f"{RELEASES[framework]}.txt").read_text()


def families(framework: str) -> dict[str, tuple[str, set[str]]]:
    """Each family as the parser reads it: its type and the ``le`` bounds of its buckets."""
    found = {}
    for family in text_string_to_metric_families(exposition(framework)):
        bounds = {sample.labels["le"] for sample in family.samples if "le" in sample.labels}
        found[family.name] = (family.type, bounds)
    return found


def printed(framework: str, sample: str) -> bool:
    """A sample line of that exact name (the parser renames counters to ``_total``; Prometheus does not)."""
    return re.search(rf"^{re.escape(sample)}[{{ ]", exposition(framework), re.MULTILINE) is not None


ENTRIES = [(framework, signal, entry) for framework, row in TABLE.items() for signal, entry in row.items()]


@pytest.mark.parametrize(("framework", "signal", "entry"), ENTRIES, ids=[f"{f}-{s}" for f, s, _ in ENTRIES])
def test_every_series_is_printed_by_its_release_with_its_type(framework: str, signal: str, entry: Series) -> None:
    assert printed(framework, entry.sample), f"{framework} prints no {entry.sample} ({signal}, {entry.source})"
    kind, bounds = families(framework)[entry.name.removesuffix("_total")]
    assert kind == entry.type
    if entry.buckets:
        assert {float(bound) for bound in bounds} == {*entry.buckets, float("inf")}


def test_every_framework_is_in_the_table_and_only_real_signals_are() -> None:
    assert set(TABLE) == set(get_args(Framework))
    assert set(SIGNAL_OF_METRIC.values()) <= {signal for row in TABLE.values() for signal in row}


@pytest.mark.parametrize("framework", [framework for framework, row in TABLE.items() if "ttft" in row])
def test_a_ttft_histogram_says_how_to_read_milliseconds(framework: Framework) -> None:
    entry = TABLE[framework]["ttft"]
    assert entry.type == "histogram"
    assert entry.to_ms == (1.0 if entry.name.endswith("_ms") else 1000.0)
    assert entry.name.endswith(("_ms", "_seconds"))


def test_what_is_missing_is_what_the_releases_lack() -> None:
    """Stated, so a change to the table is a reviewed change: TGI records no TTFT and no KV-cache
    usage; Triton counts no running sequences and has no KV cache of its own."""
    scaling = {
        framework: sorted(s for s in SIGNAL_OF_METRIC.values() if s not in row) for framework, row in TABLE.items()
    }
    assert scaling == {"vllm": [], "sglang": [], "tgi": ["kv_cache", "ttft"], "triton": ["kv_cache", "running"]}
