"""What an endpoint's ``routing`` renders (components/spec/routing.py): the front's ``--routing MODE`` and
the headless Service whose name resolves to the pods it chooses between, ``<name>-decode-pods`` for a split
endpoint's proxy (``--decode-pods``) and ``<name>-pods`` for a classic endpoint's gate (``--forward-pods``).

The front resolves that name at every refresh and probes each address on the port its URL names
(front/watch.py ``Pods``), so the URL carries the pods' own container port, not a Service port: a headless
Service forwards nothing, its name only lists the ready pods. Not-ready addresses are not published, as for
the prefill Service (components/render/mooncake_roles.py ``prefill_headless_service``): a terminating pod
leaves the name at once, so the front stops choosing it during its preStop. Without ``routing`` nothing
here is rendered and the endpoint is what it was.

A role at zero (``min_replicas: 0``) leaves the name empty, and ``pulumi up`` does not wait on it: the
Kubernetes provider awaits no pods behind a headless Service (provider/pkg/await/service.go at the pinned
provider, ``shouldWaitForPods``: false for ``clusterIP: None``), as it awaits none behind the prefill one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from components import naming
from components.render.kube import metadata
from components.render.placement import PlacedEndpoint
from components.render.pods import PORT_NAME

ChosenRole = Literal["server", "decode"]
"""The role whose pods a front chooses itself: a classic endpoint's server (the gate), a split one's decode
(the proxy; it finds the prefill pods through their own headless Service already)."""
PODS_FLAG: dict[ChosenRole, str] = {"server": "--forward-pods", "decode": "--decode-pods"}
"""front/serve.py: the URL of the pods the gate and the proxy choose between."""


def pods_service_name(endpoint: PlacedEndpoint, role: ChosenRole) -> str:
    """``<name>-pods`` (the classic server's object is the endpoint's name), ``<name>-decode-pods``."""
    return f"{naming.object_name(endpoint.name, role)}-pods"


def pods_url(endpoint: PlacedEndpoint, role: ChosenRole) -> str:
    """The headless Service's name, with the port the role's servers listen on (the endpoint's ``port``)."""
    return f"http://{pods_service_name(endpoint, role)}.{endpoint.namespace}.svc:{endpoint.spec.port}"


def routing_args(endpoint: PlacedEndpoint, role: ChosenRole) -> list[str]:
    """``--routing MODE`` and the pods' URL, or nothing for an endpoint without ``routing``."""
    mode = endpoint.spec.routing
    if mode is None:
        return []
    return ["--routing", mode, PODS_FLAG[role], pods_url(endpoint, role)]


def pods_service(endpoint: PlacedEndpoint, role: ChosenRole, leaders: Mapping[str, str]) -> dict[str, Any]:
    """The headless Service of ``role``'s serving pods: ``leaders`` adds the selector labels of a role
    spanning nodes (its leaders alone serve HTTP: components/render/mooncake_groups.py ``leaders_only``)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(pods_service_name(endpoint, role), endpoint.namespace, endpoint.labels(role)),
        "spec": {
            "clusterIP": "None",
            "selector": {**naming.selector_labels(endpoint.name, role), **leaders},
            "ports": [{"name": PORT_NAME, "port": endpoint.spec.port, "targetPort": PORT_NAME, "protocol": "TCP"}],
        },
    }
