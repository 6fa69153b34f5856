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
from components.metric_table import (
    PROXY_ANSWERED,
    PROXY_BACKEND_IN_FLIGHT,
    PROXY_IN_FLIGHT,
    PROXY_REQUESTS,
    PROXY_ROUTED_BLOCKS,
    PROXY_ROUTED_CACHED_BLOCKS,
    PROXY_UNSERVED,
)
from components.platform.grafana import grafana_values
from components.render.dashboard import dashboard_config_map, dashboard_inputs, dashboard_rows
from components.render.placement import placed
from components.spec import parse_stack_config
from components.spec.images import Framework
from fleetctl.stackfile import read_stack_file
from tests.unit.test_golden_manifests import CLUSTER_VERSION
from tests.unit.test_scaling_queries import promtool

from .stack_builders import DELETE, REGION, classic_endpoint, stack_config

PROJECT = Path(__file__).resolve().parents[2]


def prod_dashboard(region: str = "us-east-1") -> tuple[dict[str, Any], dict[str, Any]]:
    stack_file = read_stack_file(PROJECT / "stacks" / "Pulumi.prod.yaml")
    spec = parse_stack_config(stack_file.project_config, stack=stack_file.stack)
    endpoints = [placed(spec, placement) for placement in spec.placements_in(region)]
    config_map = dashboard_config_map(region, *dashboard_inputs(endpoints))  # as components/regional.py renders it
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
        "chat / proxy (inference)",
        "reason / prefill (vllm, inference)",  # LeaderWorkerSets: roles spanning two nodes
        "reason / decode (vllm, inference)",
        "reason / proxy (inference)",
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


def promtool_test(tmp_path: Path, series: list[dict[str, str]], tests: list[dict[str, Any]]) -> None:
    """``promtool test rules``: each expression evaluated by the real engine on ``series``, scraped every 15 s."""
    document = {
        "rule_files": [],
        "evaluation_interval": "15s",
        "tests": [{"interval": "15s", "input_series": series, "promql_expr_test": tests}],
    }
    path = tmp_path / "proxy.yaml"
    yaml = YAML(typ="safe", pure=True)
    yaml.width = 4096
    with path.open("w") as out:
        yaml.dump(document, out)
    result = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def proxy_row(board: dict[str, Any], endpoint: str, front: str = "proxy") -> dict[str, list[str]]:
    """The queries of each panel of ``endpoint``'s proxy (gate) row, by title."""
    return row_queries(board, f"{endpoint} / {front} (inference)")


def row_queries(board: dict[str, Any], title: str) -> dict[str, list[str]]:
    """The queries of each panel of the row titled ``title``, by panel title."""
    rows = [index for index, panel in enumerate(board["panels"]) if panel["type"] == "row"]
    (start,) = [index for index in rows if board["panels"][index]["title"] == title]
    end = next((index for index in rows if index > start), len(board["panels"]))
    return {
        panel["title"]: [target["expr"] for target in panel.get("targets", [])]
        for panel in board["panels"][start + 1 : end]
    }


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    found = {"namespace": "inference", "endpoint": "chat", **labels}
    return {"series": name + "{" + ",".join(f'{key}="{value}"' for key, value in found.items()) + "}", "values": values}


def at(minute: str, expr: str, *samples: tuple[str, float]) -> dict[str, Any]:
    """A promtool expression test: ``expr`` at ``minute`` gives ``samples`` (labels, value)."""
    return {"expr": expr, "eval_time": minute, "exp_samples": [{"labels": key, "value": v} for key, v in samples]}


def test_a_split_endpoints_proxy_row_shows_its_requests_unserved_by_role_and_its_roles_at_zero(
    tmp_path: Path,
) -> None:
    """The proxy's series (names from components/metric_table.py, as the proxy program exports them)
    and the ``up`` series of the inference scrape job: prefill and decode serve for five minutes,
    then scale to zero (their targets go, their series go stale); meanwhile the proxy answers 503
    per role. The canary set's proxy and pods (endpoint chat-canary) are never counted."""
    _, board = prod_dashboard()
    row = proxy_row(board, "chat")
    assert list(row)[:4] == [
        "Requests received and answered /s",
        "Unserved (503, no pod of the role) /s",
        "Requests in flight",
        "Prefill and decode pods up (0: scaled to zero)",
    ]
    proxy = {"role": "proxy", "job": "proxy"}
    input_series = [
        *(series(PROXY_REQUESTS, "0+15x40", pod=f"chat-proxy-{index}", **proxy) for index in range(2)),
        series(PROXY_REQUESTS, "0+150x40", pod="chat-canary-proxy-0", **{**proxy, "endpoint": "chat-canary"}),
        series(PROXY_ANSWERED, "0+15x20 300x20", pod="chat-proxy-0", **proxy),
        series(PROXY_UNSERVED, "0x20 0+15x20", pod="chat-proxy-0", backend="prefill", **proxy),
        series(PROXY_UNSERVED, "0x20 0+30x20", pod="chat-proxy-0", backend="decode", **proxy),
        series(PROXY_IN_FLIGHT, "3x40", pod="chat-proxy-0", **proxy),
        series("up", "1x20 stale", pod="chat-prefill-0", role="prefill", job="inference"),
        *(series("up", "1x20 stale", pod=f"chat-decode-{index}", role="decode", job="inference") for index in range(2)),
        series("up", "1x40", pod="chat-canary-prefill-0", role="prefill", job="inference", endpoint="chat-canary"),
        series("up", "1x40", pod="chat-proxy-0", role="prefill", job="proxy"),  # another job: not a prefill pod
    ]
    (received, answered), (unserved,), (in_flight,), (prefill, decode), *_ = row.values()

    promtool_test(
        tmp_path,
        input_series,
        [
            at("4m", received, ("{}", 2)),
            at("4m", answered, ("{}", 1)),
            at("4m", prefill, ("{}", 1)),
            at("4m", decode, ("{}", 2)),
            at("4m", unserved, ('{backend="decode"}', 0), ('{backend="prefill"}', 0)),
            # Five minutes past the last scrape of the roles' pods: at zero, and the proxy says why.
            at("9m", prefill, ("{}", 0)),
            at("9m", decode, ("{}", 0)),
            at("9m", answered, ("{}", 0)),
            at("9m", unserved, ('{backend="decode"}', 2), ('{backend="prefill"}', 1)),
            at("9m", in_flight, ("{}", 3)),
        ],
    )


def test_a_vllm_row_shows_the_engines_own_prefix_cache_hit_rate(tmp_path: Path) -> None:
    """vLLM 0.33.0 counts prompt tokens looked up in its prefix cache and those found (v1/metrics/loggers.py,
    vllm:prefix_cache_queries and vllm:prefix_cache_hits, counters): the row shows found over looked up,
    summed over the role's pods and never over another role's."""
    _, board = prod_dashboard()
    (ratio,) = row_queries(board, "chat / prefill (vllm, inference)")["Prefix-cache hit rate (prompt tokens)"]
    engine = {"role": "prefill", "job": "inference"}
    input_series = [
        series("vllm:prefix_cache_queries_total", "0+100x20", pod="chat-prefill-0", **engine),
        series("vllm:prefix_cache_hits_total", "0+90x20", pod="chat-prefill-0", **engine),
        series("vllm:prefix_cache_queries_total", "0+100x20", pod="chat-prefill-1", **engine),
        series("vllm:prefix_cache_hits_total", "0+30x20", pod="chat-prefill-1", **engine),
        series("vllm:prefix_cache_queries_total", "0+100x20", pod="chat-decode-0", role="decode", job="inference"),
        series("vllm:prefix_cache_hits_total", "0+0x20", pod="chat-decode-0", role="decode", job="inference"),
    ]
    promtool_test(tmp_path, input_series, [at("4m", ratio, ("{}", 0.6))])


def test_a_front_that_routes_shows_the_prompt_it_believed_cached_and_its_load_per_backend(tmp_path: Path) -> None:
    """prod's chat routes by prefix (its proxy runs with --routing), reason does not: only chat's row gains
    the two panels, over the routing series front/metrics.py exports (names from components/metric_table.py).
    Evaluated by the real engine: three quarters of prefill's blocks and half of decode's believed cached,
    each backend's load by target, the canary set's proxy never counted."""
    _, board = prod_dashboard()
    assert "Prompt believed cached where routed" not in proxy_row(board, "reason")
    row = proxy_row(board, "chat")
    assert list(row)[4:] == ["Prompt believed cached where routed", "Requests in flight per backend"]
    (believed,), (load,) = list(row.values())[4:]
    proxy = {"role": "proxy", "job": "proxy", "pod": "chat-proxy-0"}
    canary = {**proxy, "endpoint": "chat-canary", "pod": "chat-canary-proxy-0"}
    input_series = [
        series(PROXY_ROUTED_BLOCKS, "0+40x20", backend="prefill", **proxy),
        series(PROXY_ROUTED_CACHED_BLOCKS, "0+30x20", backend="prefill", **proxy),
        series(PROXY_ROUTED_BLOCKS, "0+40x20", backend="decode", **proxy),
        series(PROXY_ROUTED_CACHED_BLOCKS, "0+20x20", backend="decode", **proxy),
        series(PROXY_ROUTED_BLOCKS, "0+40x20", backend="prefill", **canary),
        series(PROXY_ROUTED_CACHED_BLOCKS, "0+0x20", backend="prefill", **canary),
        series(PROXY_BACKEND_IN_FLIGHT, "2x20", backend="prefill", target="10.0.0.1/0/e1", **proxy),
        series(PROXY_BACKEND_IN_FLIGHT, "3x20", backend="decode", target="10.0.0.2", **proxy),
        series(PROXY_BACKEND_IN_FLIGHT, "9x20", backend="decode", target="10.0.0.3", **canary),
    ]
    promtool_test(
        tmp_path,
        input_series,
        [
            at("4m", believed, ('{backend="prefill"}', 0.75), ('{backend="decode"}', 0.5)),
            at(
                "4m",
                load,
                ('{backend="prefill",target="10.0.0.1/0/e1"}', 2),
                ('{backend="decode",target="10.0.0.2"}', 3),
            ),
        ],
    )


def test_a_gated_classic_endpoints_gate_row_shows_its_requests_unserved_and_its_server_at_zero(
    tmp_path: Path,
) -> None:
    """A classic endpoint at min_replicas 0 has a row for its gate beside its server's: the gate's series
    (role gate, backend server) and the server pods the inference job scrapes, 0 once they went stale."""
    config = stack_config(endpoints={"chat": classic_endpoint({"autoscaling": {"min_replicas": 0, "max_replicas": 2}})})
    spec = parse_stack_config(config)
    endpoints = [placed(spec, placement) for placement in spec.placements_in(REGION)]
    (text,) = dashboard_config_map(REGION, dashboard_rows(endpoints))["data"].values()
    board = json.loads(text)
    rows = [panel["title"] for panel in board["panels"] if panel["type"] == "row"]
    assert rows == ["chat / server (vllm, inference)", "chat / gate (inference)"]
    row = proxy_row(board, "chat", "gate")
    assert list(row) == [
        "Requests received and answered /s",
        "Unserved (503, no pod of the role) /s",
        "Requests in flight",
        "Server pods up (0: scaled to zero)",
    ]
    gate = {"role": "gate", "job": "proxy"}
    input_series = [
        *(series(PROXY_REQUESTS, "0+15x40", pod=f"chat-gate-{index}", **gate) for index in range(2)),
        series(PROXY_ANSWERED, "0+15x20 300x20", pod="chat-gate-0", **gate),
        series(PROXY_UNSERVED, "0x20 0+15x20", pod="chat-gate-0", backend="server", **gate),
        series(PROXY_IN_FLIGHT, "1x40", pod="chat-gate-0", **gate),
        series("up", "1x20 stale", pod="chat-6d5f8-0", role="server", job="inference"),
        series("up", "1x40", pod="chat-canary-0", role="canary", job="inference"),  # not the server
    ]
    (received, answered), (unserved,), (in_flight,), (server,) = row.values()

    promtool_test(
        tmp_path,
        input_series,
        [
            at("4m", received, ("{}", 2)),
            at("4m", answered, ("{}", 1)),
            at("4m", server, ("{}", 1)),
            at("4m", unserved, ('{backend="server"}', 0)),
            at("9m", server, ("{}", 0)),
            at("9m", answered, ("{}", 0)),
            at("9m", unserved, ('{backend="server"}', 1)),
            at("9m", in_flight, ("{}", 1)),
        ],
    )


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


Row = tuple[str, str, naming.Role, Framework]


def test_panel_ids_follow_what_a_panel_shows_not_where_it_sits() -> None:
    row: Row = ("inference", "summarize", "server", "vllm")
    other: Row = ("inference", "assist", "server", "vllm")

    def panels(*rows: Row) -> list[dict[str, Any]]:
        (text,) = dashboard_config_map(REGION, rows)["data"].values()
        return list(json.loads(text)["panels"])

    alone, after_another = panels(row), panels(other, row)
    moved = after_another[-len(alone) :]
    assert [panel["title"] for panel in moved] == [panel["title"] for panel in alone]
    assert [panel["id"] for panel in moved] == [panel["id"] for panel in alone]
    assert [panel["gridPos"]["y"] for panel in moved] != [panel["gridPos"]["y"] for panel in alone]
    numbers = [panel["id"] for panel in after_another]
    assert len(set(numbers)) == len(numbers)
    assert min(numbers) > 0
