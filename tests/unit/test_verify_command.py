"""fleetctl verify's own refusals, before it sends anything."""

from __future__ import annotations

import pytest

from fleetctl.verify.command import main


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
