"""``fleetctl verify`` through the global address (docs/global.md): each endpoint is asked once
through the accelerator as a client would ask it, besides once per region through its ALB.

Which region answered cannot be told from the answer: neither the ALB nor the servers name their
region in a response, and the accelerator's addresses are the same anycast addresses everywhere.
The check says so in its detail rather than guess; the per-region checks show each region serves.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from components.spec import StackSpec
from fleetctl.verify.client import CheckError, Client
from fleetctl.verify.schemas import TritonModel, request_check
from fleetctl.verify.wake import NotWaitedError, request_waking

REGION = "global"
"""The region column of a check made through the global address."""
CHECK = "global request"
Row = tuple[str, str, str, str, str]
UNTOLD = "which region answered is unverifiable: no response names its region"


def global_checks(
    spec: StackSpec,
    records: Mapping[str, Mapping[str, Any]],
    client: Client,
    triton: TritonModel,
    arguments: argparse.Namespace,
) -> list[Row]:
    """One request per endpoint through its global address, when the stack has the front, as rows
    of ``fleetctl.verify.command.Check`` (endpoint, region, check, status, detail)."""
    if not spec.global_front.enabled or arguments.region not in (None, REGION):
        return []
    checks: list[Row] = []
    for name, endpoint in spec.endpoints.items():
        if arguments.endpoint and name != arguments.endpoint:
            continue
        by_region = records.get(name) or {}
        addresses = sorted(
            {str(record["global_address"]) for record in by_region.values() if record.get("global_address")}
        )
        if len(addresses) != 1:
            found = ", ".join(addresses) or "none"
            detail = f"expected one global address in the stack's outputs, found {found}"
            checks.append((name, REGION, CHECK, "failed", detail))
            continue
        address = addresses[0].rstrip("/")
        model = next((record.get("served_model_name") for record in by_region.values()), None)
        assert endpoint.framework is not None  # set by the model once it validated
        request = request_check(endpoint.framework, triton, model or endpoint.served_model_name)
        try:
            answer, _ = request_waking(request, client, address, arguments.wake_wait)
        except NotWaitedError as reason:
            checks.append((name, REGION, CHECK, "unverified", f"{reason} via {address}"))
            continue
        except CheckError as error:
            checks.append((name, REGION, CHECK, "failed", str(error)))
            continue
        checks.append((name, REGION, CHECK, "passed", f"{answer} via {address}; {UNTOLD}"))
    return checks
