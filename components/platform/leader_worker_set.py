"""LeaderWorkerSet's controller, in a region where a Mooncake role spans nodes
(components/render/mooncake_groups.py): its CRDs, applied by the program, and its chart
(config/pins.yaml charts.lws), which runs the controller and its webhooks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import naming
from components.catalog import pins
from components.platform.addons import helm_release, vendored_crds

NAMESPACE = "lws-system"
"""Where the vendored CRDs' conversion webhook points (service lws-webhook-service, the name the chart
gives it: charts/lws/templates/webhook/service.yaml)."""


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
