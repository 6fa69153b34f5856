"""The classic workloads of the example stacks under the recording mocks: what is registered,
with which provider, parent, options and outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from ruamel.yaml import YAML

from components import naming
from components.catalog import chart_crds, pins
from components.platform.leader_worker_set import NAMESPACE as LWS_NAMESPACE
from components.render.startup import startup_seconds
from components.spec.engine import EndpointRecord
from components.spec.model_sizes import KNOWN_MODEL_BYTES
from components.workloads.kube import CUSTOM_KINDS
from fleetctl.plan import Plan, manifest_files, run_program
from fleetctl.stackfile import read_stack_file
from tests import custom_resources
from tests.component.programs import by_type, edited, example_plan
from tests.crd_schema import schema_problems

LWS_CRDS = chart_crds(pins().charts.lws)

PREFIX = "urn:pulumi:prod::inference-fleet::"
PLATFORM = "inference-fleet:fleet:Fleet$inference-fleet:platform:RegionalPlatform$inference-fleet:platform:"
WORKLOADS = "inference-fleet:fleet:Fleet$inference-fleet:workloads:RegionalWorkloads$"
CLUSTER_VERSION = f"{pins().kubernetes.default_version}.0"


def named(plan: Plan, resource_type: str, name: str) -> dict[str, Any]:
    (resource,) = (resource for resource in by_type(plan, resource_type) if resource["name"] == name)
    return resource


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1"])
def test_a_classic_endpoint_with_autoscaling_and_canary_registers_its_objects_in_each_region(region: str) -> None:
    plan = example_plan("prod")
    component = named(plan, "inference-fleet:workloads:InferenceEndpoint", f"{region}-summarize")
    children = sorted(
        (resource["type"], resource["name"]) for resource in plan.resources if resource["parent"] == component["urn"]
    )
    assert children == [
        ("kubernetes:apps/v1:Deployment", f"{region}-summarize"),
        ("kubernetes:apps/v1:Deployment", f"{region}-summarize-canary"),
        ("kubernetes:core/v1:Service", f"{region}-summarize"),
        ("kubernetes:core/v1:Service", f"{region}-summarize-canary"),
        ("kubernetes:keda.sh/v1alpha1:ScaledObject", f"{region}-summarize"),
        ("kubernetes:networking.k8s.io/v1:Ingress", f"{region}-summarize"),
        ("kubernetes:networking.k8s.io/v1:NetworkPolicy", f"{region}-summarize"),
        ("kubernetes:policy/v1:PodDisruptionBudget", f"{region}-summarize"),
    ]
    provider = f"{PREFIX}{PLATFORM}EksCluster$pulumi:providers:kubernetes::{region}-kubernetes"
    assert {resource["provider"] for resource in plan.resources if resource["parent"] == component["urn"]} == {provider}


def test_a_mooncake_endpoint_registers_roles_proxy_store_and_policies_in_each_region() -> None:
    plan = example_plan("prod")
    component = named(plan, "inference-fleet:workloads:InferenceEndpoint", "us-east-1-chat")
    children = sorted(
        (resource["type"], resource["name"]) for resource in plan.resources if resource["parent"] == component["urn"]
    )
    assert children == sorted(
        [
            ("kubernetes:core/v1:ServiceAccount", "us-east-1-chat-kv"),
            ("kubernetes:core/v1:ConfigMap", "us-east-1-chat-mooncake"),
            ("kubernetes:apps/v1:StatefulSet", "us-east-1-chat-store"),
            ("kubernetes:core/v1:Service", "us-east-1-chat-store"),
            ("kubernetes:apps/v1:Deployment", "us-east-1-chat-prefill"),
            ("kubernetes:core/v1:Service", "us-east-1-chat-prefill"),
            ("kubernetes:policy/v1:PodDisruptionBudget", "us-east-1-chat-prefill"),
            ("kubernetes:keda.sh/v1alpha1:ScaledObject", "us-east-1-chat-prefill"),
            ("kubernetes:apps/v1:Deployment", "us-east-1-chat-decode"),
            ("kubernetes:core/v1:Service", "us-east-1-chat-decode"),
            ("kubernetes:policy/v1:PodDisruptionBudget", "us-east-1-chat-decode"),
            ("kubernetes:keda.sh/v1alpha1:ScaledObject", "us-east-1-chat-decode"),
            ("kubernetes:core/v1:Service", "us-east-1-chat-decode-pods"),  # routing: prefix
            ("kubernetes:core/v1:ConfigMap", "us-east-1-chat-proxy"),
            ("kubernetes:apps/v1:Deployment", "us-east-1-chat-proxy"),
            ("kubernetes:core/v1:Service", "us-east-1-chat-proxy"),
            ("kubernetes:policy/v1:PodDisruptionBudget", "us-east-1-chat-proxy"),
            ("kubernetes:networking.k8s.io/v1:Ingress", "us-east-1-chat"),
            ("kubernetes:networking.k8s.io/v1:NetworkPolicy", "us-east-1-chat-proxy"),
            ("kubernetes:networking.k8s.io/v1:NetworkPolicy", "us-east-1-chat-roles"),
            ("kubernetes:networking.k8s.io/v1:NetworkPolicy", "us-east-1-chat-store"),
        ]
    )


def test_the_cold_tier_child_names_the_regions_own_bucket_under_the_endpoints_prefix() -> None:
    plan = example_plan("prod")
    for region in ("us-east-1", "eu-west-1"):
        prefill = named(plan, "kubernetes:apps/v1:Deployment", f"{region}-chat-prefill")
        args = prefill["inputs"]["spec"]["template"]["spec"]["containers"][0]["args"]
        config = json.loads(args[args.index("--kv-transfer-config") + 1])
        cold = config["kv_connector_extra_config"]["connectors"][-1]
        (tier,) = cold["kv_connector_extra_config"]["secondary_tiers"]
        assert tier["store_config"]["bucket"] == f"inference-fleet-prod-kv-123456789012-{region}"
        assert tier["prefix"] == "mooncake-kv/chat"  # vLLM adds the '/': its keys start mooncake-kv/chat/


def test_rollouts_wait_for_model_loading_and_routes_for_the_load_balancer() -> None:
    plan = example_plan("prod")
    deployment = named(plan, "kubernetes:apps/v1:Deployment", "us-east-1-summarize")
    # Llama-3.1-8B from the Hub: its startup budget (components/render/startup.py), twice that to
    # report a rollout stuck, and 10 minutes more for Pulumi.
    budget = startup_seconds(KNOWN_MODEL_BYTES["meta-llama/Llama-3.1-8B-Instruct"], "hub")
    progress_deadline = deployment["inputs"]["spec"]["progressDeadlineSeconds"]
    assert progress_deadline == 2 * budget
    wait = f"{2 * budget // 60 + 10}m"
    assert deployment["options"]["customTimeouts"] == {"create": wait, "update": wait}
    route = named(plan, "kubernetes:networking.k8s.io/v1:Ingress", "us-east-1-summarize")
    assert route["options"]["customTimeouts"] == {"create": "20m", "update": "20m"}


def test_workloads_wait_for_their_namespace_the_nodes_and_the_load_balancer_controller() -> None:
    depends_on = named(example_plan("prod"), "kubernetes:core/v1:Service", "eu-west-1-summarize")["options"][
        "dependsOn"
    ]
    expected = [
        f"{WORKLOADS}kubernetes:core/v1:Namespace::eu-west-1-inference",
        f"{WORKLOADS}kubernetes:core/v1:ServiceAccount::eu-west-1-inference",
        f"{PLATFORM}LoadBalancerController$kubernetes:helm.sh/v3:Release::eu-west-1-lb-controller",
        f"{PLATFORM}EfaNodeGroup$eks:index:ManagedNodeGroup::eu-west-1-g6e",
        f"{PLATFORM}ClusterAddons$kubernetes:helm.sh/v3:Release::eu-west-1-nvidia-device-plugin",
    ]
    assert {PREFIX + urn for urn in expected} <= set(depends_on)
    assert not [urn for urn in depends_on if "us-east-1" in urn]


def test_namespaces_are_created_once_per_region_and_kept_on_delete() -> None:
    namespaces = [
        namespace
        for namespace in by_type(example_plan("prod"), "kubernetes:core/v1:Namespace")
        if namespace["inputs"]["metadata"]["name"] not in (naming.METRICS_NAMESPACE, LWS_NAMESPACE)
    ]
    assert sorted(namespace["name"] for namespace in namespaces) == ["eu-west-1-inference", "us-east-1-inference"]
    assert all(namespace["options"].get("retainOnDelete") for namespace in namespaces)


def test_an_autoscaled_deployment_does_not_send_a_replica_count() -> None:
    deployment = named(example_plan("prod"), "kubernetes:apps/v1:Deployment", "eu-west-1-summarize")
    assert "replicas" not in deployment["inputs"]["spec"]


def test_each_endpoint_and_region_exports_its_engine_record_with_the_routed_address() -> None:
    records = example_plan("dev").outputs["endpoints"]
    record = EndpointRecord.from_dict(records["assistant"]["us-west-2"])
    assert record.address == "http://k8s-inference-fleet-offline.us-west-2.elb.amazonaws.com/inference/assistant"
    assert record.capabilities.context_length == 32768
    assert EndpointRecord.from_dict(record.to_dict()) == record
    assert set(records) == {"assistant", "chat-pd", "kv-cache"}


def test_each_engine_record_names_the_model_clients_send() -> None:
    records = example_plan("dev").outputs["endpoints"]
    served = {
        name: EndpointRecord.from_dict(by_region["us-west-2"]).served_model_name for name, by_region in records.items()
    }
    assert served == {"assistant": "Qwen/Qwen3-8B", "chat-pd": "Qwen/Qwen3-8B", "kv-cache": "Qwen/Qwen3-0.6B"}


def test_the_plan_writes_the_rendered_manifests_per_region_and_namespace() -> None:
    files = manifest_files(example_plan("prod"))
    for region in ("us-east-1", "eu-west-1"):
        assert f"manifests/{region}/inference/Ingress-summarize.yaml" in files
        assert f"manifests/{region}/inference/Deployment-summarize-canary.yaml" in files
        assert f"manifests/{region}/_cluster/Namespace-inference.yaml" in files


@pytest.mark.parametrize("stack", ["dev", "prod", "existing"])
def test_every_manifest_of_the_example_stacks_is_valid_for_the_cluster_version(stack: str) -> None:
    files = manifest_files(example_plan(stack))
    assert len(files) > 10
    for path, text in files.items():
        document = YAML(typ="safe", pure=True).load(text)
        if custom_resources.is_custom(document):  # KEDA's ScaledObjects, against KEDA's CRD
            assert custom_resources.problems(document) == [], path
            continue
        if (document["apiVersion"], document["kind"]) in CUSTOM_KINDS:
            (crd,) = [c for c in LWS_CRDS if c["spec"]["names"]["kind"] == document["kind"]]
            assert schema_problems(crd, document) == [], path
            continue
        try:
            kubernetes_validate.validate(document, CLUSTER_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            raise AssertionError(f"{path}: {error}") from None


def test_the_example_stacks_run_every_mooncake_mode() -> None:
    store_configs = {
        manifest["inputs"]["metadata"]["name"]
        for stack in ("dev", "prod")
        for manifest in by_type(example_plan(stack), "kubernetes:core/v1:ConfigMap")
        if manifest["inputs"]["metadata"]["labels"].get("app.kubernetes.io/component") == "store"
    }
    assert store_configs == {"chat-mooncake", "kv-cache-mooncake"}  # both (prod) and store (dev) carry a store
    assert named(example_plan("dev"), "kubernetes:apps/v1:Deployment", "us-west-2-chat-pd-prefill")  # disaggregated


def test_the_route_of_a_gated_endpoint_waits_for_its_gates_rollout(tmp_path: Path) -> None:
    """Moved to the gate (min_replicas 0), the route is updated only once the gate's Deployment is
    rolled out, so the load balancer never sends to a gate without ready pods; an ungated route
    waits for none of its endpoint's workloads, as before."""
    stack = edited(
        tmp_path,
        "prod",
        ("        min_replicas: 2\n        max_replicas: 8\n", "        min_replicas: 0\n        max_replicas: 8\n"),
    )
    plan = run_program(read_stack_file(stack))
    for region in ("us-east-1", "eu-west-1"):
        gate = named(plan, "kubernetes:apps/v1:Deployment", f"{region}-summarize-gate")
        route = named(plan, "kubernetes:networking.k8s.io/v1:Ingress", f"{region}-summarize")
        assert gate["urn"] in route["options"]["dependsOn"]
        others = [r["urn"] for r in plan.resources if r["type"] == "kubernetes:apps/v1:Deployment" and r is not gate]
        assert not set(others) & set(route["options"]["dependsOn"])
    ungated = named(example_plan("prod"), "kubernetes:networking.k8s.io/v1:Ingress", "us-east-1-summarize")
    assert not [urn for urn in ungated["options"]["dependsOn"] if "apps/v1:Deployment" in urn]
