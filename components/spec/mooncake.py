"""Section 3: the ``mooncake`` block (disaggregated prefill/decode, KV-cache store, both)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, Self

from pydantic import Field
from pydantic_core import PydanticCustomError

from components.catalog import pins
from components.scheduling import HUGEPAGE_2MI_BYTES
from components.spec.autoscaling import RoleAutoscaling
from components.spec.base import NonEmptyStr, ObjectName, Port, SpecModel, fail
from components.spec.images import ImageRef
from components.spec.roles import Roles
from components.spec.sizes import ByteSize

Mode = Literal["disaggregated", "store", "both"]
Protocol = Literal["rdma", "tcp"]
SPLIT_MODES: tuple[Mode, ...] = ("disaggregated", "both")
STORE_MODES: tuple[Mode, ...] = ("store", "both")


class Topology(SpecModel):
    prefill: int = Field(
        1, ge=1, le=1000, description="Prefill instances (the X of XpYd); mooncake.topology must name it."
    )
    decode: int = Field(
        1, ge=1, le=1000, description="Decode instances (the Y of XpYd); mooncake.topology must name it."
    )


class Transfer(SpecModel):
    protocol: Protocol = Field(
        "rdma",
        description="rdma: EFA nodes and devices, vLLM's Mooncake protocol 'efa'; tcp: no EFA placement.",
    )
    device_name: str = Field("", description="NIC whitelist for Mooncake; empty lets Mooncake auto-detect.")
    num_workers: int = Field(10, ge=1, description="Sender threads per prefill worker.")
    bootstrap_base_port: Port = Field(8998, description="Port of the prefill bootstrap server.")
    abort_request_timeout: int = Field(
        480, ge=1, description="Seconds before a prefiller frees KV blocks no decoder pulled."
    )


class Store(SpecModel):
    enabled: bool | None = Field(
        None, description="Run the shared KV-cache store; defaults to true for 'store' and 'both', false otherwise."
    )
    metadata_server: NonEmptyStr | None = Field(
        None, description="Override of the metadata URL; defaults to the store master's HTTP metadata server."
    )
    master_server_address: NonEmptyStr | None = Field(
        None, description="Override of host:port of the store master; defaults to the master Service."
    )
    protocol: Protocol | None = Field(None, description="Store transport; defaults to transfer.protocol.")
    device_name: str | None = Field(None, description="Store NIC whitelist; defaults to transfer.device_name.")
    global_segment_size: ByteSize | None = Field(
        None, description="Host DRAM each rank adds to the pool (byte size); defaults to config/pins.yaml."
    )
    local_buffer_size: ByteSize | None = Field(
        None, description="Per-rank transfer buffer (byte size); defaults to config/pins.yaml."
    )
    offload: Literal["cpu", "disk", "none"] = Field(
        "cpu",
        description="cpu and none: the pool is the ranks' DRAM and nothing beyond it (the two render alike); "
        "disk: a mooncake_client beside each server owns the pool and an SSD tier (tcp only).",
    )
    offload_disk_size: ByteSize | None = Field(
        None, description="SSD tier per pod (byte size) for offload disk; defaults to config/pins.yaml (100 GiB)."
    )
    cold_tier_enabled: bool = Field(
        False, description="Write KV asynchronously to the region's cold-tier bucket; needs the store enabled."
    )


class Proxy(SpecModel):
    image: ImageRef | None = Field(
        None,
        description="Image the proxy program runs in (it needs python3 and aiohttp, as vLLM images have); "
        "defaults to the endpoint image.",
    )
    scheduling: Literal["round_robin"] = Field("round_robin", description="How the proxy picks instances.")
    admin_api_key_secret: ObjectName | None = Field(
        None,
        description="Name of a Kubernetes Secret holding the proxy admin key (key ADMIN_API_KEY), created by the "
        "stack from the Pulumi secret inference-fleet:secrets.<name>.ADMIN_API_KEY; never in plaintext config.",
    )


class MooncakeAutoscaling(SpecModel):
    enabled: bool = Field(False, description="Autoscale the roles below; only for 'disaggregated' and 'both'.")
    prefill: RoleAutoscaling | None = Field(None, description="Autoscaler of the prefill role.")
    decode: RoleAutoscaling | None = Field(None, description="Autoscaler of the decode role.")


class Mooncake(SpecModel):
    mode: Mode = Field(description="disaggregated (prefill/decode split), store (shared KV store) or both.")
    topology: Topology | None = Field(None, description="XpYd counts; required for 'disaggregated' and 'both'.")
    store: Store = Field(default_factory=Store, description="The Mooncake KV-cache store.")
    transfer: Transfer = Field(default_factory=Transfer, description="KV transfer between instances.")
    proxy: Proxy | None = Field(None, description="The prefill/decode proxy of split modes.")
    autoscaling: MooncakeAutoscaling = Field(
        default_factory=MooncakeAutoscaling, description="Per-role autoscaling of split modes."
    )
    roles: Roles = Field(
        default_factory=Roles,
        description="A shape per role of split modes (GPUs, node group, args, resources); the endpoint's fields "
        "where a role states none.",
    )

    @property
    def split(self) -> bool:
        return self.mode in SPLIT_MODES

    @property
    def store_enabled(self) -> bool:
        return bool(self.store.enabled)

    def _defaults(self) -> Self:
        store, transfer = self.store, self.transfer
        pinned = pins().mooncake
        filled = store.model_copy(
            update={
                "enabled": store.enabled if store.enabled is not None else self.mode in STORE_MODES,
                "protocol": store.protocol or transfer.protocol,
                "device_name": transfer.device_name if store.device_name is None else store.device_name,
                "global_segment_size": store.global_segment_size or pinned.global_segment_size,
                "local_buffer_size": store.local_buffer_size or pinned.local_buffer_size,
                "offload_disk_size": store.offload_disk_size
                or (pinned.offload_disk_size if store.offload == "disk" else None),
            }
        )
        return self.model_copy(update={"store": filled})

    def _rules(self) -> Iterator[PydanticCustomError]:
        mode = self.mode
        if self.split and self.topology is None:
            yield fail(
                "topology_required",
                "is required for mode {mode!r}: an XpYd topology such as {{prefill: 1, decode: 1}}",
                at="topology",
                mode=mode,
            )
        if self.split and self.topology is not None:
            # XpYd names both: a count left out is a mistake, not a default of 1 (docs/mooncake.md).
            for count in Topology.model_fields:
                if count not in self.topology.model_fields_set:
                    yield fail(
                        "topology_count_required",
                        "is required: a split topology names both counts, as in {{prefill: 1, decode: 1}}",
                        at=f"topology.{count}",
                    )
        if not self.split and self.topology is not None:
            yield fail("topology_unused", "is not used by mode 'store'; remove it", at="topology")
        if not self.split and (self.roles.prefill is not None or self.roles.decode is not None):
            yield fail(
                "roles_unused",
                "shapes prefill and decode, which only 'disaggregated' and 'both' run; remove it (mode 'store' "
                "runs one server, shaped by the endpoint's fields)",
                at="roles",
            )
        if not self.split and self.proxy is not None:
            yield fail("proxy_unused", "is only used by 'disaggregated' and 'both'; remove it", at="proxy")
        if self.autoscaling.enabled and not self.split:
            yield fail(
                "autoscaling_mode",
                "requires a 'disaggregated' or 'both' mode, got {mode!r}",
                at="autoscaling.enabled",
                mode=mode,
            )
        elif self.autoscaling.enabled and self.autoscaling.prefill is None and self.autoscaling.decode is None:
            yield fail("autoscaling_roles", "names no role: add prefill, decode or both", at="autoscaling")
        yield from self._store_rules()

    def _store_rules(self) -> Iterator[PydanticCustomError]:
        """The store block's rules, on the store as the defaults filled it in."""
        mode, store = self.mode, self.store
        if mode == "both" and not store.enabled:
            yield fail(
                "store_required",
                "must be true for mode 'both' (its store connector is wired to the master)",
                at="store.enabled",
            )
        if mode == "store" and not store.enabled:
            yield fail(
                "store_required",
                "must be true for mode 'store': the store is all that mode runs (without it the server's "
                "connector list is empty); remove store.enabled, or serve without a store as a classic endpoint "
                "(remove the mooncake block and set image)",
                at="store.enabled",
            )
        if mode == "disaggregated" and store.enabled:
            yield fail(
                "store_unused",
                "mode 'disaggregated' runs no store; use mode 'both' for transfer plus store",
                at="store.enabled",
            )
        if store.cold_tier_enabled and not store.enabled:
            yield fail(
                "cold_tier_needs_store",
                "requires mooncake.store.enabled to be true",
                at="store.cold_tier_enabled",
            )
        if store.offload_disk_size is not None and store.offload != "disk":
            yield fail(
                "disk_size_unused",
                "is only read with offload 'disk', got offload {offload!r}; remove it",
                at="store.offload_disk_size",
                offload=store.offload,
            )
        if store.protocol == "rdma" and self.transfer.protocol != "rdma":
            yield fail(
                "store_rdma_placement",
                "rdma needs the pods on EFA nodes with their devices, which only transfer.protocol rdma gives "
                "them; set transfer.protocol to rdma too, or the store's protocol to tcp",
                at="store.protocol",
            )
        if store.offload == "disk" and store.protocol == "rdma":
            yield fail(
                "disk_offload_rdma",
                "'disk' runs a mooncake_client beside each server, which cannot share the pod's EFA devices; "
                "set store.protocol (or transfer.protocol) to tcp, or use offload cpu",
                at="store.offload",
            )
        if not store.enabled:
            return
        for key in ("global_segment_size", "local_buffer_size"):
            size = getattr(store, key)
            if size == "0":
                yield fail(
                    "store_size_zero",
                    "must be greater than 0 (the pinned vLLM's Mooncake store refuses 0 in embedded mode)",
                    at=f"store.{key}",
                )
            elif store.protocol == "rdma" and int(size) % HUGEPAGE_2MI_BYTES:
                yield fail(
                    "store_size_pages",
                    "must be a whole number of 2 MiB pages with protocol rdma (the store takes it from 2 MiB "
                    "huge pages, docs/efa.md), got {size} bytes",
                    at=f"store.{key}",
                    size=size,
                )

    @property
    def store_on_hugepages(self) -> bool:
        """The store's segments and buffers are 2 MiB huge pages: an rdma store, which registers them
        with every EFA device (docs/efa.md)."""
        return self.store_enabled and self.store.protocol == "rdma"

    def store_hugepage_bytes(self, ranks: int) -> int:
        """The huge pages ``ranks`` store clients of one pod take: each its segment and buffer."""
        if not self.store_on_hugepages:
            return 0
        assert self.store.global_segment_size is not None
        assert self.store.local_buffer_size is not None
        return ranks * (int(self.store.global_segment_size) + int(self.store.local_buffer_size))
