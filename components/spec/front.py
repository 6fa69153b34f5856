"""The stack's global front door (``inference-fleet:global``): one address for every endpoint
across the stack's regions, with a traffic dial per region (docs/global.md).

The fields are checked by the model; what needs the rest of the stack (the regions it names,
where the endpoints run, the routes' ports) by :func:`check_front`, whose problems carry the
path of the field to change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import Field

from components.spec.base import SpecModel
from components.spec.errors import Problem, dotted
from components.spec.region import Region

KEY = "global"
"""The config key, ``inference-fleet:global`` (a Python keyword, so the model field is aliased)."""

ACCELERATOR = "global-accelerator"
ROUTE53_LATENCY = "route53-latency"
DEFAULT_WEIGHT = 128
"""Global Accelerator's default endpoint weight (EndpointConfiguration.Weight: 0-255, default 128)."""


class FrontRegion(SpecModel):
    """How much of the traffic Global Accelerator already sends to this region it lets through."""

    traffic_dial: int = Field(
        100,
        ge=0,
        le=100,
        description="Percent of the traffic routed to this region that it serves (default 100). The endpoint "
        "group's traffic dial: 0 drains it from normal routing, but Global Accelerator's failover ignores the "
        "dial, so a drained region still takes traffic while no other region has a healthy endpoint.",
    )
    weight: int = Field(
        DEFAULT_WEIGHT,
        ge=0,
        le=255,
        description="Weight of the region's ALB in its endpoint group (0-255, default 128). With one ALB per "
        "region it only matters as 0 or not: 0 keeps the region out of normal routing and of failover (unless "
        "no region has a healthy endpoint of weight above 0: then Global Accelerator fails open); the dial "
        "moves traffic between regions.",
    )


class FrontEndpoint(SpecModel):
    """An endpoint with a listener of its own on the accelerator, served only by the regions it runs in."""

    port: int = Field(
        ...,
        ge=1,
        le=65535,
        description="The accelerator port of this endpoint's own listener (e.g. 8443): its endpoint groups are "
        "only in the regions the endpoint runs in, each forwarding this port to the region's routes (443, or 80). "
        "Lets an endpoint with target_regions have a global address; unique per endpoint, not the routes' port.",
    )
    regions: dict[str, FrontRegion] = Field(
        default_factory=dict,
        description="Per region of this endpoint: the dial and weight of its endpoint group there, which drain "
        "or restore this endpoint alone in the region. A region not listed takes global.regions.<r>.",
    )

    def region(self, name: str, front: GlobalFront) -> FrontRegion:
        return self.regions.get(name) or front.region(name)


class GlobalFront(SpecModel):
    """One address for every endpoint in every region of the stack."""

    enabled: bool = Field(False, description="Create the global front door (default false).")
    kind: Literal["global-accelerator", "route53-latency"] = Field(
        "global-accelerator",
        description="global-accelerator (default): static anycast addresses in front of every region's ALB. "
        "route53-latency: a latency record per region in your hosted zone (zone_id, record_name), aliased to "
        "the region's ALB and answered only while the ALB is healthy.",
    )
    zone_id: str | None = Field(
        None,
        pattern=r"^Z[A-Z0-9]{1,31}$",
        description="route53-latency only: the Route 53 hosted zone holding record_name (Z0123456789ABCDEFGHIJ).",
    )
    record_name: str | None = Field(
        None,
        pattern=r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$",
        description="route53-latency only: the DNS name clients call (e.g. inference.example.com), in zone_id's zone.",
    )
    regions: dict[str, FrontRegion] = Field(
        default_factory=dict,
        description="Per region of the stack: its traffic dial and weight. A region not listed serves at dial 100.",
    )
    endpoints: dict[str, FrontEndpoint] = Field(
        default_factory=dict,
        description="global-accelerator only: endpoints with a listener of their own (port), served only by the "
        "regions they run in. The other endpoints share the routes' port and must run in every region.",
    )

    def region(self, name: str) -> FrontRegion:
        return self.regions.get(name) or FrontRegion()

    def serving(self, regions: Sequence[str]) -> list[str]:
        """The regions whose dial lets traffic through."""
        return [name for name in regions if self.region(name).traffic_dial > 0 and self.region(name).weight > 0]


def listen_port(region: Region) -> int:
    """The port the region's routes listen on (components/render/route.py): 443 with a certificate, else 80."""
    return 443 if region.ingress.certificate_arn is not None else 80


def check_front(
    front: GlobalFront, regions: Mapping[str, Region], target_regions: Mapping[str, Sequence[str] | None]
) -> list[Problem]:
    """The rules that need the whole stack. Names are checked whether or not the front is enabled;
    the rest only when it is."""
    problems = [
        Problem(dotted([KEY, "regions", name]), f"is not a region of this stack (regions: {', '.join(regions)})")
        for name in front.regions
        if name not in regions
    ]
    if not front.enabled:
        return problems
    if front.kind == ROUTE53_LATENCY:
        problems += _route53_problems(front)
    elif front.zone_id is not None or front.record_name is not None:
        key = "zone_id" if front.zone_id is not None else "record_name"
        problems.append(Problem(dotted([KEY, key]), "is for kind route53-latency only: remove it"))
    if regions and not front.serving(list(regions)):
        problems.append(
            Problem(
                dotted([KEY, "regions"]),
                "drains every region (traffic_dial 0 or weight 0 everywhere): at least one region must serve",
            )
        )
    ports = {name: listen_port(region) for name, region in regions.items()}
    if len(set(ports.values())) > 1:
        https = sorted(name for name, port in ports.items() if port == 443)
        for name, port in ports.items():
            if port == 80:
                problems.append(
                    Problem(
                        dotted(["regions", name, "ingress", "certificate_arn"]),
                        f"is missing while {', '.join(https)} route HTTPS on 443: the global address forwards "
                        "one port to every region, so every region's ingress needs a certificate, or none",
                    )
                )
    for endpoint, targets in target_regions.items():
        missing = [name for name in regions if targets is not None and name not in targets]
        if missing and endpoint not in front.endpoints:
            problems.append(
                Problem(
                    dotted(["endpoints", endpoint, "target_regions"]),
                    f"leaves out {', '.join(missing)}: on the shared listener every endpoint serves every region "
                    "(the global address would send its clients to a region that answers 404 while healthy); "
                    f"give it a listener of its own (global.endpoints.{endpoint}.port) served only by its regions, "
                    "remove target_regions, or disable global",
                )
            )
    return problems + _endpoint_listener_problems(front, regions, target_regions, set(ports.values()))


def endpoint_regions(
    endpoint: str, regions: Sequence[str], target_regions: Mapping[str, Sequence[str] | None]
) -> list[str]:
    """The regions of the stack an endpoint runs in (all of them without target_regions)."""
    targets = target_regions.get(endpoint)
    return [name for name in regions if targets is None or name in targets]


def _endpoint_listener_problems(
    front: GlobalFront,
    regions: Mapping[str, Region],
    target_regions: Mapping[str, Sequence[str] | None],
    route_ports: set[int],
) -> list[Problem]:
    """Endpoints with a listener of their own: of the stack, on the accelerator, each on a port of its
    own (an accelerator's listeners may not overlap: CreateListener PortRanges), with a dial and weight
    only for its regions, and at least one of them serving."""
    problems: list[Problem] = []
    if front.endpoints and front.kind == ROUTE53_LATENCY:
        return [Problem(dotted([KEY, "endpoints"]), "is for kind global-accelerator only: remove it")]
    owners: dict[int, str] = {}
    for endpoint, settings in front.endpoints.items():
        path = [KEY, "endpoints", endpoint]
        if endpoint not in target_regions:
            problems.append(Problem(dotted(path), f"is not an endpoint of this stack ({', '.join(target_regions)})"))
            continue
        if settings.port in route_ports:
            problems.append(
                Problem(dotted([*path, "port"]), f"is {settings.port}, the shared listener's: choose another port")
            )
        elif settings.port in owners:
            problems.append(
                Problem(
                    dotted([*path, "port"]), f"is {settings.port}, already {owners[settings.port]}'s: one per endpoint"
                )
            )
        owners.setdefault(settings.port, endpoint)
        served = endpoint_regions(endpoint, list(regions), target_regions)
        for name in settings.regions:
            if name not in served:
                problems.append(
                    Problem(
                        dotted([*path, "regions", name]), f"is not a region {endpoint} runs in ({', '.join(served)})"
                    )
                )
        dials = {name: settings.region(name, front) for name in served}
        if served and not [name for name, dial in dials.items() if dial.traffic_dial > 0 and dial.weight > 0]:
            problems.append(
                Problem(
                    dotted([*path, "regions"]),
                    f"drains every region of {endpoint} (traffic_dial 0 or weight 0 everywhere): one must serve",
                )
            )
    return problems


def _route53_problems(front: GlobalFront) -> list[Problem]:
    """Latency records either answer for a region or not: a dial is 0 (no record) or 100, and the
    endpoint weight of an accelerator means nothing there."""
    problems = [
        Problem(dotted([KEY, key]), f"is required with kind route53-latency: {what}")
        for key, what in (("zone_id", "the hosted zone of the name"), ("record_name", "the name clients call"))
        if getattr(front, key) is None
    ]
    for name, region in front.regions.items():
        if region.traffic_dial not in (0, 100):
            problems.append(
                Problem(
                    dotted([KEY, "regions", name, "traffic_dial"]),
                    f"is {region.traffic_dial}: route53-latency records serve a region or not, so 0 or 100",
                )
            )
        if region.weight != DEFAULT_WEIGHT:
            problems.append(
                Problem(dotted([KEY, "regions", name, "weight"]), "is for kind global-accelerator only: remove it")
            )
    return problems
