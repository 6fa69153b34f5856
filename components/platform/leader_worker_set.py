"""LeaderWorkerSet's controller, in a region where a Mooncake role spans nodes
(components/render/mooncake_groups.py): its CRDs, applied by the program, and its chart
(config/pins.yaml charts.lws), which runs the controller and its webhooks.

The release is ready before the webhooks serve: the manager's readiness is a plain ping
(cmd/main.go ``setupHealthzAndReadyzCheck``: ``healthz.Ping``), while it registers its webhooks only
once its own certificates are generated (``setupControllers`` waits on ``certsReady``), and the
chart's webhooks fail closed (charts/lws/templates/webhook/webhook.yaml: ``failurePolicy: Fail``),
all at kubernetes-sigs/lws v0.10.0. pulumi-kubernetes retries a create only on NotFound/NoMatch, so
the first LeaderWorkerSet of a region would fail the run with the API server's "failed calling
webhook". Each LeaderWorkerSet retries exactly that error, bounded (:func:`webhook_retry`): its
create is the check that the webhooks answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import naming
from components.catalog import pins
from components.platform.addons import helm_release, vendored_crds
from components.platform.retries import Retry

NAMESPACE = "lws-system"
"""Where the vendored CRDs' conversion webhook points (service lws-webhook-service, the name the chart
gives it: charts/lws/templates/webhook/service.yaml)."""
WEBHOOK_SERVICE = "lws-webhook-service"
WEBHOOKS = ("mleaderworkerset.kb.io", "vleaderworkerset.kb.io")
"""The chart's mutating and validating webhooks of LeaderWorkerSets (charts/lws/templates/webhook/webhook.yaml)."""
WEBHOOK_ATTEMPTS = 20
WEBHOOK_DELAY_SECONDS = 15.0
"""Up to five minutes for the manager to write its certificates and serve (it takes seconds)."""


def webhook_not_serving(error: str) -> bool:
    """The API server's refusal while LWS's webhooks do not answer yet: ``failed calling webhook "<name>"``
    (k8s.io/apiserver pkg/admission/plugin/webhook/errors ``ErrCallingWebhook``) for one of the
    chart's webhooks, or a call to the webhook service failing (its CRDs' conversion webhook too)."""
    calling = "failed calling webhook" in error and any(f'"{name}"' in error for name in WEBHOOKS)
    return calling or f"{WEBHOOK_SERVICE}.{NAMESPACE}.svc" in error


def webhook_retry(region: str) -> Retry:
    return Retry(
        waiting_for=f"LeaderWorkerSet's webhooks in {region} to answer",
        matches=webhook_not_serving,
        attempts=WEBHOOK_ATTEMPTS,
        delay_seconds=WEBHOOK_DELAY_SECONDS,
        advice=f"see the lws-controller-manager pods' logs in {NAMESPACE} (kubectl -n {NAMESPACE} logs "
        "deploy/lws-controller-manager) for the certificate setup, then run pulumi up again",
    )


def lws_values() -> dict[str, Any]:
    """The chart's values.yaml points the manager image at tag ``main``, pulled Always; the release's
    own tag instead (the chart's appVersion), pulled once."""
    return {"image": {"manager": {"tag": f"v{pins().charts.lws.version}", "pullPolicy": "IfNotPresent"}}}


@dataclass(frozen=True)
class LeaderWorkerSetControllerArgs:
    region: str
    kubernetes: k8s.Provider
    addons: pulumi.Resource
    crds_only: bool = False
    """The controller runs already (``existing_cluster.addons.lws: crds``): its CRDs only."""


class LeaderWorkerSetController(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: LeaderWorkerSetControllerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("inference-fleet:platform:LeaderWorkerSetController", name, None, opts)
        region = args.region
        crds = vendored_crds(region, "lws", pins().charts.lws, self, args.kubernetes)
        if args.crds_only:
            self.register_outputs({})
            return
        namespace = k8s.core.v1.Namespace(
            naming.platform_name(region, "lws-namespace"),
            metadata={"name": NAMESPACE, "labels": naming.fleet_labels()},
            opts=pulumi.ResourceOptions(parent=self, provider=args.kubernetes),
        )
        helm_release(
            naming.platform_name(region, "lws"),
            pins().charts.lws,
            lws_values(),
            NAMESPACE,
            pulumi.ResourceOptions(parent=self, provider=args.kubernetes, depends_on=[args.addons, namespace, *crds]),
            skip_crds=True,
        )
        self.register_outputs({})
