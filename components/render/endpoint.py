"""Every object of one endpoint in one region, whatever its kind."""

from __future__ import annotations

from typing import Any

from components.render.classic import classic_objects
from components.render.mooncake import cold_tier_target, mooncake_objects
from components.render.placement import PlacedEndpoint

BUCKET_PLACEHOLDER = "<cold-tier-bucket>"
"""Stands for the region's cold-tier bucket where its name is not known yet."""


def endpoint_objects(endpoint: PlacedEndpoint, bucket: str = BUCKET_PLACEHOLDER) -> dict[str, dict[str, Any]]:
    """The endpoint's manifests keyed by part; ``bucket`` is the cold tier's, for endpoints that use it."""
    mooncake = endpoint.spec.mooncake
    if mooncake is None:
        return classic_objects(endpoint)
    cold = cold_tier_target(endpoint, bucket) if mooncake.store.cold_tier_enabled else None
    return mooncake_objects(endpoint, cold)
