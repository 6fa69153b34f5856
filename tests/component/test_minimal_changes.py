"""Operations as config edits (docs/operations.md): each edit of an example stack,
planned offline before and after, changes exactly what it should and nothing else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from fleetctl.cli import main as fleetctl
from fleetctl.diff import main as diff
from fleetctl.stackfile import stack_path
from tests.component.programs import edited, plan_directory

ROUTE = "kubernetes:networking.k8s.io/v1:Ingress"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
PROD_REGIONS = ("eu-west-1", "us-east-1")
ACTION = "metadata.annotations['alb.ingress.kubernetes.io/actions.summarize'](json)"


@pytest.fixture(scope="module")
def base_plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("base")
    return {stack: plan_directory(stack_path(stack), root / stack) for stack in ("dev", "prod")}


def changes(capsys: pytest.CaptureFixture[str], base: Path, head: Path) -> list[dict[str, Any]]:
    code = diff([str(base), str(head), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 2, err
    document = json.loads(out)
    return [entry for region in document["regions"].values() for entry in region["resources"]]


def summary(entries: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    return sorted((entry["action"], entry["type"], entry["name"], entry["verdict"]) for entry in entries)


def paths(entry: dict[str, Any]) -> set[str]:
    return {change["path"] for change in entry["changes"]}


def edited_with_fleetctl(tmp_path: Path, stack: str, *argv: str) -> Path:
    copy = tmp_path / f"Pulumi.{stack}.yaml"
    shutil.copyfile(stack_path(stack), copy)
    assert fleetctl([*argv, "--stack-file", str(copy)]) == 0
    return copy


def planned_edit(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], stack: str, *argv: str
) -> list[dict[str, Any]]:
    """The resource changes of one fleetctl edit of an example stack, planned before and after."""
    head = edited_with_fleetctl(tmp_path, stack, *argv)
    capsys.readouterr()
    return changes(capsys, base_plans[stack], plan_directory(head, tmp_path / "plan"))


def test_scaling_changes_only_the_replica_count(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (entry,) = planned_edit(base_plans, tmp_path, capsys, "dev", "scale", "assistant", "3")
    assert (entry["action"], entry["type"], entry["name"], entry["verdict"]) == (
        "update",
        DEPLOYMENT,
        "us-west-2-assistant",
        "in place",
    )
    assert entry["changes"] == [{"path": "spec.replicas", "old": 1, "new": 3, "forces_replacement": False}]


def test_an_image_update_rolls_only_that_endpoints_workload(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (entry,) = planned_edit(
        base_plans, tmp_path, capsys, "dev", "image", "set", "assistant", "vllm/vllm-openai:v0.34.0"
    )
    assert (entry["type"], entry["name"], entry["verdict"]) == (DEPLOYMENT, "us-west-2-assistant", "rolling restart")
    assert paths(entry) == {"spec.template.spec.containers[0].image"}


def test_stopping_changes_only_the_replica_count_and_keeps_every_object(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (entry,) = planned_edit(base_plans, tmp_path, capsys, "dev", "stop", "assistant")
    assert entry["changes"] == [{"path": "spec.replicas", "old": 1, "new": 0, "forces_replacement": False}]


def test_a_canary_weight_change_updates_only_the_routes(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = planned_edit(base_plans, tmp_path, capsys, "prod", "canary", "weight", "summarize", "25")
    assert summary(entries) == [("update", ROUTE, f"{region}-summarize", "traffic only") for region in PROD_REGIONS]
    for entry in entries:
        assert paths(entry) == {f"{ACTION}.forwardConfig.targetGroups[{index}].weight" for index in (0, 1)}


def test_promote_changes_the_primary_image_deletes_the_canary_and_restores_the_route(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = planned_edit(base_plans, tmp_path, capsys, "prod", "canary", "promote", "summarize")
    assert summary(entries) == sorted(
        [
            *(("update", DEPLOYMENT, f"{region}-summarize", "rolling restart") for region in PROD_REGIONS),
            *(("delete", DEPLOYMENT, f"{region}-summarize-canary", "delete") for region in PROD_REGIONS),
            *(("delete", SERVICE, f"{region}-summarize-canary", "delete") for region in PROD_REGIONS),
            *(("update", ROUTE, f"{region}-summarize", "traffic only") for region in PROD_REGIONS),
            # the region's dashboard loses the canary's row
            *(("update", CONFIG_MAP, f"{region}-dashboard", "in place") for region in PROD_REGIONS),
        ]
    )
    primary = next(entry for entry in entries if entry["name"] == "us-east-1-summarize" and entry["type"] == DEPLOYMENT)
    assert primary["changes"] == [
        {
            "path": "spec.template.spec.containers[0].image",
            "old": "123456789012.dkr.ecr.us-east-1.amazonaws.com/summarize-vllm:2026.11.1",
            "new": "123456789012.dkr.ecr.us-east-1.amazonaws.com/summarize-vllm:2026.11.2",
            "forces_replacement": False,
        }
    ]


def test_rollback_deletes_the_canary_and_restores_the_route_leaving_the_primary_alone(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = planned_edit(base_plans, tmp_path, capsys, "prod", "canary", "rollback", "summarize")
    assert summary(entries) == sorted(
        [
            *(("delete", DEPLOYMENT, f"{region}-summarize-canary", "delete") for region in PROD_REGIONS),
            *(("delete", SERVICE, f"{region}-summarize-canary", "delete") for region in PROD_REGIONS),
            *(("update", ROUTE, f"{region}-summarize", "traffic only") for region in PROD_REGIONS),
            *(("update", CONFIG_MAP, f"{region}-dashboard", "in place") for region in PROD_REGIONS),
        ]
    )


def test_adding_an_endpoint_only_creates(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = (
        "  inference-fleet:endpoints:\n    docs:\n      image: lmsysorg/sglang:v0.5.6\n      model: Qwen/Qwen3-0.6B\n"
        "      node_group: gpu\n"
    )
    head = edited(tmp_path / "stack", "dev", ("  inference-fleet:endpoints:\n", new))
    entries = changes(capsys, base_plans["dev"], plan_directory(head, tmp_path / "plan"))
    assert {entry["action"] for entry in entries} == {"create"}
    assert {entry["name"] for entry in entries} == {"us-west-2-docs"}


def test_removing_an_endpoint_deletes_all_of_its_objects_and_nothing_else(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = planned_edit(base_plans, tmp_path, capsys, "prod", "endpoint", "remove", "summarize")
    endpoint = [entry for entry in entries if "-summarize" in entry["name"]]
    assert {entry["action"] for entry in endpoint} == {"delete"}
    assert {entry["name"].split("-summarize")[0] for entry in endpoint} == set(PROD_REGIONS)
    assert len(endpoint) == 2 * 9  # per region: the component and its eight objects
    # chat still autoscales, so each region keeps its metrics pipeline; its dashboard loses
    # summarize's rows and nothing else changes.
    assert summary([entry for entry in entries if entry not in endpoint]) == sorted(
        ("update", CONFIG_MAP, f"{region}-dashboard", "in place") for region in PROD_REGIONS
    )


def test_a_topology_edit_changes_only_the_role_counts(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The proxy finds prefill pods by the headless Service's name, so it does not roll."""
    entries = planned_edit(
        base_plans, tmp_path, capsys, "dev", "topology", "set", "chat-pd", "--prefill", "2", "--decode", "3"
    )
    assert summary(entries) == [
        ("update", DEPLOYMENT, "us-west-2-chat-pd-decode", "in place"),
        ("update", "kubernetes:apps/v1:Deployment", "us-west-2-chat-pd-prefill", "in place"),
    ]
    by_name = {entry["name"]: entry for entry in entries}
    assert paths(by_name["us-west-2-chat-pd-prefill"]) == {"spec.replicas"}
    assert paths(by_name["us-west-2-chat-pd-decode"]) == {"spec.replicas"}


def test_a_store_edit_changes_the_config_and_rolls_exactly_the_pods_that_read_it(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = planned_edit(
        base_plans, tmp_path, capsys, "prod", "store", "configure", "chat", "--global-segment-size", "32GiB"
    )
    assert summary(entries) == sorted(
        [
            *(
                ("update", "kubernetes:core/v1:ConfigMap", f"{region}-chat-mooncake", "in place")
                for region in PROD_REGIONS
            ),
            *(
                ("update", "kubernetes:apps/v1:Deployment", f"{region}-chat-prefill", "rolling restart")
                for region in PROD_REGIONS
            ),
            *(("update", DEPLOYMENT, f"{region}-chat-decode", "rolling restart") for region in PROD_REGIONS),
        ]
    )
    config = next(entry for entry in entries if entry["name"] == "us-east-1-chat-mooncake")
    assert config["changes"][0]["forces_replacement"] is False  # edited in place (enableConfigMapMutable)
    decode = next(entry for entry in entries if entry["name"] == "us-east-1-chat-decode")
    # An rdma store's segments are huge pages, not memory (docs/efa.md); the bootstrap timeout is sized
    # from the segment in mode both (VLLM_MOONCAKE_CONNECTOR_TIMEOUT, components/render/mooncake_roles.py).
    env = decode["changes"]
    assert any(c["path"] == "spec.template.spec.containers[0].env[3].value" and c["new"] == "62" for c in env)
    assert paths(decode) == {
        "spec.template.spec.containers[0].env[3].value",
        "spec.template.metadata.annotations.inference-fleet/mooncake-config-sha256",
        "spec.template.spec.containers[0].resources.limits.hugepages-2Mi",
        "spec.template.spec.containers[0].resources.requests.hugepages-2Mi",
    }


def test_autoscaling_an_endpoint_creates_its_scaled_object_and_the_regions_pipeline_and_frees_its_count(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dev autoscales nothing, so it runs no metrics pipeline; the first autoscaler brings it (KEDA
    runs every autoscaler), and the Deployment only gives up its replica count."""
    entries = planned_edit(
        base_plans, tmp_path, capsys, "dev", "autoscaling", "set", "assistant", "--max", "3", "--metric", "queue:8"
    )
    assert {entry["action"] for entry in entries} == {"create", "update"}
    (update,) = [entry for entry in entries if entry["action"] == "update"]
    assert (update["type"], update["name"]) == (DEPLOYMENT, "us-west-2-assistant")
    assert paths(update) == {"spec.replicas"}
    created = {(entry["type"], entry["name"]) for entry in entries if entry["action"] == "create"}
    assert ("kubernetes:keda.sh/v1alpha1:ScaledObject", "us-west-2-assistant") in created
    assert ("inference-fleet:platform:MetricsPipeline", "us-west-2-metrics") in created
    assert (CONFIG_MAP, "us-west-2-dashboard") in created


def test_changing_a_roles_scaling_metrics_updates_only_its_scaled_object(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A metric edit is the ScaledObject's triggers, in place: the role's workload, its pods and
    its HPA's name (KEDA keeps it: advanced.horizontalPodAutoscalerConfig.name) stay."""
    entries = planned_edit(
        base_plans, tmp_path, capsys, "prod", "autoscaling", "set", "chat", "--role", "decode", "--metric", "running:48"
    )
    assert summary(entries) == [
        ("update", "kubernetes:keda.sh/v1alpha1:ScaledObject", f"{region}-chat-decode", "in place")
        for region in PROD_REGIONS
    ]
    for entry in entries:
        assert {path.split("[")[0] for path in paths(entry)} == {"spec.triggers"}


def test_scaling_a_split_role_to_zero_updates_its_scaled_object_in_place(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """min_replicas 0 of a split endpoint's role plans: its ScaledObject gains the minimum, the
    explicit cooldown and the wake trigger, in place; the proxy rolls for its one new argument
    (--scale-to-zero prefill: it stays ready while prefill is at zero); the role's workload, the
    other role and the proxy's program stay."""
    entries = planned_edit(
        base_plans, tmp_path, capsys, "prod", "autoscaling", "set", "chat", "--role", "prefill", "--min", "0"
    )
    assert summary(entries) == sorted(
        [
            ("update", "kubernetes:keda.sh/v1alpha1:ScaledObject", f"{region}-chat-prefill", "in place")
            for region in PROD_REGIONS
        ]
        + [
            ("update", "kubernetes:apps/v1:Deployment", f"{region}-chat-proxy", "rolling restart")
            for region in PROD_REGIONS
        ]
    )
    for entry in entries:
        if entry["type"] == "kubernetes:apps/v1:Deployment":
            added = [(change["path"].rsplit(".", 1)[1], change["new"]) for change in entry["changes"]]
            assert added == [("args[22]", "--scale-to-zero"), ("args[23]", "prefill")]
        else:
            assert paths(entry) == {"spec.minReplicaCount", "spec.cooldownPeriod", "spec.triggers[2]"}


def test_scaling_a_classic_endpoint_to_zero_adds_its_gate_and_moves_the_route_to_it(
    base_plans: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """min_replicas 0 of a classic endpoint plans: the gate created (program, Deployment, Service,
    disruption budget, policy); the route's action renamed to the gate's Service, the canary's share
    kept; the server's policy narrowed to the gate and the scraper, the canary's own policy created;
    the ScaledObject's minimum, cooldown and wake trigger in place; the dashboard's gate row. The server
    and canary workloads and Services stay, and nothing is replaced."""
    entries = planned_edit(base_plans, tmp_path, capsys, "prod", "autoscaling", "set", "summarize", "--min", "0")
    policy = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
    expected = []
    for region in PROD_REGIONS:
        expected += [
            ("create", CONFIG_MAP, f"{region}-summarize-gate", "create"),
            ("create", DEPLOYMENT, f"{region}-summarize-gate", "create"),
            ("create", SERVICE, f"{region}-summarize-gate", "create"),
            ("create", "kubernetes:policy/v1:PodDisruptionBudget", f"{region}-summarize-gate", "create"),
            ("create", policy, f"{region}-summarize-gate", "create"),
            ("create", policy, f"{region}-summarize-canary", "create"),
            ("update", policy, f"{region}-summarize", "in place"),
            ("update", ROUTE, f"{region}-summarize", "in place"),
            ("update", "kubernetes:keda.sh/v1alpha1:ScaledObject", f"{region}-summarize", "in place"),
            # The region's dashboard gains the gate's row.
            ("update", CONFIG_MAP, f"{region}-dashboard", "in place"),
        ]
    assert summary(entries) == sorted(expected)
    for entry in entries:
        if entry["type"] == "kubernetes:keda.sh/v1alpha1:ScaledObject":
            assert paths(entry) == {"spec.minReplicaCount", "spec.cooldownPeriod", "spec.triggers[1]"}
        elif entry["type"] == ROUTE:
            annotation = "metadata.annotations['alb.ingress.kubernetes.io/{}.{}']"
            assert paths(entry) == {
                *(
                    annotation.format(kind, name)
                    for kind in ("actions", "transforms")
                    for name in ("summarize", "summarize-gate")
                ),
                "spec.rules[0].http.paths[0].backend.service.name",
            }
            (gate_action,) = [c for c in entry["changes"] if "actions.summarize-gate" in c["path"]]
            assert '"serviceName":"summarize-canary","servicePort":80,"weight":10' in gate_action["new"]
