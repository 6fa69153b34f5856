"""fleetctl verify through the global address (docs/global.md): one request per endpoint, and an
honest word on which region answered (no response tells)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from components.spec import parse_stack_config
from fleetctl.stackfile import read_stack_file, stack_path
from fleetctl.verify.client import CheckError, Client
from fleetctl.verify.command import parser
from fleetctl.verify.global_front import global_checks

CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/front"
GLOBAL = "https://front.awsglobalaccelerator.com"


class Answers(Client):
    """Completions answered for every URL under ``up``; anything else cannot connect."""

    def __init__(self, up: str) -> None:
        super().__init__()
        self.up = up
        self.asked: list[str] = []

    def exchange(self, method: str, url: str, body: Any = None) -> tuple[int, Any, Mapping[str, str]]:
        self.asked.append(url)
        if not url.startswith(self.up):
            raise CheckError(f"{method} {url}: cannot connect (refused)")
        return 200, {"choices": [{"text": "hello"}]}, {}


def spec(enabled: bool) -> Any:
    config = copy.deepcopy(dict(read_stack_file(stack_path("prod")).project_config))
    config["global"] = {"enabled": enabled}
    for region in config["regions"].values():
        region["ingress"] = {"scheme": "internal", "certificate_arn": CERTIFICATE, "allowed_cidrs": ["10.0.0.0/8"]}
    return parse_stack_config(config)


def records(with_global: bool = True) -> dict[str, Any]:
    return {
        name: {
            region: {
                "address": f"https://alb.{region}/inference/{name}",
                "served_model_name": f"model-{name}",
                **({"global_address": f"{GLOBAL}/inference/{name}"} if with_global else {}),
            }
            for region in ("us-east-1", "eu-west-1")
        }
        for name in ("chat", "reason", "summarize")
    }


def test_each_endpoint_is_asked_once_through_the_global_address() -> None:
    client = Answers(GLOBAL)
    rows = global_checks(spec(True), records(), client, triton=None, arguments=parser().parse_args([]))  # type: ignore[arg-type]
    assert [(row[0], row[1], row[2], row[3]) for row in rows] == [
        ("chat", "global", "global request", "passed"),
        ("reason", "global", "global request", "passed"),
        ("summarize", "global", "global request", "passed"),
    ]
    assert client.asked == [f"{GLOBAL}/inference/{name}/v1/completions" for name in ("chat", "reason", "summarize")]
    assert all("which region answered is unverifiable" in row[4] for row in rows)


def test_a_global_address_that_does_not_answer_fails() -> None:
    rows = global_checks(spec(True), records(), Answers("https://elsewhere"), None, parser().parse_args([]))  # type: ignore[arg-type]
    assert {row[3] for row in rows} == {"failed"}
    assert "cannot connect" in rows[0][4]


def test_missing_global_addresses_fail_and_no_front_means_no_check() -> None:
    arguments = parser().parse_args([])
    rows = global_checks(spec(True), records(with_global=False), Answers(GLOBAL), None, arguments)  # type: ignore[arg-type]
    assert rows[0][3:] == ("failed", "expected one global address in the stack's outputs, found none")
    assert global_checks(spec(False), records(), Answers(GLOBAL), None, arguments) == []  # type: ignore[arg-type]
    only_a_region = parser().parse_args(["--region", "us-east-1"])
    assert global_checks(spec(True), records(), Answers(GLOBAL), None, only_a_region) == []  # type: ignore[arg-type]
