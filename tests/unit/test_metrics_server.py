"""metrics-server: the resource metrics API cpu and memory autoscalers read, with the pipeline."""

from __future__ import annotations

from components.catalog import pins
from components.platform.metrics_server import NAMESPACE, metrics_server_values
from components.schedulability.platform_pods import facts as platform_facts
from components.schedulability.platform_pods import platform_workloads
from components.schedulability.quantities import amounts
from components.spec import parse_stack_config
from tests.chart_values import chart_defaults, unknown_paths

from .stack_builders import REGION, stack_config

VALUES = "metrics-server-3.13.1-values.yaml"


def test_the_chart_is_kubernetes_sigs_at_the_pinned_version() -> None:
    chart = pins().charts.metrics_server
    assert (chart.repo, chart.chart, chart.version) == (
        "https://kubernetes-sigs.github.io/metrics-server/",
        "metrics-server",
        "3.13.1",
    )


def test_values_set_only_keys_the_pinned_chart_declares() -> None:
    assert list(unknown_paths(metrics_server_values(), chart_defaults(VALUES))) == []


def test_the_chart_registers_the_resource_metrics_api() -> None:
    assert chart_defaults(VALUES)["apiService"]["create"] is True
    assert "apiService" not in metrics_server_values()


def test_the_recorded_scheduling_facts_are_the_charts_defaults() -> None:
    chart = chart_defaults(VALUES)
    recorded = platform_facts()["charts"]["metrics_server"]
    assert recorded["version"] == pins().charts.metrics_server.version
    for field in ("replicas", "nodeSelector", "tolerations", "affinity"):
        assert recorded["defaults"][field] == chart[field], field
    assert recorded["defaults"]["resources"]["requests"] == chart["resources"]["requests"]
    assert chart["addonResizer"]["enabled"] is False


def test_one_pod_on_a_system_node_counted_where_the_pipeline_runs() -> None:
    on = parse_stack_config(stack_config(region_overrides={"metrics": {"enabled": True}})).regions[REGION]
    (server,) = [w for w in platform_workloads(REGION, on) if w.name == "metrics-server"]
    assert (server.namespace, server.replicas) == (NAMESPACE, 1)
    assert server.requests == amounts({"cpu": "100m", "memory": "200Mi"})
    assert server.pod["nodeSelector"] == {"inference-fleet/accelerator": "none"}
    off = parse_stack_config(stack_config()).regions[REGION]
    assert not [w for w in platform_workloads(REGION, off) if w.name == "metrics-server"]
