"""The region dashboard: a ConfigMap Grafana's sidecar loads, a row per serving workload, panels
only for what the framework exposes (the rest named), and every query valid PromQL to the real
Prometheus parser (`promtool check rules`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
from ruamel.yaml import YAML

from components import naming
from components.platform.grafana import grafana_values
from components.render.dashboard import dashboard_config_map, dashboard_rows
from components.render.placement import placed
from components.spec import parse_stack_config
from fleetctl.stackfile import read_stack_file
from tests.unit.test_golden_manifests import CLUSTER_VERSION
from tests.unit.test_scaling_queries import promtool

from .stack_builders import DELETE, REGION, classic_endpoint, stack_config

PROJECT = Path(__file__).resolve().parents[2]


def prod_dashboard(region: str = "us-east-1") -> tuple[dict[str, Any], dict[str, Any]]:
    stack_file = read_stack_file(PROJECT / "stacks" / "Pulumi.prod.yaml")
    spec = parse_stack_config(stack_file.project_config, stack=stack_file.stack)
    endpoints = [placed(spec, placement) for placement in spec.placements_in(region)]
    config_map = dashboard_config_map(region, dashboard_rows(endpoints))
    (text,) = config_map["data"].values()
    return config_map, json.loads(text)


def queries(board: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in board["panels"] for target in panel.get("targets", [])]


def test_the_config_map_is_what_grafanas_sidecar_loads_and_valid() -> None:
    config_map, _ = prod_dashboard()
    assert config_map["metadata"]["namespace"] == naming.METRICS_NAMESPACE
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    kubernetes_validate.validate(config_map, CLUSTER_VERSION, strict=True)


def test_a_row_per_serving_workload_of_the_region() -> None:
    _, board = prod_dashboard()
    rows = [panel["title"] for panel in board["panels"] if panel["type"] == "row"]
    assert rows == [
        "chat / prefill (vllm, inference)",
        "chat / decode (vllm, inference)",
        "reason / prefill (vllm, inference)",  # LeaderWorkerSets: roles spanning two nodes
        "reason / decode (vllm, inference)",
        "summarize / server (vllm, inference)",
        "summarize / canary (vllm, inference)",
    ]


def test_every_panel_reads_the_prometheus_the_pipelines_grafana_provisions() -> None:
    _, board = prod_dashboard()
    (source,) = grafana_values()["datasources"]["datasources.yaml"]["datasources"]
    for panel in board["panels"]:
        if panel["type"] == "timeseries":
            assert panel["datasource"] == {"type": source["type"], "uid": source["uid"]}


def test_split_roles_show_kv_transfers_and_every_panel_reads_its_own_role() -> None:
    _, board = prod_dashboard()
    titles = [panel["title"] for panel in board["panels"]]
    assert titles.count("KV transfers /s") == 4  # chat's and reason's prefill and decode, not a classic server
    for expr in queries(board):
        assert 'namespace="inference",endpoint="' in expr
        assert ',role="' in expr


def test_what_a_framework_lacks_is_named_not_drawn() -> None:
    tgi = classic_endpoint({"image": "ghcr.io/huggingface/text-generation-inference:3.3.6", "model": DELETE})
    tgi["model_source"] = "s3://models/mistral"
    spec = parse_stack_config(stack_config(endpoints={"chat": tgi}))
    endpoints = [placed(spec, placement) for placement in spec.placements_in(REGION)]
    (text,) = dashboard_config_map(REGION, dashboard_rows(endpoints))["data"].values()
    board = json.loads(text)
    titles = [panel["title"] for panel in board["panels"]]
    assert "Time to first token" not in titles
    assert "KV-cache usage" not in titles
    assert "Requests waiting" in titles
    (note,) = [panel for panel in board["panels"] if panel["type"] == "text"]
    assert (
        note["options"]["content"] == "tgi exposes no time to first token, KV-cache usage: these panels are left out."
    )


def test_every_dashboard_query_parses_in_prometheus(tmp_path: Path) -> None:
    _, board = prod_dashboard()
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [{"record": f"dashboard:q{i}", "expr": e} for i, e in enumerate(queries(board))],
            }
        ]
    }
    path = tmp_path / "dashboard.rules.yaml"
    YAML(typ="safe", pure=True).dump(rules, path)
    result = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(queries(board))} rules found" in result.stdout
