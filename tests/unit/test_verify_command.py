"""fleetctl verify's own refusals, before it sends anything."""

from __future__ import annotations

import pytest

from components.render.proxy import PROXY_HEALTH_PATH
from components.spec import parse_stack_config
from fleetctl.verify.command import health_path, main, parser
from tests.unit.stack_builders import DELETE, with_classic, with_mooncake


def test_without_the_pulumi_cli_it_says_how_to_go_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", "")
    assert main(["--stack", "dev"]) == 1
    error = capsys.readouterr().err
    assert "cannot run pulumi" in error
    assert "install the Pulumi CLI or pass --outputs FILE" in error


def test_a_canary_measured_with_no_requests_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--stack", "dev", "--canary-requests", "0"])
    assert exit_.value.code == 2
    assert "--canary-requests: must be at least 1, got 0" in capsys.readouterr().err


def test_split_mooncake_endpoints_are_health_checked_at_their_proxys_health() -> None:
    """The proxy program serves /health (200 only while it reaches prefill and decode); verify asks it,
    as the route's health check does, instead of skipping the check."""
    spec = parse_stack_config(with_mooncake())
    split = spec.endpoints["chat"]
    assert health_path(split) == PROXY_HEALTH_PATH == "/health"
    triton = {"image": "nvcr.io/nvidia/tritonserver:25.01-py3", "model": DELETE, "model_path": "/models"}
    classic = parse_stack_config(with_classic(triton)).endpoints["chat"]
    assert health_path(classic) == "/v2/health/ready"


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
def test_a_wake_wait_that_is_not_0_or_more_seconds_is_refused(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--stack", "dev", "--wake-wait", value])
    assert exit_.value.code == 2
    assert f"--wake-wait: must be a number of seconds, 0 or more, got {value}" in capsys.readouterr().err


def test_the_wake_wait_defaults_to_15_minutes_and_0_means_do_not_wait() -> None:
    assert parser().parse_args([]).wake_wait == 900.0
    assert parser().parse_args(["--wake-wait", "0"]).wake_wait == 0.0
    assert "--wake-wait" in parser().format_help()
