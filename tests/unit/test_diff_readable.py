"""Diffs a reviewer can read: generated dashboards in one line, lists paired by id, each verdict of a
type named, the global front's changes under its own label."""

from __future__ import annotations

import json
from typing import Any

from components import naming
from components.platform.global_front import provider_name
from components.render.dashboard import dashboard_config_map
from components.spec.images import Framework
from fleetctl.diff import ABSENT, diff_plans, diff_values, render_json, render_markdown, render_text
from fleetctl.diff.engine import GLOBAL_FRONT, GLOBAL_FRONT_PROVIDER

from .test_diff import DEPLOYMENT, STACK, deployment, only, plan, provider, resource

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
Row = tuple[str, str, naming.Role, Framework]
ROW_A: Row = ("inference", "chat", "server", "vllm")
ROW_B: Row = ("inference", "code", "server", "vllm")
ROW_C: Row = ("inference", "summarize", "server", "vllm")


def dashboard(*rows: Row) -> dict[str, Any]:
    return resource(CONFIG_MAP, "us-east-1-dashboard", dashboard_config_map("us-east-1", rows))


def test_a_list_keyed_by_id_pairs_items_that_moved() -> None:
    old = [{"id": 1, "title": "a", "y": 0}, {"id": 2, "title": "b", "y": 1}]
    new = [{"id": 3, "title": "c", "y": 0}, {"id": 1, "title": "a", "y": 1}, {"id": 2, "title": "b", "y": 2}]
    changes = {change.dotted: (change.old, change.new) for change in diff_values({"p": old}, {"p": new})}
    assert changes == {"p[0]": (ABSENT, new[0]), "p[1].y": (0, 1), "p[2].y": (1, 2)}


def test_an_endpoint_inserted_in_the_dashboard_is_one_summary_line() -> None:
    base, head = plan(dashboard(ROW_A, ROW_C)), plan(dashboard(ROW_A, ROW_B, ROW_C))
    change = only(diff_plans(base, head))
    assert change.shown == ()
    (line,) = change.summary
    assert line.startswith("data['inference-fleet-us-east-1.json']: generated Grafana dashboard: ")
    assert "9 panels added (row 'code / server (vllm, inference)')" in line
    assert "9 panels moved (position only)" in line  # summarize's row, below the new one
    assert "changed" not in line
    text = render_text(diff_plans(base, head), "base", "head")
    assert "panels[" not in text
    assert line in text
    document = json.loads(render_json(diff_plans(base, head), "base", "head"))
    (record,) = document["regions"]["us-east-1"]["resources"]
    assert record["summary"] == [line]
    assert len(record["changes"]) > 8


def test_a_panel_whose_query_changed_is_counted_as_changed() -> None:
    base = dashboard(ROW_A)
    head = json.loads(json.dumps(base))
    (key,) = head["inputs"]["data"]
    board = json.loads(head["inputs"]["data"][key])
    board["panels"][1]["targets"][0]["expr"] = "up"
    head["inputs"]["data"][key] = json.dumps(board)
    (line,) = only(diff_plans(plan(base), plan(head))).summary
    assert line.endswith("generated Grafana dashboard: 1 panel changed")


def test_the_real_changes_come_before_the_generated_dashboard() -> None:
    base = plan(dashboard(ROW_A))
    head = plan(dashboard(ROW_A, ROW_B), resource(DEPLOYMENT, "code", deployment()))
    diff = diff_plans(base, head)
    assert [r.type for r in diff.resources] == [DEPLOYMENT, CONFIG_MAP]  # an update sorts before a create
    markdown = render_markdown(diff, "base", "head").splitlines()
    total = markdown.index("**Total:** 1 to create, 0 to update, 1 to replace, 0 to delete")
    assert total < next(index for index, line in enumerate(markdown) if line.startswith("#### "))


def test_a_types_verdict_names_a_rolling_restart_beside_a_deletion() -> None:
    base = plan(resource(DEPLOYMENT, "a", deployment()), resource(DEPLOYMENT, "b", deployment()))
    head = plan(resource(DEPLOYMENT, "b", deployment("vllm:9")))
    text = render_text(diff_plans(base, head), "base", "head")
    assert f"{DEPLOYMENT}: delete (1 delete, 1 update: rolling restart)" in text
    verdicts = json.loads(render_json(diff_plans(base, head), "base", "head"))["regions"]["us-east-1"]["verdicts"]
    assert verdicts[DEPLOYMENT]["verdicts"] == {"delete": 1, "rolling restart": 1}


def test_the_global_fronts_changes_are_listed_as_the_global_fronts() -> None:
    assert provider_name().startswith(GLOBAL_FRONT_PROVIDER)
    front = {**provider("us-west-2"), "urn": f"{STACK}pulumi:providers:aws::{provider_name()}"}
    front["name"] = provider_name()
    group = "aws:globalaccelerator/endpointGroup:EndpointGroup"

    def endpoint_group(weight: int) -> dict[str, Any]:
        return {**resource(group, "eu-west-1", {"weight": weight}, region=None), "provider": front["urn"]}

    base = {**plan(), "resources": [front, endpoint_group(100)]}
    head = {**plan(), "resources": [front, endpoint_group(0)]}
    assert only(diff_plans(base, head)).region == GLOBAL_FRONT
    assert "global front: 0 to create, 1 to update" in render_text(diff_plans(base, head), "base", "head")
