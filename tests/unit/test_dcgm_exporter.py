"""The DCGM exporter: chart values, where it runs, and what the schedulability check counts."""

from __future__ import annotations

import re

from components import scheduling
from components.catalog import instance_catalog, pins
from components.platform.dcgm import POD_LABEL_ALLOWLIST, dcgm_values
from components.platform.prometheus import DCGM_POD_LABELS
from components.schedulability.nodes import region_nodes
from components.schedulability.platform_pods import DaemonSet, daemon_sets
from components.schedulability.platform_pods import facts as platform_facts
from components.schedulability.quantities import amounts
from components.spec import parse_stack_config
from tests.chart_values import chart_defaults, unknown_paths

from .stack_builders import REGION, stack_config

VALUES = "dcgm-exporter-4.8.2-values.yaml"


def test_the_chart_is_nvidias_at_the_pinned_version() -> None:
    chart = pins().charts.dcgm_exporter
    assert (chart.repo, chart.chart, chart.version) == (
        "https://nvidia.github.io/dcgm-exporter/helm-charts",
        "dcgm-exporter",
        "4.8.2",
    )


def test_values_set_only_keys_the_pinned_chart_declares() -> None:
    assert list(unknown_paths(dcgm_values(), chart_defaults(VALUES))) == []


def test_it_copies_exactly_the_name_and_component_labels_that_prometheus_renames() -> None:
    """The allowlist is matched anywhere in a key (regexp MatchString), so it is anchored; the
    sanitised keys (every character outside [a-zA-Z0-9_] -> '_') are those the scrape job renames."""
    keys = [
        "app.kubernetes.io/name",
        "app.kubernetes.io/component",
        "app.kubernetes.io/part-of",
        "x-app.kubernetes.io/name",
    ]
    kept = [key for key in keys if any(re.search(pattern, key) for pattern in POD_LABEL_ALLOWLIST)]
    assert kept == ["app.kubernetes.io/name", "app.kubernetes.io/component"]
    assert {re.sub("[^a-zA-Z0-9_]", "_", key) for key in kept} == set(DCGM_POD_LABELS)
    assert dcgm_values()["kubernetes"]["enablePodLabels"] is True
    assert chart_defaults(VALUES)["kubernetes"]["rbac"]["create"] is True  # the pod reader's ClusterRole


def test_the_charts_servicemonitor_is_off_it_needs_the_operators_crds() -> None:
    assert chart_defaults(VALUES)["serviceMonitor"]["enabled"] is True
    assert dcgm_values()["serviceMonitor"] == {"enabled": False}


def test_the_recorded_scheduling_facts_are_the_charts_defaults() -> None:
    chart = chart_defaults(VALUES)
    recorded = platform_facts()["charts"]["dcgm_exporter"]
    assert recorded["version"] == pins().charts.dcgm_exporter.version
    for field in ("nodeSelector", "affinity", "tolerations"):
        assert recorded["defaults"][field] == chart[field], field
    assert recorded["defaults"]["resources"]["requests"] == chart["resources"]["requests"]


def exporters(metrics: bool) -> list[DaemonSet]:
    spec = parse_stack_config(stack_config(region_overrides={"metrics": {"enabled": metrics}}))
    region = spec.regions[REGION]
    nodes = region_nodes(region, instance_catalog(), autoscaled=False)
    return [d for d in daemon_sets(region, nodes) if d.name == "dcgm-exporter"]


def test_it_runs_on_every_nvidia_node_where_the_pipeline_runs() -> None:
    (exporter,) = exporters(True)
    assert exporter.pod["nodeSelector"] == {scheduling.ACCELERATOR_LABEL: "nvidia"}
    assert exporter.pod["tolerations"] == scheduling.tolerations((scheduling.GPU_TAINT, scheduling.EFA_TAINT))
    assert exporter.requests == amounts({"cpu": "100m", "memory": "128Mi"})
    assert exporters(False) == []
