"""The region's Prometheus: chart values, the scrape configuration promtool accepts, the server's pod."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ruamel.yaml import YAML

from components import naming
from components.catalog import pins
from components.platform import prometheus
from components.schedulability.platform_pods import facts as platform_facts
from components.schedulability.platform_pods import platform_workloads
from components.schedulability.quantities import amounts
from components.spec import parse_stack_config
from components.spec.metrics import Metrics
from tests.chart_values import chart_defaults, unknown_paths
from tests.prometheus_config import rendered_config, with_file_sd
from tests.prometheus_tools import binary

from .stack_builders import REGION, stack_config

VALUES = "prometheus-29.27.0-values.yaml"


def test_the_chart_is_prometheus_community_s_at_the_pinned_version() -> None:
    chart = pins().charts.prometheus
    assert (chart.repo, chart.chart, chart.version) == (
        "https://prometheus-community.github.io/helm-charts",
        "prometheus",
        "29.27.0",
    )


def test_values_set_only_keys_the_pinned_chart_declares_besides_our_scrape_jobs() -> None:
    """scrapeConfigs takes further keys as further jobs (values.yaml: 'Further scrapeConfigs can be
    added as new keys'); every other path is the chart's."""
    values = prometheus.prometheus_values(Metrics())
    defaults = chart_defaults(VALUES)
    ours = {job for job in values["scrapeConfigs"] if job not in defaults["scrapeConfigs"]}
    assert ours == {"inference", "proxy", "dcgm-exporter", "keda"}
    assert list(unknown_paths({k: v for k, v in values.items() if k != "scrapeConfigs"}, defaults)) == []


def test_every_default_job_but_prometheus_itself_is_off() -> None:
    defaults = chart_defaults(VALUES)["scrapeConfigs"]
    assert set(prometheus.CHART_SCRAPE_JOBS) == set(defaults) - {"prometheus"}
    jobs = [job["job_name"] for job in rendered_config(prometheus.prometheus_values(Metrics()))["scrape_configs"]]
    assert jobs == ["dcgm-exporter", "inference", "keda", "proxy"]  # the chart's own 'prometheus' job stays on: merged
    assert {name: settings["enabled"] for name, settings in defaults.items()}["prometheus"] is True


def test_the_server_answers_where_the_scalers_query_and_keeps_what_the_spec_says() -> None:
    server = prometheus.prometheus_values(Metrics(retention_days=3, disk="20GiB"))["server"]
    assert (server["fullnameOverride"], server["service"]["servicePort"]) == ("prometheus", 9090)
    assert naming.prometheus_query_url() == "http://prometheus.inference-fleet-metrics.svc.cluster.local:9090"
    assert (server["retention"], server["retentionSize"]) == ("3d", "16384MB")
    assert server["persistentVolume"] == {"enabled": False}
    assert server["emptyDir"] == {"sizeLimit": "20Gi"}
    assert server["global"]["scrape_interval"] == "15s"


def test_every_subchart_is_off() -> None:
    values = prometheus.prometheus_values(Metrics())
    defaults = chart_defaults(VALUES)
    assert {name for name in defaults if isinstance(defaults[name], dict) and "enabled" in defaults[name]} >= set(
        prometheus.SUBCHARTS
    )
    assert all(values[name] == {"enabled": False} for name in prometheus.SUBCHARTS)


def test_promtool_accepts_the_rendered_configuration(tmp_path: Path) -> None:
    """promtool check config parses every scrape job and its relabel rules as the Prometheus it ships
    with does (Debian's 2.42; the chart runs 3.14, which reads these the same). Debian builds it
    without Kubernetes discovery, so the jobs read their targets from files here."""
    config = tmp_path / "prometheus.yml"
    rendered = with_file_sd(rendered_config(prometheus.prometheus_values(Metrics())), str(tmp_path))
    with config.open("w", encoding="utf-8") as handle:
        YAML(typ="safe", pure=True).dump(rendered, handle)
    result = subprocess.run(
        [binary("promtool"), "check", "config", str(config)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_refuses_a_broken_relabel_rule(tmp_path: Path) -> None:
    """The check above can fail: a relabel rule with an invalid regex is refused."""
    values = prometheus.prometheus_values(Metrics())
    values["scrapeConfigs"]["inference"]["relabel_configs"][0]["regex"] = "("
    config = tmp_path / "prometheus.yml"
    with config.open("w", encoding="utf-8") as handle:
        YAML(typ="safe", pure=True).dump(with_file_sd(rendered_config(values), str(tmp_path)), handle)
    assert subprocess.run(
        [binary("promtool"), "check", "config", str(config)], capture_output=True, check=False
    ).returncode


def test_the_recorded_scheduling_facts_are_the_charts_defaults() -> None:
    server = chart_defaults(VALUES)["server"]
    recorded = platform_facts()["charts"]["prometheus"]
    assert recorded["version"] == pins().charts.prometheus.version
    for field, default in recorded["defaults"]["server"].items():
        assert server[field] == default, field
    assert server["statefulSet"]["enabled"] is False
    assert server["daemonSet"]["enabled"] is False
    assert chart_defaults(VALUES)["configmapReload"]["prometheus"]["resources"] == {}


def test_the_server_is_one_pod_on_a_system_node_counted_where_the_pipeline_runs() -> None:
    on = parse_stack_config(stack_config(region_overrides={"metrics": {"enabled": True}})).regions[REGION]
    (server,) = [w for w in platform_workloads(REGION, on) if w.name == "prometheus"]
    assert (server.namespace, server.replicas) == (naming.METRICS_NAMESPACE, 1)
    assert server.requests == amounts({"cpu": "500m", "memory": "2Gi"})
    assert server.pod["nodeSelector"] == {"inference-fleet/accelerator": "none"}
    off = parse_stack_config(stack_config()).regions[REGION]
    assert not [w for w in platform_workloads(REGION, off) if w.name == "prometheus"]


def test_promtool_accepts_remote_write_to_amp_signed_with_sigv4(tmp_path: Path) -> None:
    settings = Metrics(
        amp_workspace_arn="arn:aws:aps:us-east-1:123456789012:workspace/ws-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"
    )
    values = prometheus.prometheus_values(settings)
    config = rendered_config(values)
    assert config["remote_write"] == values["server"]["remoteWrite"]
    path = tmp_path / "prometheus.yml"
    with path.open("w", encoding="utf-8") as handle:
        YAML(typ="safe", pure=True).dump(with_file_sd(config, str(tmp_path)), handle)
    result = subprocess.run(
        [binary("promtool"), "check", "config", str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "remoteWrite" not in prometheus.prometheus_values(Metrics())["server"]
