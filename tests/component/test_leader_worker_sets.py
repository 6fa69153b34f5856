"""Mooncake roles spanning nodes in the real program under the recording mocks: the prod example's
reason endpoint (prefill and decode groups of two p5s) plans LeaderWorkerSets, and LeaderWorkerSet's
controller (its CRDs and its chart from the OCI registry, in lws-system) in each region they run in,
before the endpoints' objects; dev, without such a role, installs none."""

from __future__ import annotations

from tests.component.programs import by_type, example_plan

LWS_TYPE = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"


def test_groups_plan_leader_worker_sets_and_their_controller_where_they_run() -> None:
    plan = example_plan("prod")
    groups = by_type(plan, LWS_TYPE)
    assert sorted(resource["name"] for resource in groups) == [
        f"{region}-reason-{role}" for region in ("eu-west-1", "us-east-1") for role in ("decode", "prefill")
    ]
    for group in groups:
        assert group["inputs"]["spec"]["leaderWorkerTemplate"]["size"] == 2
    assert not [r for r in by_type(plan, "kubernetes:apps/v1:StatefulSet") if r["name"].endswith("-reason-prefill")]
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
        region = group["name"].split("-reason-")[0]
        assert f"$kubernetes:helm.sh/v3:Release::{region}-lws" in "|".join(group["options"]["dependsOn"]), group


def test_without_groups_no_controller_is_installed() -> None:
    plan = example_plan("dev")
    assert not [r for r in by_type(plan, "kubernetes:helm.sh/v3:Release") if r["inputs"].get("name") == "lws"]
    assert not by_type(plan, LWS_TYPE)


def test_each_leader_worker_set_retries_while_the_webhooks_do_not_answer() -> None:
    """LWS v0.10.0's release is ready on a plain ping before its fail-closed webhooks serve
    (cmd/main.go, charts/lws/templates/webhook/webhook.yaml), and pulumi-kubernetes retries a create
    only on NotFound/NoMatch: every LeaderWorkerSet carries a bounded retry of the webhook's refusal
    (tests/unit/test_retries.py), and nothing else of the endpoint does."""
    plan = example_plan("prod")
    groups = by_type(plan, LWS_TYPE)
    assert groups
    for group in groups:
        assert group["options"]["hooks"] == {"onError": [f"{group['name']}-webhook"]}
    others = [r for r in plan.resources if r["type"].startswith("kubernetes:") and r["type"] != LWS_TYPE]
    assert not [r["name"] for r in others if "hooks" in r["options"]]
