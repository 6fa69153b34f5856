"""A shape per role of a split Mooncake endpoint: ``mooncake.roles.prefill`` and ``.decode``.

Each field a role leaves out is the endpoint's own, so an endpoint without ``roles`` renders
exactly as before. The pair must stay able to hand KV over (components/spec/mooncake_checks.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.spec.base import DnsLabel, SpecModel, items
from components.spec.resources import Resources

SplitRole = Literal["prefill", "decode"]
SPLIT_ROLES: tuple[SplitRole, ...] = ("prefill", "decode")
ROLES_PATH = "mooncake.roles"
"""Where an endpoint's role shapes are: the start of the path of a problem in one."""
MULTI_NODE_FLAGS = ("--nnodes", "--node-rank", "--master-addr", "--pipeline-parallel-size", "--headless")
"""vLLM flags (vllm/engine/arg_utils.py) a role spanning nodes renders from ``nodes``
(components/render/mooncake_groups.py)."""


class RoleShape(SpecModel):
    """What one role's pods run: each field left out is the endpoint's own."""

    gpu_count: int | None = Field(
        None,
        ge=1,
        description="GPUs per pod of this role, and so its tensor parallelism; defaults to the endpoint's gpu_count.",
    )
    node_group: DnsLabel | None = Field(
        None, description="Node group of this role's pods; defaults to the endpoint's node_group (or its default)."
    )
    args: tuple[str, ...] | None = items(
        "Extra server arguments of this role, instead of the endpoint's args (which it defaults to).", default=None
    )
    nodes: int = Field(
        1,
        ge=1,
        description="Nodes one instance of this role spans: with more than 1, each instance is a LeaderWorkerSet "
        "group of that many pods, one per node of an EFA group, running vLLM's multi-node launch (pipeline "
        "parallelism across the nodes, tensor parallelism of gpu_count within each).",
    )
    resources: Resources = Field(
        default_factory=Resources,
        description="CPU and memory per pod of this role; each amount defaults to the endpoint's resources when "
        "they state it, else to the per-GPU default for this role's gpu_count.",
    )


class Roles(SpecModel):
    """A shape per role of a split endpoint. Prefill (compute-bound) and decode (memory-bound) may
    differ in GPUs, node group, args and resources, as long as the pair can still hand KV over:
    one model, one block size and KV dtype, and tensor-parallel sizes of which one divides the other
    (what the pinned vLLM's MooncakeConnector pairs)."""

    prefill: RoleShape | None = Field(None, description="Shape of the prefill role; the endpoint's when absent.")
    decode: RoleShape | None = Field(None, description="Shape of the decode role; the endpoint's when absent.")

    def shape(self, role: str) -> RoleShape | None:
        """The shape ``role`` states, None for a role without one (or one that is not split)."""
        if role == "prefill":
            return self.prefill
        if role == "decode":
            return self.decode
        return None

    def nodes(self, role: str) -> int:
        """The nodes one instance of ``role`` spans (1 for a role without a shape)."""
        shape = self.shape(role)
        return shape.nodes if shape is not None else 1
