"""Section 6: the framework-neutral engine record exported for external control planes."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from components.spec.base import NonEmptyStr, SpecModel


class EngineCapabilities(SpecModel):
    context_length: int | None = Field(None, gt=0, description="Longest sequence in tokens (vLLM --max-model-len).")
    kv_cache_block_size: int | None = Field(None, gt=0, description="Tokens per KV-cache block.")
    total_kv_blocks: int | None = Field(None, gt=0, description="KV-cache blocks per engine.")
    max_num_seqs: int | None = Field(None, gt=0, description="Most sequences batched together.")
    max_num_batched_tokens: int | None = Field(None, gt=0, description="Token budget of one scheduler step.")
    bos_token_id: int | None = Field(None, ge=0, description="Beginning-of-sequence token id (0 is a valid id).")
    enable_prefix_caching: bool | None = Field(None, description="Reuse KV of shared prefixes.")
    logical_data_parallel_size: int = Field(1, ge=1, description="Data-parallel engines behind the address.")
    prefix_caching_coordinator_policy: NonEmptyStr | None = Field(
        None, description="Routing policy for client-side prefix hashing."
    )

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineCapabilities:
        return cls.model_validate(data)


class EndpointRecord(SpecModel):
    """What an external control plane needs of one endpoint in one region; no framework fields."""

    endpoint: str
    region: str
    address: str
    served_model_name: str | None = None
    """What requests send as their model; None only for a Triton repository without ``model``."""
    capabilities: EngineCapabilities = Field(default_factory=EngineCapabilities)

    def to_dict(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "region": self.region,
            "address": self.address,
            "served_model_name": self.served_model_name,
            "capabilities": self.capabilities.to_dict(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EndpointRecord:
        return cls.model_validate(data)
