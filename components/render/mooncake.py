"""Every object of a Mooncake endpoint in one region, keyed by a stable part name."""

from __future__ import annotations

from typing import Any

from components import naming
from components.render.autoscaling import scaled_object
from components.render.classic import pod_disruption_budget
from components.render.kube import pod_identity_account
from components.render.kv_transfer import ColdTierTarget
from components.render.mooncake_canary import canary_backend, canary_view
from components.render.mooncake_groups import leader_worker_set, leaders_only, spans_nodes
from components.render.mooncake_roles import (
    cold_tier_staging,
    mooncake_of,
    prefill_headless_service,
    role_deployment,
    role_service,
)
from components.render.mooncake_store import config_map, master_service, master_stateful_set
from components.render.network_policy import network_policies
from components.render.placement import PlacedEndpoint
from components.render.proxy import PROXY_HEALTH_PATH, program_config_map, proxy_deployment, proxy_service
from components.render.route import route
from components.render.routing import pods_service
from components.spec.autoscaling import RoleAutoscaling


def cold_tier_target(endpoint: PlacedEndpoint, bucket: str) -> ColdTierTarget:
    """Where the endpoint's cold tier writes: its own prefix of the region's bucket."""
    return ColdTierTarget(
        bucket=bucket,
        region=endpoint.region,
        prefix=naming.kv_prefix(endpoint.name),
        staging_bytes=cold_tier_staging(endpoint),
    )


def kv_service_account(endpoint: PlacedEndpoint) -> dict[str, Any]:
    """The ServiceAccount the cold tier's writers run as (bound to the endpoint's IAM role)."""
    return pod_identity_account(naming.kv_service_account(endpoint.name), endpoint.namespace, endpoint.labels("store"))


def mooncake_objects(endpoint: PlacedEndpoint, cold: ColdTierTarget | None) -> dict[str, dict[str, Any]]:
    """The endpoint's set and its route; with a canary, the canary's whole set too (parts ``canary-*``),
    rendered by the same functions from the canary's view of the endpoint (``mooncake_canary.py``)."""
    objects = _set_objects(endpoint, cold, routed=True)
    if endpoint.spec.canary is not None:
        view = canary_view(endpoint)
        # The canary writes the cold tier under a prefix (and an IAM role) of its own: its engine
        # may lay KV out differently, so its objects never mix with the primary's.
        view_cold = cold_tier_target(view, cold.bucket) if cold is not None else None
        canary = _set_objects(view, view_cold, routed=False)
        objects.update({f"canary-{part}": manifest for part, manifest in canary.items()})
    return objects


def _set_objects(endpoint: PlacedEndpoint, cold: ColdTierTarget | None, routed: bool) -> dict[str, dict[str, Any]]:
    """One complete set (primary or canary view); ``routed``: with the endpoint's route."""
    mooncake = mooncake_of(endpoint)
    canary = canary_backend(endpoint) if endpoint.spec.canary is not None else None
    stopped = endpoint.spec.desired_state == "stopped"
    objects: dict[str, dict[str, Any]] = {}
    if cold is not None:
        objects["kv-account"] = kv_service_account(endpoint)
    if mooncake.store_enabled:
        objects["store-config"] = config_map(endpoint)
        objects["store-master"] = master_stateful_set(endpoint, replicas=0 if stopped else 1)
        objects["store-service"] = master_service(endpoint)
    if not mooncake.split:
        objects["deployment"] = role_deployment(endpoint, "server", cold)
        objects["service"] = role_service(endpoint, "server")
        objects["disruption-budget"] = pod_disruption_budget(endpoint, "server")
        if routed:
            objects["route"] = route(endpoint, canary_backend=canary)
    else:
        groups = {role: spans_nodes(endpoint, role) for role in ("prefill", "decode")}
        if groups["prefill"]:
            objects["prefill"] = leader_worker_set(endpoint, "prefill", cold)
        else:
            objects["prefill"] = role_deployment(endpoint, "prefill", cold)
        objects["prefill-service"] = prefill_headless_service(endpoint)
        objects["prefill-disruption-budget"] = pod_disruption_budget(endpoint, "prefill")
        if groups["decode"]:
            objects["decode"] = leader_worker_set(endpoint, "decode", cold)
        else:
            objects["decode"] = role_deployment(endpoint, "decode", cold)
        objects["decode-service"] = role_service(endpoint, "decode")
        objects["decode-disruption-budget"] = pod_disruption_budget(endpoint, "decode")
        for role in ("prefill", "decode"):
            # The proxy reaches a group through its leader, the one pod serving HTTP and bootstrap.
            objects[f"{role}-service"]["spec"]["selector"].update(leaders_only(endpoint, role))
        if endpoint.spec.routing is not None:
            # The decode pods the proxy chooses between (their leaders, as the decode Service's).
            objects["decode-pods-service"] = pods_service(endpoint, "decode", leaders_only(endpoint, "decode"))
        scaling = mooncake.autoscaling
        roles: tuple[tuple[naming.Role, RoleAutoscaling | None, str], ...] = (
            ("prefill", scaling.prefill, "Deployment"),
            ("decode", scaling.decode, "Deployment"),
        )
        for role, role_scaling, kind in roles:
            if scaling.enabled and role_scaling is not None:
                name = naming.object_name(endpoint.name, role)
                objects[f"{role}-autoscaler"] = scaled_object(
                    name,
                    endpoint.namespace,
                    endpoint.labels(role),
                    endpoint=endpoint.name,
                    role=role,
                    framework=endpoint.spec.framework,
                    min_replicas=role_scaling.min_replicas,
                    max_replicas=role_scaling.max_replicas,
                    metrics=role_scaling.parsed_metrics,
                    stopped=stopped,
                    target_kind=kind,
                    wake="proxy" if role_scaling.min_replicas == 0 else None,
                )
        objects["proxy-program"] = program_config_map(endpoint)
        objects["proxy"] = proxy_deployment(endpoint)
        objects["proxy-service"] = proxy_service(endpoint)
        objects["proxy-disruption-budget"] = pod_disruption_budget(endpoint, "proxy")
        if routed:
            proxy = naming.object_name(endpoint.name, "proxy")
            objects["route"] = route(endpoint, backend=proxy, health_path=PROXY_HEALTH_PATH, canary_backend=canary)
    objects.update(network_policies(endpoint))
    return objects
