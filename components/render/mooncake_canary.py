"""The canary of a Mooncake endpoint: a complete second set (prefill, decode and proxy, or the one
server of mode ``store``; with its own store master where the mode has one), rendered by the same
renderers as the primary from a derived view of the endpoint (docs/mooncake-canary.md).

The view is the endpoint renamed ``<name>-canary``, with the canary's image (and topology), no
canary of its own and no autoscaling. Every name, label and selector of the set follows from that
name, so the primary's Services, PDBs, NetworkPolicies, headless prefill DNS and autoscalers never
select a canary pod and the canary's never select a primary pod; the canary's decode pulls KV only
from the prefill pods its own proxy names, and its store clients register with its own master.
"""

from __future__ import annotations

from dataclasses import replace

from components import naming
from components.render.classic import canary_image
from components.render.placement import PlacedEndpoint
from components.spec.mooncake import MooncakeAutoscaling


def canary_view(endpoint: PlacedEndpoint) -> PlacedEndpoint:
    """The endpoint as its canary set is rendered: named ``<name>-canary``, running the canary's
    image in this region, sized by the canary's topology (the primary's when it has none)."""
    spec, canary, mooncake = endpoint.spec, endpoint.spec.canary, endpoint.spec.mooncake
    assert canary is not None
    assert mooncake is not None
    proxy = mooncake.proxy
    if proxy is not None and proxy.image == spec.image:
        # The proxy runs on the python3 of the endpoint's vLLM image unless it names its own.
        proxy = proxy.model_copy(update={"image": canary.image})
    view_mooncake = mooncake.model_copy(
        update={
            "topology": canary.topology or mooncake.topology,
            # A canary's share is its weight; the set is sized by its topology, not by load.
            "autoscaling": MooncakeAutoscaling(),
            "proxy": proxy,
        }
    )
    view_spec = spec.model_copy(
        update={"image": canary.image, "region_image_uris": {}, "canary": None, "mooncake": view_mooncake}
    )
    return replace(endpoint, name=naming.canary_set_name(endpoint.name), spec=view_spec, image=canary_image(endpoint))


def canary_backend(endpoint: PlacedEndpoint) -> str:
    """The canary set's entry Service, which the primary's route weighs against the primary's:
    its proxy in the split modes, its server in mode ``store``."""
    mooncake = endpoint.spec.mooncake
    assert mooncake is not None
    role: naming.Role = "proxy" if mooncake.split else "server"
    return naming.object_name(naming.canary_set_name(endpoint.name), role)
