"""The policy rule of the global front door (docs/global.md): an accelerator listener is always
internet-facing, so it opens only 443 and reaches only routes that listen on HTTPS."""

from __future__ import annotations

import json

import pytest

from policy.rules import RULES, Resource, check

RULE = "global-listeners-need-tls"
LISTENER = "aws:globalaccelerator/listener:Listener"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"


def listener(protocol: str = "TCP", *ports: tuple[int, int]) -> Resource:
    ranges = [{"fromPort": low, "toPort": high} for low, high in ports or [(443, 443)]]
    return Resource(LISTENER, "front", "urn:listener", {"protocol": protocol, "portRanges": ranges})


def route(*ports: dict[str, int]) -> Resource:
    annotations = {"alb.ingress.kubernetes.io/listen-ports": json.dumps(list(ports))}
    return Resource(INGRESS, "chat", "urn:route", {"metadata": {"annotations": annotations}})


def violations(resources: list[Resource]) -> list[str]:
    return [violation.message for violation in check(resources) if violation.rule == RULE]


def test_the_rule_is_in_the_pack() -> None:
    assert RULE in [rule.name for rule in RULES]


def test_tcp_443_to_https_routes_passes() -> None:
    assert violations([listener(), route({"HTTPS": 443})]) == []


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ([listener("TCP", (80, 80)), route({"HTTPS": 443})], "opens ports 80-80 to the internet without TLS"),
        ([listener("TCP", (1, 65535))], "opens ports 1-65535 to the internet without TLS"),
        ([listener("UDP")], "is not TCP"),
        ([listener(), route({"HTTP": 80})], "route 'chat' listens on plain HTTP behind an internet-facing accelerator"),
    ],
)
def test_an_open_listener_without_tls_is_refused(resources: list[Resource], message: str) -> None:
    found = violations(resources)
    assert any(message in violation for violation in found), found


def test_plain_http_routes_without_an_accelerator_are_another_rules_business() -> None:
    assert violations([route({"HTTP": 80})]) == []


def group(*overrides: tuple[int, int]) -> Resource:
    props = {"portOverrides": [{"listenerPort": low, "endpointPort": high} for low, high in overrides]}
    return Resource("aws:globalaccelerator/endpointGroup:EndpointGroup", "front-chat-at-r", "urn:group", props)


def test_an_endpoints_own_port_forwarded_to_443_passes_and_elsewhere_is_refused() -> None:
    """An endpoint's own listener (global.endpoints.<name>.port) reaches the ALBs' HTTPS listeners only
    through its endpoint groups' portOverrides (EndpointGroup PortOverrides: listener port to endpoint
    port): the port passes only while every override of it goes to 443."""
    own = listener("TCP", (8443, 8443))
    assert violations([own, group((8443, 443)), route({"HTTPS": 443})]) == []
    assert violations([own, route({"HTTPS": 443})])  # no override: 8443 reaches nothing with TLS
    assert violations([own, group((8443, 443)), group((8443, 80)), route({"HTTPS": 443})])
    assert violations([listener("TCP", (8443, 8444)), group((8443, 443)), group((8444, 443))])
