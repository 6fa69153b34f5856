"""The diff engine over hand-made plans: actions, paths, secrets, renames, replacements, verdicts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetctl.diff import (
    ABSENT,
    JSON_TEXT,
    PlanDiff,
    ResourceChange,
    diff_plans,
    diff_values,
    parse_property_path,
    render_json,
    render_markdown,
    render_path,
    render_text,
)
from fleetctl.plan import SECRET
from fleetctl.replacements import REPLACED_BY, replacement_rules

STACK = "urn:pulumi:test::inference-fleet::"
PROJECT = "inference-fleet"


def provider(region: str) -> dict[str, Any]:
    return {
        "urn": f"{STACK}pulumi:providers:aws::aws-{region}",
        "type": "pulumi:providers:aws",
        "name": f"aws-{region}",
        "inputs": {"region": region},
        "options": {},
    }


def resource(
    kind: str,
    name: str,
    inputs: dict[str, Any],
    region: str | None = "us-east-1",
    options: dict[str, Any] | None = None,
    parent: str | None = None,
) -> dict[str, Any]:
    parent_type = parent.split("::")[2].rsplit("$", 1)[-1] + "$" if parent else ""
    return {
        "urn": f"{STACK}{parent_type}{kind}::{name}",
        "type": kind,
        "name": name,
        "parent": parent,
        "provider": f"{STACK}pulumi:providers:aws::aws-{region}" if region else None,
        "custom": True,
        "inputs": inputs,
        "options": options or {},
    }


def plan(*resources: dict[str, Any]) -> dict[str, Any]:
    providers = {r["provider"] for r in resources if r.get("provider")}
    regions = sorted(p.rsplit("aws-", 1)[1] for p in providers if "pulumi:providers:aws::" in p)
    return {"project": PROJECT, "stack": "test", "resources": [*map(provider, regions), *resources]}


def only(diff: PlanDiff) -> ResourceChange:
    assert len(diff.resources) == 1, [r.urn for r in diff.resources]
    return diff.resources[0]


def changes_of(change: ResourceChange) -> dict[str, tuple[Any, Any]]:
    return {c.dotted: (c.old, c.new) for c in change.changes}


ROLE = "aws:iam/role:Role"
BUCKET = "aws:s3/bucket:Bucket"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
NODE_GROUP = "eks:index:ManagedNodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


STATEFUL_SET = "kubernetes:apps/v1:StatefulSet"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"


def stateful_set(image: str, replicas: int) -> dict[str, Any]:
    return {**deployment(image=image, replicas=replicas), "kind": "StatefulSet"}


def deployment(image: str = "vllm:1", replicas: int = 2, selector: str = "chat") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "chat", "namespace": "inference", "labels": {"app.kubernetes.io/name": "chat"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": selector}},
            "template": {"spec": {"containers": [{"name": "vllm", "image": image}]}},
        },
    }


# Actions.


def test_identical_plans_have_no_changes() -> None:
    same = plan(resource(ROLE, "node-role", {"description": "nodes"}))
    diff = diff_plans(same, json.loads(json.dumps(same)))
    assert not diff.changed
    assert diff.counts() == {"create": 0, "update": 0, "replace": 0, "delete": 0, "rename": 0}


def test_new_resource_is_a_create_in_its_own_region() -> None:
    base = plan(resource(ROLE, "a", {}))
    head = plan(resource(ROLE, "a", {}), resource(ROLE, "b", {}, region="eu-west-1"))
    diff = diff_plans(base, head)
    assert [(r.action, r.name, r.region, r.verdict) for r in diff.resources] == [
        ("create", "aws-eu-west-1", "eu-west-1", "create"),
        ("create", "b", "eu-west-1", "create"),
    ]


def test_missing_resource_is_a_delete_in_the_region_it_had() -> None:
    base = plan(resource(ROLE, "a", {}), resource(ROLE, "b", {}, region="eu-west-1"))
    head = plan(resource(ROLE, "a", {}))
    diff = diff_plans(base, head)
    assert {(r.action, r.name, r.region) for r in diff.resources} == {
        ("delete", "b", "eu-west-1"),
        ("delete", "aws-eu-west-1", "eu-west-1"),
    }


def test_resource_without_an_aws_provider_is_global() -> None:
    diff = diff_plans(plan(), plan(resource("random:index:Thing", "x", {}, region=None)))
    assert only(diff).region == "global"


def test_changed_input_is_an_in_place_update_with_old_and_new_values() -> None:
    base = plan(resource(ROLE, "a", {"description": "old", "maxSessionDuration": 3600}))
    head = plan(resource(ROLE, "a", {"description": "new", "maxSessionDuration": 3600}))
    change = only(diff_plans(base, head))
    assert (change.action, change.verdict) == ("update", "in place")
    assert changes_of(change) == {"description": ("old", "new")}
    assert not change.changes[0].forces_replacement


def test_added_and_removed_inputs_are_absent_on_the_other_side() -> None:
    change = only(diff_plans(plan(resource(ROLE, "a", {"path": "/x/"})), plan(resource(ROLE, "a", {"tags": {}}))))
    assert changes_of(change) == {"path": ("/x/", ABSENT), "tags": (ABSENT, {})}


def test_boolean_and_integer_are_different_values() -> None:
    assert [c.dotted for c in diff_values({"a": 1}, {"a": True})] == ["a"]


# Paths.


@pytest.mark.parametrize(
    ("path", "rendered"),
    [
        (("scalingConfig", "maxSize"), "scalingConfig.maxSize"),
        (("spec", "template", "spec", "containers", 0, "image"), "spec.template.spec.containers[0].image"),
        (("rules", 1, "expiration", "days"), "rules[1].expiration.days"),
        (
            ("metadata", "annotations", "alb.ingress.kubernetes.io/group.name"),
            "metadata.annotations['alb.ingress.kubernetes.io/group.name']",
        ),
        (("tags", "inference-fleet:purpose"), "tags.inference-fleet:purpose"),
        (("policy", JSON_TEXT, "Statement", 0, "Resource"), "policy(json).Statement[0].Resource"),
        (("items", 0, JSON_TEXT, 2), "items[0](json)[2]"),
        (("a", JSON_TEXT, "b", JSON_TEXT, "c"), "a(json).b(json).c"),
    ],
)
def test_paths_render_dotted_with_list_indices(path: tuple[Any, ...], rendered: str) -> None:
    assert render_path(path) == rendered


def test_nested_change_is_reported_at_its_leaf() -> None:
    base = plan(resource(DEPLOYMENT, "chat", deployment(image="vllm:1"), region=None))
    head = plan(resource(DEPLOYMENT, "chat", deployment(image="vllm:2"), region=None))
    assert changes_of(only(diff_plans(base, head))) == {"spec.template.spec.containers[0].image": ("vllm:1", "vllm:2")}


def test_list_growth_reports_the_new_index() -> None:
    changes = list(diff_values({"instanceTypes": ["a"]}, {"instanceTypes": ["a", "b"]}))
    assert [(c.dotted, c.old, c.new) for c in changes] == [("instanceTypes[1]", ABSENT, "b")]


def test_json_documents_in_strings_are_compared_statement_by_statement() -> None:
    old = json.dumps({"Statement": [{"Action": "s3:GetObject", "Resource": "arn:aws:s3:::a/*"}]})
    new = json.dumps({"Statement": [{"Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}]})
    changes = list(diff_values({"policy": old}, {"policy": new}))
    assert [(c.dotted, c.old, c.new) for c in changes] == [
        ("policy(json).Statement[0].Resource", "arn:aws:s3:::a/*", "arn:aws:s3:::b/*")
    ]


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        ("spec.replicas", ("spec", "replicas")),
        ("spec.template.spec.containers[0].image", ("spec", "template", "spec", "containers", 0, "image")),
        ('metadata.annotations["a.b/c"]', ("metadata", "annotations", "a.b/c")),
        ("metadata.*", ("metadata", "*")),
        ("rules[*].days", ("rules", "*", "days")),
    ],
)
def test_property_paths_parse_like_pulumi_options(text: str, steps: tuple[Any, ...]) -> None:
    assert parse_property_path(text) == steps


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_a_value_never_differs_from_itself(value: Any) -> None:
    assert list(diff_values(value, json.loads(json.dumps(value)))) == []


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=4), json_values, min_size=1, max_size=4), st.data())
def test_changing_one_key_reports_changes_under_that_key_only(document: dict[str, Any], data: Any) -> None:
    key = data.draw(st.sampled_from(sorted(document)))
    replacement = data.draw(json_values.filter(lambda value: json.dumps(value) != json.dumps(document[key])))
    changes = list(diff_values(document, {**document, key: replacement}))
    assert changes
    assert all(change.path[0] == key for change in changes)


# Secrets.

PLAIN = "hunter2-plaintext"


@pytest.mark.parametrize(
    ("old", "new"),
    [(SECRET, PLAIN), (PLAIN, SECRET), ({"token": PLAIN}, SECRET), (SECRET, {"token": PLAIN})],
    ids=["secret-to-plain", "plain-to-secret", "object-to-secret", "secret-to-object"],
)
def test_a_value_secret_on_either_side_is_shown_as_secret_on_both(old: Any, new: Any) -> None:
    base = plan(resource("kubernetes:core/v1:Secret", "s", {"stringData": {"HF_TOKEN": old}}, region=None))
    head = plan(resource("kubernetes:core/v1:Secret", "s", {"stringData": {"HF_TOKEN": new}}, region=None))
    diff = diff_plans(base, head)
    assert changes_of(only(diff)) == {"stringData.HF_TOKEN": (SECRET, SECRET)}
    for render in (render_text, render_markdown, render_json):
        assert PLAIN not in render(diff, "base", "head")


def test_two_secrets_are_not_a_visible_change() -> None:
    base = plan(resource("pulumi:providers:kubernetes", "k", {"kubeconfig": SECRET}, region=None))
    assert not diff_plans(base, json.loads(json.dumps(base))).changed


# Renames.


def test_alias_spec_naming_the_base_urn_is_a_rename_not_delete_and_create() -> None:
    old = resource(ROLE, "old-name", {"description": "nodes"})
    new = resource(ROLE, "new-name", {"description": "nodes"}, options={"aliases": [{"spec": {"name": "old-name"}}]})
    change = only(diff_plans(plan(old), plan(new)))
    assert (change.action, change.verdict, change.renamed_from) == ("rename", "rename only", old["urn"])


def test_alias_urn_with_changed_inputs_is_an_update_of_the_renamed_resource() -> None:
    old = resource(ROLE, "old-name", {"description": "nodes"})
    new = resource(ROLE, "new-name", {"description": "GPU nodes"}, options={"aliases": [{"urn": old["urn"]}]})
    change = only(diff_plans(plan(old), plan(new)))
    assert (change.action, change.renamed_from) == ("update", old["urn"])
    assert changes_of(change) == {"description": ("nodes", "GPU nodes")}


def test_alias_spec_follows_a_move_to_another_parent() -> None:
    component = resource("inference-fleet:platform:ColdTier", "tier", {}, region=None)
    old = resource(BUCKET, "bucket", {"bucket": "b"})
    new = resource(
        BUCKET, "bucket", {"bucket": "b"}, parent=component["urn"], options={"aliases": [{"spec": {"noParent": True}}]}
    )
    diff = diff_plans(plan(component, old), plan(component, new))
    assert [(r.action, r.renamed_from) for r in diff.resources] == [("rename", old["urn"])]


def test_alias_of_a_urn_still_in_head_is_not_a_rename() -> None:
    old = resource(ROLE, "a", {})
    new = resource(ROLE, "b", {}, options={"aliases": [{"urn": old["urn"]}]})
    diff = diff_plans(plan(old), plan(old, new))
    assert [(r.action, r.name) for r in diff.resources] == [("create", "b")]


def test_a_plan_whose_grandchildren_name_only_their_parents_type_matches_the_engines_urns() -> None:
    """Plans written before the mocks qualified a type by the parent's whole chain, as the engine does."""
    fleet = resource("inference-fleet:fleet:Fleet", "fleet", {}, region=None)
    platform = resource("inference-fleet:platform:ColdTier", "tier", {}, region=None, parent=fleet["urn"])
    old_bucket = resource(BUCKET, "bucket", {"bucket": "b"}, parent=platform["urn"])
    old_role = resource(ROLE, "gone", {}, parent=platform["urn"])
    engine_type = "inference-fleet:fleet:Fleet$inference-fleet:platform:ColdTier$"
    assert old_bucket["urn"] == f"{STACK}inference-fleet:platform:ColdTier${BUCKET}::bucket"
    bucket = {**old_bucket, "urn": f"{STACK}{engine_type}{BUCKET}::bucket"}
    diff = diff_plans(plan(fleet, platform, old_bucket, old_role), plan(fleet, platform, bucket))
    assert [(r.action, r.urn) for r in diff.resources] == [("delete", old_role["urn"])]


# Replacements.


def test_every_table_entry_names_its_source() -> None:
    for kind, rules in REPLACED_BY.items():
        for rule in rules:
            assert all(rule.path.split(".")), kind
            assert len(rule.source) > 20, (kind, rule.path)


def test_kubernetes_objects_share_the_metadata_rules() -> None:
    paths = {rule.path for rule in replacement_rules("kubernetes:core/v1:ServiceAccount")}
    assert paths == {"metadata.name", "metadata.namespace"}
    assert "spec.selector" in {rule.path for rule in replacement_rules(DEPLOYMENT)}


def test_renamed_bucket_is_a_loud_replacement_of_a_stateful_resource() -> None:
    options = {"protect": True, "retainOnDelete": True}
    base = plan(resource(BUCKET, "cold", {"bucket": "kv-a", "forceDestroy": False}, options=options))
    head = plan(resource(BUCKET, "cold", {"bucket": "kv-b", "forceDestroy": False}, options=options))
    diff = diff_plans(base, head)
    change = only(diff)
    assert (change.action, change.verdict, change.loud) == ("replace", "replacement of stateful resource", True)
    assert change.changes[0].forces_replacement
    assert any(reason.startswith("bucket: ") for reason in change.reasons)
    assert any("protect" in note for note in change.notes)
    text = render_text(diff, "base", "head")
    assert text.splitlines()[1].startswith("!! 1 stateful resource(s) would be replaced or deleted: cold")
    assert "!!+- replace" in text
    assert text.rstrip().splitlines()[-1].startswith("!! 1 stateful resource(s)")
    assert "**!!" in render_markdown(diff, "base", "head")
    assert json.loads(render_json(diff, "base", "head"))["summary"]["loud"] == 1


def test_deleting_a_retained_resource_is_loud_too() -> None:
    kept = resource(ROLE, "kept", {})
    base = plan(kept, resource("aws:s3/bucketVersioning:BucketVersioning", "v", {}, options={"retainOnDelete": True}))
    change = only(diff_plans(base, plan(kept)))
    assert (change.action, change.verdict, change.loud) == ("delete", "deletion of stateful resource", True)


def test_selector_change_replaces_a_deployment_without_calling_it_stateful() -> None:
    base = plan(resource(DEPLOYMENT, "chat", deployment(selector="chat"), region=None))
    head = plan(resource(DEPLOYMENT, "chat", deployment(selector="chat-v2"), region=None))
    change = only(diff_plans(base, head))
    assert (change.action, change.verdict, change.loud) == ("replace", "replacement", False)


def test_unknown_type_updates_in_place() -> None:
    base = plan(resource("acme:index:Widget", "w", {"name": "a"}))
    head = plan(resource("acme:index:Widget", "w", {"name": "b"}))
    assert only(diff_plans(base, head)).action == "update"


def test_replace_on_changes_option_makes_a_path_force_replacement() -> None:
    options = {"replaceOnChanges": ["spec.*"]}
    base = plan(resource("acme:index:Widget", "w", {"spec": {"size": 1}, "note": "x"}, options=options))
    head = plan(resource("acme:index:Widget", "w", {"spec": {"size": 2}, "note": "y"}, options=options))
    change = only(diff_plans(base, head))
    assert change.action == "replace"
    assert {c.dotted: c.forces_replacement for c in change.changes} == {"spec.size": True, "note": False}


def test_protected_resource_of_any_type_is_stateful_when_replaced() -> None:
    options = {"protect": True, "replaceOnChanges": ["zone"]}
    base = plan(resource("acme:index:Volume", "v", {"zone": "a"}, options=options))
    head = plan(resource("acme:index:Volume", "v", {"zone": "b"}, options=options))
    assert only(diff_plans(base, head)).verdict == "replacement of stateful resource"


def test_ignore_changes_hides_the_ignored_path() -> None:
    options = {"ignoreChanges": ["spec.replicas"]}
    base = plan(resource(DEPLOYMENT, "chat", deployment(replicas=2), region=None, options=options))
    head = plan(resource(DEPLOYMENT, "chat", deployment(replicas=7), region=None, options=options))
    assert not diff_plans(base, head).changed


def test_config_map_data_replaces_it_unless_the_provider_makes_config_maps_mutable() -> None:
    def config_plan(data: str, mutable: bool) -> dict[str, Any]:
        kube = resource("pulumi:providers:kubernetes", "k8s", {"enableConfigMapMutable": "true"} if mutable else {})
        config_map = resource("kubernetes:core/v1:ConfigMap", "store", {"data": {"mooncake.json": data}})
        config_map["provider"] = kube["urn"]
        return plan(kube, config_map)

    assert only(diff_plans(config_plan("{}", False), config_plan("[]", False))).action == "replace"
    assert only(diff_plans(config_plan("{}", True), config_plan("[]", True))).action == "update"


def test_region_change_of_a_provider_replaces_every_resource_it_manages() -> None:
    role = resource(ROLE, "a", {"description": "x"})
    base = plan(role)
    head = plan(role)
    head["resources"][0] = {**provider("us-east-1"), "inputs": {"region": "us-east-2"}}
    diff = diff_plans(base, head)
    assert [(r.action, r.type, r.region) for r in diff.resources] == [
        ("replace", "pulumi:providers:aws", "us-east-2"),
        ("replace", ROLE, "us-east-2"),
    ]
    role_change = diff.resources[1]
    assert role_change.changes == ()
    assert role_change.reasons == ("its provider aws-us-east-1 is replaced",)
    assert "replaces the 1 resource(s) it manages" in diff.resources[0].notes


def test_moving_a_resource_to_another_provider_replaces_it() -> None:
    stays = (resource(ROLE, "b", {}), resource(ROLE, "c", {}, region="eu-west-1"))
    base = plan(resource(ROLE, "a", {}), *stays)
    head = plan(resource(ROLE, "a", {}, region="eu-west-1"), *stays)
    change = only(diff_plans(base, head))
    assert (change.action, change.name, change.region) == ("replace", "a", "eu-west-1")
    assert change.reasons == ("provider: aws-us-east-1 -> aws-eu-west-1",)


def test_a_renamed_provider_does_not_replace_what_it_manages() -> None:
    base = plan(resource(ROLE, "a", {}))
    head = plan(resource(ROLE, "a", {}))
    head["resources"][0] = {**provider("us-east-1"), "urn": f"{STACK}pulumi:providers:aws::renamed", "name": "renamed"}
    head["resources"][0]["options"] = {"aliases": [{"urn": f"{STACK}pulumi:providers:aws::aws-us-east-1"}]}
    head["resources"][1]["provider"] = f"{STACK}pulumi:providers:aws::renamed"
    assert [(r.action, r.type) for r in diff_plans(base, head).resources] == [("rename", "pulumi:providers:aws")]


def test_moving_a_resource_to_an_identically_configured_provider_does_not_replace_it() -> None:
    base = plan(resource(ROLE, "a", {}))
    head = plan(resource(ROLE, "a", {}))
    twin = {**provider("us-east-1"), "urn": f"{STACK}pulumi:providers:aws::twin", "name": "twin"}
    head["resources"].append(twin)
    head["resources"][1]["provider"] = twin["urn"]
    assert [(r.action, r.name) for r in diff_plans(base, head).resources] == [("create", "twin")]


# Verdicts.

ROUTE: dict[str, Any] = {
    "metadata": {"name": "summarize", "annotations": {"alb.ingress.kubernetes.io/actions.summarize": "{}"}},
    "spec": {"rules": [{"http": {"paths": [{"path": "/inference/summarize"}]}}]},
}


def weighted(weight: int) -> dict[str, Any]:
    action = {"type": "forward", "forwardConfig": {"targetGroups": [{"weight": 100 - weight}, {"weight": weight}]}}
    annotations = {"alb.ingress.kubernetes.io/actions.summarize": json.dumps(action)}
    return {**ROUTE, "metadata": {**ROUTE["metadata"], "annotations": annotations}}


def with_annotation(route: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    annotations = {**route["metadata"]["annotations"], key: value}
    return {**route, "metadata": {**route["metadata"], "annotations": annotations}}


@pytest.mark.parametrize(
    ("kind", "old", "new", "verdict"),
    [
        (INGRESS, weighted(10), weighted(20), "traffic only"),
        (INGRESS, ROUTE, {**ROUTE, "spec": {"rules": []}}, "in place"),
        (INGRESS, ROUTE, with_annotation(ROUTE, "alb.ingress.kubernetes.io/healthcheck-path", "/ready"), "in place"),
        (DEPLOYMENT, deployment(image="vllm:1"), deployment(image="vllm:2"), "rolling restart"),
        (DEPLOYMENT, deployment(replicas=1), deployment(replicas=3), "in place"),
        # A Deployment surges (maxSurge 1): one pod or many, a new pod serves before an old one stops.
        (DEPLOYMENT, deployment(image="vllm:1", replicas=1), deployment(image="vllm:2", replicas=1), "rolling restart"),
        # A StatefulSet has no surge: its one pod is deleted before its replacement starts.
        (STATEFUL_SET, stateful_set("vllm:1", 1), stateful_set("vllm:2", 1), "outage while it rolls"),
        (STATEFUL_SET, stateful_set("vllm:1", 2), stateful_set("vllm:2", 2), "rolling restart"),
        # A LeaderWorkerSet's group template rolls its groups (it was "in place" before).
        (
            LWS,
            {"spec": {"leaderWorkerTemplate": {"size": 2}}},
            {"spec": {"leaderWorkerTemplate": {"size": 3}}},
            "rolling restart",
        ),
        (LAUNCH_TEMPLATE, {"imageId": "ami-1"}, {"imageId": "ami-2"}, "new generation"),
        (LAUNCH_TEMPLATE, {"tags": {"a": "1"}}, {"tags": {"a": "2"}}, "in place"),
        (NODE_GROUP, {"scalingConfig": {"maxSize": 4}}, {"scalingConfig": {"maxSize": 6}}, "in place"),
        (NODE_GROUP, {"launchTemplate": {"version": "1"}}, {"launchTemplate": {"version": "2"}}, "new generation"),
        (NODE_GROUP, {"instanceTypes": ["g6e.12xlarge"]}, {"instanceTypes": ["g6e.24xlarge"]}, "new generation"),
        (
            "aws:kms/key:Key",
            {"keyUsage": "ENCRYPT_DECRYPT"},
            {"keyUsage": "SIGN_VERIFY"},
            "replacement of stateful resource",
        ),
        ("eks:index:Cluster", {"name": "a"}, {"name": "b"}, "replacement of stateful resource"),
        ("eks:index:Cluster", {"version": "1.34"}, {"version": "1.35"}, "in place"),
    ],
)
def test_verdict_says_what_the_change_does(kind: str, old: dict[str, Any], new: dict[str, Any], verdict: str) -> None:
    change = only(diff_plans(plan(resource(kind, "r", old)), plan(resource(kind, "r", new))))
    assert change.verdict == verdict


def test_weight_change_shows_the_weights_inside_the_annotation() -> None:
    change = only(diff_plans(plan(resource(INGRESS, "r", weighted(10))), plan(resource(INGRESS, "r", weighted(20)))))
    annotation = "metadata.annotations['alb.ingress.kubernetes.io/actions.summarize'](json)"
    assert changes_of(change) == {
        f"{annotation}.forwardConfig.targetGroups[0].weight": (90, 80),
        f"{annotation}.forwardConfig.targetGroups[1].weight": (10, 20),
    }


def test_a_kind_is_judged_by_its_worst_resource() -> None:
    base = plan(resource(DEPLOYMENT, "a", deployment(replicas=1)), resource(DEPLOYMENT, "b", deployment()))
    head = plan(resource(DEPLOYMENT, "a", deployment(replicas=2)), resource(DEPLOYMENT, "b", deployment("vllm:9")))
    text = render_text(diff_plans(base, head), "base", "head")
    assert f"{DEPLOYMENT}: rolling restart (1 update: rolling restart, 1 update: in place)" in text


# Rendering.


def test_loud_changes_come_first_in_their_region() -> None:
    base = plan(resource(ROLE, "a", {"description": "x"}), resource(BUCKET, "z", {"bucket": "one"}))
    head = plan(resource(ROLE, "a", {"description": "y"}), resource(BUCKET, "z", {"bucket": "two"}))
    assert [r.name for r in diff_plans(base, head).resources] == ["z", "a"]


def test_json_output_is_stable_sorted_and_complete() -> None:
    base = plan(resource(ROLE, "a", {"description": "x"}), resource(ROLE, "gone", {}))
    head = plan(resource(ROLE, "a", {"description": "y"}), resource(ROLE, "new", {}, region="eu-west-1"))
    first = render_json(diff_plans(base, head), "base", "head")
    assert first == render_json(diff_plans(base, head), "base", "head")
    document = json.loads(first)
    assert document["summary"] == {"create": 2, "update": 1, "replace": 0, "delete": 1, "rename": 0, "loud": 0}
    assert list(document["regions"]) == ["eu-west-1", "us-east-1"]
    update = next(r for r in document["regions"]["us-east-1"]["resources"] if r["action"] == "update")
    assert update["changes"] == [{"path": "description", "old": "x", "new": "y", "forces_replacement": False}]
    assert document["regions"]["us-east-1"]["verdicts"][ROLE] == {
        "verdict": "delete",
        "actions": {"delete": 1, "update": 1},
        "verdicts": {"delete": 1, "in place": 1},
    }


def test_markdown_is_a_table_per_region_with_cells_escaped() -> None:
    base = plan(resource(ROLE, "a", {"description": "a|b"}))
    head = plan(resource(ROLE, "a", {"description": "<c>|d"}))
    markdown = render_markdown(diff_plans(base, head), "base", "head")
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    assert rows[0] == "| | action | type | name | verdict | changes |"
    assert len(rows) == 3
    assert rows[2].count("|") == 7  # the values' own pipes are escaped
    assert "&lt;c&gt;&#124;d" in rows[2]


def test_no_changes_says_so_in_every_format() -> None:
    empty = diff_plans(plan(), plan())
    assert render_text(empty, "a", "b").splitlines()[-1] == "no changes"
    assert "No changes." in render_markdown(empty, "a", "b")
    assert json.loads(render_json(empty, "a", "b"))["changed"] is False


def on_stack(document: dict[str, Any], stack: str) -> dict[str, Any]:
    """``document`` (a plan of stack ``test``) as the plan of ``stack``, with its root Stack resource."""
    root = f"urn:pulumi:{stack}::{PROJECT}::pulumi:pulumi:Stack::{PROJECT}-{stack}"
    text = json.dumps(document).replace("urn:pulumi:test::", f"urn:pulumi:{stack}::")
    moved: dict[str, Any] = json.loads(text)
    for entry in moved["resources"]:
        entry["parent"] = root
    stack_resource = {"urn": root, "type": "pulumi:pulumi:Stack", "name": f"{PROJECT}-{stack}", "custom": False}
    return {**moved, "stack": stack, "resources": [stack_resource, *moved["resources"]]}


def test_plans_of_two_stacks_are_matched_by_urn_without_the_stack_and_the_output_says_so() -> None:
    base = on_stack(plan(resource(ROLE, "a", {"description": "x"}), resource(ROLE, "gone", {})), "dev")
    head = on_stack(plan(resource(ROLE, "a", {"description": "y"})), "dev-copy")
    diff = diff_plans(base, head)
    assert [(change.action, change.name, change.urn) for change in diff.resources] == [
        ("delete", "gone", f"urn:pulumi:dev::{PROJECT}::{ROLE}::gone"),
        ("update", "a", f"urn:pulumi:dev-copy::{PROJECT}::{ROLE}::a"),
    ]
    [note] = diff.notes
    assert note.startswith("BASE plans stack 'dev' and HEAD stack 'dev-copy': resources are matched by their URN ")
    assert render_text(diff, "a", "b").splitlines()[1] == f"note: {note}"
    assert f"> Note: {note}" in render_markdown(diff, "a", "b")
    assert json.loads(render_json(diff, "a", "b"))["notes"] == [note]


def test_plans_of_one_stack_have_no_note() -> None:
    document = on_stack(plan(resource(ROLE, "a", {})), "dev")
    assert diff_plans(document, document).notes == ()
    assert json.loads(render_json(diff_plans(document, document), "a", "b"))["notes"] == []
