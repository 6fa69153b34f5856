"""A Mooncake role spanning nodes in the real program under the recording mocks: the prod example
with 2-node prefill and decode groups plans LeaderWorkerSets, and LeaderWorkerSet's controller
(its CRDs and its chart from the OCI registry, in lws-system) in each region they run in, before
the endpoints' objects; prod as it is installs none."""

from __future__ import annotations

from pathlib import Path

from fleetctl.plan import run_program
from fleetctl.stackfile import read_stack_file
from tests.component.programs import by_type, edited, example_plan

ROLES = (
    "        proxy:\n          admin_api_key_secret: chat-proxy-admin\n",
    "        proxy:\n          admin_api_key_secret: chat-proxy-admin\n"
    "        roles:\n          prefill: {nodes: 2}\n          decode: {nodes: 2}\n",
)
P5_MAX = "max_size: 5                 # chat's 2P2D, and a third decode pod while it rolls"
CHAT_AUTOSCALING = "          enabled: true\n          prefill:"
"""Groups are sized by the topology, not autoscaled: prod's role autoscalers are turned off here."""


def test_groups_plan_leader_worker_sets_and_their_controller_where_they_run(tmp_path: Path) -> None:
    text = edited(tmp_path, "prod", ROLES).read_text()
    assert text.count(P5_MAX) == 2  # both regions' p5 groups: 2 groups of 2 per role, 8 nodes
    stack_file = tmp_path / "Pulumi.prod.yaml"
    assert text.count(CHAT_AUTOSCALING) == 1
    text = text.replace(CHAT_AUTOSCALING, CHAT_AUTOSCALING.replace("true", "false"))
    stack_file.write_text(text.replace(P5_MAX, "max_size: 8"))
    plan = run_program(read_stack_file(stack_file))

    groups = by_type(plan, "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
    assert sorted(resource["name"] for resource in groups) == [
        f"{region}-chat-{role}" for region in ("eu-west-1", "us-east-1") for role in ("decode", "prefill")
    ]
    assert not [r for r in by_type(plan, "kubernetes:apps/v1:StatefulSet") if r["name"].endswith("-chat-prefill")]
    releases = [r for r in by_type(plan, "kubernetes:helm.sh/v3:Release") if r["inputs"].get("name") == "lws"]
    assert sorted(release["name"] for release in releases) == ["eu-west-1-lws", "us-east-1-lws"]
    for release in releases:
        inputs = release["inputs"]
        assert inputs["chart"] == "oci://registry.k8s.io/lws/charts/lws"
        assert inputs["version"] == "0.10.0"
        assert inputs["namespace"] == "lws-system"
        assert inputs["skipCrds"] is True
        assert "repositoryOpts" not in inputs
        assert inputs["values"]["image"]["manager"] == {"tag": "v0.10.0", "pullPolicy": "IfNotPresent"}
    crds = [
        r
        for r in by_type(plan, "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
        if r["name"].startswith("us-east-1-lws-")
    ]
    assert sorted(crd["inputs"]["metadata"]["name"] for crd in crds) == [
        "disaggregatedsetrolescalers.disaggregatedset.x-k8s.io",
        "disaggregatedsets.disaggregatedset.x-k8s.io",
        "leaderworkersets.leaderworkerset.x-k8s.io",
    ]
    # The groups wait for their region's controller, as every pod waits for the platform.
    for group in groups:
        region = group["name"].split("-chat-")[0]
        assert f"$kubernetes:helm.sh/v3:Release::{region}-lws" in "|".join(group["options"]["dependsOn"]), group


def test_without_groups_no_controller_is_installed() -> None:
    plan = example_plan("prod")
    assert not [r for r in by_type(plan, "kubernetes:helm.sh/v3:Release") if r["inputs"].get("name") == "lws"]
    assert not by_type(plan, "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
