"""The region's Grafana dashboard: a ConfigMap in the metrics namespace labelled for Grafana's
dashboard sidecar, one row per endpoint and serving role (classic servers, canaries, prefill,
decode), each panel a query on the region's Prometheus built from the framework metric table
(components/metric_table.py). A signal the framework does not expose gets no panel; the row's
note names what is missing, so nobody reads an empty graph as an idle server.

A split Mooncake endpoint (and its canary set) also gets a row for its proxy, which stays up when
prefill and decode scale to zero: the requests it received and relayed, those it answered 503
because a role had no pod (per role), those in flight, and how many prefill and decode pods
Prometheus scrapes, 0 at zero rather than no data. A classic endpoint's gate (min_replicas 0, or
routing) gets the same row, for its server. A front that routes also shows the share of the prompts
it believed cached where it sent them and its load on each backend; every vLLM row shows the engine's
own prefix-cache hit rate, the figure routing by prefix raises."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from components import naming
from components.metric_table import (
    DCGM,
    PREFIX_CACHE,
    PROXY_ANSWERED,
    PROXY_BACKEND_IN_FLIGHT,
    PROXY_IN_FLIGHT,
    PROXY_REQUESTS,
    PROXY_ROUTED_BLOCKS,
    PROXY_ROUTED_CACHED_BLOCKS,
    PROXY_UNSERVED,
    SIGNAL_MEANING,
    TABLE,
    Series,
    Signal,
)
from components.render.autoscaling import selector
from components.render.endpoint import endpoint_objects
from components.render.kube import metadata
from components.render.placement import PlacedEndpoint
from components.spec.images import Framework

DATASOURCE = {"type": "prometheus", "uid": naming.DASHBOARD_DATASOURCE_UID}
"""The region's Prometheus, as the pipeline's Grafana provisions it (components/platform/grafana.py)."""
WINDOW = "2m"
SERVING_ROLES = ("server", "canary", "prefill", "decode")
"""Roles whose pods run the framework's server (proxy and store master export none of its metrics)."""
PROXY_ROLE: naming.Role = "proxy"
FRONT_ROLES: dict[str, tuple[naming.Role, ...]] = {PROXY_ROLE: ("prefill", "decode"), "gate": ("server",)}
"""The pods running the proxy program (a split endpoint's proxy, a classic endpoint's gate) and the
roles behind each."""
ROW_ROLES = (*SERVING_ROLES, *FRONT_ROLES)
INFERENCE_JOB = "inference"
"""The scrape job of the servers (components/platform/prometheus.py): its ``up`` series, one per
pod it scrapes, carry the pod's ``endpoint`` and ``role``."""
_WIDTH, _HEIGHT = 8, 7


def dashboard_name(region: str) -> str:
    return f"{naming.PROJECT}-{region}"


def serving_workloads(manifests: Iterable[Mapping[str, Any]]) -> list[tuple[str, naming.Role]]:
    """(series endpoint label, role) of each workload that runs a server or a split endpoint's
    proxy, as its pods are labelled."""
    found = []
    for manifest in manifests:
        if manifest["kind"] in ("Deployment", "StatefulSet"):
            labels = manifest["spec"]["template"]["metadata"]["labels"]
        elif manifest["kind"] == "LeaderWorkerSet":  # a role spanning nodes: its leaders' pods
            labels = manifest["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]
        else:
            continue
        role = labels["app.kubernetes.io/component"]
        if role in ROW_ROLES:
            found.append((labels["app.kubernetes.io/name"], role))
    return found


def _quantiles(sample: str, labels: str, to_ms: float) -> list[dict[str, str]]:
    scale = "" if to_ms == 1.0 else f" * {to_ms:g}"
    return [
        {
            "expr": f"histogram_quantile({q}, sum by (le) (rate({sample}{labels}[{WINDOW}]))){scale}",
            "legendFormat": f"p{int(q * 100)}",
        }
        for q in (0.5, 0.9, 0.99)
    ]


def _targets(signal: Signal, entry: Series, labels: str) -> list[dict[str, str]] | None:
    """A signal's queries on one role's series; None where the entry cannot be read so."""
    if signal in ("requests", "kv_transfers"):
        return [{"expr": f"sum(rate({entry.count}{labels}[{WINDOW}]))", "legendFormat": signal}]
    if signal in ("ttft", "inter_token"):
        return None if entry.to_ms is None else _quantiles(entry.sample, labels, entry.to_ms)
    aggregate = "avg" if signal == "kv_cache" else "sum"
    return [{"expr": f"{aggregate}({entry.name}{labels})", "legendFormat": signal}]


PANELS: tuple[tuple[Signal, str, str], ...] = (
    ("requests", "Requests finished /s", "reqps"),
    ("ttft", "Time to first token", "ms"),
    ("inter_token", "Inter-token latency", "ms"),
    ("queue", "Requests waiting", "short"),
    ("running", "Sequences running", "short"),
    ("kv_cache", "KV-cache usage", "percentunit"),
    ("kv_transfers", "KV transfers /s", "ops"),
)


def _panel(title: str, unit: str, targets: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "type": "timeseries",
        "title": title,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit}},
        "targets": [
            {**target, "refId": chr(ord("A") + index), "datasource": DATASOURCE} for index, target in enumerate(targets)
        ],
    }


def role_panels(namespace: str, endpoint: str, role: naming.Role, framework: Framework) -> list[dict[str, Any]]:
    """Every panel of one role's row; a note of what the framework does not expose last."""
    row = TABLE[framework]
    labels = selector(namespace, endpoint, role)
    panels: list[dict[str, Any]] = []
    missing: list[Signal] = []
    for signal, title, unit in PANELS:
        if signal == "kv_transfers" and role not in ("prefill", "decode"):
            continue  # only split roles move KV between pods
        entry = row.get(signal)
        targets = None if entry is None else _targets(signal, entry, labels)
        if targets is None:
            missing.append(signal)
        else:
            panels.append(_panel(title, unit, targets))
    if framework in PREFIX_CACHE:
        hits, queries = PREFIX_CACHE[framework]
        ratio = f"sum(rate({hits.name}{labels}[{WINDOW}])) / sum(rate({queries.name}{labels}[{WINDOW}]))"
        panels.append(
            _panel(
                "Prefix-cache hit rate (prompt tokens)", "percentunit", [{"expr": ratio, "legendFormat": "hit rate"}]
            )
        )
    gpu = [{"expr": f"avg({DCGM['gpu'].name}{labels})", "legendFormat": "gpu"}]
    panels.append(_panel("GPU utilisation", "percent", gpu))
    if missing:
        names = ", ".join(SIGNAL_MEANING[signal] for signal in missing)
        note = f"{framework} exposes no {names}: these panels are left out."
        panels.append({"type": "text", "title": "Not exposed", "options": {"mode": "markdown", "content": note}})
    return panels


def proxy_panels(
    namespace: str, endpoint: str, front: naming.Role = PROXY_ROLE, routed: bool = False
) -> list[dict[str, Any]]:
    """A split endpoint's proxy row (a classic endpoint's gate row): what it received and could not
    serve, and the pods of the roles behind it; a front that routes (``routing``) adds the share of the
    prompts it believed cached where it sent them, and the load it holds on each backend."""
    labels = selector(namespace, endpoint, front)
    traffic = [
        {"expr": f"sum(rate({PROXY_REQUESTS}{labels}[{WINDOW}]))", "legendFormat": "received"},
        {"expr": f"sum(rate({PROXY_ANSWERED}{labels}[{WINDOW}]))", "legendFormat": "answered"},
    ]
    unserved = [{"expr": f"sum by (backend) (rate({PROXY_UNSERVED}{labels}[{WINDOW}]))", "legendFormat": "{{backend}}"}]
    in_flight = [{"expr": f"sum({PROXY_IN_FLIGHT}{labels})", "legendFormat": "in flight"}]
    roles = FRONT_ROLES[front]
    pods = [
        {
            "expr": f'count(up{{job="{INFERENCE_JOB}",{selector(namespace, endpoint, role)[1:]} == 1) or vector(0)',
            "legendFormat": role,
        }
        for role in roles
    ]
    panels = [
        _panel("Requests received and answered /s", "reqps", traffic),
        _panel("Unserved (503, no pod of the role) /s", "reqps", unserved),
        _panel("Requests in flight", "short", in_flight),
        _panel(f"{' and '.join(roles).capitalize()} pods up (0: scaled to zero)", "short", pods),
    ]
    if routed:
        believed = (
            f"sum by (backend) (rate({PROXY_ROUTED_CACHED_BLOCKS}{labels}[{WINDOW}]))"
            f" / sum by (backend) (rate({PROXY_ROUTED_BLOCKS}{labels}[{WINDOW}]))"
        )
        load = f"sum by (backend, target) ({PROXY_BACKEND_IN_FLIGHT}{labels})"
        panels += [
            _panel(
                "Prompt believed cached where routed",
                "percentunit",
                [{"expr": believed, "legendFormat": "{{backend}}"}],
            ),
            _panel(
                "Requests in flight per backend", "short", [{"expr": load, "legendFormat": "{{backend}} {{target}}"}]
            ),
        ]
    return panels


def panel_id(key: str, used: set[int]) -> int:
    """A panel's ``id`` from what it shows (namespace, endpoint, role, title), not from its position: an
    endpoint added or removed leaves every other panel's id, and so its links (``viewPanel=<id>``) and
    the diff's pairing of panels, as they were. Grafana keeps an id that is positive and unique and
    renumbers a duplicate or a missing one; it orders panels by ``gridPos`` (y, then x), so positions
    must stay sequential (grafana/grafana apps/dashboard/pkg/migration/frontend_defaults.go,
    ensurePanelsHaveUniqueIds and sortPanelsByGridPos, read on the main branch, not at the 13.2.0 tag
    the chart pins). Ids fit 31 bits; the rare clash takes the next free number."""
    number = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") & 0x7FFFFFFF or 1
    while number in used:
        number = number % 0x7FFFFFFF + 1
    used.add(number)
    return number


def dashboard(
    region: str, rows: Iterable[tuple[str, str, naming.Role, Framework]], routed: Collection[tuple[str, str]] = ()
) -> dict[str, Any]:
    """Grafana dashboard JSON; ``rows`` are (namespace, series endpoint, role, framework), ``routed`` the
    (namespace, series endpoint) whose front routes (``routing_fronts``)."""
    panels: list[dict[str, Any]] = []
    used: set[int] = set()
    y = 0
    for namespace, endpoint, role, framework in rows:
        proxy = role in FRONT_ROLES
        title = f"{endpoint} / {role} ({namespace})" if proxy else f"{endpoint} / {role} ({framework}, {namespace})"
        row_key = f"{namespace}/{endpoint}/{role}"
        panels.append(
            {"type": "row", "title": title, "collapsed": False, "id": panel_id(row_key, used),
             "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []}
        )  # fmt: skip
        y += 1
        if proxy:
            row_panels = proxy_panels(namespace, endpoint, role, (namespace, endpoint) in routed)
        else:
            row_panels = role_panels(namespace, endpoint, role, framework)
        for index, panel in enumerate(row_panels):
            x = (index % 3) * _WIDTH
            panel["id"] = panel_id(f"{row_key}/{panel['title']}", used)
            panel["gridPos"] = {"h": _HEIGHT, "w": _WIDTH, "x": x, "y": y + (index // 3) * _HEIGHT}
            panels.append(panel)
        y += -(-len(row_panels) // 3) * _HEIGHT
    return {
        "uid": dashboard_name(region)[:40],
        "title": f"Inference fleet: {region}",
        "tags": [naming.PROJECT],
        "timezone": "utc",
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-3h", "to": "now"},
        "panels": panels,
    }


def dashboard_config_map(
    region: str, rows: Iterable[tuple[str, str, naming.Role, Framework]], routed: Collection[tuple[str, str]] = ()
) -> dict[str, Any]:
    name = dashboard_name(region)
    key, value = naming.DASHBOARD_LABEL
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(name, naming.METRICS_NAMESPACE, {**naming.fleet_labels(), key: value}),
        "data": {f"{name}.json": json.dumps(dashboard(region, rows, routed), indent=1, sort_keys=True)},
    }


def dashboard_rows(endpoints: Iterable[PlacedEndpoint]) -> list[tuple[str, str, naming.Role, Framework]]:
    """Each serving workload and proxy of the region's endpoints (canary sets included), in endpoint order."""
    return dashboard_inputs(endpoints)[0]


def dashboard_inputs(
    endpoints: Iterable[PlacedEndpoint],
) -> tuple[list[tuple[str, str, naming.Role, Framework]], set[tuple[str, str]]]:
    """The dashboard's rows (``dashboard_rows``), and the (namespace, series endpoint) of each front
    (proxy, gate) that routes: its program runs with ``--routing`` (front/serve.py), so it exports the
    routing series. One rendering of each endpoint for both."""
    rows: list[tuple[str, str, naming.Role, Framework]] = []
    routed: set[tuple[str, str]] = set()
    for endpoint in sorted(endpoints, key=lambda placed: placed.name):
        manifests = list(endpoint_objects(endpoint).values())
        for series_endpoint, role in serving_workloads(manifests):
            rows.append((endpoint.namespace, series_endpoint, role, endpoint.spec.framework))
        for manifest in manifests:
            template = manifest["spec"]["template"] if manifest["kind"] == "Deployment" else None
            if template is None or template["metadata"]["labels"]["app.kubernetes.io/component"] not in FRONT_ROLES:
                continue
            if any("--routing" in container.get("args", []) for container in template["spec"]["containers"]):
                routed.add((endpoint.namespace, template["metadata"]["labels"]["app.kubernetes.io/name"]))
    return rows, routed
