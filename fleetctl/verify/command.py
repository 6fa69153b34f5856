"""fleetctl verify: every endpoint and region of a deployed stack, through its real route.

The routed addresses and each region's kubeconfig come from the stack's outputs
(`pulumi stack output --json --show-secrets`, or a file given with --outputs); what to ask
each endpoint comes from the stack file (its framework, its Mooncake mode, its canary).
The canary's share and the Mooncake evidence are read from the pods through the Kubernetes
API. Exit 0 only when every check passed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from components.naming import canary_set_name
from components.render.gate import has_gate
from components.render.proxy import PROXY_HEALTH_PATH
from components.spec import Endpoint, StackSpec
from components.spec.errors import ProblemsError
from fleetctl.project import resolve_stack
from fleetctl.stackfile import load_stack
from fleetctl.verify.autoscaler import autoscaled_workloads, autoscaler_active
from fleetctl.verify.client import CheckError, Client, UnverifiedError
from fleetctl.verify.global_front import global_checks
from fleetctl.verify.incluster import (
    Target,
    canary_share,
    engine_protocols,
    kv_store,
    kv_transfer,
    kv_transport,
    prefix_routing,
)
from fleetctl.verify.kube import Cluster, connect
from fleetctl.verify.schemas import SCALED_TO_ZERO, TritonModel, request_check
from fleetctl.verify.wake import AsleepError, NotWaitedError, Zero, request_waking


@dataclass(frozen=True)
class Check:
    endpoint: str
    region: str
    check: str
    status: str
    """passed, failed, or unverified (a check this version cannot make yet: not a pass)."""
    detail: str


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fleetctl verify", description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--stack", metavar="NAME", help="the stack of the Pulumi project here (default: the one pulumi has selected)"
    )
    which.add_argument("--stack-file", metavar="PATH", type=Path, help="read this stack file")
    parser.add_argument(
        "--outputs", metavar="FILE", type=Path, help="stack outputs as JSON (default: pulumi stack output)"
    )
    parser.add_argument("--endpoint", metavar="NAME", help="verify only this endpoint")
    parser.add_argument("--region", metavar="REGION", help="verify only this region")
    parser.add_argument(
        "--auth-env", metavar="VAR", help="send 'Authorization: Bearer $VAR' (the value never in config)"
    )
    parser.add_argument(
        "--timeout", metavar="SECONDS", type=_seconds, default=30.0, help="seconds per request (default 30)"
    )
    parser.add_argument(
        "--deadline", metavar="SECONDS", type=_seconds, default=600.0, help="seconds for the whole run (default 600)"
    )
    parser.add_argument(
        "--triton-model",
        metavar="MODEL",
        default="identity",
        help="Triton model to infer on, an identity model (default identity)",
    )
    parser.add_argument(
        "--triton-input",
        metavar="TENSOR",
        default="INPUT0",
        help="the Triton model's input tensor to send (default INPUT0)",
    )
    parser.add_argument(
        "--triton-output",
        metavar="TENSOR",
        default="OUTPUT0",
        help="the Triton model's output tensor that must echo the input (default OUTPUT0)",
    )
    parser.add_argument(
        "--canary-requests",
        metavar="N",
        type=_positive,
        default=200,
        help="requests sent to measure a canary's share (default 200)",
    )
    parser.add_argument(
        "--log-wait",
        metavar="SECONDS",
        type=_seconds,
        default=30.0,
        help="seconds to wait for the pods to count or log what requests did (default 30)",
    )
    parser.add_argument(
        "--wake-wait",
        metavar="SECONDS",
        type=_wait_seconds,
        default=900.0,
        help="seconds to wait for an endpoint scaled to zero to wake, asking again after each Retry-After "
        "(default 900, not counted in --deadline; 0: do not wait, the request check is unverified)",
    )
    parser.add_argument(
        "--output", choices=("table", "json"), default="table", help="table for people (default), json for scripts"
    )
    return parser


def _positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def _seconds(text: str) -> float:
    seconds = float(text)
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text}")
    return seconds


def _wait_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, 0 or more, got {text}")
    return seconds


def stack_outputs(arguments: argparse.Namespace, stack: str) -> dict[str, Any]:
    if arguments.outputs is not None:
        where = f"--outputs {arguments.outputs}"
        try:
            text = arguments.outputs.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            raise CheckError(f"{where}: cannot read it: {reason}") from None
        return _outputs_document(text, where)
    try:
        completed = subprocess.run(
            ["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", stack],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as error:
        raise CheckError(f"cannot run pulumi ({error}); install the Pulumi CLI or pass --outputs FILE") from None
    if completed.returncode != 0:
        raise CheckError(f"pulumi stack output --stack {stack} failed: {completed.stderr.strip()}")
    return _outputs_document(completed.stdout, f"pulumi stack output --stack {stack}")


def _outputs_document(text: str, where: str) -> dict[str, Any]:
    """Stack outputs as ``pulumi stack output --json`` writes them: an object whose ``endpoints``
    map endpoint -> region -> record and whose ``kubeconfigs`` map region -> kubeconfig."""
    try:
        outputs = json.loads(text)
    except ValueError as error:
        raise CheckError(f"{where}: not valid JSON ({error}); give what pulumi stack output --json writes") from None
    if not isinstance(outputs, dict):
        raise CheckError(f"{where}: must be a JSON object of stack outputs, got {type(outputs).__name__}")
    endpoints = outputs.get("endpoints") or {}
    if not isinstance(endpoints, dict) or not all(
        isinstance(regions, dict) and all(isinstance(record, dict) for record in regions.values())
        for regions in endpoints.values()
        if regions
    ):
        raise CheckError(f"{where}: endpoints must map each endpoint to an object of region -> record")
    if not isinstance(outputs.get("kubeconfigs") or {}, dict):
        raise CheckError(f"{where}: kubeconfigs must map each region to its kubeconfig")
    return outputs


def verify(spec: StackSpec, outputs: dict[str, Any], client: Client, arguments: argparse.Namespace) -> list[Check]:
    records = outputs.get("endpoints") or {}
    kubeconfigs = outputs.get("kubeconfigs") or {}
    clusters: dict[str, Cluster] = {}
    triton = TritonModel(arguments.triton_model, arguments.triton_input, arguments.triton_output)
    checks: list[Check] = []

    def cluster(region: str) -> Cluster:
        if region not in clusters:
            if not kubeconfigs.get(region):
                raise CheckError(f"no kubeconfig for {region} in the stack's outputs (kubeconfigs, a secret)")
            clusters[region] = connect(kubeconfigs[region], client)
        return clusters[region]

    for placement in spec.placements:
        name, region = placement.endpoint, placement.region
        if (arguments.endpoint and name != arguments.endpoint) or (arguments.region and region != arguments.region):
            continue
        endpoint = spec.endpoints[name]
        record = (records.get(name) or {}).get(region)
        if not record or not record.get("address"):
            checks.append(Check(name, region, "address", "failed", "no routed address in the stack's outputs"))
            continue
        address = str(record["address"]).rstrip("/")
        # What was deployed; the stack file's when the record predates the field.
        model = record.get("served_model_name") or endpoint.served_model_name
        found, zero = endpoint_checks(name, region, endpoint, address, model, client, triton, arguments.wake_wait)
        checks += found
        checks += cluster_checks(
            name, region, endpoint, address, model, partial(cluster, region), client, triton, arguments, zero
        )
    checks += [Check(*row) for row in global_checks(spec, records, client, triton, arguments)]
    return checks


def health_path(endpoint: Endpoint) -> str:
    """What the route health-checks: the proxy's /health in front of split Mooncake roles (200 only
    while it reaches a prefill engine and decode), the gate's in front of a classic server that may
    scale to zero (200 while the server answers or is at zero), the server's own path otherwise."""
    if (endpoint.mooncake is not None and endpoint.mooncake.split) or has_gate(endpoint):
        return PROXY_HEALTH_PATH
    return endpoint.health_check_path or "/health"


def endpoint_checks(
    name: str,
    region: str,
    endpoint: Endpoint,
    address: str,
    model: str | None,
    client: Client,
    triton: TritonModel,
    wake_wait: float,
) -> tuple[list[Check], Zero | None]:
    """The health and request checks through the route, and what the request found of an
    endpoint scaled to zero (None when it was awake or failed otherwise)."""
    checks: list[Check] = []
    url = f"{address}{health_path(endpoint)}"
    try:
        checks.append(Check(name, region, "health", "passed", _health(client, url)))
    except CheckError as error:
        checks.append(Check(name, region, "health", "failed", str(error)))
    request = request_check(endpoint.framework, triton, model)
    zero: Zero | None = None
    try:
        detail, zero = request_waking(request, client, address, wake_wait)
        checks.append(Check(name, region, "request", "passed", detail))
    except NotWaitedError as reason:
        checks.append(Check(name, region, "request", "unverified", str(reason)))
        zero = reason.zero
    except AsleepError as error:
        checks.append(Check(name, region, "request", "failed", str(error)))
        zero = error.zero
    except CheckError as error:
        checks.append(Check(name, region, "request", "failed", str(error)))
    return checks, zero


def cluster_checks(
    name: str,
    region: str,
    endpoint: Endpoint,
    address: str,
    model: str | None,
    cluster: Callable[[], Cluster],
    client: Client,
    triton: TritonModel,
    arguments: argparse.Namespace,
    zero: Zero | None = None,
) -> list[Check]:
    """The checks that read the cluster: the autoscalers, the canary's share, Mooncake's KV evidence
    (of each set, when a Mooncake endpoint runs a canary set: its own checks, named ``canary ...``).
    Of an endpoint the request check found at zero and did not see wake, the checks that need
    served requests are unverified, saying so; the autoscalers' is made whatever the state."""
    wanted: list[tuple[str, Callable[[Target], str], str]] = []
    workloads = autoscaled_workloads(name, endpoint)
    if workloads:

        def active(target: Target) -> str:
            return autoscaler_active(target.cluster, target.namespace, workloads, zero, target.log_wait)

        wanted.append(("autoscaler active", active, name))
    if endpoint.canary is not None:
        share = partial(canary_share, requests=arguments.canary_requests, triton=triton)
        wanted.append(("canary share", share, name))
    if endpoint.routing == "prefix":
        wanted.append(("prefix routing", prefix_routing, name))
    mooncake = endpoint.mooncake
    if mooncake is not None:
        sets = [("", name)]
        if endpoint.canary is not None:
            sets.append(("canary ", canary_set_name(name)))
        for prefix, set_name in sets:
            if mooncake.split:
                wanted.append((f"{prefix}kv transfer", kv_transfer, set_name))
            if mooncake.store_enabled:
                wanted.append((f"{prefix}kv store", kv_store, set_name))
            if "rdma" in engine_protocols(endpoint):
                wanted.append((f"{prefix}kv transport", kv_transport, set_name))
    # With a canary set the route sends a request to either set: each set's is sent to its own entry pod.
    direct = mooncake is not None and endpoint.canary is not None
    checks: list[Check] = []
    for check, action, set_name in wanted:
        unserved = zero.unverified() if zero is not None and check != "autoscaler active" else None
        if unserved is not None:
            checks.append(Check(name, region, check, "unverified", unserved))
            continue
        try:
            target = Target(
                set_name,
                region,
                endpoint,
                address,
                model,
                cluster(),
                client,
                arguments.log_wait,
                direct=direct,
                wake_wait=arguments.wake_wait,
            )
            checks.append(Check(name, region, check, "passed", action(target)))
        except UnverifiedError as reason:
            checks.append(Check(name, region, check, "unverified", str(reason)))
        except CheckError as error:
            checks.append(Check(name, region, check, "failed", str(error)))
    return checks


def _health(client: Client, url: str) -> str:
    """200, and the roles a split endpoint's proxy (the server a gate) says are at zero (it stays healthy then)."""
    status, answer = client.request("GET", url)
    if status != 200:
        raise CheckError(f"GET {url}: HTTP {status}")
    at_zero = answer.get(SCALED_TO_ZERO) if isinstance(answer, dict) else None
    if isinstance(at_zero, list) and at_zero:
        return f"HTTP 200 (scaled to zero: {', '.join(map(str, at_zero))})"
    return "HTTP 200"


def table(checks: Sequence[Check]) -> str:
    rows = [("endpoint", "region", "check", "status", "detail")] + [
        (check.endpoint, check.region, check.check, check.status, check.detail) for check in checks
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + "  " + row[4]
        for row in rows
    )


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser().parse_args(argv)
    try:
        stack_file, spec = load_stack(arguments.stack_file or resolve_stack(arguments.stack).path)
    except ProblemsError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return 1
    headers = {}
    if arguments.auth_env:
        token = os.environ.get(arguments.auth_env)
        if not token:
            print(f"error: --auth-env {arguments.auth_env}: the variable is not set", file=sys.stderr)
            return 1
        headers["Authorization"] = f"Bearer {token}"
    client = Client(timeout=arguments.timeout, deadline=arguments.deadline, headers=headers)
    try:
        checks = verify(spec, stack_outputs(arguments, stack_file.stack), client, arguments)
    except CheckError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if arguments.output == "json":
        print(json.dumps([asdict(check) for check in checks], indent=2))
    else:
        print(table(checks))
    return 0 if checks and all(check.status == "passed" for check in checks) else 1
