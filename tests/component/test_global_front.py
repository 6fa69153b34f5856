"""The global front door under the recording mocks (docs/global.md): one accelerator per stack on a
us-west-2 provider, a TCP listener on the routes' port, one endpoint group per region whose one
endpoint is that region's ALB (found by the load balancer controller's tags), and the global
address in every engine record."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from components import naming
from fleetctl.plan import Plan, run_program
from fleetctl.policy_check import check_plan
from fleetctl.stackfile import read_stack_file, stack_path
from tests.component.programs import by_type, example_plan

ACCELERATOR = "aws:globalaccelerator/accelerator:Accelerator"
LISTENER = "aws:globalaccelerator/listener:Listener"
ENDPOINT_GROUP = "aws:globalaccelerator/endpointGroup:EndpointGroup"
PROD_REGIONS = ("eu-west-1", "us-east-1")


HTTPS = """      ingress:
        scheme: internal
        certificate_arn: arn:aws:acm:us-east-1:123456789012:certificate/inference-fleet-prod
        allowed_cidrs: [10.0.0.0/8]
"""


REGIONAL = "prod-regional"
"""The prod example without its global front, where an endpoint may leave a region (region remove)."""


def regional_prod_text() -> str:
    text = stack_path("prod").read_text()
    enabled = "  inference-fleet:global:           # one address for both regions (docs/global.md)\n    enabled: true"
    assert text.count(enabled) == 1
    return text.replace(enabled, enabled.replace("enabled: true", "enabled: false"))


def front_stack_file(directory: Path) -> Path:
    """A copy of the prod example with its global front enabled (added, with HTTPS routes, where
    the file lacks it)."""
    text = stack_path("prod").read_text()
    if "inference-fleet:global:" not in text:
        text = text.replace("      ingress:\n        scheme: internal\n", HTTPS)
        text = text.replace(
            "  inference-fleet:endpoints:", "  inference-fleet:global:\n    enabled: true\n  inference-fleet:endpoints:"
        )
    directory.mkdir(parents=True, exist_ok=True)
    copy = directory / "Pulumi.prod.yaml"
    copy.write_text(text)
    return copy


@cache
def front_plan() -> Plan:
    stack_file = read_stack_file(front_stack_file(Path(tempfile.mkdtemp(prefix="global-front-"))))
    assert stack_file.project_config["global"]["enabled"] is True
    return run_program(stack_file)


def provider_of(plan: Plan, resource: dict[str, Any]) -> dict[str, Any]:
    (provider,) = [entry for entry in plan.resources if entry["urn"] == resource["provider"]]
    return provider


def test_one_accelerator_per_stack_on_a_us_west_2_provider() -> None:
    plan = front_plan()
    (accelerator,) = by_type(plan, ACCELERATOR)
    assert accelerator["inputs"] == {"enabled": True, "ipAddressType": "IPV4", "name": "inference-fleet-prod"}
    provider = provider_of(plan, accelerator)
    assert provider["name"] == "aws-global-us-west-2"
    assert provider["inputs"]["region"] == "us-west-2"
    for resource in by_type(plan, LISTENER) + by_type(plan, ENDPOINT_GROUP):
        assert provider_of(plan, resource)["name"] == "aws-global-us-west-2"


def test_a_tcp_listener_on_the_routes_https_port() -> None:
    (listener,) = by_type(front_plan(), LISTENER)
    assert listener["inputs"]["protocol"] == "TCP"
    assert listener["inputs"]["portRanges"] == [{"fromPort": 443, "toPort": 443}]
    assert listener["inputs"]["acceleratorArn"].startswith("arn:aws:globalaccelerator::123456789012:accelerator/")


def test_one_endpoint_group_per_region_with_its_alb_and_client_ip_preserved() -> None:
    plan = front_plan()
    (listener,) = by_type(plan, LISTENER)
    groups = {group["inputs"]["endpointGroupRegion"]: group for group in by_type(plan, ENDPOINT_GROUP)}
    assert sorted(groups) == list(PROD_REGIONS)
    for region, group in groups.items():
        inputs = group["inputs"]
        assert group["name"] == f"global-front-{region}"
        assert inputs["listenerArn"] == listener["inputs"]["acceleratorArn"].replace(
            "accelerator/global-front-accelerator-offline", "accelerator/offline/listener/global-front-listener"
        )
        assert inputs["trafficDialPercentage"] == 100
        (endpoint,) = inputs["endpointConfigurations"]
        cluster = naming.cluster_name("prod", region)
        assert endpoint == {
            "endpointId": f"arn:aws:elasticloadbalancing:{region}:123456789012:loadbalancer/app/"
            f"k8s-{naming.INGRESS_GROUP}-offline/{cluster}",
            "clientIpPreservationEnabled": True,
            "weight": 128,
        }
        # Global Accelerator judges an ALB endpoint by the ALB's own health checks.
        assert not any(key.startswith("healthCheck") for key in inputs)


def test_every_record_has_the_global_address_beside_its_region_address() -> None:
    plan = front_plan()
    dns_name = plan.outputs["global"]["dns_name"]
    assert dns_name.endswith(".awsglobalaccelerator.com")
    for endpoint, by_region in plan.outputs["endpoints"].items():
        assert sorted(by_region) == list(PROD_REGIONS)
        for region, record in by_region.items():
            assert record["global_address"] == f"https://{dns_name}/inference/{endpoint}"
            assert (
                record["address"]
                == f"https://k8s-inference-fleet-offline.{region}.elb.amazonaws.com/inference/{endpoint}"
            )


def test_a_stack_without_the_front_has_none_of_it() -> None:
    plan = example_plan("dev")
    assert not [resource for resource in plan.resources if "globalaccelerator" in resource["type"]]
    assert "global" not in plan.outputs
    assert all("global_address" not in record for by in plan.outputs["endpoints"].values() for record in by.values())


def test_the_planned_front_passes_every_policy_rule() -> None:
    assert check_plan(front_plan().resources) == []


def test_route53_latency_records_alias_each_serving_regions_alb(tmp_path: Path) -> None:
    stack = front_stack_file(tmp_path)
    text = stack.read_text().replace(
        "  inference-fleet:global:           # one address for both regions (docs/global.md)\n    enabled: true",
        "  inference-fleet:global:\n    enabled: true\n    kind: route53-latency\n    zone_id: Z0123456789ABCDEFGHIJ\n"
        "    record_name: inference.example.com\n    regions:\n      eu-west-1: {traffic_dial: 0}",
    )
    stack.write_text(text)
    plan = run_program(read_stack_file(stack))
    assert not [resource for resource in plan.resources if "globalaccelerator" in resource["type"]]
    (record,) = by_type(plan, "aws:route53/record:Record")  # eu-west-1 is drained: no record
    assert record["name"] == "global-front-us-east-1"
    assert record["provider"].endswith("::aws-us-east-1")
    assert record["inputs"] == {
        "zoneId": "Z0123456789ABCDEFGHIJ",
        "name": "inference.example.com",
        "type": "A",
        "setIdentifier": "us-east-1",
        "latencyRoutingPolicies": [{"region": "us-east-1"}],
        "aliases": [
            {
                "name": "k8s-inference-fleet-offline.us-east-1.elb.amazonaws.com",
                "zoneId": "ZOFFLINEALB",
                "evaluateTargetHealth": True,
            }
        ],
    }
    assert plan.outputs["global"] == {"dns_name": "inference.example.com", "addresses": []}
    assert plan.outputs["endpoints"]["chat"]["eu-west-1"]["global_address"] == (
        "https://inference.example.com/inference/chat"
    )


def test_each_endpoint_group_retries_while_its_alb_is_still_provisioning() -> None:
    """The Ingress status that releases the ALB lookup is written while the ALB is ``provisioning``,
    Global Accelerator takes only active endpoints (Developer Guide, "Endpoints for standard
    accelerators"), and terraform-provider-aws ``resourceEndpointGroupCreate`` sends
    CreateEndpointGroup once: each group carries its own bounded retry (tests/unit/test_retries.py)."""
    groups = by_type(front_plan(), ENDPOINT_GROUP)
    assert groups
    for group in groups:
        region = group["inputs"]["endpointGroupRegion"]
        assert group["options"]["hooks"] == {"onError": [f"global-front-{region}-alb-active"]}
    (listener,) = by_type(front_plan(), LISTENER)
    assert "hooks" not in listener["options"]
