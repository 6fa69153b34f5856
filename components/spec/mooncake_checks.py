"""Rules of a Mooncake endpoint across its fields: the classic fields it refuses (mooncake sizes its
roles), its canary set, the EFA page entries its store registers, and whether a split pair (prefill
and decode, roles spanning nodes) can hand KV over; and where in the config each rule points."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic_core import PydanticCustomError

from components.catalog import pins
from components.scheduling import EFA_PAGE_ENTRY_BUDGET, HUGEPAGE_2MI_BYTES
from components.spec.base import fail
from components.spec.images import repository_and_tag
from components.spec.mooncake import Mooncake
from components.spec.roles import ROLES_PATH, SPLIT_ROLES
from components.spec.server_args import flag_value

if TYPE_CHECKING:
    from components.spec.endpoint import Canary, Endpoint

KV_LAYOUT_FLAGS = {
    "--block-size": "block size",
    "--kv-cache-dtype": "KV cache dtype",
    "--dtype": "model dtype (the KV cache's under --kv-cache-dtype auto)",
}
"""vLLM flags that set how a KV block is laid out in memory (vllm/config/cache.py, model.py)."""
BOTH_RELEASE = (0, 33, 0)
"""The first vLLM release whose MultiConnector serves mode ``both``: 0.32.0's asserts that every child
connector with transfer stats has Prometheus metrics (multi_connector.py
``MultiKVConnectorPromMetrics.observe``), which the Mooncake connector has not, and the server's output
handler dies at the first transfer (found on real vLLM: tests/vllm/test_real_both.py)."""
_RELEASE_TAG = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def mooncake_rules(endpoint: Endpoint, mooncake: Mooncake) -> Iterator[PydanticCustomError]:
    if endpoint.framework != "vllm":
        yield fail(
            "mooncake_framework",
            "must be 'vllm' with mooncake, got {framework!r}",
            at="framework",
            framework=endpoint.framework,
        )
    if endpoint.accelerator != "nvidia":
        yield fail("mooncake_accelerator", "must be 'nvidia' with mooncake", at="accelerator")
    if endpoint.replicas is not None:
        yield fail(
            "mooncake_replicas",
            "is for classic endpoints; size Mooncake roles with mooncake.topology (and mooncake.autoscaling)",
            at="replicas",
        )
    if endpoint.autoscaling is not None:
        yield fail("mooncake_autoscaling", "is for classic endpoints; use mooncake.autoscaling", at="autoscaling")
    if endpoint.canary is not None:
        yield from _canary_rules(endpoint.canary, mooncake)
    # The pod with the most ranks registers the most pages.
    ranks, role = max((endpoint.tensor_parallel_size(role), role) for role in _vllm_roles(mooncake))
    yield from _page_entry_rules(mooncake, ranks, role if mooncake.split else None)
    if mooncake.mode == "both":
        yield from _both_release_rules(endpoint)
    if mooncake.split:
        yield from _kv_pair_rules(endpoint, mooncake)
        yield from _group_rules(mooncake)


def vllm_release(image: str) -> tuple[int, ...] | None:
    """The release a vLLM image's tag names (``vllm/vllm-openai:v0.33.0``: 0, 33, 0); None for another
    repository or a tag that names none (``latest``, a digest only)."""
    repository, tag = repository_and_tag(image)
    match = _RELEASE_TAG.match(tag) if tag is not None and "vllm" in repository.lower() else None
    return tuple(int(part) for part in match.groups()) if match else None


def _both_release_rules(endpoint: Endpoint) -> Iterator[PydanticCustomError]:
    images = {"image": endpoint.image, "canary.image": endpoint.canary.image if endpoint.canary else None}
    images |= {f"region_image_uris.{region}": image for region, image in endpoint.region_image_uris.items()}
    for at, image in images.items():
        release = vllm_release(image) if image else None
        if release is not None and release < BOTH_RELEASE:
            yield fail(
                "mooncake_both_release",
                "is vLLM {release}: its MultiConnector stops the server at the first transfer in mode 'both' "
                "(it asserts the Mooncake connector has Prometheus metrics); use vLLM 0.33.0 or later",
                at=at,
                release=".".join(map(str, release)),
            )


def _canary_rules(canary: Canary, mooncake: Mooncake) -> Iterator[PydanticCustomError]:
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


def _divisor_near(size: int, other: int) -> int:
    """The size nearest ``other`` that pairs with ``size`` (one divides the other)."""
    candidates = [n for n in range(1, max(size, other) * 2 + 1) if max(n, size) % min(n, size) == 0]
    return min(candidates, key=lambda n: (abs(n - other), n))


def _kv_pair_rules(endpoint: Endpoint, mooncake: Mooncake) -> Iterator[PydanticCustomError]:
    """Prefill and decode must lay KV out alike for the decoder to read what the prefiller wrote.

    The model is the endpoint's (one per endpoint). The pinned vLLM's MooncakeConnector
    (vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py) compares the
    two sides' registered KV regions byte for byte (``_validate_asymmetric_region_lengths``), so
    block size and KV dtype must be equal, and pairs different tensor-parallel sizes only when one
    divides the other (``_get_tp_ratio`` asserts it: a rank of the larger side maps into exactly one
    rank of the smaller)."""
    prefill, decode = endpoint.role_spec("prefill"), endpoint.role_spec("decode")
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
                at=_role_field(mooncake, "args"),
                flag=flag,
                prefill=shown[0],
                decode=shown[1],
                what=what,
            )
    sizes = (endpoint.tensor_parallel_size("prefill"), endpoint.tensor_parallel_size("decode"))
    if max(sizes) % min(sizes):
        yield fail(
            "kv_tp_pair",
            "prefill runs tensor parallelism {prefill} and decode {decode}; the pinned vLLM's ({release}) "
            "MooncakeConnector pairs different sizes only when one divides the other (_get_tp_ratio in "
            "vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py asserts it: each rank "
            "of the larger side holds a share of exactly one rank of the smaller); choose gpu_counts such as "
            "{suggestion}",
            at=_role_field(mooncake, "gpu_count"),
            prefill=sizes[0],
            decode=sizes[1],
            release=pins().vllm.release,
            suggestion=f"{sizes[0]} and {_divisor_near(sizes[0], sizes[1])}",
        )


def _group_rules(mooncake: Mooncake) -> Iterator[PydanticCustomError]:
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
                at=f"{ROLES_PATH}.{role}.nodes",
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
            at=_role_field(mooncake, "nodes", default=1),
            prefill=spans[0],
            decode=spans[1],
        )


def _role_field(mooncake: Mooncake, field: str, default: object = None) -> str:
    """Where a pair rule points: the decode role's ``field`` where a role states it (decode first),
    else the endpoint's own."""
    for role in ("decode", "prefill"):
        shape = mooncake.roles.shape(role)
        if shape is not None and getattr(shape, field) != default:
            return f"{ROLES_PATH}.{role}.{field}"
    return field


def gpu_count_paths(endpoint: Endpoint) -> dict[str, str]:
    """Each vLLM role's gpu_count path: a role's own where it states one, else the endpoint's."""
    if endpoint.mooncake is None or not endpoint.mooncake.split:
        return {"server": "gpu_count"}
    paths: dict[str, str] = {}
    for role in SPLIT_ROLES:
        shape = endpoint.mooncake.roles.shape(role)
        stated = shape is not None and shape.gpu_count is not None
        paths[role] = f"{ROLES_PATH}.{role}.gpu_count" if stated else "gpu_count"
    return paths


def _vllm_roles(mooncake: Mooncake) -> tuple[str, ...]:
    return SPLIT_ROLES if mooncake.split else ("server",)


def _page_entry_rules(mooncake: Mooncake, ranks: int, role: str | None) -> Iterator[PydanticCustomError]:
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
