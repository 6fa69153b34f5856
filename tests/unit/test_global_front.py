"""The global front door's config (``inference-fleet:global``, docs/global.md): fields checked by
the model, the rest against the stack, every error naming the field to change."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.spec import CONFIG_KEYS, SpecError, parse_stack_config
from fleetctl.stackfile import read_stack_file, stack_path

CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/front"
R53 = {
    "enabled": True,
    "kind": "route53-latency",
    "zone_id": "Z0123456789ABCDEFGHIJ",
    "record_name": "inference.example.com",
}


def prod(front: dict[str, Any] | None, *, certificates: bool = True) -> dict[str, Any]:
    """The prod example's config with ``front`` as its global block (HTTPS in both regions)."""
    config = copy.deepcopy(dict(read_stack_file(stack_path("prod")).project_config))
    config.pop("global", None)
    if front is not None:
        config["global"] = front
    for region in config["regions"].values():
        ingress = region.setdefault("ingress", {})
        ingress.pop("certificate_arn", None)
        ingress.pop("allowed_cidrs", None)
        if certificates:
            ingress.update(certificate_arn=CERTIFICATE, allowed_cidrs=["203.0.113.0/24"])
    return config


def problems(config: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as raised:
        parse_stack_config(config)
    return [str(problem) for problem in raised.value.problems]


def test_global_is_a_config_key_of_the_project() -> None:
    assert CONFIG_KEYS == ("regions", "endpoints", "global", "secrets")


def test_defaults_are_off_with_every_region_at_full_dial() -> None:
    spec = parse_stack_config(prod(None))
    assert not spec.global_front.enabled
    assert spec.global_front.kind == "global-accelerator"
    assert spec.global_front.region("eu-west-1").traffic_dial == 100
    assert spec.global_front.region("eu-west-1").weight == 128


def test_dials_and_weights_are_read_per_region() -> None:
    spec = parse_stack_config(prod({"enabled": True, "regions": {"eu-west-1": {"traffic_dial": 0, "weight": 200}}}))
    assert spec.global_front.region("eu-west-1").traffic_dial == 0
    assert spec.global_front.region("eu-west-1").weight == 200
    assert spec.global_front.region("us-east-1").traffic_dial == 100
    assert spec.global_front.serving(["us-east-1", "eu-west-1"]) == ["us-east-1"]


@pytest.mark.parametrize(
    ("front", "path"),
    [
        ({"enabled": True, "regions": {"eu-west-1": {"traffic_dial": 101}}}, "global.regions.eu-west-1.traffic_dial"),
        ({"enabled": True, "regions": {"eu-west-1": {"traffic_dial": -1}}}, "global.regions.eu-west-1.traffic_dial"),
        ({"enabled": True, "regions": {"eu-west-1": {"traffic_dial": "50"}}}, "global.regions.eu-west-1.traffic_dial"),
        ({"enabled": True, "regions": {"eu-west-1": {"weight": 256}}}, "global.regions.eu-west-1.weight"),
        ({"enabled": True, "regions": {"eu-west-1": {"dial": 5}}}, "global.regions.eu-west-1.dial"),
        ({"enabled": "yes"}, "global.enabled"),
        ({"enabled": True, "kind": "anycast"}, "global.kind"),
        ({"enabled": True, "kind": "route53-latency", "zone_id": "Z123"}, "global.record_name"),
        ({"enabled": True, "kind": "route53-latency", "record_name": "a.example.com"}, "global.zone_id"),
        ({"enabled": True, "zone_id": "Z123"}, "global.zone_id"),
        ({"enabled": True, "record_name": "Inference.Example.com"}, "global.record_name"),
        ({**R53, "regions": {"eu-west-1": {"traffic_dial": 50}}}, "global.regions.eu-west-1.traffic_dial"),
        ({**R53, "regions": {"eu-west-1": {"weight": 10}}}, "global.regions.eu-west-1.weight"),
        ({"enabled": False, "regions": {"us-west-2": {}}}, "global.regions.us-west-2"),
        (
            {"enabled": True, "regions": {"eu-west-1": {"traffic_dial": 0}, "us-east-1": {"weight": 0}}},
            "global.regions",
        ),
    ],
)
def test_a_wrong_field_is_named(front: dict[str, Any], path: str) -> None:
    found = problems(prod(front))
    assert len(found) == 1, found
    assert found[0].startswith(f"error: {path}: "), found


def test_route53_latency_needs_its_zone_and_name_and_takes_dials_of_0_or_100() -> None:
    spec = parse_stack_config(prod({**R53, "regions": {"eu-west-1": {"traffic_dial": 0}}}))
    assert (spec.global_front.kind, spec.global_front.zone_id, spec.global_front.record_name) == (
        "route53-latency",
        "Z0123456789ABCDEFGHIJ",
        "inference.example.com",
    )


def test_regions_must_listen_on_the_same_port() -> None:
    config = prod({"enabled": True}, certificates=False)
    config["regions"]["us-east-1"]["ingress"].update(certificate_arn=CERTIFICATE, allowed_cidrs=["203.0.113.0/24"])
    (found,) = problems(config)
    assert found.startswith("error: regions.eu-west-1.ingress.certificate_arn: is missing while us-east-1 route HTTPS")


def test_every_endpoint_serves_every_region_of_the_front() -> None:
    config = prod({"enabled": True})
    config["endpoints"]["summarize"]["target_regions"] = ["us-east-1"]
    (found,) = problems(config)
    assert found.startswith("error: endpoints.summarize.target_regions: leaves out eu-west-1")
    config["global"]["enabled"] = False
    parse_stack_config(config)  # without the front, an endpoint may serve where it likes
