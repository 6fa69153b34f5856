"""The stack's global front door (docs/global.md): one AWS Global Accelerator in front of every
region's shared ALB, so each endpoint has one address whatever region serves it.

Global Accelerator works at layer 4: its TCP listener forwards the routes' port to the ALBs,
which keep TLS, path routing and the canary weights. Each region is an endpoint group whose one
endpoint is the region's ALB and whose traffic dial (``global.regions.<r>.traffic_dial``) drains
or restores the region. Global Accelerator judges an ALB endpoint by the ALB's own health checks
(the endpoint group's health-check settings apply only to EC2 and Elastic IP endpoints), so a
region whose targets are all unhealthy leaves the rotation.

The ALB is made by the load balancer controller, not by Pulumi: it is looked up at deploy time by
the tags the controller puts on it, once every route of the region has its status (so the ALB
exists and one ``pulumi up`` can create the routes and then the endpoint group). The controller writes
that status right after CreateLoadBalancer, while the ALB is still ``provisioning``, and Global
Accelerator takes only an active endpoint ("A resource must be valid and active when you add it as an
endpoint", Developer Guide, "Endpoints for standard accelerators"), answering InvalidArgumentException
naming the ARN; terraform-provider-aws ``resourceEndpointGroupCreate`` (internal/service/globalaccelerator/
endpoint_group.go) sends CreateEndpointGroup once, and the ``aws_lb`` data source reads no state. So each
endpoint group retries that one error, bounded (:data:`ALB_ACTIVE_ATTEMPTS`), through an error hook
(components/platform/retries.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components import naming
from components.platform.load_balancer import CLUSTER_TAG
from components.platform.retries import Retry, retrying
from components.spec.front import ACCELERATOR, ROUTE53_LATENCY, FrontRegion, GlobalFront, listen_port
from components.spec.region import Region

API_REGION = "us-west-2"
"""Global Accelerator is global, but its API answers only in US West (Oregon) (CreateAccelerator,
Global Accelerator API Reference): the provider of every resource here is pinned to it."""
STACK_TAG = "ingress.k8s.aws/stack"
"""The controller tags an ingress group's ALB with the group's name (an explicit group: the name
alone; pkg/ingress/group.go GroupID.String of kubernetes-sigs/aws-load-balancer-controller)."""
PROTOCOL = "TCP"
ALB_ACTIVE_ATTEMPTS = 40
ALB_ACTIVE_DELAY_SECONDS = 15.0
"""Up to ten minutes for a new ALB to leave ``provisioning`` (it takes a few)."""
__all__ = ["ACCELERATOR", "API_REGION", "GlobalFrontArgs", "GlobalFrontDoor", "RegionFront", "global_address"]


def provider_name() -> str:
    return f"aws-global-{API_REGION}"


def accelerator_name(stack: str) -> str:
    """At most 64 characters of letters, digits, '.' and '-' (CreateAccelerator Name)."""
    return f"{naming.PROJECT}-{stack}"[:64].strip("-.")


def listener_ports(regions: Mapping[str, Region]) -> list[int]:
    """The routes' ports (validation holds every region of a front to the same one)."""
    return sorted({listen_port(region) for region in regions.values()})


def alb_tags(cluster_name: str) -> dict[str, str]:
    return {CLUSTER_TAG: cluster_name, STACK_TAG: naming.INGRESS_GROUP}


def endpoint_configuration(
    alb_arn: pulumi.Input[str], weight: int
) -> aws.globalaccelerator.EndpointGroupEndpointConfigurationArgs:
    # Internal ALBs always preserve the client address; said explicitly, internet-facing ones do too,
    # so the ALB's inbound CIDRs (the region's allowed_cidrs) apply to the real clients.
    return aws.globalaccelerator.EndpointGroupEndpointConfigurationArgs(
        endpoint_id=alb_arn, client_ip_preservation_enabled=True, weight=weight
    )


def alb_not_active(error: str) -> bool:
    """Global Accelerator's refusal of an ALB it cannot take yet: an InvalidArgumentException naming an
    ALB's ARN (terraform-provider-aws prefixes it "creating Global Accelerator Endpoint Group")."""
    return "InvalidArgumentException" in error and ":loadbalancer/app/" in error


def alb_active_retry(region: str) -> Retry:
    return Retry(
        waiting_for=f"the ALB of {region} to be active",
        matches=alb_not_active,
        attempts=ALB_ACTIVE_ATTEMPTS,
        delay_seconds=ALB_ACTIVE_DELAY_SECONDS,
        advice=f"see the ALB's state (aws elbv2 describe-load-balancers --region {region}) and the load "
        "balancer controller's events on the region's Ingresses, then run pulumi up again",
    )


@dataclass(frozen=True)
class RegionFront:
    """What the front needs of one region."""

    cluster_name: pulumi.Input[str]
    routes: Sequence[pulumi.Output[Any]]
    """Outputs that resolve once every route of the region has its status (the engine records)."""
    provider: aws.Provider
    """The region's own provider, for the ALB lookup."""
    endpoints: tuple[str, ...] = ()
    """The endpoints the region runs (an endpoint with a listener of its own has groups only in its regions)."""


@dataclass(frozen=True)
class GlobalFrontArgs:
    stack: str
    front: GlobalFront
    regions: Mapping[str, Region]
    served: Mapping[str, RegionFront]
    """Regions with at least one route, so an ALB; a region without one gets no endpoint group."""
    provider: aws.Provider | None
    """An AWS provider in ``API_REGION``, for the accelerator (latency records use the regions' own)."""


class GlobalFrontDoor(pulumi.ComponentResource):
    dns_name: pulumi.Output[str]
    """The accelerator's DNS name (``<id>.awsglobalaccelerator.com``), answering with its static addresses."""
    addresses: pulumi.Output[list[str]]

    def __init__(self, name: str, args: GlobalFrontArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-fleet:platform:GlobalFrontDoor", name, None, opts)
        self.endpoint_groups: dict[str, aws.globalaccelerator.EndpointGroup] = {}
        self.records: dict[str, aws.route53.Record] = {}
        if args.front.kind == ROUTE53_LATENCY:
            self._latency_records(name, args)
        else:
            self._accelerator(name, args)
        self.register_outputs({"dns_name": self.dns_name, "addresses": self.addresses})

    def _alb(self, region: str, served: RegionFront) -> pulumi.Output[aws.lb.GetLoadBalancerResult]:
        """The region's ALB, once every route of the region has its status (so the ALB exists)."""
        tags = pulumi.Output.all(served.cluster_name, *served.routes).apply(lambda values: alb_tags(values[0]))
        return aws.lb.get_load_balancer_output(
            tags=tags, region=region, opts=pulumi.InvokeOutputOptions(parent=self, provider=served.provider)
        )

    def _accelerator(self, name: str, args: GlobalFrontArgs) -> None:
        assert args.provider is not None, "an accelerator needs a provider in its API region"
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        accelerator = aws.globalaccelerator.Accelerator(
            f"{name}-accelerator",
            name=accelerator_name(args.stack),
            ip_address_type="IPV4",
            enabled=True,
            opts=child,
        )
        albs = {region: self._alb(region, served) for region, served in args.served.items()}
        shared = [region for region, served in args.served.items() if set(served.endpoints) - set(args.front.endpoints)]
        if shared or not args.front.endpoints:
            # The routes' port, for every endpoint without a listener of its own (each runs in every region).
            listener = _listener(f"{name}-listener", accelerator, listener_ports(args.regions), child)
            for region in shared:
                self.endpoint_groups[region] = self._group(
                    f"{name}-{region}", listener, region, albs[region].arn, args.front.region(region), child
                )
        for endpoint, own in args.front.endpoints.items():
            # One listener on the endpoint's own port, with groups only where it runs (docs/global.md).
            listener = _listener(f"{name}-{endpoint}-listener", accelerator, [own.port], child)
            for region, served in args.served.items():
                if endpoint not in served.endpoints:
                    continue
                self.endpoint_groups[endpoint_group_key(endpoint, region)] = self._group(
                    f"{name}-{endpoint}-at-{region}",
                    listener,
                    region,
                    albs[region].arn,
                    own.region(region, args.front),
                    child,
                    port_override=(own.port, listen_port(args.regions[region])),
                )
        self.dns_name = accelerator.dns_name
        self.addresses = accelerator.ip_sets.apply(
            lambda sets: sorted(address for ip_set in sets or [] for address in ip_set.ip_addresses or [])
        )

    def _group(
        self,
        resource_name: str,
        listener: aws.globalaccelerator.Listener,
        region: str,
        alb_arn: pulumi.Input[str],
        settings: FrontRegion,
        opts: pulumi.ResourceOptions,
        *,
        port_override: tuple[int, int] | None = None,
    ) -> aws.globalaccelerator.EndpointGroup:
        """An endpoint group whose one endpoint is the region's ALB; ``port_override`` (listener port,
        routes' port) forwards an endpoint's own port to the port the ALB listens on."""
        overrides = None
        if port_override is not None:
            overrides = [
                aws.globalaccelerator.EndpointGroupPortOverrideArgs(
                    listener_port=port_override[0], endpoint_port=port_override[1]
                )
            ]
        return aws.globalaccelerator.EndpointGroup(
            resource_name,
            listener_arn=listener.arn,
            endpoint_group_region=region,
            traffic_dial_percentage=float(settings.traffic_dial),
            endpoint_configurations=[endpoint_configuration(alb_arn, settings.weight)],
            port_overrides=overrides,
            opts=pulumi.ResourceOptions.merge(opts, retrying(f"{resource_name}-alb-active", alb_active_retry(region))),
        )

    def _latency_records(self, name: str, args: GlobalFrontArgs) -> None:
        """One latency record per serving region, an alias of its ALB that Route 53 answers with only
        while the ALB has a healthy target (evaluate_target_health). A drained region has no record."""
        front = args.front
        assert front.zone_id is not None  # validated
        assert front.record_name is not None
        for region, served in args.served.items():
            if front.region(region).traffic_dial == 0:
                continue
            alb = self._alb(region, served)
            self.records[region] = aws.route53.Record(
                f"{name}-{region}",
                zone_id=front.zone_id,
                name=front.record_name,
                type="A",
                set_identifier=region,
                latency_routing_policies=[aws.route53.RecordLatencyRoutingPolicyArgs(region=region)],
                aliases=[
                    aws.route53.RecordAliasArgs(name=alb.dns_name, zone_id=alb.zone_id, evaluate_target_health=True)
                ],
                opts=pulumi.ResourceOptions(parent=self, provider=served.provider),
            )
        self.dns_name = pulumi.Output.from_input(front.record_name)
        self.addresses = pulumi.Output.from_input([])


def _listener(
    resource_name: str,
    accelerator: aws.globalaccelerator.Accelerator,
    ports: Sequence[int],
    opts: pulumi.ResourceOptions,
) -> aws.globalaccelerator.Listener:
    """A TCP listener of the accelerator on ``ports``, each a range of one."""
    return aws.globalaccelerator.Listener(
        resource_name,
        accelerator_arn=accelerator.arn,
        protocol=PROTOCOL,
        client_affinity="NONE",
        port_ranges=[aws.globalaccelerator.ListenerPortRangeArgs(from_port=port, to_port=port) for port in ports],
        opts=opts,
    )


def endpoint_group_key(endpoint: str, region: str) -> str:
    """``GlobalFrontDoor.endpoint_groups`` key of an endpoint's own group in a region (a shared one's is the region)."""
    return f"{endpoint}@{region}"


def global_address(endpoint: str, region: Region, dns_name: str, port: int | None = None) -> str:
    """The endpoint's address through the front: the routes' scheme and path on the accelerator's name,
    and the endpoint's own listener port when it has one."""
    scheme = "https" if listen_port(region) == 443 else "http"
    host = dns_name if port is None else f"{dns_name}:{port}"
    return f"{scheme}://{host}{naming.route_path(endpoint)}"
