"""Grafana: chart values, the dashboards it loads, its secret, its pod."""

from __future__ import annotations

from components import naming
from components.catalog import pins
from components.platform.grafana import grafana_values
from components.schedulability.platform_pods import facts as platform_facts
from components.schedulability.platform_pods import platform_workloads
from components.schedulability.quantities import amounts
from components.schedulability.workloads import Workload
from components.spec import parse_stack_config
from tests.chart_values import chart_defaults, unknown_paths

from .stack_builders import REGION, stack_config

VALUES = "grafana-12.11.1-values.yaml"


def test_the_chart_is_grafana_communitys_at_the_pinned_version() -> None:
    chart = pins().charts.grafana
    assert (chart.repo, chart.chart, chart.version) == (
        "https://grafana-community.github.io/helm-charts",
        "grafana",
        "12.11.1",
    )


def test_values_set_only_keys_the_pinned_chart_declares() -> None:
    assert list(unknown_paths(grafana_values(), chart_defaults(VALUES))) == []


def test_it_loads_every_labelled_configmap_of_its_own_namespace_as_dashboards() -> None:
    dashboards = grafana_values()["sidecar"]["dashboards"]
    assert (dashboards["enabled"], dashboards["label"], dashboards["labelValue"]) == (True, "grafana_dashboard", "1")
    assert "searchNamespace" not in dashboards  # unset: the sidecar's own namespace, the metrics namespace
    assert chart_defaults(VALUES)["sidecar"]["dashboards"]["searchNamespace"] is None


def test_its_data_source_is_the_regions_prometheus_by_the_uid_dashboards_name() -> None:
    (source,) = grafana_values()["datasources"]["datasources.yaml"]["datasources"]
    assert (source["type"], source["uid"], source["url"]) == (
        "prometheus",
        naming.DASHBOARD_DATASOURCE_UID,
        naming.prometheus_query_url(),
    )


def test_no_credential_is_set_so_the_chart_keeps_its_generated_password_in_the_cluster() -> None:
    """templates/secret.yaml generates (or looks up) the admin password only while none is given."""
    values = grafana_values()
    defaults = chart_defaults(VALUES)
    assert "adminPassword" not in values
    assert "adminPassword" not in defaults
    assert defaults["admin"]["existingSecret"] == ""
    assert "admin" not in values
    assert "env" not in values


def test_it_is_reachable_only_inside_the_cluster() -> None:
    defaults = chart_defaults(VALUES)
    assert defaults["service"]["type"] == "ClusterIP"
    assert defaults["ingress"]["enabled"] is False
    assert not {"service", "ingress", "route"} & set(grafana_values())


def test_the_recorded_scheduling_facts_are_the_charts_defaults() -> None:
    chart = chart_defaults(VALUES)
    recorded = platform_facts()["charts"]["grafana"]
    assert recorded["version"] == pins().charts.grafana.version
    for field, default in recorded["defaults"].items():
        if field == "sidecar":
            assert chart["sidecar"]["resources"] == default["resources"]
        else:
            assert chart[field] == default, field


def test_grafanas_pod_counts_both_containers_where_the_pipeline_runs_with_it() -> None:
    def found(metrics: dict[str, object]) -> list[Workload]:
        region = parse_stack_config(stack_config(region_overrides={"metrics": metrics})).regions[REGION]
        return [w for w in platform_workloads(REGION, region) if w.name == "grafana"]

    (grafana,) = found({"enabled": True})
    assert grafana.requests == amounts({"cpu": "150m", "memory": "320Mi"})
    assert grafana.namespace == naming.METRICS_NAMESPACE
    assert found({"enabled": True, "grafana": False}) == []
    assert found({"enabled": False}) == []
