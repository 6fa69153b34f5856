"""regions.<r>.metrics: its fields, and the default that turns the pipeline on where an endpoint needs it."""

from __future__ import annotations

from typing import Any

import pytest

from components.spec import SpecError, parse_stack_config

from .stack_builders import REGION, classic_endpoint, mooncake_endpoint, region, stack_config


def metrics_of(config: dict[str, Any]) -> Any:
    return parse_stack_config(config).regions[REGION].metrics


def autoscaled(*metrics: str) -> dict[str, Any]:
    return classic_endpoint({"autoscaling": {"min_replicas": 1, "max_replicas": 2, "metrics": list(metrics)}})


def test_a_region_without_endpoints_runs_no_pipeline() -> None:
    assert metrics_of(stack_config()).enabled is False


@pytest.mark.parametrize("metrics", [("cpu:70",), ("memory:80",), ("cpu:70", "memory:80")])
def test_resource_metrics_alone_turn_it_on_too_since_keda_runs_every_autoscaler(metrics: tuple[str, ...]) -> None:
    assert metrics_of(stack_config(endpoints={"chat": autoscaled(*metrics)})).enabled is True


@pytest.mark.parametrize("metric", ["gpu:60", "gpu_memory:80", "queue:5", "query:2:sum(up)"])
def test_any_other_metric_turns_the_pipeline_on(metric: str) -> None:
    assert metrics_of(stack_config(endpoints={"chat": autoscaled("cpu:70", metric)})).enabled is True


@pytest.mark.parametrize(
    ("endpoint", "path"),
    [
        (autoscaled("cpu:70"), "endpoints.chat.autoscaling"),
        (
            mooncake_endpoint(
                {
                    "mooncake": {
                        "autoscaling": {"enabled": True, "decode": {"max_replicas": 2, "metrics": ["running:8"]}}
                    }
                }
            ),
            "endpoints.chat.mooncake.autoscaling",
        ),
    ],
)
def test_an_autoscaler_in_a_region_whose_pipeline_is_off_is_refused(endpoint: dict[str, Any], path: str) -> None:
    config = stack_config(region_overrides={"metrics": {"enabled": False}}, endpoints={"chat": endpoint})
    with pytest.raises(SpecError) as caught:
        parse_stack_config(config)
    (problem,) = caught.value.problems
    assert problem.path == path
    assert "whose metrics pipeline is off (regions.us-east-1.metrics.enabled: false)" in problem.message


def test_a_disabled_autoscaler_needs_no_pipeline() -> None:
    endpoint = classic_endpoint({"autoscaling": {"enabled": False, "max_replicas": 2, "metrics": ["gpu:60"]}})
    assert metrics_of(stack_config(endpoints={"chat": endpoint})).enabled is False


def test_a_mooncake_role_autoscaled_on_gpu_turns_it_on() -> None:
    scaling = {"enabled": True, "decode": {"min_replicas": 1, "max_replicas": 3, "metrics": ["gpu:60"]}}
    endpoint = mooncake_endpoint({"mooncake": {"autoscaling": scaling}})
    assert metrics_of(stack_config(endpoints={"chat": endpoint})).enabled is True


def test_an_endpoint_placed_elsewhere_does_not_turn_it_on_here() -> None:
    endpoint = autoscaled("gpu:60")
    endpoint["target_regions"] = ["eu-west-1"]
    other = region(name="eu-west-1")
    for group in other["node_groups"].values():
        group.pop("availability_zones", None)
    spec = parse_stack_config(
        stack_config(regions={REGION: region(), "eu-west-1": other}, endpoints={"chat": endpoint})
    )
    assert (spec.regions[REGION].metrics.enabled, spec.regions["eu-west-1"].metrics.enabled) == (False, True)


@pytest.mark.parametrize("enabled", [True, False])
def test_an_explicit_setting_wins_over_the_default(enabled: bool) -> None:
    """On without an autoscaler (for the dashboards), off with endpoints that do not autoscale."""
    config = stack_config(region_overrides={"metrics": {"enabled": enabled}}, endpoints={"chat": classic_endpoint()})
    assert metrics_of(config).enabled is enabled


def test_defaults_keep_a_week_in_ten_gibibytes_of_which_prometheus_fills_eighty_percent() -> None:
    metrics = metrics_of(stack_config())
    assert (metrics.retention_days, metrics.disk, metrics.grafana) == (7, str(10 * 2**30), True)
    assert metrics.retention_size == "8192MB"


def test_a_disk_below_a_gibibyte_is_refused_naming_the_field() -> None:
    with pytest.raises(SpecError) as error:
        parse_stack_config(stack_config(region_overrides={"metrics": {"disk": "512MiB"}}))
    (problem,) = error.value.problems
    assert problem.path == f"regions.{REGION}.metrics.disk"
    assert "at least 1GiB" in problem.message


@pytest.mark.parametrize(
    ("field", "value"), [("enabled", "yes"), ("retention_days", 0), ("retention_days", 91), ("scrape", True)]
)
def test_bad_fields_are_refused_at_their_path(field: str, value: Any) -> None:
    with pytest.raises(SpecError) as error:
        parse_stack_config(stack_config(region_overrides={"metrics": {field: value}}))
    assert [problem.path for problem in error.value.problems] == [f"regions.{REGION}.metrics.{field}"]


WORKSPACE = "arn:aws:aps:us-east-1:123456789012:workspace/ws-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"


def test_an_amp_workspace_gives_its_remote_write_endpoint_in_its_own_region() -> None:
    arn = WORKSPACE.replace("us-east-1", "eu-west-1")
    metrics = metrics_of(stack_config(region_overrides={"metrics": {"amp_workspace_arn": arn}}))
    assert metrics.amp_remote_write_url == (
        "https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/ws-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"
        "/api/v1/remote_write"
    )
    assert metrics.amp_region == "eu-west-1"
    assert metrics_of(stack_config()).amp_remote_write_url is None


@pytest.mark.parametrize(
    "value",
    [
        "ws-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d",
        WORKSPACE.replace(":aps:", ":s3:"),
        WORKSPACE + "/extra",
        "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d",
    ],
)
def test_anything_but_a_workspace_arn_is_refused_naming_the_form(value: str) -> None:
    with pytest.raises(SpecError) as error:
        parse_stack_config(stack_config(region_overrides={"metrics": {"amp_workspace_arn": value}}))
    (problem,) = error.value.problems
    assert problem.path == f"regions.{REGION}.metrics.amp_workspace_arn"
    assert "arn:aws:aps:<region>:<12-digit account>:workspace/ws-<id>" in problem.message
