"""Classic endpoint rendering: framework flags, replica ownership, stop/start, canary routes,
and the invariants no edit may break (selectors, route weights, name lengths)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.naming import MAX_ENDPOINT_NAME_LENGTH
from components.render.autoscaling import PAUSED_REPLICAS
from components.render.classic import classic_objects
from components.render.drain import SERVER_DRAIN_SECONDS
from components.render.frameworks import ADAPTERS, Adapter
from components.render.kube import quantity
from components.render.placement import PlacedEndpoint
from components.render.route import weights
from components.spec.engine import EngineCapabilities
from tests.unit.stack_builders import DELETE, classic_endpoint, placed_endpoint, region, stack_config

ACTION = "alb.ingress.kubernetes.io/actions.chat"


def rendered(
    overrides: dict[str, Any] | None = None, *, name: str = "chat", region_overrides: Any = None
) -> dict[str, Any]:
    config = stack_config(
        regions={"us-east-1": region(region_overrides)}, endpoints={name: classic_endpoint(overrides)}
    )
    return classic_objects(placed_endpoint(config, name))


def placed(overrides: dict[str, Any] | None = None) -> PlacedEndpoint:
    return placed_endpoint(stack_config(endpoints={"chat": classic_endpoint(overrides)}))


def server(objects: dict[str, Any], part: str = "deployment") -> dict[str, Any]:
    container: dict[str, Any] = objects[part]["spec"]["template"]["spec"]["containers"][0]
    return container


def route_targets(objects: dict[str, Any]) -> list[tuple[str, int]]:
    action = json.loads(objects["route"]["metadata"]["annotations"][ACTION])
    return [(group["serviceName"], group["weight"]) for group in action["forwardConfig"]["targetGroups"]]


# Framework adapters.


def test_vllm_serves_the_synced_weights_and_translates_the_engine_record() -> None:
    objects = rendered(
        {
            "model_source": "s3://models/llama-8b",
            "model_loading": "sync",
            "gpu_count": 2,
            "engine": {"context_length": 8192, "max_num_seqs": 64, "enable_prefix_caching": False},
            "args": ["--dtype", "bfloat16"],
        },
        region_overrides={"node_groups": {"gpu": {"max_size": 4}}},
    )
    assert server(objects)["args"] == [
        "/models/llama-8b",
        "--served-model-name",
        "Qwen/Qwen3-8B",
        "--port",
        "8000",
        "--tensor-parallel-size",
        "2",
        "--max-model-len",
        "8192",
        "--max-num-seqs",
        "64",
        "--no-enable-prefix-caching",
        "--shutdown-timeout",  # drain, not abort, on SIGTERM (components/render/drain.py)
        str(SERVER_DRAIN_SECONDS),
        "--dtype",
        "bfloat16",
    ]
    assert "command" not in server(objects)  # the image's `vllm serve`


VLLM = "vllm/vllm-openai:v0.33.0"
SGLANG = "lmsysorg/sglang:v0.5.6"
TGI = "ghcr.io/huggingface/text-generation-inference:3.3.6"
TRITON = "nvcr.io/nvidia/tritonserver:25.10-py3"


@pytest.mark.parametrize(
    ("image", "model_args"),
    [
        (VLLM, ["Qwen/Qwen3-8B", "--served-model-name", "Qwen/Qwen3-8B"]),
        (SGLANG, ["--model-path", "Qwen/Qwen3-8B", "--served-model-name", "Qwen/Qwen3-8B"]),
        (TGI, ["--model-id", "Qwen/Qwen3-8B"]),  # TGI has no served-name flag
    ],
    ids=["vllm", "sglang", "tgi"],
)
def test_each_framework_downloads_the_hub_model_and_serves_it_under_that_name(
    image: str, model_args: list[str]
) -> None:
    args = server(rendered({"image": image, "model": "Qwen/Qwen3-8B"}))["args"]
    assert args[: len(model_args)] == model_args
    assert args.count("Qwen/Qwen3-8B") == model_args.count("Qwen/Qwen3-8B")  # nowhere else


@pytest.mark.parametrize(
    ("image", "model_args"),
    [
        (VLLM, ["/models/llama-8b", "--served-model-name", "llama-chat"]),
        (SGLANG, ["--model-path", "/models/llama-8b", "--served-model-name", "llama-chat"]),
        (TGI, ["--model-id", "/models/llama-8b"]),
        (TRITON, ["--model-repository=/models/llama-8b"]),  # the repository's directories name its models
    ],
    ids=["vllm", "sglang", "tgi", "triton"],
)
def test_each_framework_loads_local_weights_and_serves_them_under_the_model_name(
    image: str, model_args: list[str]
) -> None:
    overrides = {"image": image, "model": "llama-chat", "model_source": "s3://models/llama-8b", "model_loading": "sync"}
    args = server(rendered(overrides))["args"]
    assert args[: len(model_args)] == model_args
    assert ("llama-chat" in args) == ("--served-model-name" in model_args)


@pytest.mark.parametrize("image", [VLLM, SGLANG, TGI, TRITON], ids=["vllm", "sglang", "tgi", "triton"])
def test_without_model_the_server_answers_to_the_path_it_loaded(image: str) -> None:
    endpoint = placed({"image": image, "model": DELETE, "model_path": "/weights/llama"})
    assert "--served-model-name" not in endpoint.spec.server_launch().args
    assert endpoint.spec.served_model_name == (None if image == TRITON else "/weights/llama")


@pytest.mark.parametrize(
    ("image", "flag"),
    [
        ("vllm/vllm-openai:v0.33.0", "--max-model-len"),
        ("lmsysorg/sglang:v0.5.6", "--context-length"),
        ("ghcr.io/huggingface/text-generation-inference:3.3.6", "--max-total-tokens"),
    ],
)
def test_each_framework_renders_the_context_length_with_its_own_flag(image: str, flag: str) -> None:
    args = server(rendered({"image": image, "engine": {"context_length": 4096}}))["args"]
    assert args[args.index(flag) + 1] == "4096"


def test_sglang_serves_the_metrics_verify_counts_a_canarys_requests_in() -> None:
    args = server(rendered({"image": "lmsysorg/sglang:v0.5.6"}))["args"]
    assert "--enable-metrics" in args  # without it SGLang serves no /metrics at all


def test_tgi_reads_prefix_caching_from_its_environment() -> None:
    container = server(
        rendered(
            {"image": "ghcr.io/huggingface/text-generation-inference:3.3.6", "engine": {"enable_prefix_caching": True}}
        )
    )
    assert {"name": "PREFIX_CACHING", "value": "1"} in container["env"]


def test_triton_serves_its_model_repository_and_checks_kserve_health() -> None:
    objects = rendered({"image": "nvcr.io/nvidia/tritonserver:25.10-py3", "model_source": "s3://models/repository"})
    container = server(objects)
    assert container["command"] == ["tritonserver"]
    # Its metrics port is rendered (Triton's default), so the one the region's Prometheus scrapes is certain.
    assert container["args"] == [
        "--model-repository=/models/repository",
        "--metrics-port=8002",
        "--http-port=8000",
        "--metrics-config=histogram_latencies=true",  # the TTFT histogram the scalers read
        f"--exit-timeout-secs={SERVER_DRAIN_SECONDS}",  # how long it finishes in-flight inferences on SIGTERM
    ]
    assert {"name": "metrics", "containerPort": 8002, "protocol": "TCP"} in container["ports"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert (
        objects["route"]["metadata"]["annotations"]["alb.ingress.kubernetes.io/healthcheck-path"] == "/v2/health/ready"
    )


def test_model_source_is_synced_by_an_init_container_into_the_served_path() -> None:
    pod = rendered({"model_source": "s3://models/llama-8b/", "model_path": "/weights"})["deployment"]["spec"][
        "template"
    ]["spec"]
    (sync,) = pod["initContainers"]
    assert sync["args"][:4] == ["s3", "sync", "s3://models/llama-8b/", "/weights"]
    assert {"name": "model-weights", "mountPath": "/weights", "readOnly": True} in pod["containers"][0]["volumeMounts"]


def test_secret_env_is_read_from_the_secret_never_written_out() -> None:
    container = server(rendered({"secret_env": {"HF_TOKEN": {"secret": "hf", "key": "token"}}}))
    assert container["env"] == [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]


# Scheduling and resources.


def test_pods_land_on_their_node_group_and_tolerate_its_taints() -> None:
    pod = rendered({"node_group": "p5", "gpu_count": 8, "capacity_type": "on-demand"})["deployment"]["spec"][
        "template"
    ]["spec"]
    assert pod["nodeSelector"] == {"inference-fleet/node-group": "p5", "eks.amazonaws.com/capacityType": "ON_DEMAND"}
    assert {(toleration["key"], toleration["effect"]) for toleration in pod["tolerations"]} == {
        ("nvidia.com/gpu", "NoSchedule"),
        ("vpc.amazonaws.com/efa", "NoSchedule"),
    }


def test_resources_default_per_gpu_and_requests_equal_limits() -> None:
    resources = server(rendered({"gpu_count": 2}))["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "2"}


def test_shared_memory_is_memory_backed_and_half_the_pods_memory() -> None:
    volumes = rendered({"resources": {"memory": "64GiB"}})["deployment"]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}} in volumes


@pytest.mark.parametrize(
    ("size", "text"), [(2**30, "1Gi"), (3 * 2**20, "3Mi"), (1536 * 2**20, "1536Mi"), (1000, "1000")]
)
def test_quantity_uses_the_largest_exact_unit(size: int, text: str) -> None:
    assert quantity(size) == text


# Replica counts: Pulumi, the autoscaler, stop and start.


def test_an_autoscaled_deployment_leaves_its_replica_count_to_the_autoscaler() -> None:
    objects = rendered({"autoscaling": {"min_replicas": 2, "max_replicas": 4, "metrics": ["memory:80"]}})
    assert "replicas" not in objects["deployment"]["spec"]
    autoscaler = objects["autoscaler"]["spec"]
    assert objects["autoscaler"]["kind"] == "ScaledObject"
    assert (autoscaler["minReplicaCount"], autoscaler["maxReplicaCount"]) == (2, 4)
    assert autoscaler["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat"}


@pytest.mark.parametrize(
    ("counts", "running_replicas"),
    [({"replicas": 2}, 2), ({"autoscaling": {"min_replicas": 1, "max_replicas": 2}}, None)],
)
def test_stopping_keeps_every_object_with_zero_pods_and_starting_restores_them(
    counts: dict[str, Any], running_replicas: int | None
) -> None:
    running = rendered(counts)
    stopped = rendered({"desired_state": "stopped", **counts})
    assert stopped.keys() == running.keys()
    assert stopped["deployment"]["spec"]["replicas"] == 0
    assert running["deployment"]["spec"].get("replicas") == running_replicas
    without_count = [{**objects["deployment"]["spec"], "replicas": None} for objects in (running, stopped)]
    assert without_count[0] == without_count[1]
    if "autoscaler" in running:  # KEDA would raise a workload below its minimum: paused at zero instead
        assert stopped["autoscaler"]["metadata"]["annotations"][PAUSED_REPLICAS] == "0"
        assert PAUSED_REPLICAS not in running["autoscaler"]["metadata"]["annotations"]


# Canary and route.


def test_a_canary_is_a_second_workload_and_service_with_its_own_image_and_count() -> None:
    objects = rendered({"replicas": 2, "canary": {"image": "vllm/vllm-openai:v0.34.0", "weight": 30, "replicas": 1}})
    assert server(objects, "canary-deployment")["image"] == "vllm/vllm-openai:v0.34.0"
    assert objects["canary-deployment"]["spec"]["replicas"] == 1
    assert objects["canary-service"]["spec"]["selector"] == {
        "app.kubernetes.io/name": "chat",
        "app.kubernetes.io/component": "canary",
    }
    assert route_targets(objects) == [("chat", 70), ("chat-canary", 30)]


def test_without_a_canary_the_route_sends_everything_to_the_primary() -> None:
    assert route_targets(rendered()) == [("chat", 100)]


def test_ecr_images_of_the_canary_use_the_regions_replica() -> None:
    image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/chat:2"
    objects = rendered({"image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/chat:1", "canary": {"image": image}})
    assert server(objects)["image"] == "123456789012.dkr.ecr.us-east-1.amazonaws.com/chat:1"
    assert server(objects, "canary-deployment")["image"] == "123456789012.dkr.ecr.us-east-1.amazonaws.com/chat:2"


def test_the_route_strips_its_prefix_so_every_framework_sees_its_own_paths() -> None:
    annotations = rendered()["route"]["metadata"]["annotations"]
    (transform,) = json.loads(annotations["alb.ingress.kubernetes.io/transforms.chat"])
    assert transform["urlRewriteConfig"]["rewrites"] == [{"regex": "^/inference/chat/?(.*)$", "replace": "/$1"}]
    path = rendered()["route"]["spec"]["rules"][0]["http"]["paths"][0]
    assert (path["path"], path["pathType"]) == ("/inference/chat", "Prefix")


def test_an_internal_route_without_certificate_listens_on_http_only() -> None:
    annotations = rendered()["route"]["metadata"]["annotations"]
    assert annotations["alb.ingress.kubernetes.io/listen-ports"] == '[{"HTTP":80}]'
    assert "alb.ingress.kubernetes.io/certificate-arn" not in annotations


# Invariants under edits.


def selectors(objects: dict[str, Any]) -> dict[str, Any]:
    found = {}
    for part, manifest in objects.items():
        spec = manifest["spec"]
        if "selector" in spec:
            found[part] = spec["selector"]
    return found


EDITS = st.fixed_dictionaries(
    {},
    optional={
        "image": st.sampled_from(["vllm/vllm-openai:v0.33.0", "vllm/vllm-openai:v0.34.0", "my.registry/vllm:1"]),
        "replicas": st.integers(0, 2),
        "env": st.dictionaries(st.sampled_from(["A", "B", "LOG_LEVEL"]), st.text("abc", max_size=3), max_size=2),
        "args": st.lists(st.sampled_from([("--dtype", "auto"), ("--seed", "7"), ("--enforce-eager",)]), max_size=3).map(
            lambda flags: [arg for flag in flags for arg in flag]  # a value after its flag, never first
        ),
        "desired_state": st.sampled_from(["running", "stopped"]),
    },
)


@settings(max_examples=40, deadline=None)
@given(edits=EDITS, weight=st.integers(1, 99))
def test_selectors_never_change_under_edits_of_image_replicas_weight_env_or_args(
    edits: dict[str, Any], weight: int
) -> None:
    base = rendered({"canary": {"image": "vllm/vllm-openai:v0.34.0"}})
    edited_overrides = {**edits, "replicas": min(edits.get("replicas", 1), 1)}
    if edits.get("desired_state") != "stopped":
        edited_overrides["canary"] = {"image": "vllm/vllm-openai:v0.35.0", "weight": weight}
    edited = rendered(edited_overrides)
    for part, selector in selectors(edited).items():
        assert selector == selectors(base)[part]


@settings(max_examples=60, deadline=None)
@given(weight=st.integers(1, 99))
def test_route_weights_always_sum_to_100(weight: int) -> None:
    endpoint = placed({"canary": {"image": "vllm/vllm-openai:v0.34.0", "weight": weight}})
    assert sum(share for _, share in weights(endpoint, "chat")) == 100
    assert sum(share for _, share in route_targets(classic_objects(endpoint))) == 100


def test_every_name_label_and_annotation_key_fits_kubernetes_limits_for_the_longest_endpoint_name() -> None:
    name = "e" * MAX_ENDPOINT_NAME_LENGTH
    objects = rendered({"canary": {"image": "vllm/vllm-openai:v0.34.0"}, "autoscaling": {"max_replicas": 2}}, name=name)
    for manifest in objects.values():
        metadata = manifest["metadata"]
        assert len(metadata["name"]) <= 63
        assert all(len(value) <= 63 for value in metadata["labels"].values())
        assert all(len(key.rpartition("/")[2]) <= 63 for key in metadata.get("annotations", {}))


@pytest.mark.parametrize("adapter", list(ADAPTERS.values()), ids=list(ADAPTERS))
def test_every_translated_field_is_a_field_of_the_engine_record(adapter: Adapter) -> None:
    assert set(adapter.engine_flags) <= set(EngineCapabilities.model_fields)
