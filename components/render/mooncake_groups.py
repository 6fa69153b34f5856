"""A Mooncake role that spans nodes (``mooncake.roles.<role>.nodes`` > 1): each instance is a group of
that many pods, one per node of the role's EFA group, run by LeaderWorkerSet (config/pins.yaml
charts.lws) and started with vLLM's own multi-node launch.

vLLM 0.33.0 documents two launches across nodes (docs/serving/parallelism_scaling.md): a Ray cluster,
or its native multiprocessing one, ``--nnodes N --node-rank R --master-addr <leader>`` on every node
and ``--headless`` on all but the first, which is also how its LWS guide deploys
(docs/deployment/frameworks/lws.md, "Multiprocessing (default)"). The Mooncake connector supports the
native one by design: with ``nnodes`` > 1 every rank registers with the bootstrap server at the
model-parallel master, the leader (``get_mooncake_bootstrap_addr``,
vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py), so a decoder's one
bootstrap address reaches every rank of the group. Ray is "an optional dependency" of the release
(the same docs; requirements/common.txt and cuda.txt do not list it) and would add a second scheduler
inside the pods; the native launch needs nothing but the flags.

The nodes are pipeline stages, as the docs advise for a model larger than one node: tensor
parallelism ``gpu_count`` within each node (NVLink), pipeline parallelism ``nodes`` across them.

LeaderWorkerSet v0.10.0 names the leader of group ``i`` ``<lws>-<i>`` and its workers
``<lws>-<i>-<j>``, labels every pod with its worker index (0 for the leader), and sets
``LWS_LEADER_ADDRESS`` (the leader's DNS name) and ``LWS_WORKER_INDEX`` in every container
(pkg/utils/pod/pod_utils.go AddLWSVariables), which the arguments below take through Kubernetes'
``$(VAR)`` expansion. ``subdomainPolicy: UniquePerReplica`` gives each group a headless Service of its
own (``<lws>-<i>``) for that DNS name, instead of one named ``<lws>`` over every pod: that name is the
prefill role's own headless Service, which selects leaders only, so the proxy finds leaders only.
"""

from __future__ import annotations

from typing import Any

from components import naming
from components.render.kube import metadata
from components.render.kv_transfer import ColdTierTarget, MooncakeRole
from components.render.mooncake_roles import role_replicas, role_template
from components.render.placement import PlacedEndpoint
from components.render.pods import PORT_NAME

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
"""The label LWS puts on every pod of a group: "0" on the leader (api/leaderworkerset/v1)."""
LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"
WORKER_INDEX = "$(LWS_WORKER_INDEX)"


def spans_nodes(endpoint: PlacedEndpoint, role: str) -> bool:
    return endpoint.spec.nodes(role) > 1


def leaders_only(endpoint: PlacedEndpoint, role: str) -> dict[str, str]:
    """Extra selector labels of a Service that must reach a role's leaders only (the servers that
    answer HTTP and hold the group's bootstrap server), none for a role of single pods."""
    return {WORKER_INDEX_LABEL: "0"} if spans_nodes(endpoint, role) else {}


def launch_args(nodes: int, leader: bool) -> list[str]:
    """The multi-node flags of one pod of a group: the leader is rank 0 and serves the API; the
    workers run their ranks headless."""
    rank = "0" if leader else WORKER_INDEX
    args = ["--pipeline-parallel-size", str(nodes), "--nnodes", str(nodes), "--node-rank", rank]
    args += ["--master-addr", LEADER_ADDRESS]
    return args if leader else [*args, "--headless"]


def _worker(template: dict[str, Any], nodes: int) -> dict[str, Any]:
    """A worker serves no HTTP (``--headless``): no server port, no HTTP probes."""
    container = template["spec"]["containers"][0]
    container["args"] = [*container["args"], *launch_args(nodes, leader=False)]
    container["ports"] = [port for port in container["ports"] if port["name"] != PORT_NAME]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        container.pop(probe, None)
    return template


def leader_worker_set(endpoint: PlacedEndpoint, role: MooncakeRole, cold: ColdTierTarget | None) -> dict[str, Any]:
    """``role``'s instances as groups of ``nodes`` pods (``<name>-<role>``)."""
    nodes = endpoint.spec.nodes(role)
    leader = role_template(endpoint, role, cold)
    leader["spec"]["containers"][0]["args"] += launch_args(nodes, leader=True)
    worker = _worker(role_template(endpoint, role, cold), nodes)
    spec: dict[str, Any] = {}
    replicas = role_replicas(endpoint, role)
    assert replicas is not None  # a group role has no autoscaler (validated)
    spec["replicas"] = replicas
    spec["networkConfig"] = {"subdomainPolicy": "UniquePerReplica"}
    # As the Deployments do: a new group starts before an old one stops, so a role of one group keeps
    # serving while it rolls. LWS v0.10.0 defaults to maxSurge 0 and maxUnavailable 1 (its CRD,
    # config/lws-0.10.0-crds.yaml, rollingUpdateConfiguration), which rolls a one-group role as an
    # outage; maxUnavailable 0 is allowed with a surge. The roll needs one more group's nodes.
    spec["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0},
    }
    spec["leaderWorkerTemplate"] = {
        "size": nodes,
        # A rank that dies takes the group's collective with it: restart the whole group.
        "restartPolicy": "RecreateGroupOnPodRestart",
        "leaderTemplate": leader,
        "workerTemplate": worker,
    }
    name = naming.object_name(endpoint.name, role)
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": metadata(name, endpoint.namespace, endpoint.labels(role)),
        "spec": spec,
    }
