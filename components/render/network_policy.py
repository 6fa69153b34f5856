"""NetworkPolicies of a Mooncake endpoint: into its pods comes exactly the traffic its roles
need, nothing else. Enforced by the VPC CNI's network policy agent (enabled on the cluster).

- proxy (or the store server): its port, from anywhere (the load balancer sends from its subnets);
  the proxy's metrics port from the region's Prometheus (the requests it counts wake roles at zero);
- role pods: the server port from the proxy, and from the region's Prometheus (its /metrics,
  docs/metrics.md); from each other and from the proxy the prefill bootstrap window; from each
  other the Mooncake transfer engine's RPC range (where its TCP transport listens too) and the
  ZMQ side channel range vLLM binds at random; with offload disk the store-client's one port,
  where it serves its segment's RPC and disk-tier reads (its other two listeners are its
  transfer engine's, in the range above: tests/e2e reads them);
- the store master: RPC and metadata from the endpoint's role pods.

Over EFA the KV itself moves by SRD, not IP, and no policy sees it.
"""

from __future__ import annotations

from typing import Any

from components import naming
from components.render.kube import endpoint_pods, metrics_port, network_policy, scraper_rule, tcp_ports
from components.render.mooncake_groups import spans_nodes
from components.render.mooncake_roles import mooncake_of
from components.render.mooncake_store import MASTER_RPC_PORT, METADATA_PORT, REAL_CLIENT_PORT, offloads_to_disk
from components.render.placement import PlacedEndpoint
from components.render.proxy import PROXY_METRICS_PORT, PROXY_PORT

BOOTSTRAP_SPAN = 100
"""Bootstrap ports are base + data-parallel rank * tensor-parallel size + tensor-parallel rank."""
TRANSFER_ENGINE_PORTS = (15000, 17000)
"""Mooncake's MC_MIN_RPC_PORT..MC_MAX_RPC_PORT defaults."""
SIDE_CHANNEL_PORTS = (49152, 65535)
"""pyzmq bind_to_random_port's default range, where vLLM's Mooncake side channel binds."""


def _policy(
    endpoint: PlacedEndpoint, suffix: str, selector: dict[str, Any], rules: list[dict[str, Any]]
) -> dict[str, Any]:
    return network_policy(f"{endpoint.name}-{suffix}", endpoint, selector, rules)


def network_policies(endpoint: PlacedEndpoint) -> dict[str, dict[str, Any]]:
    mooncake = mooncake_of(endpoint)
    port = endpoint.spec.port
    policies: dict[str, dict[str, Any]] = {}
    # offload disk: each pod's store-client serves the pool's segments of that pod and, on the same
    # pinned port, reads from its SSD tier for the other pods (mooncake_store.store_client_container).
    disk = mooncake.store_enabled and offloads_to_disk(endpoint)
    store_clients = [(REAL_CLIENT_PORT, REAL_CLIENT_PORT)] if disk else []
    if mooncake.split:
        roles: tuple[naming.Role, ...] = ("prefill", "decode")
        bootstrap = mooncake.transfer.bootstrap_base_port
        window = (bootstrap, min(bootstrap + BOOTSTRAP_SPAN, 65535))
        proxy_rules = [{"ports": tcp_ports((PROXY_PORT, PROXY_PORT))}, scraper_rule(PROXY_METRICS_PORT)]
        policies["policy-proxy"] = _policy(endpoint, "proxy", endpoint_pods(endpoint, "proxy"), proxy_rules)
        role_rules = [
            {"from": [{"podSelector": endpoint_pods(endpoint, "proxy")}], "ports": tcp_ports((port, port), window)},
            {
                "from": [{"podSelector": endpoint_pods(endpoint, *roles)}],
                "ports": tcp_ports(window, TRANSFER_ENGINE_PORTS, SIDE_CHANNEL_PORTS, *store_clients),
            },
            scraper_rule(metrics_port(endpoint)),
        ]
    else:
        roles = ("server",)
        role_rules = [
            {"ports": tcp_ports((port, port))},  # the route's backend
            {
                "from": [{"podSelector": endpoint_pods(endpoint, *roles)}],
                "ports": tcp_ports(TRANSFER_ENGINE_PORTS, *store_clients),
            },
        ]
    policies["policy-roles"] = _policy(endpoint, "roles", endpoint_pods(endpoint, *roles), role_rules)
    for role in roles:
        if spans_nodes(endpoint, role):
            # A group's ranks talk among themselves on ports they pick (torch.distributed's store on
            # the leader's master port, NCCL's and vLLM's sockets): every TCP port, between the pods of
            # the role only. Policies add up, so this widens nothing for any other peer.
            group = endpoint_pods(endpoint, role)
            policies[f"policy-{role}-group"] = _policy(
                endpoint, f"{role}-group", group, [{"from": [{"podSelector": group}], "ports": tcp_ports((1, 65535))}]
            )
    if mooncake.store_enabled:
        policies["policy-store"] = _policy(
            endpoint,
            "store",
            endpoint_pods(endpoint, "store"),
            [
                {
                    "from": [{"podSelector": endpoint_pods(endpoint, *roles)}],
                    "ports": tcp_ports((MASTER_RPC_PORT, MASTER_RPC_PORT), (METADATA_PORT, METADATA_PORT)),
                }
            ],
        )
    return policies
