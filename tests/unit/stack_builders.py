"""Builders of a minimal valid stack config, so each test states only what differs.

The stack has one region, ``us-east-1``, with three node groups:

* ``system``: m7i.xlarge, no GPUs (system pods);
* ``p5``: p5.48xlarge (8 GPUs, EFA) in us-east-1a, the region's only EFA group, whose nodes reserve
  the huge pages of an 8-GPU rdma pod with the default store (libfabric's 5 GiB and 8 ranks x 8 GiB);
* ``gpu``: g6e.12xlarge (4 GPUs), EFA off.

Overrides are deep-merged: nested mappings merge key by key, any other value
replaces, and :data:`DELETE` removes a key.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from components.render.placement import PlacedEndpoint, placed
from components.spec import parse_stack_config

REGION: Final = "us-east-1"
IMAGE: Final = "vllm/vllm-openai:v0.33.0"
MODEL: Final = "Qwen/Qwen3-8B"
P5_GPUS: Final = 8
GPU_GROUP_GPUS: Final = 4


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


DELETE: Final = _Delete()
"""An override value that removes the key it is set on."""


def merged(base: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A deep copy of ``base`` with ``overrides`` deep-merged into it."""
    result = copy.deepcopy(dict(base))
    for key, value in (overrides or {}).items():
        if value is DELETE:
            result.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def region(overrides: Mapping[str, Any] | None = None, *, name: str = REGION) -> dict[str, Any]:
    """A valid region named ``name`` (its zones follow the name), with ``overrides`` merged in."""
    base = {
        "kubernetes_version": "1.33",
        "vpc": {"cidr": "10.20.0.0/16", "availability_zones": [f"{name}a", f"{name}b"]},
        "node_groups": {
            "system": {"instance_types": ["m7i.xlarge"], "min_size": 2, "max_size": 4, "desired_size": 2},
            "p5": {
                "instance_types": ["p5.48xlarge"],
                "min_size": 0,
                "max_size": 4,
                "desired_size": 2,
                "efa": True,
                "availability_zone": f"{name}a",
                "hugepages_2mi": "69GiB",
            },
            "gpu": {"instance_types": ["g6e.12xlarge"], "min_size": 0, "max_size": 2, "desired_size": 1},
        },
    }
    return merged(base, overrides)


def classic_endpoint(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A classic vLLM endpoint serving :data:`MODEL` on the ``gpu`` group, one replica of one GPU."""
    return merged({"image": IMAGE, "model": MODEL, "node_group": "gpu"}, overrides)


def mooncake_endpoint(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A 1P1D Mooncake endpoint serving :data:`MODEL` over rdma (so it defaults to the ``p5`` group)."""
    return merged(
        {"model": MODEL, "mooncake": {"mode": "disaggregated", "topology": {"prefill": 1, "decode": 1}}}, overrides
    )


def stack_config(
    *,
    region_overrides: Mapping[str, Any] | None = None,
    regions: Mapping[str, Mapping[str, Any]] | None = None,
    endpoints: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The project's config keys: the minimal region (or ``regions``) plus ``endpoints``."""
    config: dict[str, Any] = {
        "regions": copy.deepcopy(dict(regions)) if regions is not None else {REGION: region(region_overrides)}
    }
    if endpoints is not None:
        config["endpoints"] = copy.deepcopy(dict(endpoints))
    return config


def with_region(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The minimal stack with ``overrides`` merged into its region and no endpoints."""
    return stack_config(region_overrides=overrides)


def with_classic(overrides: Mapping[str, Any] | None = None, *, name: str = "chat") -> dict[str, Any]:
    """The minimal stack with one classic endpoint ``name``."""
    return stack_config(endpoints={name: classic_endpoint(overrides)})


def with_mooncake(overrides: Mapping[str, Any] | None = None, *, name: str = "chat") -> dict[str, Any]:
    """The minimal stack with one Mooncake endpoint ``name``."""
    return stack_config(endpoints={name: mooncake_endpoint(overrides)})


def placed_endpoint(config: Mapping[str, Any], name: str = "chat", region_name: str = REGION) -> PlacedEndpoint:
    """Endpoint ``name`` of a valid ``config`` as it is rendered in ``region_name``."""
    spec = parse_stack_config(config)
    (placement,) = (p for p in spec.placements if p.endpoint == name and p.region == region_name)
    return placed(spec, placement)


EKS_ONLY_ADDONS: Final = ("coredns", "eks_pod_identity_agent", "cluster_autoscaler", "aws_load_balancer_controller")
"""The add-ons a cluster given by kubeconfig must run already (the program installs them through EKS)."""
DEVICE_PLUGINS: Final = ("nvidia_device_plugin", "efa_device_plugin")


def existing_region(
    cluster: Mapping[str, Any], overrides: Mapping[str, Any] | None = None, *, name: str = REGION
) -> dict[str, Any]:
    """:func:`region` on an existing cluster (``cluster`` is its ``existing_cluster``): no VPC, the three
    groups described by a label ``role: <group>`` with no sizes but max_size, the device plugins present
    (their nodes carry none of the program's labels), and with kubeconfig every add-on present that the
    program installs through EKS."""
    addons = dict.fromkeys(DEVICE_PLUGINS, "present")
    if "kubeconfig" in cluster:
        addons.update(dict.fromkeys(EKS_ONLY_ADDONS, "present"))
    described = {"min_size": DELETE, "desired_size": DELETE}
    base = region(
        {
            "vpc": DELETE,
            "existing_cluster": merged({"addons": addons}, cluster),
            "node_groups": {group: {**described, "labels": {"role": group}} for group in ("system", "p5", "gpu")},
        },
        name=name,
    )
    return merged(base, overrides)
