"""A global front for a fleet whose regions differ (docs/global.md, "Endpoints in some regions"): an
endpoint with ``global.endpoints.<name>.port`` has a listener of its own on the one accelerator, with
endpoint groups only in the regions it runs in, each forwarding that port to the routes' 443; the
shared listener and its groups keep their names (URNs), and the policy pack accepts the forwarded port."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.spec import SpecError
from components.validation import validate_stack
from fleetctl.cli import main as fleetctl
from fleetctl.plan import Plan, run_program
from fleetctl.policy_check import check_plan
from fleetctl.stackfile import read_stack_file
from tests.component.programs import by_type
from tests.component.test_global_front import ENDPOINT_GROUP, LISTENER, front_stack_file

ENABLED = "  inference-fleet:global:           # one address for both regions (docs/global.md)\n    enabled: true"
SUMMARIZE = "    summarize:                      # classic, autoscaled, with a 10% canary\n"


def regional_summarize(tmp_path: Path, *, port: int | None) -> Path:
    """The prod example with summarize in us-east-1 only, and a listener of its own when ``port``."""
    stack = front_stack_file(tmp_path)
    text = stack.read_text()
    assert text.count(ENABLED) == 1
    assert text.count(SUMMARIZE) == 1
    text = text.replace(SUMMARIZE, SUMMARIZE + "      target_regions: [us-east-1]\n")
    if port is not None:
        text = with_endpoints(text, f"\n      summarize: {{port: {port}}}")
    stack.write_text(text)
    return stack


def with_endpoints(text: str, endpoints: str) -> str:
    """``global.endpoints`` written below the line of ``enabled: true`` (and its comment)."""
    line_end = text.index("\n", text.index(ENABLED) + len(ENABLED))
    return f"{text[:line_end]}\n    endpoints:{endpoints}{text[line_end:]}"


def plan_of(stack: Path) -> Plan:
    return run_program(read_stack_file(stack))


def test_an_endpoint_in_some_regions_has_its_own_listener_and_groups_only_there(tmp_path: Path) -> None:
    plan = plan_of(regional_summarize(tmp_path, port=8443))
    listeners = {listener["name"]: listener for listener in by_type(plan, LISTENER)}
    assert sorted(listeners) == ["global-front-listener", "global-front-summarize-listener"]
    assert listeners["global-front-listener"]["inputs"]["portRanges"] == [{"fromPort": 443, "toPort": 443}]
    assert listeners["global-front-summarize-listener"]["inputs"]["portRanges"] == [{"fromPort": 8443, "toPort": 8443}]
    groups = {group["name"]: group["inputs"] for group in by_type(plan, ENDPOINT_GROUP)}
    # The shared groups keep their names; summarize's own group is only where it runs.
    assert sorted(groups) == ["global-front-eu-west-1", "global-front-summarize-at-us-east-1", "global-front-us-east-1"]
    own = groups["global-front-summarize-at-us-east-1"]
    assert own["endpointGroupRegion"] == "us-east-1"
    assert own["portOverrides"] == [{"listenerPort": 8443, "endpointPort": 443}]
    assert own["listenerArn"].endswith("/listener/global-front-summarize-listener")
    assert own["endpointConfigurations"] == groups["global-front-us-east-1"]["endpointConfigurations"]
    assert "portOverrides" not in groups["global-front-us-east-1"]
    dns_name = plan.outputs["global"]["dns_name"]
    assert sorted(plan.outputs["endpoints"]["summarize"]) == ["us-east-1"]
    assert plan.outputs["endpoints"]["summarize"]["us-east-1"]["global_address"] == (
        f"https://{dns_name}:8443/inference/summarize"
    )
    assert plan.outputs["endpoints"]["chat"]["eu-west-1"]["global_address"] == f"https://{dns_name}/inference/chat"
    assert check_plan(plan.resources) == []


def test_without_a_listener_of_its_own_such_an_endpoint_is_refused_naming_the_fix(tmp_path: Path) -> None:
    config = read_stack_file(regional_summarize(tmp_path, port=None)).project_config
    with pytest.raises(SpecError) as refused:
        validate_stack(config, stack="prod")
    assert "endpoints.summarize.target_regions: leaves out eu-west-1" in str(refused.value)
    assert "global.endpoints.summarize.port" in str(refused.value)


@pytest.mark.parametrize(
    ("endpoints", "message"),
    [
        ("{summarize: {port: 443}}", "global.endpoints.summarize.port: is 443, the shared listener's"),
        ("{summarize: {port: 8443}, chat: {port: 8443}}", "global.endpoints.chat.port: is 8443, already summarize's"),
        ("{nope: {port: 9443}, summarize: {port: 8443}}", "global.endpoints.nope: is not an endpoint of this stack"),
        (
            "{summarize: {port: 8443, regions: {eu-west-1: {traffic_dial: 0}}}}",
            "global.endpoints.summarize.regions.eu-west-1: is not a region summarize runs in",
        ),
        (
            "{summarize: {port: 8443, regions: {us-east-1: {traffic_dial: 0}}}}",
            "global.endpoints.summarize.regions: drains every region of summarize",
        ),
    ],
)
def test_bad_endpoint_listeners_are_refused(tmp_path: Path, endpoints: str, message: str) -> None:
    stack = regional_summarize(tmp_path, port=None)
    stack.write_text(with_endpoints(stack.read_text(), f" {endpoints}"))
    with pytest.raises(SpecError) as refused:
        validate_stack(read_stack_file(stack).project_config, stack="prod")
    assert message in str(refused.value)


def test_drain_per_endpoint_and_region_moves_only_that_endpoints_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fleetctl region drain REGION --endpoint NAME`` writes the endpoint's own dial in the region
    (global.endpoints.<name>.regions.<r>.traffic_dial), plans as that one group's dial, and undrain
    restores the file byte for byte; the last region of an endpoint, and an endpoint on the shared
    listener, are refused with the file untouched."""
    stack = regional_summarize(tmp_path, port=8443)
    text = stack.read_text().replace("summarize: {port: 8443}", "summarize: {port: 8443}\n      chat: {port: 9443}")
    stack.write_text(text)
    before = stack.read_bytes()
    argv = ["region", "drain", "eu-west-1", "--endpoint", "chat", "--stack-file", str(stack), "--output", "json"]
    assert fleetctl(argv) == 0, capsys.readouterr().err
    record = json.loads(capsys.readouterr().out)
    assert [change["path"] for change in record["changes"]] == ["global.endpoints.chat.regions"]
    (note,) = record["notes"]
    assert note.startswith("chat in eu-west-1 still takes failover traffic")
    assert "global.endpoints.chat.regions.eu-west-1.weight: 0" in note
    spec = validate_stack(read_stack_file(stack).project_config, stack="prod")
    assert spec.global_front.endpoints["chat"].region("eu-west-1", spec.global_front).traffic_dial == 0
    assert spec.global_front.region("eu-west-1").traffic_dial == 100
    groups = {group["name"]: group["inputs"] for group in by_type(plan_of(stack), ENDPOINT_GROUP)}
    assert groups["global-front-chat-at-eu-west-1"]["trafficDialPercentage"] == 0
    assert groups["global-front-chat-at-us-east-1"]["trafficDialPercentage"] == 100
    assert groups["global-front-eu-west-1"]["trafficDialPercentage"] == 100
    assert fleetctl(["region", "undrain", "eu-west-1", "--endpoint", "chat", "--stack-file", str(stack)]) == 0
    assert stack.read_bytes() == before
    capsys.readouterr()

    assert fleetctl(["region", "drain", "us-east-1", "--endpoint", "summarize", "--stack-file", str(stack)]) == 1
    assert "global.endpoints.summarize.regions.us-east-1.traffic_dial: us-east-1 is the last region serving" in (
        capsys.readouterr().err
    )
    assert fleetctl(["region", "drain", "eu-west-1", "--endpoint", "reason", "--stack-file", str(stack)]) == 1
    assert "global.endpoints.reason: is not set: reason has no listener of its own" in capsys.readouterr().err
    assert stack.read_bytes() == before
