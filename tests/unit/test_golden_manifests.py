"""Golden manifests of classic endpoints, one file per framework and variant, each
document validated strictly against the Kubernetes OpenAPI schema of the cluster version.

Regenerate after an intended rendering change: ``UPDATE_GOLDEN=1 make test``, then
review the diff of tests/golden/ like any other change.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from ruamel.yaml import YAML

from components.catalog import chart_crds, pins
from components.render.classic import classic_objects, namespace, workload_service_account
from components.render.mooncake import cold_tier_target, mooncake_objects
from components.workloads.kube import CUSTOM_KINDS, KINDS
from tests import custom_resources
from tests.crd_schema import schema_problems
from tests.unit.stack_builders import DELETE, MODEL, classic_endpoint, placed_endpoint, region, stack_config

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
LWS_CRDS = chart_crds(pins().charts.lws)
CLUSTER_VERSION = f"{pins().kubernetes.default_version}.0"

PUBLIC = {
    "ingress": {
        "scheme": "internet-facing",
        "certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/0f3e6a7b-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
        "allowed_cidrs": ["203.0.113.0/24"],
    }
}
ENGINE = {
    "context_length": 32768,
    "kv_cache_block_size": 16,
    "total_kv_blocks": 4096,
    "max_num_seqs": 128,
    "max_num_batched_tokens": 8192,
    "enable_prefix_caching": False,
}

CASES: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "vllm": (
        {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "model_source": "s3://models-bucket/llama-3.1-8b",
            "gpu_count": 2,
            "engine": ENGINE,
            "env": {"VLLM_LOGGING_LEVEL": "INFO"},
        },
        None,
    ),
    "sglang": (
        {"image": "lmsysorg/sglang:v0.5.6", "model_path": "/weights/qwen", "gpu_count": 2, "engine": ENGINE},
        None,
    ),
    "tgi": (
        {
            "image": "ghcr.io/huggingface/text-generation-inference:3.3.6",
            "model": "mistralai/Mistral-7B-Instruct-v0.3",
            "model_source": "s3://models-bucket/mistral-7b",
            "engine": ENGINE,
            "secret_env": {"HF_TOKEN": {"secret": "hf-token", "key": "token"}},
        },
        None,
    ),
    "triton": (
        {
            "image": "nvcr.io/nvidia/tritonserver:25.10-py3",
            "model": DELETE,
            "model_source": "s3://models-bucket/repository",
        },
        None,
    ),
    "canary": (
        {"canary": {"image": "vllm/vllm-openai:v0.34.0", "weight": 25, "replicas": 1}, "replicas": 2},
        PUBLIC,
    ),
    "autoscaling": (
        {
            "autoscaling": {
                "min_replicas": 2,
                "max_replicas": 4,
                "metrics": ["cpu:70", "gpu:60", "queue:5", "ttft_p90_ms:800"],
            }
        },
        None,
    ),
    # The server may go to zero: a gate in front counts requests and wakes it, the route goes through
    # it, the canary's share straight to the canary (docs/metrics.md, 'Scale to zero').
    "scale-to-zero": (
        {
            "autoscaling": {"min_replicas": 0, "max_replicas": 3, "metrics": ["queue:4"]},
            "canary": {"image": "vllm/vllm-openai:v0.34.0", "weight": 10, "replicas": 1},
            "health_check_path": "/ready",
        },
        None,
    ),
    # Routed at a floor of two: a gate that chooses each request's server pod through <name>-pods, no
    # --scale-to-zero and no wake trigger; the canary's share straight to the canary.
    "routing": (
        {
            "routing": "prefix",
            "autoscaling": {"min_replicas": 2, "max_replicas": 4, "metrics": ["queue:5"]},
            "canary": {"image": "vllm/vllm-openai:v0.34.0", "weight": 10, "replicas": 1},
        },
        None,
    ),
    "stopped": (
        {
            "desired_state": "stopped",
            "autoscaling": {"min_replicas": 1, "max_replicas": 2},
            "capacity_type": "on-demand",
        },
        None,
    ),
}


TCP = {"transfer": {"protocol": "tcp"}}
SPLIT = {"topology": {"prefill": 2, "decode": 1}}
COLD_REGION = {"cold_tier": {"enabled": True}}
P4D_REGION = {
    "node_groups": {
        "p4d": {
            "instance_types": ["p4d.24xlarge"],
            "min_size": 0,
            "max_size": 2,
            "desired_size": 1,
            "efa": True,
            "availability_zone": "us-east-1a",
            "hugepages_2mi": "37GiB",
        }
    }
}
BUCKET = "inference-fleet-test-kv-123456789012-us-east-1"


def on_p5(mooncake: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"model": "Qwen/Qwen3-32B", "node_group": "p5", "gpu_count": 8, "mooncake": mooncake, **fields}


def on_gpu(mooncake: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "node_group": "gpu", "gpu_count": 2, "mooncake": {**TCP, **mooncake}, **fields}


MOONCAKE_CASES: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "disaggregated-rdma": (on_p5({"mode": "disaggregated", **SPLIT}), None),
    "disaggregated-tcp": (on_gpu({"mode": "disaggregated", "topology": {"prefill": 1, "decode": 1}}), None),
    "store-rdma": (on_p5({"mode": "store"}), None),
    "store-tcp-cold-tier": (on_gpu({"mode": "store", "store": {"cold_tier_enabled": True}}), COLD_REGION),
    "both-rdma-cold-tier": (
        on_p5(
            {
                "mode": "both",
                **SPLIT,
                "store": {"cold_tier_enabled": True},
                "proxy": {"admin_api_key_secret": "chat-admin"},
            }
        ),
        COLD_REGION,
    ),
    "store-rdma-cold-tier": (on_p5({"mode": "store", "store": {"cold_tier_enabled": True}}), COLD_REGION),
    "both-tcp-cold-tier": (
        on_gpu({"mode": "both", "topology": {"prefill": 1, "decode": 1}, "store": {"cold_tier_enabled": True}}),
        COLD_REGION,
    ),
    "store-tcp-disk": (on_gpu({"mode": "store", "store": {"offload": "disk", "offload_disk_size": "200GiB"}}), None),
    "both-tcp": (on_gpu({"mode": "both", "topology": {"prefill": 1, "decode": 1}, "store": {"offload": "none"}}), None),
    "disaggregated-tcp-autoscaled-decode": (
        on_gpu(
            {
                "mode": "disaggregated",
                "topology": {"prefill": 1, "decode": 1},
                "autoscaling": {
                    "enabled": True,
                    "decode": {"min_replicas": 1, "max_replicas": 2, "metrics": ["running:32", "kv_cache:0.8"]},
                },
            }
        ),
        None,
    ),
    # Both roles may go to zero: each ScaledObject wakes on the proxy's requests (docs/metrics.md).
    "disaggregated-tcp-scale-to-zero": (
        on_gpu(
            {
                "mode": "disaggregated",
                "topology": {"prefill": 1, "decode": 1},
                "autoscaling": {
                    "enabled": True,
                    "prefill": {"min_replicas": 0, "max_replicas": 2, "metrics": ["queue:4"]},
                    "decode": {"min_replicas": 0, "max_replicas": 2, "metrics": ["running:32"]},
                },
            }
        ),
        None,
    ),
    "both-rdma-autoscaled-prefill": (
        on_p5(
            {
                "mode": "both",
                "topology": {"prefill": 1, "decode": 1},
                "autoscaling": {
                    "enabled": True,
                    "prefill": {"min_replicas": 1, "max_replicas": 2, "metrics": ["queue:4", "ttft_p90_ms:1000"]},
                },
            }
        ),
        None,
    ),
    # A role pair with different shapes: prefill a whole p5 (TP 8), decode 4 GPUs of a p4d (TP 4; with
    # all its EFA devices) in the same zone, each with its own args and memory; the store shards by
    # their common multiple.
    "both-rdma-role-shapes": (
        on_p5(
            {
                "mode": "both",
                "topology": {"prefill": 1, "decode": 2},
                "roles": {
                    "prefill": {"args": ["--max-num-batched-tokens", "16384"]},
                    "decode": {
                        "node_group": "p4d",
                        "gpu_count": 4,
                        "args": ["--max-num-seqs", "256"],
                        "resources": {"cpu": 40, "memory": "400GiB"},
                    },
                },
            }
        ),
        P4D_REGION,
    ),
    # A model larger than one node: each decode instance a group of two whole p5s (pipeline stages),
    # a LeaderWorkerSet; prefill one p5.
    "disaggregated-rdma-2-node-decode": (
        on_p5({"mode": "disaggregated", "topology": {"prefill": 1, "decode": 2}, "roles": {"decode": {"nodes": 2}}}),
        None,
    ),
    # Routed, decode spanning nodes: the proxy chooses among the decode groups' leaders (<name>-decode-pods).
    "disaggregated-rdma-2-node-decode-routing": (
        on_p5(
            {"mode": "disaggregated", "topology": {"prefill": 1, "decode": 2}, "roles": {"decode": {"nodes": 2}}},
            routing="prefix",
        ),
        None,
    ),
    "both-tcp-stopped": (
        on_gpu({"mode": "both", "topology": {"prefill": 1, "decode": 1}}, desired_state="stopped"),
        None,
    ),
    "both-tcp-canary": (
        on_gpu(
            {"mode": "both", "topology": {"prefill": 2, "decode": 1}, "store": {"cold_tier_enabled": True}},
            canary={"image": "vllm/vllm-openai:v0.34.0", "weight": 5, "topology": {"prefill": 1, "decode": 1}},
        ),
        COLD_REGION,
    ),
    "store-rdma-canary": (
        on_p5({"mode": "store"}, canary={"image": "vllm/vllm-openai:v0.34.0-efa", "weight": 20}),
        None,
    ),
}
GOLDEN_CASES = [("classic", case) for case in CASES] + [("mooncake", case) for case in MOONCAKE_CASES]


def rendered(family: str, case: str) -> list[dict[str, Any]]:
    overrides, region_overrides = (CASES if family == "classic" else MOONCAKE_CASES)[case]
    endpoint_spec = classic_endpoint(overrides) if family == "classic" else overrides
    config = stack_config(regions={"us-east-1": region(region_overrides)}, endpoints={"chat": endpoint_spec})
    endpoint = placed_endpoint(config)
    if family == "classic":
        objects = classic_objects(endpoint)
    else:
        cold = endpoint.spec.mooncake is not None and endpoint.spec.mooncake.store.cold_tier_enabled
        objects = mooncake_objects(endpoint, cold_tier_target(endpoint, BUCKET) if cold else None)
    return [namespace(endpoint.namespace), workload_service_account(endpoint.namespace), *objects.values()]


def as_yaml(documents: list[dict[str, Any]]) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.width = 4096
    buffer = io.StringIO()
    yaml.dump_all(documents, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(("family", "case"), GOLDEN_CASES)
def test_rendering_matches_its_golden_file(family: str, case: str) -> None:
    path = GOLDEN / family / f"{case}.yaml"
    text = as_yaml(rendered(family, case))
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.read_text() == text, f"{path} is stale: rerun with UPDATE_GOLDEN=1 and review the diff"


@pytest.mark.parametrize(("family", "case"), GOLDEN_CASES)
def test_every_golden_document_is_valid_for_the_cluster_version(family: str, case: str) -> None:
    documents = list(YAML(typ="safe", pure=True).load_all((GOLDEN / family / f"{case}.yaml").read_text()))
    assert len(documents) >= 6
    for document in documents:
        if (document["apiVersion"], document["kind"]) in CUSTOM_KINDS:
            if custom_resources.is_custom(document):  # KEDA's ScaledObjects, against the vendored CRDs
                assert custom_resources.problems(document) == []
            continue  # LeaderWorkerSets: held to their own CRD below
        kubernetes_validate.validate(document, CLUSTER_VERSION, strict=True)


def test_scaled_object_validation_rejects_a_misspelt_field() -> None:
    """The CRD check is real: KEDA's schema refuses a field it does not name."""
    scaled = next(document for document in rendered("classic", "autoscaling") if document["kind"] == "ScaledObject")
    assert custom_resources.problems(scaled) == []
    scaled["spec"]["triggers"][1]["metricTyp"] = "Value"
    assert custom_resources.problems(scaled) == [
        "spec.triggers.1: Additional properties are not allowed ('metricTyp' was unexpected)"
    ]


@pytest.mark.parametrize(("family", "case"), GOLDEN_CASES)
def test_every_custom_object_is_valid_for_its_pinned_crd(family: str, case: str) -> None:
    """LeaderWorkerSets against the vendored LWS CRD (config/pins.yaml charts.lws), and the pod
    templates inside them against Kubernetes' own PodTemplateSpec schema."""
    documents = list(YAML(typ="safe", pure=True).load_all((GOLDEN / family / f"{case}.yaml").read_text()))
    crds = {
        (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"]): crd
        for crd in LWS_CRDS
        for version in crd["spec"]["versions"]
    }
    for document in documents:
        key = (document["apiVersion"], document["kind"])
        if key not in crds:
            continue  # ScaledObjects: held to KEDA's CRD above
        assert schema_problems(crds[key], document) == []
        group = document["spec"]["leaderWorkerTemplate"]
        for part in ("leaderTemplate", "workerTemplate"):
            template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": group[part]}
            kubernetes_validate.validate(template, CLUSTER_VERSION, strict=True)


def test_strict_validation_rejects_a_misspelt_field() -> None:
    """The schema check is real: a field Kubernetes does not know fails it."""
    deployment = next(document for document in rendered("classic", "vllm") if document["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolice"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, CLUSTER_VERSION, strict=True)


@pytest.mark.parametrize(("family", "case"), GOLDEN_CASES)
def test_every_rendered_kind_has_a_typed_pulumi_resource(family: str, case: str) -> None:
    for document in rendered(family, case):
        assert (document["apiVersion"], document["kind"]) in KINDS.keys() | CUSTOM_KINDS


@pytest.mark.parametrize(("family", "case"), GOLDEN_CASES)
def test_every_namespace_asks_the_load_balancer_controller_for_readiness_gates(family: str, case: str) -> None:
    (namespace_document,) = [document for document in rendered(family, case) if document["kind"] == "Namespace"]
    assert namespace_document["metadata"]["labels"]["elbv2.k8s.aws/pod-readiness-gate-inject"] == "enabled"


@pytest.mark.parametrize(("family", "case"), GOLDEN_CASES)
def test_a_route_health_checks_its_backends_readiness_path_for_200(family: str, case: str) -> None:
    """The ALB checks what the kubelet's readiness probe checks, and wants 200: on servers the framework's
    health path, which vLLM, SGLang and TGI (/health) and Triton (/v2/health/ready) answer when they serve;
    on a split Mooncake endpoint's proxy (and a classic endpoint's gate) its /health, 200 while it can serve.
    A Service's own health-check annotation is what its target group gets (the load balancer controller
    merges the Service's annotations over the Ingress's: v3.4.2 pkg/ingress/model_build_target_group.go)."""
    documents = rendered(family, case)
    (ingress,) = [document for document in documents if document["kind"] == "Ingress"]
    annotations = ingress["metadata"]["annotations"]
    assert annotations["alb.ingress.kubernetes.io/success-codes"] == "200"
    (action,) = [json.loads(value) for key, value in annotations.items() if "/actions." in key]
    backends = [group["serviceName"] for group in action["forwardConfig"]["targetGroups"]]
    for backend in backends:
        (service,) = [d for d in documents if d["kind"] == "Service" and d["metadata"]["name"] == backend]
        selector = service["spec"]["selector"]
        pods = [
            d["spec"]["template"]
            for d in documents
            if d["kind"] in ("Deployment", "StatefulSet")
            and selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(pods) == 1, backend
        (probe,) = [c["readinessProbe"] for c in pods[0]["spec"]["containers"] if "readinessProbe" in c]
        checked = {**annotations, **service["metadata"].get("annotations", {})}
        assert checked["alb.ingress.kubernetes.io/healthcheck-path"] == probe["httpGet"]["path"], backend


SERVER_CONTAINERS = ("Deployment", "StatefulSet")


@pytest.mark.parametrize("case", list(MOONCAKE_CASES))
def test_every_mooncake_role_loads_the_same_model_under_the_same_served_name(case: str) -> None:
    """The proxy forwards the client's model to prefill and decode alike: every vLLM role must answer to it."""
    model = MOONCAKE_CASES[case][0]["model"]
    templates = [
        template
        for document in rendered("mooncake", case)
        for template in (
            [document["spec"]["template"]]
            if document["kind"] in SERVER_CONTAINERS
            else list(document["spec"]["leaderWorkerTemplate"].values())
            if document["kind"] == "LeaderWorkerSet"
            else []
        )
        if isinstance(template, dict)
    ]
    servers = [
        container
        for template in templates
        for container in template["spec"]["containers"]
        if container["name"] == "server"
    ]
    assert servers
    for server in servers:
        assert server["args"][:3] == [model, "--served-model-name", model]
