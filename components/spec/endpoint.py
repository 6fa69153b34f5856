"""Section 1: one inference endpoint (classic, or Mooncake with a ``mooncake`` block)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from components.catalog import pins
from components.render.frameworks import (
    ADAPTERS,
    DRAIN_SOURCE,
    ServerInputs,
    ServerLaunch,
    flag_name,
    server_launch,
)
from components.render.model_loading import ModelLoading, streaming_flags
from components.render.mooncake_env import ROLE_ENV
from components.render.startup import LoadPath, startup_seconds
from components.scheduling import CAPACITY_TYPE_LABEL, EFA_PAGE_ENTRY_BUDGET, HUGEPAGE_2MI_BYTES, NODE_GROUP_LABEL
from components.spec import value_checks
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
from components.spec.images import HEALTH_PATHS, Framework, ImageRef, framework_from_image, rewrite_for_region
from components.spec.model_delivery import loading_rules, streams_by_default
from components.spec.model_sizes import KNOWN_MODEL_BYTES
from components.spec.mooncake import Mooncake, Proxy, Topology
from components.spec.region import CapacityType
from components.spec.resources import Resources
from components.spec.roles import MULTI_NODE_FLAGS, SPLIT_ROLES, Roles
from components.spec.sizes import ByteSize
from policy.rules import CREDENTIAL_NAME

_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")
# A served name goes on the server's command line and into clients' requests: no spaces, no
# leading '-' (it would read as a flag).
_MODEL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/@+-]{0,255}$")
# huggingface_hub's validate_repo_id with the namespace required: each part 1-96 of letters,
# digits, '_', '.' and '-', starting and ending with a letter, digit or '_'; no '--' or '..'.
_HUB_PART = r"[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_HUB_ID = re.compile(rf"^{_HUB_PART}/{_HUB_PART}$")
MODELS_DIR = "/models"
"""Where model_source is synced when model_path is not given: /models/<last part of the source>."""
RESERVED_LABEL_PREFIX = "app.kubernetes.io/"
CREDENTIAL_FLAG_WORDS = ("key", "token", "secret", "password")
"""A flag named one of these, or ending in ``-<word>`` (``--api-key``, ``--hf-token``), takes a credential."""
VLLM_CREDENTIAL_ENV = {"--api-key": "VLLM_API_KEY", "--hf-token": "HF_TOKEN", "--token": "HF_TOKEN"}
"""Where vLLM reads the same credential from the environment (vllm/envs.py, huggingface_hub)."""
# Node labels the pods are steered by, each from its own field.
_STEERING_LABELS = {NODE_GROUP_LABEL: "node_group", CAPACITY_TYPE_LABEL: "capacity_type"}


def _path(value: str) -> str:
    if not value.startswith("/"):
        raise fail("path", "must start with '/', got {value!r}", value=value)
    return value


def _s3_uri(value: str) -> str:
    if not _S3_URI.match(value):
        raise fail("s3_uri", "must be an s3:// URI such as s3://my-bucket/models/llama, got {value!r}", value=value)
    return value


def _model_name(value: str) -> str:
    if not _MODEL_NAME.match(value):
        raise fail(
            "model_name",
            "must be a model name such as Qwen/Qwen3-8B (at most 256 letters, digits and '_.:/@+-', "
            "starting with a letter, digit or '_'), got {value!r}",
            value=value,
        )
    return value


_ROLES = "mooncake.roles"
KV_LAYOUT_FLAGS = {
    "--block-size": "block size",
    "--kv-cache-dtype": "KV cache dtype",
    "--dtype": "model dtype (the KV cache's under --kv-cache-dtype auto)",
}
"""vLLM flags that set how a KV block is laid out in memory (vllm/config/cache.py, model.py)."""


def flag_value(args: tuple[str, ...], flag: str) -> str | None:
    """The value ``args`` give ``flag`` (``--flag value`` or ``--flag=value``, the last one winning as
    with argparse; vLLM reads ``_`` in a flag's name as ``-``), None when they give none."""
    value = None
    for index, arg in enumerate(args):
        name = flag_name(arg)
        if name is None or "--" + name.lstrip("-").replace("_", "-") != flag:
            continue
        if "=" in arg:
            value = arg.split("=", 1)[1]
        elif index + 1 < len(args):
            value = args[index + 1]
    return value


def _divisor_near(size: int, other: int) -> int:
    """The size nearest ``other`` that pairs with ``size`` (one divides the other)."""
    candidates = [n for n in range(1, max(size, other) * 2 + 1) if max(n, size) % min(n, size) == 0]
    return min(candidates, key=lambda n: (abs(n - other), n))


def credential_flag(arg: str) -> str | None:
    """The flag of ``arg`` (``--api-key`` of ``--api-key=sk-...`` or of ``--api_key``) when it takes a
    credential, else None."""
    name = flag_name(arg)
    if name is None:
        return None
    normalized = "--" + name.lstrip("-").lower().replace("_", "-")
    word = normalized.removeprefix("--")
    if word in CREDENTIAL_FLAG_WORDS or word.endswith(tuple(f"-{w}" for w in CREDENTIAL_FLAG_WORDS)):
        return normalized
    return None


def is_hub_id(value: str) -> bool:
    """``org/name`` as the Hugging Face Hub spells repository ids."""
    return bool(_HUB_ID.match(value)) and "--" not in value and ".." not in value and not value.endswith(".git")


def _own_label(key: str) -> str:
    if key.startswith(RESERVED_LABEL_PREFIX):
        raise fail(
            "reserved_label",
            "{key!r} is set by inference-fleet (the app.kubernetes.io/ labels are its selectors); choose another key",
            key=key,
        )
    return key


Path = Annotated[str, AfterValidator(_path)]
S3Uri = Annotated[str, AfterValidator(_s3_uri)]
ModelName = Annotated[str, AfterValidator(_model_name)]
UserLabelKey = Annotated[LabelKey, AfterValidator(_own_label)]


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
            yield from self._mooncake_rules(self.mooncake)
        elif self.image is None:
            yield fail(
                "image_required", "is required for a classic endpoint (one without a mooncake block)", at="image"
            )
        if self.image is not None and (self.mooncake is None or self.framework == "vllm"):
            # The server is known (its framework settled), so what it is told to serve and run can be checked.
            yield from self._model_rules()
            yield from self._args_rules()
            yield from self._role_args_rules()
            yield from self._group_args_rules()
            yield from value_checks.gpu_rules(self, self._gpu_count_paths())
            yield from value_checks.context_rules(self)
            yield from value_checks.canary_rules(self)
        if self.framework is not None:
            yield from self._scaling_rules(self.framework)

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

    def _mooncake_rules(self, mooncake: Mooncake) -> Iterator[PydanticCustomError]:
        if self.framework != "vllm":
            yield fail(
                "mooncake_framework",
                "must be 'vllm' with mooncake, got {framework!r}",
                at="framework",
                framework=self.framework,
            )
        if self.accelerator != "nvidia":
            yield fail("mooncake_accelerator", "must be 'nvidia' with mooncake", at="accelerator")
        if self.replicas is not None:
            yield fail(
                "mooncake_replicas",
                "is for classic endpoints; size Mooncake roles with mooncake.topology (and mooncake.autoscaling)",
                at="replicas",
            )
        if self.autoscaling is not None:
            yield fail("mooncake_autoscaling", "is for classic endpoints; use mooncake.autoscaling", at="autoscaling")
        if self.canary is not None:
            yield from self._mooncake_canary_rules(self.canary, mooncake)
        # The pod with the most ranks registers the most pages.
        ranks, role = max((self.tensor_parallel_size(role), role) for role in self._vllm_roles(mooncake))
        yield from self._page_entry_rules(mooncake, ranks, role if mooncake.split else None)
        if mooncake.split:
            yield from self._kv_pair_rules(mooncake)
            yield from self._group_rules(mooncake)

    def _mooncake_canary_rules(self, canary: Canary, mooncake: Mooncake) -> Iterator[PydanticCustomError]:
        """A Mooncake endpoint's canary is a whole second set (docs/mooncake-canary.md), sized by a
        topology of its own, never by replicas."""
        if "replicas" in canary.model_fields_set:
            fix = "canary.topology (default: mooncake.topology)" if mooncake.split else "nothing: mode 'store' runs one"
            yield fail(
                "mooncake_canary_replicas",
                "is for a classic endpoint's canary; a Mooncake canary is a whole prefill/decode/proxy set, "
                "sized with {fix}; remove it",
                at="canary.replicas",
                fix=fix,
            )
        if canary.topology is not None and not mooncake.split:
            yield fail(
                "canary_topology_unused",
                "is not used by mode 'store' (its canary is one server and its own store master); remove it",
                at="canary.topology",
            )

    def _model_rules(self) -> Iterator[PydanticCustomError]:
        """Every endpoint says what it serves; a model the server downloads is a Hub id."""
        yield from loading_rules(
            self.model_source, self.model_loading, self.model_path, self.framework, self.model_revision
        )
        if self.model_path is not None or self.streams_weights:  # a synced model_source has set model_path
            return
        if self.model is None:
            yield fail(
                "model_required",
                "is required: say what the endpoint serves with model (a Hugging Face Hub id such as "
                "Qwen/Qwen3-8B, which the server downloads), model_source (an s3:// URI of the weights, streamed "
                "or synced into the pod) or model_path (weights already in the image)",
                at="model",
            )
        elif ADAPTERS[self.framework].repository:
            yield fail(
                "model_repository",
                "is taken for a Hub id, but {framework} serves a model repository and downloads nothing from the "
                "Hub: set model_source (an s3:// URI of the repository) or model_path, and model then only names "
                "the model clients call",
                at="model",
                framework=self.framework,
            )
        elif not is_hub_id(self.model):
            yield fail(
                "hub_id",
                "without model_source or model_path the server downloads the model from the Hugging Face Hub, so "
                "it must be a Hub id org/name such as Qwen/Qwen3-8B, got {value!r}; to serve local weights under "
                "this name, set model_source or model_path",
                at="model",
                value=self.model,
            )

    def _args_rules(self) -> Iterator[PydanticCustomError]:
        """Refuse args and env that repeat what inference-fleet renders from a field."""
        owned = self.server_launch().owned
        variables = {name: source for name, source in owned.items() if not name.startswith("-")}
        if self.mooncake is not None:
            owned["--kv-transfer-config"] = "mooncake"
            variables.update(ROLE_ENV)
        for variable in (*self.env, *self.secret_env):
            if variable in variables:
                field = "env" if variable in self.env else "secret_env"
                yield fail(
                    "owned_env",
                    "{name!r} is set by inference-fleet from {source}; remove it",
                    at=f"{field}.{variable}",
                    name=variable,
                    source=variables[variable],
                )
        if self.args and flag_name(self.args[0]) is None and ADAPTERS[self.framework].model_flag is None:
            # After the rendered flags (each with its value) a bare word is a second positional model.
            source = owned["--model"]
            yield fail(
                "positional_model",
                "{arg!r} would be a second positional model; the model is rendered from {source}: set {source} "
                "instead of passing it in args",
                at="args[0]",
                arg=self.args[0],
                source=source,
            )
        for index, arg in enumerate(self.args):
            credential = self._credential_rule(index, arg)
            name = flag_name(arg)
            if credential is not None:
                yield credential
            elif name in owned and owned[name] == DRAIN_SOURCE:
                yield fail(
                    "owned_flag",
                    "{name!r} is rendered by inference-fleet so that the server drains within its pod's grace "
                    'period (docs/deploying.md, "How a rollout drains"); remove it',
                    at=f"args[{index}]",
                    name=name,
                )
            elif name in owned:
                yield fail(
                    "owned_flag",
                    "{name!r} is rendered from {source}; set {source} instead of passing it in args",
                    at=f"args[{index}]",
                    name=name,
                    source=owned[name],
                )

    def _credential_rule(self, index: int, arg: str) -> PydanticCustomError | None:
        """A credential on the command line is in the pod spec, the plan, the state and every process
        listing: it belongs in a Secret, read through secret_env."""
        flag = credential_flag(arg)
        if flag is None:
            return None
        variable = VLLM_CREDENTIAL_ENV.get(flag) if self.framework == "vllm" else None
        if variable == "VLLM_API_KEY" and self.mooncake is not None:
            fix = (
                "a Mooncake endpoint's servers take their key from mooncake.proxy.admin_api_key_secret "
                "(a Secret the proxy presents too)"
            )
        elif variable is not None:
            fix = (
                f"read it from a Kubernetes Secret instead: secret_env: {{{variable}: {{secret: <name>, "
                f"key: <key>}}}} (vLLM reads {variable} for {flag})"
            )
        else:
            fix = (
                "read it from a Kubernetes Secret instead: secret_env: {<VARIABLE>: {secret: <name>, key: "
                "<key>}}, with the variable the server reads for it"
            )
        return fail(
            "credential_in_args",
            "{flag!r} passes a credential on the command line, where the pod spec, the plan, the Pulumi state "
            "and process listings show it; remove it from args: {fix}",
            at=f"args[{index}]",
            flag=flag,
            fix=fix,
        )

    def _role_args_rules(self) -> Iterator[PydanticCustomError]:
        """A role's own args, held to the same rules as the endpoint's, each problem at the role's field."""
        for role in SPLIT_ROLES:
            shape = self.mooncake.roles.shape(role) if self.mooncake is not None else None
            if shape is None or shape.args is None:
                continue
            for problem in self.role_spec(role)._args_rules():
                at = str((problem.context or {}).get("at", ""))
                if at.startswith("args"):  # env is the endpoint's, checked once with its own args
                    yield PydanticCustomError(problem.type, problem.message_template, {"at": f"{_ROLES}.{role}.{at}"})

    def _group_args_rules(self) -> Iterator[PydanticCustomError]:
        """A role spanning nodes renders its multi-node launch from ``nodes``: args must not set it."""
        for role in SPLIT_ROLES:
            if self.nodes(role) == 1:
                continue
            shape = self.mooncake.roles.shape(role) if self.mooncake is not None else None
            where = f"{_ROLES}.{role}.args" if shape is not None and shape.args is not None else "args"
            for index, arg in enumerate(self.role_spec(role).args):
                name = flag_name(arg)
                if name is not None and "--" + name.lstrip("-").replace("_", "-") in MULTI_NODE_FLAGS:
                    yield fail(
                        "group_flag",
                        "{name!r} is rendered for {role}, which spans {nodes} nodes, from mooncake.roles.{role}.nodes "
                        "(vLLM's multi-node launch, one pipeline stage per node); remove it",
                        at=f"{where}[{index}]",
                        name=name,
                        role=role,
                        nodes=self.nodes(role),
                    )

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

    def _kv_pair_rules(self, mooncake: Mooncake) -> Iterator[PydanticCustomError]:
        """Prefill and decode must lay KV out alike for the decoder to read what the prefiller wrote.

        The model is the endpoint's (one per endpoint). The pinned vLLM's MooncakeConnector
        (vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py) compares the
        two sides' registered KV regions byte for byte (``_validate_asymmetric_region_lengths``), so
        block size and KV dtype must be equal, and pairs different tensor-parallel sizes only when one
        divides the other (``_get_tp_ratio`` asserts it: a rank of the larger side maps into exactly one
        rank of the smaller)."""
        prefill, decode = self.role_spec("prefill"), self.role_spec("decode")
        for flag, what in KV_LAYOUT_FLAGS.items():
            values = (flag_value(prefill.args, flag), flag_value(decode.args, flag))
            if values[0] != values[1]:
                shown = [value if value is not None else "unset (vLLM's default)" for value in values]
                yield fail(
                    "kv_layout_mismatch",
                    "prefill has {flag} {prefill} and decode {decode}: the decoder reads the prefiller's KV blocks "
                    "byte for byte, so their {what} must be equal (the pinned vLLM's MooncakeConnector refuses "
                    "regions of different lengths, vllm/distributed/kv_transfer/kv_connector/v1/mooncake/"
                    "mooncake_connector.py); set {flag} alike in both roles' args",
                    at=self._role_field(mooncake, "args"),
                    flag=flag,
                    prefill=shown[0],
                    decode=shown[1],
                    what=what,
                )
        sizes = (self.tensor_parallel_size("prefill"), self.tensor_parallel_size("decode"))
        if max(sizes) % min(sizes):
            yield fail(
                "kv_tp_pair",
                "prefill runs tensor parallelism {prefill} and decode {decode}; the pinned vLLM's ({release}) "
                "MooncakeConnector pairs different sizes only when one divides the other (_get_tp_ratio in "
                "vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py asserts it: each rank "
                "of the larger side holds a share of exactly one rank of the smaller); choose gpu_counts such as "
                "{suggestion}",
                at=self._role_field(mooncake, "gpu_count"),
                prefill=sizes[0],
                decode=sizes[1],
                release=pins().vllm.release,
                suggestion=f"{sizes[0]} and {_divisor_near(sizes[0], sizes[1])}",
            )

    def _group_rules(self, mooncake: Mooncake) -> Iterator[PydanticCustomError]:
        """A role spanning nodes (``nodes`` > 1) is a LeaderWorkerSet of groups over EFA."""
        for role in SPLIT_ROLES:
            nodes = mooncake.roles.nodes(role)
            if nodes == 1:
                continue
            if mooncake.transfer.protocol != "rdma":
                yield fail(
                    "group_needs_efa",
                    "{nodes} spans nodes of an EFA group (the group's ranks and its KV move over EFA, and each pod "
                    "takes every EFA device of its node, one pod per node); set mooncake.transfer.protocol to rdma "
                    "and place the role on an EFA group, or set nodes to 1",
                    at=f"{_ROLES}.{role}.nodes",
                    nodes=nodes,
                )
            scaling = mooncake.autoscaling
            if scaling.enabled and getattr(scaling, role) is not None:
                yield fail(
                    "group_autoscaling",
                    "scales a Deployment or StatefulSet, but {role} spans {nodes} nodes and is a LeaderWorkerSet "
                    "of groups sized by mooncake.topology; remove mooncake.autoscaling.{role} or set "
                    "mooncake.roles.{role}.nodes to 1",
                    at=f"mooncake.autoscaling.{role}",
                    role=role,
                    nodes=nodes,
                )
        spans = (mooncake.roles.nodes("prefill"), mooncake.roles.nodes("decode"))
        if mooncake.store_enabled and spans[0] != spans[1]:
            yield fail(
                "group_store_stages",
                "prefill spans {prefill} nodes and decode {decode}: each node is a pipeline stage, and the pinned "
                "vLLM's MooncakeStoreConnector keys every stored shard by its stage (@pp_rank:<r> in PoolKey."
                "build_prefix, vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/data.py), so a decoder "
                "of another depth would read shards of other layers; in mode 'both' give both roles the same nodes",
                at=self._role_field(mooncake, "nodes", default=1),
                prefill=spans[0],
                decode=spans[1],
            )

    def _role_field(self, mooncake: Mooncake, field: str, default: object = None) -> str:
        """Where a pair rule points: the decode role's ``field`` where a role states it (decode first),
        else the endpoint's own."""
        for role in ("decode", "prefill"):
            shape = mooncake.roles.shape(role)
            if shape is not None and getattr(shape, field) != default:
                return f"{_ROLES}.{role}.{field}"
        return field

    def _gpu_count_paths(self) -> dict[str, str]:
        """Each vLLM role's gpu_count path: a role's own where it states one, else the endpoint's."""
        if self.mooncake is None or not self.mooncake.split:
            return {"server": "gpu_count"}
        paths: dict[str, str] = {}
        for role in SPLIT_ROLES:
            shape = self.mooncake.roles.shape(role)
            stated = shape is not None and shape.gpu_count is not None
            paths[role] = f"{_ROLES}.{role}.gpu_count" if stated else "gpu_count"
        return paths

    @staticmethod
    def _vllm_roles(mooncake: Mooncake) -> tuple[str, ...]:
        return SPLIT_ROLES if mooncake.split else ("server",)

    def _page_entry_rules(self, mooncake: Mooncake, ranks: int, role: str | None) -> Iterator[PydanticCustomError]:
        """Every rank registers its store segment and buffer on every EFA device of the node, in
        2 MiB pages (docs/efa.md): together they must fit one device's page entries."""
        pages = mooncake.store_hugepage_bytes(ranks) // HUGEPAGE_2MI_BYTES
        if pages <= EFA_PAGE_ENTRY_BUDGET:
            return
        store = mooncake.store
        assert store.global_segment_size is not None
        assert store.local_buffer_size is not None
        yield fail(
            "efa_page_entries",
            "{ranks} ranks{pod} x ({segment} MiB segment + {buffer} MiB buffer) registers {pages} pages of 2 MiB "
            "on each EFA device, past the {budget} page entries one device holds (Mooncake's budget, docs/efa.md); "
            "lower store.global_segment_size or store.local_buffer_size",
            at="mooncake.store",
            ranks=ranks,
            pod=f" (a {role} pod's)" if role is not None else "",
            segment=int(store.global_segment_size) // 2**20,
            buffer=int(store.local_buffer_size) // 2**20,
            pages=pages,
            budget=EFA_PAGE_ENTRY_BUDGET,
        )

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
