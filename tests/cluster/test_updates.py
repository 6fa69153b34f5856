"""`fleetctl` edits applied as updates: an example stack's plan applied to the test cluster, then
the plan of the edited stack, object by object, as `pulumi up` would. The API server must accept
every update `fleetctl diff` calls in place, traffic only or a rolling restart, and every change
it refuses must be one the diff calls a replacement (fleetctl/replacements.py): otherwise a
reviewed diff would promise an update that fails halfway through `pulumi up`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from fleetctl.cli import main as fleetctl
from fleetctl.diff.engine import (
    CREATE,
    DELETE,
    IN_PLACE,
    OUTAGE_VERDICT,
    REPLACE,
    ROLLING_RESTART_VERDICT,
    TRAFFIC,
    diff_plans,
)
from fleetctl.plan import Plan, run_program
from fleetctl.replacements import is_kubernetes_object
from fleetctl.stackfile import read_stack_file, stack_path
from tests.cluster.kube import ApiError, Kube
from tests.cluster.region import APPLY_FIRST, apply_all, field_manager, reset
from tests.cluster.stacks import plan_manifests
from tests.component.programs import example_plan

UPDATES = (IN_PLACE, TRAFFIC, ROLLING_RESTART_VERDICT, OUTAGE_VERDICT)
EDITS = [
    ("dev", "scale", "assistant", "3"),
    ("dev", "image", "set", "assistant", "vllm/vllm-openai:v0.34.0"),
    ("dev", "topology", "set", "chat-pd", "--prefill", "2", "--decode", "3"),
    ("dev", "canary", "start", "assistant", "--image", "vllm/vllm-openai:v0.34.0", "--weight", "10"),
    ("dev", "canary", "weight", "chat-pd", "40"),
    ("dev", "canary", "promote", "chat-pd"),
    ("dev", "canary", "rollback", "chat-pd"),
    ("dev", "topology", "set", "chat-pd", "--canary", "--prefill", "2"),
    ("dev", "canary", "start", "kv-cache", "--image", "vllm/vllm-openai:v0.34.0", "--weight", "5"),
    ("dev", "endpoint", "add", "embed", "--image", "vllm/vllm-openai:v0.33.0", "--model", "Qwen/Qwen3-0.6B"),
    ("dev", "endpoint", "remove", "kv-cache"),
    ("prod", "store", "configure", "chat", "--global-segment-size", "32GiB", "--offload", "none"),
    ("prod", "canary", "weight", "summarize", "50"),
    ("prod", "canary", "promote", "summarize"),
    ("prod", "canary", "rollback", "summarize"),
    # prod's chat autoscales both roles, so its topology sizes nothing; its scaling is the edit there
    ("prod", "autoscaling", "set", "chat", "--role", "decode", "--metric", "running:48", "--metric", "kv_cache:0.85"),
    ("prod", "autoscaling", "set", "chat", "--role", "prefill", "--min", "0"),  # to zero: woken by the proxy
    ("prod", "autoscaling", "set", "summarize", "--min", "0"),  # a classic endpoint to zero: behind its gate
    ("prod", "stop", "chat"),  # a split endpoint (dev's chat-pd runs a canary, which a stop refuses)
    ("prod", "endpoint", "remove", "summarize"),
]


def _document(plan: Plan) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(plan.to_json())
    return document


def _edited_plan(tmp_path: Path, stack: str, argv: tuple[str, ...]) -> Plan:
    copy = tmp_path / f"Pulumi.{stack}.yaml"
    shutil.copyfile(stack_path(stack), copy)
    assert fleetctl([*argv, "--stack-file", str(copy)]) == 0
    return run_program(read_stack_file(copy))


def _order(manifest: dict[str, Any]) -> tuple[int, str]:
    kind = manifest["kind"]
    return (APPLY_FIRST.index(kind) if kind in APPLY_FIRST else len(APPLY_FIRST), kind)


@pytest.mark.parametrize("edit", EDITS, ids=["-".join(edit[:3]) for edit in EDITS])
def test_every_update_the_diff_promises_is_accepted(
    control_plane: Kube, tmp_path: Path, edit: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    stack, *argv = edit
    base, head = example_plan(stack), _edited_plan(tmp_path, stack, tuple(argv))
    capsys.readouterr()
    changes = [c for c in diff_plans(_document(base), _document(head)).resources if is_kubernetes_object(c.type)]
    assert changes, "the edit changes no Kubernetes object"
    head_inputs = {resource["urn"]: resource["inputs"] for resource in head.resources}
    base_inputs = {resource["urn"]: resource["inputs"] for resource in base.resources}
    retained = {resource["urn"] for resource in base.resources if resource["options"].get("retainOnDelete")}
    broken = []
    for region in sorted({change.region for change in changes}):
        reset(control_plane)
        apply_all(control_plane, plan_manifests(base)[region])
        mine = sorted(
            (c for c in changes if c.region == region), key=lambda c: _order(head_inputs.get(c.urn) or {"kind": ""})
        )
        for change in mine:
            if change.action == DELETE:
                if change.urn in retained:
                    continue  # the engine forgets it and leaves it in the cluster (a CRD, a namespace)
                manifest = base_inputs[change.urn]
                metadata = manifest["metadata"]
                control_plane.delete(
                    manifest["apiVersion"], manifest["kind"], metadata["name"], metadata.get("namespace")
                )
                continue
            manifest = head_inputs[change.urn]
            try:
                control_plane.apply(manifest, field_manager(manifest))
            except ApiError as error:
                if change.action != REPLACE:
                    broken.append(f"{change.action} ({change.verdict}) of {change.name} refused: {error.message}")
                continue
            if change.action not in (CREATE, REPLACE) and change.verdict not in UPDATES:
                broken.append(f"{change.name}: an update the diff calls {change.verdict!r}")
    assert broken == []


# No `fleetctl` edit changes a field the API server refuses to change (selectors depend only on an
# endpoint's name and role, design decision 3), so the refusals are provoked here: one field at a
# time, on an object of dev's plan, planned as a head plan and applied over the base plan.


def _add_selector_label(manifest: dict[str, Any]) -> None:
    manifest["spec"]["selector"]["matchLabels"]["inference-fleet-tests/extra"] = "x"
    manifest["spec"]["template"]["metadata"]["labels"]["inference-fleet-tests/extra"] = "x"


def _claim_template(manifest: dict[str, Any]) -> None:
    manifest["spec"]["volumeClaimTemplates"] = [
        {
            "metadata": {"name": "cache"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }
    ]


def _new_image(manifest: dict[str, Any]) -> None:
    manifest["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.34.0"


MUTATIONS = {
    # name: (resource type, Pulumi name, change, whether the API server refuses it)
    "deployment-selector": ("kubernetes:apps/v1:Deployment", "us-west-2-assistant", _add_selector_label, True),
    "statefulset-selector": ("kubernetes:apps/v1:StatefulSet", "us-west-2-kv-cache-store", _add_selector_label, True),
    "statefulset-service-name": (
        "kubernetes:apps/v1:StatefulSet",
        "us-west-2-kv-cache-store",
        lambda manifest: manifest["spec"].update(serviceName="kv-cache-elsewhere"),
        True,
    ),
    "statefulset-pod-management": (
        "kubernetes:apps/v1:StatefulSet",
        "us-west-2-kv-cache-store",
        # The master keeps the default, OrderedReady.
        lambda manifest: manifest["spec"].update(podManagementPolicy="Parallel"),
        True,
    ),
    "statefulset-claims": ("kubernetes:apps/v1:StatefulSet", "us-west-2-kv-cache-store", _claim_template, True),
    "service-cluster-ip": (
        "kubernetes:core/v1:Service",
        "us-west-2-assistant",
        lambda manifest: manifest["spec"].update(clusterIP="10.100.200.200"),
        True,
    ),
    "deployment-image": ("kubernetes:apps/v1:Deployment", "us-west-2-assistant", _new_image, False),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_every_change_the_api_server_refuses_is_a_replacement_in_the_diff(control_plane: Kube, mutation: str) -> None:
    resource_type, name, change, refused = MUTATIONS[mutation]
    base = _document(example_plan("dev"))
    head = json.loads(json.dumps(base))
    (resource,) = [r for r in head["resources"] if r["type"] == resource_type and r["name"] == name]
    change(resource["inputs"])
    (entry,) = [c for c in diff_plans(base, head).resources if c.urn == resource["urn"]]
    reset(control_plane)
    apply_all(control_plane, plan_manifests(example_plan("dev"))["us-west-2"])
    refusal = None
    try:
        control_plane.apply(resource["inputs"], field_manager(resource["inputs"]))
    except ApiError as error:
        refusal = error
    if refusal is None:
        assert not refused, "the API server accepted the change"
        assert entry.action != REPLACE
    else:
        assert refused, refusal.message
        assert refusal.status == 422, refusal  # Invalid: "field is immutable", "may not change", "Forbidden"
        assert entry.action == REPLACE, (
            f"the API server refuses it ({refusal.message}) but the diff says {entry.verdict}"
        )
