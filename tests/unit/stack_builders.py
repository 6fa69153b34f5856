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

from components.render.mooncake_env import ADMIN_KEY_IN_SECRET
from components.render.placement import PlacedEndpoint, placed
from components.spec import parse_stack_config

REGION: Final = "us-east-1"
IMAGE: Final = "vllm/vllm-openai:v0.33.0"
MODEL: Final = "Qwen/Qwen3-8B"
P5_GPUS: Final = 8
GPU_GROUP_GPUS: Final = 4
RUNNER_CIDR: Final = "203.0.113.0/24"
"""The egress of the machine that runs `pulumi up` (TEST-NET-3, RFC 5737)."""


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
        # The runner's way to the API of a cluster in a VPC the stack creates (docs/cluster-access.md).
        "cluster_access": {"public_access_cidrs": [RUNNER_CIDR]},
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


def secrets_read(endpoints: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``inference-fleet:secrets`` as the stack file holds it (a ciphertext stand-in per value) for
    every Secret key the raw ``endpoints`` read: secret_env and the proxy's admin key."""
    secrets: dict[str, Any] = {}
    for endpoint in endpoints.values():
        if not isinstance(endpoint, Mapping):
            continue  # an invalid endpoint: the test is about that
        secret_env = endpoint.get("secret_env")
        refs = [
            (ref.get("secret"), ref.get("key"))
            for ref in (secret_env.values() if isinstance(secret_env, Mapping) else ())
            if isinstance(ref, Mapping)
        ]
        mooncake = endpoint.get("mooncake")
        proxy = mooncake.get("proxy") if isinstance(mooncake, Mapping) else None
        if isinstance(proxy, Mapping) and proxy.get("admin_api_key_secret"):
            refs.append((proxy["admin_api_key_secret"], ADMIN_KEY_IN_SECRET))
        for name, key in refs:
            if isinstance(name, str) and isinstance(key, str):
                secrets.setdefault(name, {})[key] = {"secure": "v1:test"}
    return secrets


def stack_config(
    *,
    region_overrides: Mapping[str, Any] | None = None,
    regions: Mapping[str, Mapping[str, Any]] | None = None,
    endpoints: Mapping[str, Mapping[str, Any]] | None = None,
    secrets: bool = True,
) -> dict[str, Any]:
    """The project's config keys: the minimal region (or ``regions``) plus ``endpoints``, and with
    ``secrets`` every Secret the endpoints read (none without, as a stack that forgot them)."""
    config: dict[str, Any] = {
        "regions": copy.deepcopy(dict(regions)) if regions is not None else {REGION: region(region_overrides)}
    }
    if endpoints is not None:
        config["endpoints"] = copy.deepcopy(dict(endpoints))
        if secrets and secrets_read(endpoints):
            config["secrets"] = secrets_read(endpoints)
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
    """:func:`region` on an existing cluster (``cluster`` is its ``existing_cluster``): no VPC or cluster
    access (the cluster's own), the three
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
            "cluster_access": DELETE,
            "existing_cluster": merged({"addons": addons}, cluster),
            "node_groups": {group: {**described, "labels": {"role": group}} for group in ("system", "p5", "gpu")},
        },
        name=name,
    )
    return merged(base, overrides)
