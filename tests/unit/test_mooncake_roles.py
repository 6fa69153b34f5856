"""A shape per role (mooncake.roles): each role's GPUs, node group, args and resources, the
pair's KV compatibility as the pinned vLLM's Mooncake connectors read it, and every consumer of
a pod's placement (rendering, node-group resolution, the schedulability check) following the
role's own shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.render.kv_transfer import as_argument
from components.render.mooncake import mooncake_objects
from components.schedulability import check_schedulable
from components.scheduling import EFA_RESOURCE, HUGEPAGES_2MI_RESOURCE, NODE_GROUP_LABEL
from components.spec import Problem, SpecError, parse_stack_config

from .stack_builders import DELETE, merged, mooncake_endpoint, placed_endpoint, stack_config

# A second EFA group in p5's zone (p4d: 8 GPUs, 4 EFA devices) and one in another zone.
GROUPS = {
    "node_groups": {
        "p4d": {
            "instance_types": ["p4d.24xlarge"],
            "min_size": 0,
            "max_size": 4,
            "desired_size": 1,
            "efa": True,
            "availability_zone": "us-east-1a",
        },
        "p4d-b": {
            "instance_types": ["p4d.24xlarge"],
            "min_size": 0,
            "max_size": 4,
            "desired_size": 1,
            "efa": True,
            "availability_zone": "us-east-1b",
        },
    }
}


def config(endpoint: dict[str, Any], groups: dict[str, Any] | None = GROUPS) -> dict[str, Any]:
    base = {"node_group": "p5", "gpu_count": 8}
    return stack_config(region_overrides=groups, endpoints={"chat": mooncake_endpoint(merged(base, endpoint))})


def roles(
    prefill: dict[str, Any] | None = None, decode: dict[str, Any] | None = None, **mooncake: Any
) -> dict[str, Any]:
    shapes = {role: shape for role, shape in (("prefill", prefill), ("decode", decode)) if shape is not None}
    return {"mooncake": {"roles": shapes, **mooncake}}


def problems(stack: dict[str, Any]) -> tuple[Problem, ...]:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(stack)
    return caught.value.problems


def only_problem(stack: dict[str, Any]) -> Problem:
    found = problems(stack)
    assert len(found) == 1, "\n".join(map(str, found))
    return found[0]


def objects(stack: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return mooncake_objects(placed_endpoint(stack), None)


def server(objects: dict[str, dict[str, Any]], part: str) -> dict[str, Any]:
    container: dict[str, Any] = objects[part]["spec"]["template"]["spec"]["containers"][0]
    return container


def kv_config(objects: dict[str, dict[str, Any]], part: str) -> dict[str, Any]:
    args = server(objects, part)["args"]
    config: dict[str, Any] = json.loads(args[args.index("--kv-transfer-config") + 1])
    return config


def tensor_parallel(objects: dict[str, dict[str, Any]], part: str) -> int:
    args = server(objects, part)["args"]
    return int(args[args.index("--tensor-parallel-size") + 1]) if "--tensor-parallel-size" in args else 1


# Each role's pods take the role's shape; the other role keeps the endpoint's.

DIFFERENT = roles(
    prefill={"node_group": "p4d", "gpu_count": 8, "args": ["--max-num-batched-tokens", "16384"]},
    decode={"gpu_count": 4, "resources": {"memory": "200GiB"}},
)


def test_each_role_runs_its_own_gpus_group_args_and_resources() -> None:
    rendered = objects(config(DIFFERENT))
    prefill, decode = server(rendered, "prefill"), server(rendered, "decode")
    prefill_pod = rendered["prefill"]["spec"]["template"]["spec"]
    decode_pod = rendered["decode"]["spec"]["template"]["spec"]
    assert prefill_pod["nodeSelector"][NODE_GROUP_LABEL] == "p4d"
    assert decode_pod["nodeSelector"][NODE_GROUP_LABEL] == "p5"  # the endpoint's group
    assert (tensor_parallel(rendered, "prefill"), tensor_parallel(rendered, "decode")) == (8, 4)
    assert prefill["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert decode["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert prefill["args"][prefill["args"].index("--max-num-batched-tokens") + 1] == "16384"
    assert "--max-num-batched-tokens" not in decode["args"]
    # Every EFA device of the role's own node: p4d has 4, p5 32.
    assert prefill["resources"]["limits"][EFA_RESOURCE] == "4"
    assert decode["resources"]["limits"][EFA_RESOURCE] == "32"
    # CPU by the role's GPUs where nothing states it; decode's memory as it states it.
    assert prefill["resources"]["limits"]["cpu"] == "24"
    assert decode["resources"]["limits"]["cpu"] == "12"
    assert decode["resources"]["limits"]["memory"] == "200Gi"


def test_role_args_replace_the_endpoint_args_and_a_role_without_args_keeps_them() -> None:
    stack = config(merged({"args": ["--max-num-seqs", "64"]}, roles(prefill={"args": ["--enforce-eager"]})))
    rendered = objects(stack)
    prefill, decode = server(rendered, "prefill")["args"], server(rendered, "decode")["args"]
    assert "--enforce-eager" in prefill
    assert "--max-num-seqs" not in prefill
    assert decode[decode.index("--max-num-seqs") + 1] == "64"
    assert "--enforce-eager" not in decode


def test_role_resources_default_to_the_endpoints_stated_amounts_else_to_the_roles_gpus() -> None:
    stack = config(merged({"gpu_count": 2, "resources": {"cpu": 10}}, roles(prefill={"gpu_count": 8})))
    spec = parse_stack_config(stack).endpoints["chat"]
    prefill = spec.role_spec("prefill")
    assert prefill.resources.cpu == "10"  # the endpoint states it
    assert prefill.resources.memory == str(8 * 12 * 2**30)  # 12 GiB per GPU of the role
    assert spec.role_spec("decode").resources.memory == str(2 * 12 * 2**30)


def test_without_roles_an_endpoint_renders_exactly_as_with_empty_shapes() -> None:
    plain = objects(config({}))
    empty = objects(config(roles(prefill={}, decode={})))
    assert as_argument(plain) == as_argument(empty)


def test_huge_pages_follow_each_roles_ranks() -> None:
    stack = config(
        roles(prefill={"gpu_count": 8}, decode={"gpu_count": 2}, mode="both", store={"protocol": "rdma"}),
        groups=merged(GROUPS, {"node_groups": {"p5": {"hugepages_2mi": "69GiB"}}}),
    )
    rendered = objects(stack)
    store = 8 * 2**30  # the pinned segment and buffer of one rank
    libfabric = 5120 * 2**20
    for part, ranks in (("prefill", 8), ("decode", 2)):
        wanted = f"{(libfabric + ranks * store) // 2**20}Mi"
        assert server(rendered, part)["resources"]["limits"][HUGEPAGES_2MI_RESOURCE] == wanted


# KV compatibility of the pair.


def test_the_store_shards_by_the_least_common_multiple_where_the_roles_tp_differ() -> None:
    rendered = objects(config(roles(prefill={"gpu_count": 8}, decode={"gpu_count": 2}, mode="both")))
    for part in ("prefill", "decode"):
        children = kv_config(rendered, part)["kv_connector_extra_config"]["connectors"]
        (store,) = [child for child in children if child["kv_connector"] == "MooncakeStoreConnector"]
        assert store["kv_connector_extra_config"]["store_tp_size"] == 8
    same = objects(config(roles(mode="both", decode={"gpu_count": 8})))
    children = kv_config(same, "decode")["kv_connector_extra_config"]["connectors"]
    stores = [child for child in children if "Store" in child["kv_connector"]]
    assert all("store_tp_size" not in child.get("kv_connector_extra_config", {}) for child in stores)


@pytest.mark.parametrize(("prefill", "decode"), [(8, 4), (8, 2), (1, 8), (4, 4)])
def test_tensor_parallel_sizes_that_divide_each_other_pair(prefill: int, decode: int) -> None:
    parse_stack_config(config(roles(prefill={"gpu_count": prefill}, decode={"gpu_count": decode})))


def test_tensor_parallel_sizes_that_do_not_divide_are_refused_naming_the_connector() -> None:
    problem = only_problem(config(roles(prefill={"gpu_count": 8}, decode={"gpu_count": 3})))
    assert problem.path == "endpoints.chat.mooncake.roles.decode.gpu_count"
    assert "prefill runs tensor parallelism 8 and decode 3" in problem.message
    assert "_get_tp_ratio" in problem.message
    assert "vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py" in problem.message
    assert "0.33.0" in problem.message


@pytest.mark.parametrize(
    ("prefill_args", "decode_args", "flag"),
    [
        (["--block-size", "32"], ["--block-size=16"], "--block-size"),
        (["--block-size", "32"], None, "--block-size"),
        (["--kv-cache-dtype", "fp8"], ["--kv_cache_dtype", "auto"], "--kv-cache-dtype"),
        (["--dtype=bfloat16"], ["--dtype", "float16"], "--dtype"),
    ],
)
def test_a_pair_that_lays_kv_out_differently_is_refused(
    prefill_args: list[str], decode_args: list[str] | None, flag: str
) -> None:
    problem = only_problem(config(roles(prefill={"args": prefill_args}, decode={"args": decode_args or []})))
    assert problem.path == "endpoints.chat.mooncake.roles.decode.args"
    assert f"prefill has {flag}" in problem.message
    assert "set " + flag + " alike in both roles' args" in problem.message


def test_a_layout_flag_stated_alike_in_both_roles_pairs() -> None:
    same = ["--block-size", "32", "--kv-cache-dtype", "fp8"]
    parse_stack_config(config(roles(prefill={"args": same}, decode={"args": [*same, "--enforce-eager"]})))


# Bad role input: the error names the role's field.


@pytest.mark.parametrize(
    ("endpoint", "path", "fragment"),
    [
        (
            roles(decode={"args": ["--tensor-parallel-size", "2"]}),
            "endpoints.chat.mooncake.roles.decode.args[0]",
            "'--tensor-parallel-size' is rendered from gpu_count",
        ),
        (
            roles(prefill={"args": ["--api-key=sk-1"]}),
            "endpoints.chat.mooncake.roles.prefill.args[0]",
            "passes a credential on the command line",
        ),
        (
            roles(prefill={"node_group": "h100"}),
            "endpoints.chat.mooncake.roles.prefill.node_group",
            "node group 'h100' does not exist in us-east-1",
        ),
        (
            roles(decode={"gpu_count": 16}),
            "endpoints.chat.mooncake.roles.decode.gpu_count",
            "16 GPUs per pod do not fit one node of regions.us-east-1.node_groups.p5",
        ),
        (
            roles(prefill={"node_group": "system"}),
            "endpoints.chat.mooncake.roles.prefill.node_group",
            "has no nvidia accelerators",
        ),
        (
            roles(prefill={"node_group": "gpu", "gpu_count": 4}),
            "endpoints.chat.mooncake.transfer.protocol",
            "'rdma' needs an EFA node group, but regions.us-east-1.node_groups.gpu has efa false",
        ),
        (
            roles(prefill={"node_group": "p4d-b"}),
            "endpoints.chat.mooncake.roles.decode.node_group",
            "decode runs on p5 in us-east-1a and prefill on p4d-b in us-east-1b",
        ),
        (
            roles(decode={"gpu_count": 0}),
            "endpoints.chat.mooncake.roles.decode.gpu_count",
            "must be an integer >= 1, got 0",
        ),
        (
            roles(decode={"gpus": 2}),
            "endpoints.chat.mooncake.roles.decode.gpus",
            "unknown key; allowed keys: gpu_count, node_group, args, nodes, resources",
        ),
        (
            roles(prefill={"gpu_count": 4}, mode="store", topology=None),
            "endpoints.chat.mooncake.roles",
            "only 'disaggregated' and 'both' run",
        ),
    ],
)
def test_a_bad_role_is_refused_at_its_field(endpoint: dict[str, Any], path: str, fragment: str) -> None:
    problem = only_problem(config(endpoint))
    assert problem.path == path
    assert fragment in problem.message


def test_a_problem_of_the_endpoints_own_group_is_reported_once_for_both_roles() -> None:
    problem = only_problem(config({"node_group": "h100"}))
    assert problem.path == "endpoints.chat.node_group"


def test_roles_on_groups_of_their_own_need_no_default_for_the_endpoint() -> None:
    # Two EFA GPU groups: the endpoint's own node_group would be ambiguous, but no pod uses it.
    stack = config({"node_group": DELETE, **roles(prefill={"node_group": "p4d"}, decode={"node_group": "p5"})})
    (placement,) = parse_stack_config(stack).placements
    assert placement.role_groups == (("prefill", "p4d"), ("decode", "p5"))
    assert placement.node_group == "p4d"
    missing = config({"node_group": DELETE, **roles(prefill={"node_group": "p4d"})})
    assert only_problem(missing).path == "endpoints.chat.node_group"  # decode still uses it


# The schedulability check counts each role on its own group.


def test_the_schedulability_check_places_each_role_on_its_own_group() -> None:
    # Two prefill pods of 8 GPUs on p4d, which may have one node: the prefill role does not fit.
    stack = config(
        roles(prefill={"node_group": "p4d"}, topology={"prefill": 2, "decode": 1}),
        groups=merged(GROUPS, {"node_groups": {"p4d": {"max_size": 1}}}),
    )
    found = check_schedulable(parse_stack_config(stack))
    assert found, "two 8-GPU prefill pods cannot fit one p4d node"
    assert any("chat-prefill" in problem.message for problem in found), "\n".join(map(str, found))
    assert not any("chat-decode" in problem.message for problem in found)
    roomy = merged(GROUPS, {"node_groups": {"p4d": {"max_size": 3}}})  # two, and one while they roll
    fits = config(roles(prefill={"node_group": "p4d"}, topology={"prefill": 2, "decode": 1}), roomy)
    assert check_schedulable(parse_stack_config(fits)) == []


def test_a_canary_set_runs_the_same_role_shapes_as_the_primary() -> None:
    stack = config(merged(DIFFERENT, {"canary": {"image": "vllm/vllm-openai:v0.34.0", "weight": 10}}))
    rendered = objects(stack)
    for part in ("prefill", "decode"):
        primary, canary = (
            rendered[part]["spec"]["template"]["spec"],
            rendered[f"canary-{part}"]["spec"]["template"]["spec"],
        )
        assert canary["nodeSelector"] == primary["nodeSelector"]
        assert canary["containers"][0]["resources"] == primary["containers"][0]["resources"]
        assert tensor_parallel(rendered, f"canary-{part}") == tensor_parallel(rendered, part)
