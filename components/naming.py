"""Every derived name and label, in one place (docs/design.md, decision 3).

Selectors depend only on the endpoint name and the role, so no ordinary edit
(replicas, image, weight, store sizes) can change them and replace a workload.
"""

from __future__ import annotations

from typing import Literal

PROJECT = "inference-fleet"
MANAGED_BY = "pulumi"

Role = Literal["server", "prefill", "decode", "store", "proxy", "gate", "canary", "route", "network-policy"]
"""The app.kubernetes.io/component of an endpoint's object: a workload role, its route or its policies."""

# Suffixes of the Kubernetes objects an endpoint owns, and the longest name each
# object kind allows. A StatefulSet's name ends up inside the pod label
# controller-revision-hash ("<name>-<10-char hash>"), which must fit in 63
# characters, so StatefulSet names are kept to 52.
_NAME_LIMITS: dict[str, int] = {
    "": 63,  # Service and Deployment of a classic endpoint
    "-canary": 63,
    # A Deployment now; kept at 52, the StatefulSet limit of when prefill was one, so no name valid then
    # is refused or renamed (and a prefill spanning nodes names its groups' worker StatefulSets).
    "-prefill": 52,
    "-decode": 63,
    "-proxy": 63,
    "-gate": 63,  # a classic endpoint's gate in front of a server that may scale to zero, or that routes
    "-pods": 63,  # the headless Service of a routed classic endpoint's server pods
    "-decode-pods": 63,  # the headless Service of a routed split endpoint's decode pods
    "-store": 52,  # StatefulSet of the Mooncake master
    "-mooncake": 63,  # ConfigMap with mooncake.json
}

MAX_ENDPOINT_NAME_LENGTH = min(limit - len(suffix) for suffix, limit in _NAME_LIMITS.items())
"""44: '<name>-prefill' must stay within the 52 characters of a StatefulSet name."""

CANARY_SUFFIX = "-canary"
MAX_CANARY_ENDPOINT_NAME_LENGTH = min(
    limit - len(CANARY_SUFFIX) - len(suffix) for suffix, limit in _NAME_LIMITS.items() if suffix != CANARY_SUFFIX
)
"""37: a Mooncake endpoint's canary set is named '<name>-canary-*', and '<name>-canary-prefill' must stay
within the 52 characters of a StatefulSet name. Only endpoints with such a canary are held to it."""


def canary_set_name(endpoint: str) -> str:
    """The name a Mooncake endpoint's canary set is rendered under (``<name>-canary``): each of its
    objects is that name plus its role's suffix, and its pods' ``app.kubernetes.io/name`` is that name,
    so no selector of the primary (Services, PDBs, NetworkPolicies, autoscalers) takes a canary pod, and
    its series carry ``endpoint="<name>-canary"``."""
    return f"{endpoint}{CANARY_SUFFIX}"


def object_name(endpoint: str, role: Role) -> str:
    """The Kubernetes name of an endpoint's object for ``role`` (the classic server has none)."""
    return endpoint if role == "server" else f"{endpoint}-{role}"


def mooncake_config_name(endpoint: str) -> str:
    """The ConfigMap holding an endpoint's mooncake.json."""
    return f"{endpoint}-mooncake"


def selector_labels(endpoint: str, role: Role) -> dict[str, str]:
    """Labels a role's pods are selected by; only the name and role, never a mutable field."""
    return {
        "app.kubernetes.io/name": endpoint,
        "app.kubernetes.io/component": role,
    }


def fleet_labels() -> dict[str, str]:
    """Labels of everything the fleet renders, shared objects (namespaces) included."""
    return {"app.kubernetes.io/part-of": PROJECT, "app.kubernetes.io/managed-by": MANAGED_BY}


def common_labels(endpoint: str, role: Role) -> dict[str, str]:
    return {**selector_labels(endpoint, role), **fleet_labels()}


def workload_resource_name(region: str, object_name: str) -> str:
    """Pulumi name of a region's Kubernetes object (endpoint names are unique in a stack)."""
    return f"{region}-{object_name}"


INGRESS_CLASS = "alb"
"""The IngressClass the load balancer controller's chart creates."""
INGRESS_GROUP = PROJECT
"""Every route of a region joins this ingress group: one shared ALB per region."""
INGRESS_PATH_PREFIX = "/inference"
POD_READINESS_GATE_LABEL = ("elbv2.k8s.aws/pod-readiness-gate-inject", "enabled")
"""The namespace label under which the load balancer controller's pod webhook (mpod.elbv2.k8s.aws)
gives pods behind a target group a readiness gate on their target health, so a rollout waits for
the ALB to pass new pods' health checks before it stops old ones. The chart's webhook selects
namespaces by exactly this key and value: helm/aws-load-balancer-controller/templates/webhook.yaml
(and config/webhook/pod_mutator_patch.yaml) of kubernetes-sigs/aws-load-balancer-controller v3.4.2;
pkg/inject/pod_readiness/pod_readiness_gate.go is the mutator it calls."""


def route_path(endpoint: str) -> str:
    """Where the region's shared load balancer serves the endpoint."""
    return f"{INGRESS_PATH_PREFIX}/{endpoint}"


def fleet_name(stack: str) -> str:
    return f"{PROJECT}-{stack}"


def aws_provider_name(region: str) -> str:
    """Pulumi name of the explicit AWS provider of a region."""
    return f"aws-{region}"


def aws_tags(stack: str) -> dict[str, str]:
    """Tags every AWS resource of the stack carries (through the providers' default_tags)."""
    return {"inference-fleet:stack": stack, "managed-by": MANAGED_BY}


# Regional platform (AWS side). Pulumi names carry the region: URNs do not include
# the parent's name, so two regions' children of the same type need distinct names.


def platform_name(region: str, *parts: str) -> str:
    """Pulumi name of a regional platform resource: ``<region>-<part>-...``."""
    return "-".join((region, *parts))


def cluster_name(stack: str, region: str) -> str:
    """The EKS cluster's AWS name (at most 100 characters; a stack name is short)."""
    return f"{PROJECT}-{stack}-{region}"


def access_entry_key(principal_arn: str) -> str:
    """The key (and Pulumi name part) of an IAM principal's EKS access entry: ``<account>-<role|user>-<name>``.

    Derived from the ARN alone, so adding or removing another principal never renames it. The
    path is left out: IAM names are unique in an account whatever their path.
    """
    account, resource = principal_arn.split(":")[4], principal_arn.split(":", 5)[5]
    kind, _, path_and_name = resource.partition("/")
    return f"{account}-{kind}-{path_and_name.rsplit('/', 1)[-1]}"


def access_entry_name(region: str, principal_arn: str) -> str:
    """Pulumi name of an IAM principal's EKS access entry: ``<region>-access-<key>``."""
    return platform_name(region, "access", access_entry_key(principal_arn))


def access_policy_association_name(region: str, principal_arn: str, association: str) -> str:
    """Pulumi name of an access policy association of that entry: ``<region>-access-<key>-<association>``."""
    return platform_name(region, "access", access_entry_key(principal_arn), association)


def node_group_name(stack: str, region: str, group: str) -> str:
    """The managed node group's AWS name."""
    return f"{cluster_name(stack, region)}-{group}"


def cold_tier_bucket_name(stack: str, region: str, account_id: str) -> str:
    """The region's KV cold-tier bucket: derived, never typed; the account id makes it globally unique."""
    return f"{PROJECT}-{stack}-kv-{account_id}-{region}"


KV_PREFIX = "mooncake-kv"
"""Every KV object of the cold tier lives under this prefix, then ``<endpoint>/``."""


def kv_prefix(endpoint: str) -> str:
    return f"{KV_PREFIX}/{endpoint}/"


def kv_service_account(endpoint: str) -> str:
    """The ServiceAccount of an endpoint that writes the cold tier, bound to its own IAM role."""
    return f"{endpoint}-kv"


WORKLOAD_SERVICE_ACCOUNT = "inference-workload"
"""The ServiceAccount inference pods run as, in each namespace; bound to the workload IAM role."""


def aws_partition(region: str) -> str:
    """The ARN partition of a region (managed policy ARNs differ in China and GovCloud)."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


# The region's metrics pipeline (docs/metrics.md): where the autoscaling layer and the dashboard
# query, and the labels every scraped series of an inference pod carries, whatever its exporter.
METRICS_NAMESPACE = "inference-fleet-metrics"
PROMETHEUS_SERVICE = "prometheus"
PROMETHEUS_PORT = 9090
SERIES_ENDPOINT_LABEL = "endpoint"
"""Series label holding the pod's ``app.kubernetes.io/name`` (the endpoint; a canary's is its own name)."""
SERIES_ROLE_LABEL = "role"
"""Series label holding the pod's ``app.kubernetes.io/component`` (server, prefill, decode, canary, ...)."""


METRICS_PORT_ANNOTATION = "inference-fleet/metrics-port"
"""On a server pod whose framework serves metrics on a port other than the server's (Triton): that port."""
SCRAPER_LABELS = {"app.kubernetes.io/name": "prometheus", "app.kubernetes.io/component": "server"}
"""The region's Prometheus server pods (prometheus-community/prometheus chart's server matchLabels),
the only pods NetworkPolicies let reach an inference pod's metrics port."""


DASHBOARD_LABEL = ("grafana_dashboard", "1")
"""A ConfigMap in ``METRICS_NAMESPACE`` with this label is loaded by the region's Grafana as dashboards
(each key a dashboard's JSON)."""
DASHBOARD_DATASOURCE_UID = "prometheus"
"""The uid of the region's Prometheus as a Grafana data source, for dashboards to name."""


def prometheus_query_url() -> str:
    """The in-cluster Prometheus the region's scalers and dashboards query."""
    return f"http://{PROMETHEUS_SERVICE}.{METRICS_NAMESPACE}.svc.cluster.local:{PROMETHEUS_PORT}"
