"""Section 1: one inference endpoint (classic, or Mooncake with a ``mooncake`` block): its fields,
the defaults filled in from them, its rules across them (with those of server_args.py,
model_delivery.py and mooncake_checks.py) and the facts the workloads derive."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, Self

from pydantic import Field
from pydantic_core import PydanticCustomError

from components.catalog import pins
from components.render.frameworks import ADAPTERS, ServerInputs, ServerLaunch, server_launch
from components.render.model_loading import ModelLoading, streaming_flags
from components.render.startup import LoadPath, startup_seconds
from components.scheduling import CAPACITY_TYPE_LABEL, NODE_GROUP_LABEL
from components.spec import model_delivery, mooncake_checks, server_args, value_checks
from components.spec.autoscaling import Autoscaling, Front, served_rules
from components.spec.base import (
    FILLED_IN,
    DnsLabel,
    EnvName,
    LabelKey,
    LabelValue,
    NonEmptyStr,
    ObjectName,
    Port,
    SpecModel,
    fail,
    items,
)
from components.spec.engine import EngineCapabilities
from components.spec.field_types import ModelName, Path, S3Uri, UserLabelKey
from components.spec.images import HEALTH_PATHS, Framework, ImageRef, framework_from_image, rewrite_for_region
from components.spec.model_delivery import MODELS_DIR, streams_by_default
from components.spec.model_sizes import KNOWN_MODEL_BYTES
from components.spec.mooncake import Mooncake, Proxy, Topology
from components.spec.region import CapacityType
from components.spec.resources import Resources
from components.spec.roles import SPLIT_ROLES, Roles
from components.spec.routing import ROUTING_DESCRIPTION, Routing, routing_rules
from components.spec.sizes import ByteSize
from policy.rules import CREDENTIAL_NAME

# Node labels the pods are steered by, each from its own field.
_STEERING_LABELS = {NODE_GROUP_LABEL: "node_group", CAPACITY_TYPE_LABEL: "capacity_type"}


class SecretRef(SpecModel):
    secret: ObjectName = Field(
        description="Name of a Kubernetes Secret in the endpoint's namespace, created by the stack from "
        "inference-fleet:secrets.<name> (which must hold the key)."
    )
    key: NonEmptyStr = Field(description="Key inside that Secret.")


class Canary(SpecModel):
    image: ImageRef = Field(
        description="Image of the canary workload (of every vLLM role of a Mooncake endpoint's canary set)."
    )
    weight: int = Field(10, ge=1, le=99, description="Percent of traffic the route sends to the canary.")
    replicas: int = Field(1, ge=1, description="Pods of a classic endpoint's canary workload.")
    topology: Topology | None = Field(
        None,
        description="XpYd counts of a split Mooncake endpoint's canary set (its own prefill, decode, proxy and "
        "store master, named <name>-canary-*); each count defaults to mooncake.topology's. The set is never "
        "autoscaled.",
    )


class Endpoint(SpecModel):
    image: ImageRef = Field(
        FILLED_IN,
        description="Server image; required for classic endpoints. With mooncake it defaults to the pinned "
        "Mooncake-enabled vLLM image (its -efa variant for transfer.protocol rdma).",
    )
    framework: Framework = Field(
        FILLED_IN,
        description="vllm, sglang, tgi or triton. Mooncake requires vllm and defaults to it; otherwise recognised "
        "from the image, vllm when unrecognised.",
    )
    target_regions: tuple[str, ...] | None = items(
        "Regions to serve in; every region of the stack when absent. An empty list is refused.", default=None
    )
    replicas: int | None = Field(
        None, ge=0, description="Pods of a classic endpoint (default 1); Mooncake endpoints use mooncake.topology."
    )
    gpu_count: int = Field(1, ge=0, description="GPUs per pod (per role pod for Mooncake roles).")
    node_group: DnsLabel | None = Field(
        None,
        description="Node group to schedule on; defaults to the region's only GPU group (only EFA group for rdma).",
    )
    accelerator: Literal["nvidia", "neuron"] = Field("nvidia", description="Device family the pods request.")
    port: Port = Field(8000, description="Container port of the server.")
    health_check_path: Path | None = Field(
        None, description="Readiness and liveness path; defaults to the framework's (/health, Triton /v2/health/ready)."
    )
    model: ModelName | None = Field(
        None,
        description="What the endpoint serves, and the name clients send as a request's model. Without "
        "model_source and model_path it is a Hugging Face Hub id org/name (e.g. Qwen/Qwen3-8B) that the server "
        "downloads at start and serves under that name; a gated model also needs HF_TOKEN in secret_env (whether "
        "a model is gated cannot be known offline: without the token the pod fails at start). With model_source or "
        "model_path the server loads those weights and model is only the served name (vLLM and SGLang "
        "--served-model-name; TGI has no such flag and takes any name; Triton's repository names its models, so "
        "it is exported only). Without model the server answers to model_path. One of model, model_source and "
        "model_path is required.",
    )
    model_path: Path | None = Field(
        None,
        description="Path of the weights inside the pod, handed to the server (vLLM's positional model, SGLang "
        "--model-path, TGI --model-id, Triton --model-repository); with model_source it defaults to "
        "/models/<last part of the URI>.",
    )
    model_source: S3Uri | None = Field(
        None,
        description="s3:// URI of the weights (safetensors), read by the endpoint's own IAM role (EKS Pod "
        "Identity); how they reach the server is model_loading.",
    )
    model_loading: ModelLoading | None = Field(
        None,
        description="How model_source reaches the server. stream: vLLM reads the safetensors from S3 straight "
        "into memory (--load-format runai_streamer, the Run:ai Model Streamer in the vLLM image), with readers "
        "and a staging buffer sized from the pod's CPU and memory; nothing is written to disk. sync: an init "
        "container copies the whole prefix into model_path (aws s3 sync) and the server reads the copy. "
        "cache: the weights are kept on the node's instance store, filled once per node and shared by the "
        "endpoint's pods there (a restart, a second replica or a wake from zero on that node reads the local "
        "copy): model_source is copied by an init container under a lock and mounted read-only at model_path; "
        "a Hub model is downloaded into a Hub cache directory on the node. "
        "Defaults to stream for vLLM in its own image repository (any tag) and to sync otherwise "
        "(docs/model-delivery.md).",
    )
    model_size: ByteSize | None = Field(
        None,
        description="Size of the weights in bytes (digits, or an IEC unit such as 16GiB). Sizes how long a pod "
        "may take to start (startup probe, rollout deadline) for the path its weights take "
        "(docs/model-delivery.md). Unset: the size of a known model (components/spec/model_sizes.py), else a "
        "30-minute budget.",
    )
    model_revision: DnsLabel | None = Field(
        None,
        description="With model_loading cache and model_source: the revision of the weights under that URI. "
        "Change it when the objects change: each node fills the new revision once and removes the old one's "
        "copy. Unset: one revision, 'initial'.",
    )
    resources: Resources = Field(default_factory=Resources, description="CPU and memory per pod.")
    env: dict[EnvName, str] = Field(
        default_factory=dict, description="Extra environment; credentials belong in secret_env, never here."
    )
    secret_env: dict[EnvName, SecretRef] = Field(
        default_factory=dict, description="Environment read from Kubernetes Secrets: VAR -> {secret, key}."
    )
    args: tuple[str, ...] = items("Extra server arguments, appended to the framework's own.", default=())
    capacity_type: CapacityType | None = Field(
        None, description="Run only on nodes of this capacity type (on-demand, spot, capacity-block)."
    )
    node_selector: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="Extra node labels the pods require."
    )
    namespace: DnsLabel = Field("inference", description="Kubernetes namespace, created if missing.")
    labels: dict[UserLabelKey, LabelValue] = Field(
        default_factory=dict, description="Labels added to every object of the endpoint."
    )
    autoscaling: Autoscaling | None = Field(None, description="Autoscaler (a KEDA ScaledObject) of a classic endpoint.")
    desired_state: Literal["running", "stopped"] = Field(
        "running", description="stopped keeps every object with zero pods; running restores the counts."
    )
    rewrite_image: bool = Field(
        True, description="Use each region's replica of an ECR image (same account, repository and tag)."
    )
    region_image_uris: dict[str, ImageRef] = Field(
        default_factory=dict, description="Explicit image per region; wins over the derived ECR rewrite."
    )
    canary: Canary | None = Field(None, description="A weighted second workload with another image.")
    routing: Routing | None = Field(None, description=ROUTING_DESCRIPTION)
    mooncake: Mooncake | None = Field(None, description="Disaggregated serving and/or the KV-cache store.")
    engine: EngineCapabilities | None = Field(None, description="Framework-neutral engine description, exported.")

    def _defaults(self) -> Self:
        """The image and framework (a Mooncake endpoint's are the pinned vLLM's), a classic endpoint's
        replicas, the health path, the proxy's image, each pod's CPU and memory, and where the weights go."""
        image: str | None = self.image
        mooncake = self.mooncake
        if mooncake is not None and image is None:
            pinned = pins().vllm
            image = pinned.efa_image if mooncake.transfer.protocol == "rdma" else pinned.image
        framework: Framework | None = self.framework
        if framework is None and mooncake is not None:
            framework = "vllm"
        elif framework is None and image is not None:
            framework = framework_from_image(image)
        if mooncake is not None and mooncake.split and image is not None:
            # The proxy program runs on the python3 and aiohttp of the endpoint's vLLM image.
            proxy = mooncake.proxy or Proxy()
            mooncake = mooncake.model_copy(update={"proxy": proxy.model_copy(update={"image": proxy.image or image})})
        if mooncake is not None:
            mooncake = mooncake.model_copy(update={"roles": self._filled_roles(mooncake.roles)})
        resources = self.resources.filled(self.gpu_count)
        model_path = self.model_path
        loading = self.model_loading
        if loading is None and self.model_source is not None:
            loading = "stream" if streams_by_default(framework, self.accelerator, image, model_path) else "sync"
        if model_path is None and self.model_source is not None and loading in ("sync", "cache"):
            model_path = f"{MODELS_DIR}/{self.model_source.rstrip('/').rsplit('/', 1)[-1]}"
        health_check_path = self.health_check_path
        if health_check_path is None and framework is not None:
            health_check_path = HEALTH_PATHS[framework]
        replicas = self.replicas
        if replicas is None and mooncake is None:
            replicas = 1
        canary = self.canary
        if canary is not None and canary.topology is not None and mooncake is not None and mooncake.topology:
            # Count by count, a canary's topology is the endpoint's unless it gives its own.
            given = canary.topology.model_fields_set
            counts = {key: getattr(mooncake.topology, key) for key in Topology.model_fields if key not in given}
            canary = canary.model_copy(update={"topology": canary.topology.model_copy(update=counts)})
        return self.model_copy(
            update={
                "image": image,
                "framework": framework,
                "replicas": replicas,
                "canary": canary,
                "health_check_path": health_check_path,
                "mooncake": mooncake,
                "resources": resources,
                "model_path": model_path,
                "model_loading": loading,
            }
        )

    def _filled_roles(self, roles: Roles) -> Roles:
        """Each role's CPU and memory: its own, else the endpoint's as stated, else the default for the
        role's GPUs (a role of 8 GPUs on an endpoint of 1 is not sized for one GPU)."""
        filled: dict[str, object] = {}
        for role in SPLIT_ROLES:
            shape = roles.shape(role)
            if shape is not None:
                gpus = shape.gpu_count if shape.gpu_count is not None else self.gpu_count
                resources = shape.resources.filled(gpus, fallback=self.resources)
                filled[role] = shape.model_copy(update={"resources": resources})
        return roles.model_copy(update=filled)

    def role_spec(self, role: str) -> Endpoint:
        """The endpoint as ``role``'s pods run it: the role's gpu_count, node_group, args and
        resources where it states them (``mooncake.roles``), the endpoint's own otherwise. Every
        other role (the store server, the proxy) is the endpoint itself."""
        shape = self.mooncake.roles.shape(role) if self.mooncake is not None else None
        if shape is None:
            return self
        update: dict[str, object] = {"resources": shape.resources}
        if shape.gpu_count is not None:
            update["gpu_count"] = shape.gpu_count
        if shape.node_group is not None:
            update["node_group"] = shape.node_group
        if shape.args is not None:
            update["args"] = shape.args
        return self.model_copy(update=update)

    def _rules(self) -> Iterator[PydanticCustomError]:
        for name in self.env:
            if CREDENTIAL_NAME.search(name):
                yield fail(
                    "secret_in_env",
                    "{name!r} looks like a credential; move it to secret_env ({{secret: <name>, key: <key>}})",
                    at=f"env.{name}",
                    name=name,
                )
            elif name in self.secret_env:
                yield fail("env_twice", "{name!r} is also in secret_env; keep one", at=f"env.{name}", name=name)
        for key, field in _STEERING_LABELS.items():
            if key in self.node_selector:
                yield fail(
                    "steering_label",
                    "{key!r} is set from {field}; use that field",
                    at="node_selector",
                    key=key,
                    field=field,
                )
        metrics_port = ADAPTERS[self.framework].metrics_port if self.framework is not None else None
        if metrics_port == self.port:
            yield fail(
                "metrics_port",
                "{port} is where {framework} serves its metrics; give the server another port",
                at="port",
                port=self.port,
                framework=self.framework,
            )
        if self.target_regions is not None and not self.target_regions:
            yield fail("no_regions", "is empty (no regions): remove the endpoint instead", at="target_regions")
        seen: set[str] = set()
        for index, region in enumerate(self.target_regions or ()):
            if region in seen:
                yield fail("duplicate_region", "lists {region!r} twice", at=f"target_regions[{index}]", region=region)
            seen.add(region)
        if self.canary is not None and self.desired_state != "running":
            yield fail(
                "canary_stopped",
                "is allowed only while desired_state is 'running': promote or roll back the canary first "
                "(fleetctl canary promote|rollback NAME)",
                at="canary",
            )
        if self.canary is not None and self.canary.topology is not None and self.mooncake is None:
            yield fail(
                "canary_topology_classic",
                "sizes a Mooncake endpoint's canary set; a classic endpoint's canary is sized with canary.replicas",
                at="canary.topology",
            )
        if self.mooncake is not None:
            yield from mooncake_checks.mooncake_rules(self, self.mooncake)
        elif self.image is None:
            yield fail(
                "image_required", "is required for a classic endpoint (one without a mooncake block)", at="image"
            )
        if self.image is not None and (self.mooncake is None or self.framework == "vllm"):
            # The server is known (its framework settled), so what it is told to serve and run can be checked.
            yield from model_delivery.model_rules(self)
            yield from server_args.args_rules(self)
            yield from server_args.role_args_rules(self)
            yield from server_args.group_args_rules(self)
            yield from value_checks.gpu_rules(self, mooncake_checks.gpu_count_paths(self))
            yield from value_checks.context_rules(self)
            yield from value_checks.canary_rules(self)
        if self.framework is not None:
            yield from self._scaling_rules(self.framework)
            yield from routing_rules(self)

    def _scaling_rules(self, framework: Framework) -> Iterator[PydanticCustomError]:
        """Every scaling metric is one the workload's framework and devices serve (docs/metrics.md)."""
        if self.mooncake is None and self.autoscaling is not None and self.autoscaling.enabled:
            yield from served_rules(self.autoscaling, "autoscaling", framework, self.accelerator, "server", "gate")
        if self.mooncake is not None and self.mooncake.autoscaling.enabled:
            for role, block in (
                ("prefill", self.mooncake.autoscaling.prefill),
                ("decode", self.mooncake.autoscaling.decode),
            ):
                if block is not None:
                    at = f"mooncake.autoscaling.{role}"
                    front: Front = "proxy" if self.mooncake.split else "store"
                    yield from served_rules(block, at, framework, self.accelerator, role, front)

    def tensor_parallel_size(self, role: str) -> int:
        """The tensor parallelism ``role``'s server runs: one rank per GPU of its pod (of each pod of a
        group, whose nodes are its pipeline stages: ``nodes``)."""
        return max(self.role_spec(role).gpu_count, 1)

    def nodes(self, role: str) -> int:
        """The nodes (pods, pipeline stages) one instance of ``role`` spans."""
        return self.mooncake.roles.nodes(role) if self.mooncake is not None else 1

    @property
    def spans_nodes(self) -> bool:
        """A role of the endpoint spans nodes: it runs as LeaderWorkerSets (its canary set too)."""
        return any(self.nodes(role) > 1 for role in SPLIT_ROLES)

    # Derived facts the workloads use.

    @property
    def classic(self) -> bool:
        return self.mooncake is None

    @property
    def autoscaled(self) -> bool:
        if self.mooncake is not None:
            return self.mooncake.autoscaling.enabled
        return self.autoscaling is not None and self.autoscaling.enabled

    @property
    def transfer_protocol(self) -> str | None:
        return self.mooncake.transfer.protocol if self.mooncake is not None else None

    def image_for(self, region: str) -> str:
        """The image pulled in ``region``: an explicit override, else the ECR rewrite, else the image."""
        if region in self.region_image_uris:
            return self.region_image_uris[region]
        return rewrite_for_region(self.image, region) if self.rewrite_image else self.image

    @property
    def served_model_name(self) -> str | None:
        """The name clients send as a request's model (exported in the engine record)."""
        return self.server_launch().served_model_name

    @property
    def streams_weights(self) -> bool:
        """The server reads model_source from S3 itself (no init container, no copy on disk)."""
        return self.model_source is not None and self.model_loading == "stream"

    @property
    def load_path(self) -> LoadPath:
        """The path the weights take to the server (components/render/startup.py)."""
        if self.model_source is not None:
            return "stream" if self.streams_weights else ("cache" if self.caches_weights else "sync")
        return "local" if self.model_path is not None else "hub"

    @property
    def startup_seconds(self) -> int:
        """How long a pod may take to start: from the model's size and its load path."""
        size = int(self.model_size) if self.model_size is not None else None
        if size is None and self.model is not None:
            size = KNOWN_MODEL_BYTES.get(self.model)
        return startup_seconds(size, self.load_path)

    @property
    def syncs_weights(self) -> bool:
        """An init container copies model_source into the pod's model_path before the server starts."""
        return self.model_source is not None and self.model_loading == "sync"

    @property
    def caches_weights(self) -> bool:
        """The weights are kept in the node's model cache (model_source's copy, or the Hub cache)."""
        return self.model_loading == "cache"

    def server_launch(self) -> ServerLaunch:
        """How the framework's server starts, the engine record translated into its flags."""
        streaming = self.streams_weights and self.framework == "vllm"
        loader: tuple[tuple[str, str], ...] = ()
        if streaming:
            assert self.resources.cpu is not None
            assert self.resources.memory is not None
            loader = streaming_flags(self.resources.cpu, int(self.resources.memory), self.gpu_count)
        inputs = ServerInputs(
            port=self.port,
            gpu_count=self.gpu_count,
            model=self.model,
            model_dir=self.model_source if streaming else self.model_path,
            engine=self.engine or EngineCapabilities(),
            loader_flags=loader,
        )
        return server_launch(self.framework, inputs)
