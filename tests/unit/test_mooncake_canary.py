"""The canary of a Mooncake endpoint: a second complete set named ``<name>-canary-*``, rendered by the
primary's own renderers, behind the primary's weighted route, that shares no selector, address or
network path for KV with the primary. The NetworkPolicies are checked as a composition: which pod may
reach which port of which other pod, by the Kubernetes rules (an ingress-isolated pod admits what one
of the policies selecting it allows)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from components import naming
from components.fleet import kv_endpoints_in
from components.render.endpoint import endpoint_objects
from components.render.mooncake import cold_tier_target, mooncake_objects
from components.render.mooncake_groups import WORKER_INDEX_LABEL
from components.render.mooncake_store import MASTER_RPC_PORT, METADATA_PORT, REAL_CLIENT_PORT
from components.render.network_policy import BOOTSTRAP_SPAN, SIDE_CHANNEL_PORTS, TRANSFER_ENGINE_PORTS
from components.render.proxy import PROXY_PORT
from components.spec import parse_stack_config
from tests.network_policies import matches
from tests.unit.stack_builders import (
    DELETE,
    MODEL,
    mooncake_endpoint,
    placed_endpoint,
    region,
    stack_config,
    with_mooncake,
)
from tests.unit.test_golden_manifests import MOONCAKE_CASES, rendered
from tests.unit.test_kv_transfer import problems

CANARY_IMAGE = "vllm/vllm-openai:v0.34.0"
TCP_GPU = {"model": MODEL, "node_group": "gpu", "gpu_count": 2}


def split(mode: str, **canary: Any) -> dict[str, Any]:
    return stack_config(
        endpoints={
            "chat": {
                **TCP_GPU,
                "mooncake": {
                    "mode": mode,
                    "transfer": {"protocol": "tcp"},
                    "topology": {"prefill": 2, "decode": 1},
                    **({"store": {"offload": "disk"}} if mode == "both" else {}),
                },
                "canary": {"image": CANARY_IMAGE, "weight": 30, **canary},
            }
        }
    )


def store_mode() -> dict[str, Any]:
    return stack_config(
        endpoints={
            "chat": {
                **TCP_GPU,
                "mooncake": {"mode": "store", "transfer": {"protocol": "tcp"}},
                "canary": {"image": CANARY_IMAGE, "weight": 30},
            }
        }
    )


def two_node_decode() -> dict[str, Any]:
    """Over EFA, decode instances of two nodes each (LeaderWorkerSets), and a canary set of its own."""
    return stack_config(
        regions={"us-east-1": region({"node_groups": {"p5": {"max_size": 12}}})},
        endpoints={
            "chat": mooncake_endpoint(
                {
                    "gpu_count": 8,
                    "mooncake": {"topology": {"prefill": 1, "decode": 1}, "roles": {"decode": {"nodes": 2}}},
                    "canary": {"image": CANARY_IMAGE, "weight": 30},
                }
            )
        },
    )


CONFIGS = {
    "disaggregated": split("disaggregated"),
    "both": split("both"),
    "store": store_mode(),
    "two-node-decode": two_node_decode(),
}


def objects_of(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return endpoint_objects(placed_endpoint(config))


def set_of(name: str) -> str:
    return "canary" if name.startswith("chat-canary") else "primary"


# The pods each workload template makes, by (workload name, labels).


def pods(objects: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Each workload's pods by their labels; a LeaderWorkerSet's leader and worker, with the worker index
    its controller adds (components/render/mooncake_groups.py, WORKER_INDEX_LABEL)."""
    found = {}
    for manifest in objects.values():
        name = manifest["metadata"]["name"]
        if manifest["kind"] in ("Deployment", "StatefulSet"):
            found[name] = manifest["spec"]["template"]["metadata"]["labels"]
        elif manifest["kind"] == "LeaderWorkerSet":
            group = manifest["spec"]["leaderWorkerTemplate"]
            leader = group.get("leaderTemplate", group["workerTemplate"])["metadata"]["labels"]
            found[name] = {**leader, WORKER_INDEX_LABEL: "0"}
            found[f"{name}/worker"] = {**group["workerTemplate"]["metadata"]["labels"], WORKER_INDEX_LABEL: "1"}
    return found


def selectors(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every pod selector an object holds: a Service's, a workload's, a PDB's, a NetworkPolicy's
    (its subject and each peer it admits) and an anti-affinity term's."""
    spec = manifest.get("spec", {})
    kind = manifest["kind"]
    if kind == "Service":
        return [{"matchLabels": spec["selector"]}]
    if kind in ("Deployment", "StatefulSet"):
        found = [spec["selector"]]
        affinity = spec["template"]["spec"].get("affinity", {}).get("podAntiAffinity", {})
        for term in affinity.get("preferredDuringSchedulingIgnoredDuringExecution", []):
            found.append(term["podAffinityTerm"]["labelSelector"])
        return found
    if kind == "PodDisruptionBudget":
        return [spec["selector"]]
    if kind == "NetworkPolicy":
        # A peer in other namespaces (the region's Prometheus) selects none of the endpoint's pods.
        peers = [
            peer["podSelector"]
            for rule in spec["ingress"]
            for peer in rule.get("from", [])
            if "namespaceSelector" not in peer
        ]
        return [spec["podSelector"], *peers]
    return []


@pytest.mark.parametrize("mode", list(CONFIGS))
def test_every_object_of_the_canary_set_is_named_after_the_canary(mode: str) -> None:
    objects = objects_of(CONFIGS[mode])
    canary = {part: manifest for part, manifest in objects.items() if part.startswith("canary-")}
    assert canary
    for manifest in canary.values():
        assert manifest["metadata"]["name"].startswith("chat-canary")
        assert manifest["metadata"]["labels"]["app.kubernetes.io/name"] == "chat-canary"
    workload_kinds = ("Deployment", "StatefulSet", "LeaderWorkerSet")
    workloads = sorted(m["metadata"]["name"] for m in canary.values() if m["kind"] in workload_kinds)
    expected = {
        "disaggregated": ["chat-canary-decode", "chat-canary-prefill", "chat-canary-proxy"],
        "two-node-decode": ["chat-canary-decode", "chat-canary-prefill", "chat-canary-proxy"],
        "both": ["chat-canary-decode", "chat-canary-prefill", "chat-canary-proxy", "chat-canary-store"],
        "store": ["chat-canary", "chat-canary-store"],
    }
    assert workloads == expected[mode]
    kinds = [manifest["kind"] for manifest in canary.values()]
    assert "Ingress" not in kinds, "the canary has no route of its own: the primary's weighs both"


@pytest.mark.parametrize("mode", list(CONFIGS))
def test_no_selector_of_one_set_takes_a_pod_of_the_other(mode: str) -> None:
    objects = objects_of(CONFIGS[mode])
    workloads = pods(objects)
    assert {set_of(name) for name in workloads} == {"primary", "canary"}
    checked = 0
    for manifest in objects.values():
        owner = set_of(manifest["metadata"]["name"])
        for selector in selectors(manifest):
            taken = [name for name, labels in workloads.items() if matches(selector, labels)]
            assert taken, f"{manifest['kind']} {manifest['metadata']['name']} selects no pod"
            assert {set_of(name) for name in taken} == {owner}, (manifest["metadata"]["name"], taken)
            checked += 1
    assert checked > 10


@pytest.mark.parametrize("mode", list(CONFIGS))
def test_the_canary_sets_series_are_told_apart_by_their_endpoint_label(mode: str) -> None:
    """Series carry endpoint = app.kubernetes.io/name and role = app.kubernetes.io/component."""
    workloads = pods(objects_of(CONFIGS[mode]))
    series = [  # a group's leader and workers are one role's series
        (labels["app.kubernetes.io/name"], labels["app.kubernetes.io/component"])
        for name, labels in workloads.items()
        if not name.endswith("/worker")
    ]
    assert len(set(series)) == len(series)
    assert {endpoint for endpoint, _ in series} == {"chat", "chat-canary"}


# NetworkPolicies as a composition.


def admitted(
    objects: Mapping[str, dict[str, Any]], source: Mapping[str, str], target: Mapping[str, str], port: int
) -> bool:
    """Whether a TCP connection from a pod labelled ``source`` to ``port`` of a pod labelled ``target``
    (same namespace) is allowed by the objects' NetworkPolicies."""
    policies = [
        manifest["spec"]
        for manifest in objects.values()
        if manifest["kind"] == "NetworkPolicy" and matches(manifest["spec"]["podSelector"], target)
    ]
    if not policies:
        return True  # not isolated for ingress
    for policy in policies:
        for rule in policy.get("ingress", []):
            peers = rule.get("from")
            if peers is not None and not any(matches(peer["podSelector"], source) for peer in peers):
                continue
            ports = rule.get("ports")
            if ports is None or any(
                entry["protocol"] == "TCP" and entry["port"] <= port <= entry.get("endPort", entry["port"])
                for entry in ports
            ):
                return True
    return False


def kv_ports(bootstrap: int) -> list[int]:
    """Every port KV or its bookkeeping moves on: the prefill bootstrap window, the transfer engine's RPC
    range, vLLM's side channel range, the store master's RPC and metadata, the store-client's port."""
    found = [bootstrap, bootstrap + BOOTSTRAP_SPAN // 2, bootstrap + BOOTSTRAP_SPAN]
    for low, high in (TRANSFER_ENGINE_PORTS, SIDE_CHANNEL_PORTS):
        found += [low, (low + high) // 2, high]
    return [*found, MASTER_RPC_PORT, METADATA_PORT, REAL_CLIENT_PORT]


@pytest.mark.parametrize("mode", list(CONFIGS))
def test_no_pod_of_one_set_reaches_a_kv_port_of_the_others(mode: str) -> None:
    objects = objects_of(CONFIGS[mode])
    workloads = pods(objects)
    for name, labels in workloads.items():
        assert any(
            manifest["kind"] == "NetworkPolicy" and matches(manifest["spec"]["podSelector"], labels)
            for manifest in objects.values()
        ), f"{name} is not isolated: every pod may reach it"
    crossings = [
        (source, target, port)
        for source, source_labels in workloads.items()
        for target, target_labels in workloads.items()
        if set_of(source) != set_of(target)
        for port in kv_ports(8998)
        if admitted(objects, source_labels, target_labels, port)
    ]
    assert crossings == []


def test_each_set_reaches_its_own_kv_ports() -> None:
    """The same evaluator admits each set's own paths, so the test above can fail."""
    objects = objects_of(CONFIGS["both"])
    workloads = pods(objects)
    for prefix in ("chat", "chat-canary"):
        proxy, prefill = workloads[f"{prefix}-proxy"], workloads[f"{prefix}-prefill"]
        decode, master = workloads[f"{prefix}-decode"], workloads[f"{prefix}-store"]
        assert admitted(objects, proxy, prefill, 8000)
        assert admitted(objects, proxy, prefill, 8998)
        assert admitted(objects, decode, prefill, 8998)
        assert admitted(objects, prefill, decode, TRANSFER_ENGINE_PORTS[0])
        assert admitted(objects, decode, prefill, REAL_CLIENT_PORT)
        assert admitted(objects, prefill, master, MASTER_RPC_PORT)
        assert admitted(objects, decode, master, METADATA_PORT)
        assert admitted(objects, {}, proxy, PROXY_PORT), "the load balancer reaches each proxy"
    assert not admitted(objects, workloads["chat-canary-proxy"], workloads["chat-prefill"], 8000)
    assert not admitted(objects, workloads["chat-proxy"], workloads["chat-canary-decode"], 8000)


# Addresses: where each set finds its peers.


def container(objects: Mapping[str, dict[str, Any]], name: str, container_name: str) -> dict[str, Any]:
    (manifest,) = [
        m for m in objects.values() if m["kind"] in ("Deployment", "StatefulSet") and m["metadata"]["name"] == name
    ]
    found: list[dict[str, Any]] = manifest["spec"]["template"]["spec"]["containers"]
    (named,) = [c for c in found if c["name"] == container_name]
    return named


def argument(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


@pytest.mark.parametrize("prefix", ["chat", "chat-canary"])
def test_each_proxy_finds_the_prefill_pods_and_decoders_of_its_own_set_only(prefix: str) -> None:
    objects = objects_of(CONFIGS["both"])
    args = container(objects, f"{prefix}-proxy", "proxy")["args"]
    host = argument(args, "--prefill-service")
    assert host == f"{prefix}-prefill.inference.svc"
    (headless,) = [
        m for m in objects.values() if m["kind"] == "Service" and m["metadata"]["name"] == f"{prefix}-prefill"
    ]
    assert headless["spec"]["clusterIP"] == "None"
    taken = [
        name for name, labels in pods(objects).items() if matches({"matchLabels": headless["spec"]["selector"]}, labels)
    ]
    assert taken == [f"{prefix}-prefill"], "the bootstrap addresses the proxy hands decode are its own set's"
    assert argument(args, "--decode") == f"http://{prefix}-decode.inference.svc:8000"


def test_each_set_registers_with_its_own_store_master() -> None:
    objects = objects_of(CONFIGS["both"])
    for prefix in ("chat", "chat-canary"):
        (config_map,) = [m for m in objects.values() if m["metadata"]["name"] == f"{prefix}-mooncake"]
        store = json.loads(config_map["data"]["mooncake.json"])
        assert store["master_server_address"] == f"{prefix}-store.inference.svc:{MASTER_RPC_PORT}"
        assert store["metadata_server"] == f"http://{prefix}-store.inference.svc:{METADATA_PORT}/metadata"
        for role in ("prefill", "decode"):
            pod = next(m for m in objects.values() if m["metadata"]["name"] == f"{prefix}-{role}")["spec"]["template"]
            volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
            assert volumes["mooncake-config"]["configMap"]["name"] == f"{prefix}-mooncake"


def test_the_canary_runs_its_image_and_topology_and_its_master_runs_the_canarys_mooncake() -> None:
    """A pinned vLLM image's master is Mooncake's own image; the canary's image (not a pinned one) also
    carries its master, so each set's master is its own clients' Mooncake release."""
    objects = objects_of(split("both", topology={"prefill": 1, "decode": 3}))
    assert container(objects, "chat-canary-prefill", "server")["image"] == CANARY_IMAGE
    assert container(objects, "chat-canary-decode", "server")["image"] == CANARY_IMAGE
    assert container(objects, "chat-canary-proxy", "proxy")["image"] == CANARY_IMAGE
    assert container(objects, "chat-canary-store", "master")["image"] == CANARY_IMAGE
    assert container(objects, "chat-prefill", "server")["image"] == "vllm/vllm-openai:v0.33.0"
    assert container(objects, "chat-store", "master")["image"].startswith("docker.io/kvcacheai/mooncake:")
    replicas = {
        m["metadata"]["name"]: m["spec"].get("replicas") for m in objects.values() if "replicas" in m.get("spec", {})
    }
    assert replicas["chat-prefill"] == 2
    assert replicas["chat-decode"] == 1
    assert replicas["chat-canary-prefill"] == 1
    assert replicas["chat-canary-decode"] == 3


def test_the_canary_set_takes_the_primary_topology_and_is_never_autoscaled() -> None:
    config = split("disaggregated")
    config["endpoints"]["chat"]["mooncake"]["autoscaling"] = {
        "enabled": True,
        "decode": {"min_replicas": 1, "max_replicas": 3},
    }
    objects = objects_of(config)
    scalers = [m["metadata"]["name"] for m in objects.values() if m["kind"] == "ScaledObject"]
    assert scalers == ["chat-decode"]
    canary_decode = next(m for m in objects.values() if m["metadata"]["name"] == "chat-canary-decode")
    assert canary_decode["spec"]["replicas"] == 1
    canary_prefill = next(m for m in objects.values() if m["metadata"]["name"] == "chat-canary-prefill")
    assert canary_prefill["spec"]["replicas"] == 2


# The route.


@pytest.mark.parametrize(
    ("mode", "primary", "canary"), [("both", "chat-proxy", "chat-canary-proxy"), ("store", "chat", "chat-canary")]
)
def test_the_route_weighs_the_primarys_entry_against_the_canarys(mode: str, primary: str, canary: str) -> None:
    objects = objects_of(CONFIGS[mode])
    (route,) = [m for m in objects.values() if m["kind"] == "Ingress"]
    (action,) = [json.loads(v) for k, v in route["metadata"]["annotations"].items() if "/actions." in k]
    groups = [(group["serviceName"], group["weight"]) for group in action["forwardConfig"]["targetGroups"]]
    assert groups == [(primary, 70), (canary, 30)]
    services = {m["metadata"]["name"]: m for m in objects.values() if m["kind"] == "Service"}
    entry: naming.Role = "proxy" if mode == "both" else "server"
    for name, owner in ((primary, "chat"), (canary, "chat-canary")):
        assert services[name]["spec"]["selector"] == naming.selector_labels(owner, entry)


@pytest.mark.parametrize("mode", list(CONFIGS))
def test_adding_a_canary_changes_no_object_of_the_primary_but_the_route(mode: str) -> None:
    with_canary = objects_of(CONFIGS[mode])
    without = CONFIGS[mode]["endpoints"]["chat"].copy()
    del without["canary"]
    alone = objects_of(stack_config(endpoints={"chat": without}))
    primary = {part: manifest for part, manifest in with_canary.items() if not part.startswith("canary-")}
    assert primary.keys() == alone.keys()
    changed = [part for part in alone if primary[part] != alone[part]]
    assert changed == ["route"]


# The cold tier, the kv-transfer configs, the spec.


def test_a_cold_tier_canary_writes_under_its_own_prefix_as_its_own_identity() -> None:
    config = stack_config(
        regions={"us-east-1": region({"cold_tier": {"enabled": True}})},
        endpoints={
            "chat": mooncake_endpoint(
                {"mooncake": {"mode": "both", "store": {"cold_tier_enabled": True}}, "canary": {"image": CANARY_IMAGE}}
            )
        },
    )
    endpoint = placed_endpoint(config)
    objects = mooncake_objects(endpoint, cold_tier_target(endpoint, "bucket"))
    for prefix in ("chat", "chat-canary"):
        prefill = next(m for m in objects.values() if m["metadata"]["name"] == f"{prefix}-prefill")["spec"]["template"]
        assert prefill["spec"]["serviceAccountName"] == f"{prefix}-kv"
        args = prefill["spec"]["containers"][0]["args"]
        tiers = json.loads(argument(args, "--kv-transfer-config"))["kv_connector_extra_config"]["connectors"][-1]
        assert tiers["kv_connector_extra_config"]["secondary_tiers"][0]["prefix"] == f"mooncake-kv/{prefix}"
    accounts = [m["metadata"]["name"] for m in objects.values() if m["kind"] == "ServiceAccount"]
    assert accounts == ["chat-kv", "chat-canary-kv"]
    identities = kv_endpoints_in(parse_stack_config(config), "us-east-1")
    assert [identity.name for identity in identities] == ["chat", "chat-canary"]


@pytest.mark.parametrize("case", [case for case in MOONCAKE_CASES if "canary" in case])
def test_every_kv_transfer_config_of_a_canary_golden_is_accepted_by_the_pinned_release(case: str) -> None:
    configs = [
        argument(c["args"], "--kv-transfer-config")
        for document in rendered("mooncake", case)
        if document["kind"] in ("Deployment", "StatefulSet") and document["metadata"]["name"].startswith("chat-canary")
        for c in document["spec"]["template"]["spec"]["containers"]
        if "--kv-transfer-config" in c.get("args", [])
    ]
    assert configs
    for config in configs:
        assert problems(json.loads(config)) == []


@pytest.mark.parametrize("mode", ["disaggregated", "both", "store"])
def test_every_mode_accepts_a_canary(mode: str) -> None:
    block: dict[str, Any] = {"mode": mode, "topology": DELETE} if mode == "store" else {"mode": mode}
    config = with_mooncake({"mooncake": block, "canary": {"image": CANARY_IMAGE, "weight": 50}})
    canary = parse_stack_config(config).endpoints["chat"].canary
    assert canary is not None
    assert canary.weight == 50


def test_a_mooncake_canary_fits_an_endpoint_name_of_37_characters() -> None:
    name = "c" * naming.MAX_CANARY_ENDPOINT_NAME_LENGTH
    assert naming.MAX_CANARY_ENDPOINT_NAME_LENGTH == 37
    spec = parse_stack_config(with_mooncake({"canary": {"image": CANARY_IMAGE}}, name=name))
    objects = endpoint_objects(placed_endpoint(with_mooncake({"canary": {"image": CANARY_IMAGE}}, name=name), name))
    assert len(objects["canary-prefill"]["metadata"]["name"]) == 52  # '<name>-canary-prefill', the tightest
    assert name in spec.endpoints


def test_a_canary_topology_takes_each_count_it_does_not_give_from_the_endpoint() -> None:
    config = split("both", topology={"decode": 3})
    canary = parse_stack_config(config).endpoints["chat"].canary
    assert canary is not None
    assert canary.topology is not None
    assert (canary.topology.prefill, canary.topology.decode) == (2, 3)


def test_the_canary_set_takes_the_endpoints_role_shapes() -> None:
    """Rendered by the same functions from the endpoint's view, the canary set's roles have the shapes
    the endpoint's roles have (mooncake.roles), whatever its topology."""
    config = split("disaggregated", topology={"prefill": 1, "decode": 1})
    config["endpoints"]["chat"]["mooncake"]["roles"] = {"decode": {"gpu_count": 1}}
    objects = objects_of(config)
    for prefix in ("chat", "chat-canary"):
        gpus = {
            role: container(objects, f"{prefix}-{role}", "server")["resources"]["limits"]["nvidia.com/gpu"]
            for role in ("prefill", "decode")
        }
        assert gpus == {"prefill": "2", "decode": "1"}, prefix


def test_only_the_primary_proxy_stays_ready_at_zero() -> None:
    """The primary's roles autoscale from 0, so its proxy takes --scale-to-zero for both; the canary set
    keeps its fixed pods, so its proxy keeps reporting a missing role as unready."""
    config = split("disaggregated")
    config["endpoints"]["chat"]["mooncake"]["autoscaling"] = {
        "enabled": True,
        "prefill": {"min_replicas": 0, "max_replicas": 3},
        "decode": {"min_replicas": 0, "max_replicas": 3},
    }
    objects = objects_of(config)
    primary = container(objects, "chat-proxy", "proxy")["args"]
    assert [primary[i + 1] for i, arg in enumerate(primary) if arg == "--scale-to-zero"] == ["prefill", "decode"]
    assert "--scale-to-zero" not in container(objects, "chat-canary-proxy", "proxy")["args"]
