"""The front's command line (front/serve.py) and its answer while its backends are at zero
(front/answers.py)."""

from __future__ import annotations

import json

import pytest

from fleetctl.verify import schemas as verify_schemas
from front import answers
from front.serve import parse_arguments


def test_the_answer_at_zero_says_so_and_when_to_retry() -> None:
    answer = answers.scaled_to_zero(["prefill", "decode"], 45)
    assert (answer.status, dict(answer.headers)["Retry-After"]) == (503, "45")
    assert json.loads(answer.body) == {
        "error": {
            "message": "prefill and decode scaled to zero: this request wakes them; retry in a few minutes",
            "type": "scaled_to_zero",
            "code": 503,
        }
    }
    one = answers.scaled_to_zero(["decode"], 30)
    assert json.loads(one.body)["error"]["message"].startswith("decode scaled to zero: this request wakes it;")


def test_scale_to_zero_roles_are_repeatable_and_checked(capsys: pytest.CaptureFixture[str]) -> None:
    required = ["--prefill-service", "p", "--prefill-port", "1", "--bootstrap-port", "2", "--decode", "http://d"]
    arguments = parse_arguments(required)
    assert (arguments.scale_to_zero, arguments.retry_after_seconds, arguments.metrics_port) == ([], 30, None)
    arguments = parse_arguments([*required, "--scale-to-zero", "prefill", "--scale-to-zero", "decode"])
    assert arguments.scale_to_zero == ["prefill", "decode"]
    for wrong in (["--scale-to-zero", "server"], ["--retry-after-seconds", "-1"], ["--retry-after-seconds", "x"]):
        with pytest.raises(SystemExit):
            parse_arguments([*required, *wrong])
        assert wrong[0] in capsys.readouterr().err


def test_verify_recognises_the_answer_at_zero_by_the_programs_error_type() -> None:
    """fleetctl verify waits for an endpoint whose proxy answers this type (and reads /health's key)."""
    assert answers.SCALED_TO_ZERO == verify_schemas.SCALED_TO_ZERO


def test_the_programs_forward_mode_takes_no_prefill_or_decode_and_only_the_server_at_zero(
    capsys: pytest.CaptureFixture[str],
) -> None:
    arguments = parse_arguments(["--forward", "http://chat.inference.svc:80/"])
    assert (arguments.forward, arguments.forward_health, arguments.scale_to_zero) == (
        "http://chat.inference.svc:80",
        "/health",
        [],
    )
    forward = ["--forward", "http://s"]
    for wrong, said in (
        ([*forward, "--decode", "http://d"], "--decode do not apply"),
        ([*forward, "--scale-to-zero", "prefill"], "takes only server"),
        ([*forward, "--forward-health", "health"], "must be a path starting with /"),
        (["--scale-to-zero", "server"], "needs --prefill-service, --prefill-port, --bootstrap-port, --decode"),
    ):
        with pytest.raises(SystemExit):
            parse_arguments(wrong)
        assert said in capsys.readouterr().err
