"""The front's /metrics (front/metrics.py): the series the rendering names, Prometheus's text format,
every series from start, the counts; Prometheus's own linter finds nothing in it."""

from __future__ import annotations

import subprocess

from prometheus_client.parser import text_string_to_metric_families

from components.metric_table import (
    PROXY_ANSWERED,
    PROXY_BACKEND_IN_FLIGHT,
    PROXY_IN_FLIGHT,
    PROXY_LAST_REQUEST,
    PROXY_REQUESTS,
    PROXY_ROUTED_BLOCKS,
    PROXY_ROUTED_CACHED_BLOCKS,
    PROXY_UNSERVED,
)
from front import metrics
from front.metrics import Counts, Routed, exposition
from tests.prometheus_tools import binary

SERIES_AT_ZERO = {
    (PROXY_REQUESTS, ()): 0,
    (PROXY_UNSERVED, (("backend", "prefill"),)): 0,
    (PROXY_UNSERVED, (("backend", "decode"),)): 0,
    (PROXY_ANSWERED, ()): 0,
    (PROXY_IN_FLIGHT, ()): 0,
    (PROXY_LAST_REQUEST, ()): 0,
}
"""A proxy's every series (name, labels) before any request: each at 0."""


def test_the_programs_series_are_the_names_the_rendering_uses() -> None:
    """The program runs alone in its pod and cannot import components.metric_table."""
    assert (metrics.REQUESTS, metrics.UNSERVED) == (PROXY_REQUESTS, PROXY_UNSERVED)
    assert (metrics.ANSWERED, metrics.IN_FLIGHT) == (PROXY_ANSWERED, PROXY_IN_FLIGHT)
    assert metrics.LAST_REQUEST == PROXY_LAST_REQUEST
    assert (metrics.ROUTED_BLOCKS, metrics.ROUTED_CACHED_BLOCKS) == (PROXY_ROUTED_BLOCKS, PROXY_ROUTED_CACHED_BLOCKS)
    assert metrics.BACKEND_IN_FLIGHT == PROXY_BACKEND_IN_FLIGHT


def test_the_routing_series_parse_as_prometheus_text() -> None:
    """What prometheus_client's own parser reads of a routed front's exposition."""
    routed = [Routed("prefill", 12, 5, {"10.0.0.1/0/e1": 2}), Routed("decode", 12, 0, {"10.0.0.9": 1})]
    families = {f.name: f for f in text_string_to_metric_families(exposition(Counts(), routed))}
    # prometheus_client names a counter's family without its _total suffix.
    blocks = families[PROXY_ROUTED_BLOCKS.removesuffix("_total")]
    assert {(s.labels["backend"], s.value) for s in blocks.samples} == {("prefill", 12.0), ("decode", 12.0)}
    loads = families[PROXY_BACKEND_IN_FLIGHT]
    assert loads.type == "gauge"
    assert {(s.labels["target"], s.value) for s in loads.samples} == {("10.0.0.1/0/e1", 2.0), ("10.0.0.9", 1.0)}


def test_the_exposition_is_prometheus_text_with_every_series_from_start() -> None:
    families = {family.name: family for family in text_string_to_metric_families(exposition(Counts()))}
    # The parser names a counter's family without _total, as OpenMetrics does; its samples keep it.
    assert {name: family.type for name, family in families.items()} == {
        PROXY_REQUESTS.removesuffix("_total"): "counter",
        PROXY_UNSERVED.removesuffix("_total"): "counter",
        PROXY_ANSWERED.removesuffix("_total"): "counter",
        PROXY_IN_FLIGHT: "gauge",
        PROXY_LAST_REQUEST: "gauge",
    }
    values = {(s.name, tuple(s.labels.items())): s.value for f in families.values() for s in f.samples}
    assert values == SERIES_AT_ZERO


def test_the_exposition_carries_the_counts() -> None:
    counts = Counts(requests=7, answered=3, in_flight=2, last_request=1764590400.25)
    counts.unserved_by(["prefill", "decode"])
    counts.unserved_by(["decode"])
    text = exposition(counts)
    values = {
        (s.name, tuple(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples
    }
    assert values[(PROXY_REQUESTS, ())] == 7
    assert values[(PROXY_UNSERVED, (("backend", "prefill"),))] == 1
    assert values[(PROXY_UNSERVED, (("backend", "decode"),))] == 2
    assert (values[(PROXY_ANSWERED, ())], values[(PROXY_IN_FLIGHT, ())]) == (3, 2)
    assert values[(PROXY_LAST_REQUEST, ())] == 1764590400.25


def test_promtool_finds_nothing_to_lint_in_the_exposition() -> None:
    """Prometheus's own linter (Debian's promtool, `check metrics`: counter suffixes, HELP, units)."""
    counts = Counts(requests=2, answered=1, in_flight=1)
    counts.unserved_by(["decode"])
    checked = subprocess.run(
        [binary("promtool"), "check", "metrics"], input=exposition(counts), capture_output=True, text=True, check=False
    )
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")


def test_promtool_finds_nothing_to_lint_in_the_gates_exposition() -> None:
    """The gate's series are the proxy's with the one backend ``server`` (Debian's promtool, `check metrics`)."""
    counts = Counts(requests=3, answered=2, in_flight=1, unserved={"server": 0})
    counts.unserved_by(["server"])
    text = exposition(counts)
    assert f'{PROXY_UNSERVED}{{backend="server"}} 1' in text.splitlines()
    checked = subprocess.run(
        [binary("promtool"), "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")


def test_promtool_finds_nothing_to_lint_in_a_routed_fronts_exposition() -> None:
    """The routing series (front/router.py) too (Debian's promtool, `check metrics`)."""
    routed = [Routed("server", 40, 31, {"10.0.0.3": 4, "10.0.0.4": 0})]
    checked = subprocess.run(
        [binary("promtool"), "check", "metrics"],
        input=exposition(Counts(unserved={"server": 0}), routed),
        capture_output=True,
        text=True,
        check=False,
    )
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")
