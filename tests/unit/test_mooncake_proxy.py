"""The proxy of split Mooncake endpoints: our program (components/render/proxy_program.py) and
how it is rendered. The program itself runs against restarting stand-ins in
tests/e2e/test_mooncake_proxy.py."""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from components.metric_table import (
    PROXY_ANSWERED,
    PROXY_IN_FLIGHT,
    PROXY_LAST_REQUEST,
    PROXY_REQUESTS,
    PROXY_UNSERVED,
)
from components.render import proxy, proxy_program
from components.render.drain import FRONT_DRAIN_SECONDS, SERVER_DRAIN_SECONDS
from components.render.mooncake import mooncake_objects
from components.render.placement import PlacedEndpoint
from components.render.pods import NON_ROOT_ID
from components.render.proxy_program import Counts, Engine, engines_of, exposition, parse_arguments, url_host
from fleetctl.verify import schemas as verify_schemas
from tests.prometheus_tools import binary
from tests.unit.stack_builders import mooncake_endpoint, placed_endpoint, stack_config

ENGINE = "5f2b7c1e-9a53-4c1b-8d1f-2a0e6b3c4d5e"


def split(**mooncake: Any) -> PlacedEndpoint:
    spec = mooncake_endpoint({"node_group": "gpu", "mooncake": {"transfer": {"protocol": "tcp"}, **mooncake}})
    return placed_endpoint(stack_config(endpoints={"chat": spec}))


def proxy_pod(endpoint: PlacedEndpoint) -> dict[str, Any]:
    template: dict[str, Any] = mooncake_objects(endpoint, None)["proxy"]["spec"]["template"]
    return template


def test_engines_are_read_from_the_bootstrap_servers_query_answer() -> None:
    """vLLM 0.33.0 MooncakeBootstrapServer.query: dict[dp_rank, EngineEntry(engine_id, worker_addr)] as JSON."""
    answer = {
        "1": {"engine_id": "second", "worker_addr": {"0": {"0": "tcp://10.0.3.7:51234"}}},
        "0": {"engine_id": ENGINE, "worker_addr": {"0": {"0": "tcp://10.0.3.7:50001"}, "1": {"0": "tcp://x:1"}}},
    }
    assert engines_of("10.0.3.7", answer) == [Engine("10.0.3.7", 0, ENGINE), Engine("10.0.3.7", 1, "second")]


@pytest.mark.parametrize(
    "answer",
    [{}, [], None, "x", {"0": {"worker_addr": {}}}, {"0": {"engine_id": ""}}, {"rank": {"engine_id": ENGINE}}],
)
def test_an_answer_naming_no_engine_leaves_the_pod_out(answer: Any) -> None:
    """A bootstrap server whose workers have not registered answers {}: no engine to send decode to."""
    assert engines_of("10.0.3.7", answer) == []


def test_ipv6_pod_addresses_are_bracketed_in_urls() -> None:
    assert url_host("fd00:ec2::12") == "[fd00:ec2::12]"
    assert url_host("10.0.3.7") == "10.0.3.7"


def test_the_program_needs_only_the_standard_library_and_aiohttp() -> None:
    """What the vLLM image carries (its requirements/common.txt has aiohttp); no module of ours."""
    tree = ast.parse(proxy.program_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0}
    tops = {name.split(".")[0] for name in imported}
    assert tops - set(sys.stdlib_module_names) - {"__future__"} == {"aiohttp"}


def test_the_config_map_carries_the_program_and_the_pods_its_checksum() -> None:
    endpoint = split()
    objects = mooncake_objects(endpoint, None)
    text = Path(proxy_program.__file__).read_text()
    assert objects["proxy-program"]["data"] == {proxy.PROGRAM_FILE: text}
    annotations = objects["proxy"]["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {proxy.PROGRAM_CHECKSUM_ANNOTATION: hashlib.sha256(text.encode()).hexdigest()}
    (volume,) = [v for v in objects["proxy"]["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    assert volume["configMap"]["name"] == objects["proxy-program"]["metadata"]["name"]


def test_a_program_change_rolls_the_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = proxy_pod(split())["metadata"]["annotations"]
    changed = tmp_path / "proxy_program.py"
    changed.write_text(proxy.program_text() + "# changed\n")
    monkeypatch.setattr(proxy, "PROGRAM_SOURCE", changed)
    assert proxy_pod(split())["metadata"]["annotations"] != before


def test_the_program_accepts_the_rendered_arguments() -> None:
    (container,) = proxy_pod(split())["spec"]["containers"]
    assert container["command"] == ["python3", f"{proxy.PROGRAM_DIR}/{proxy.PROGRAM_FILE}"]
    arguments = parse_arguments(container["args"])
    assert (arguments.host, arguments.port) == ("0.0.0.0", proxy.PROXY_PORT)
    assert arguments.prefill_service == "chat-prefill.inference.svc"
    assert (arguments.prefill_port, arguments.bootstrap_port) == (8000, 8998)
    assert arguments.decode == "http://chat-decode.inference.svc:8000"
    assert arguments.refresh_seconds == proxy.REFRESH_SECONDS
    assert arguments.keepalive_seconds > 600  # the load balancer's idle timeout


def test_the_front_drains_its_streams_as_long_as_the_servers_behind_it_and_within_its_grace() -> None:
    """The program's wait for its requests in flight after SIGTERM is the servers' drain, and the pod's
    grace period leaves it the preStop before and the exit after (components/render/drain.py)."""
    pod = proxy_pod(split())
    (container,) = pod["spec"]["containers"]
    drain = parse_arguments(container["args"]).drain_seconds
    assert drain == FRONT_DRAIN_SECONDS == SERVER_DRAIN_SECONDS
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["spec"]["terminationGracePeriodSeconds"] > pre_stop + drain


def test_fixed_and_autoscaled_prefill_get_the_same_proxy_and_a_topology_change_leaves_it() -> None:
    """The prefill pods come from the headless Service's name, whatever makes them."""
    fixed = proxy_pod(split(topology={"prefill": 1, "decode": 1}))
    assert proxy_pod(split(topology={"prefill": 3, "decode": 2})) == fixed
    autoscaled = split(autoscaling={"enabled": True, "prefill": {"min_replicas": 1, "max_replicas": 4}})
    assert proxy_pod(autoscaled) == fixed
    kinds = {document["kind"] for document in mooncake_objects(autoscaled, None).values()}
    assert not kinds & {"Role", "RoleBinding", "ServiceAccount"}  # no API access: the proxy reads DNS


def test_the_proxy_runs_two_replicas_locked_down_behind_a_disruption_budget() -> None:
    objects = mooncake_objects(split(), None)
    assert objects["proxy"]["spec"]["replicas"] == proxy.PROXY_REPLICAS == 2
    assert objects["proxy-disruption-budget"]["spec"]["maxUnavailable"] == 1
    assert objects["proxy-disruption-budget"]["spec"]["selector"] == objects["proxy"]["spec"]["selector"]
    pod = objects["proxy"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert (security["readOnlyRootFilesystem"], security["runAsNonRoot"]) == (True, True)
    assert security["runAsUser"] == NON_ROOT_ID
    assert pod["automountServiceAccountToken"] is False
    assert all(mount.get("readOnly") for mount in container["volumeMounts"] if mount["mountPath"] != "/tmp")


def test_the_proxy_replicas_prefer_different_nodes_without_requiring_it() -> None:
    pod = mooncake_objects(split(), None)["proxy"]["spec"]["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in anti
    (preference,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    term = preference["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert (
        term["labelSelector"]["matchLabels"]
        == mooncake_objects(split(), None)["proxy"]["spec"]["selector"]["matchLabels"]
    )


def test_readiness_and_the_load_balancer_check_the_proxys_health_for_200() -> None:
    objects = mooncake_objects(split(), None)
    (container,) = objects["proxy"]["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == proxy.PROXY_HEALTH_PATH == "/health"
    assert "tcpSocket" in container["livenessProbe"]  # a peer's outage must not restart the proxy
    annotations = objects["route"]["metadata"]["annotations"]
    assert annotations["alb.ingress.kubernetes.io/healthcheck-path"] == "/health"
    assert annotations["alb.ingress.kubernetes.io/success-codes"] == "200"


def test_the_admin_key_goes_to_the_proxy_as_the_servers_read_it() -> None:
    (container,) = proxy_pod(split(proxy={"admin_api_key_secret": "chat-admin"}))["spec"]["containers"]
    ref = {"secretKeyRef": {"name": "chat-admin", "key": "ADMIN_API_KEY"}}
    assert container["env"] == [{"name": "VLLM_API_KEY", "valueFrom": ref}]
    assert "env" not in proxy_pod(split())["spec"]["containers"][0]


def test_the_programs_series_are_the_names_the_rendering_uses() -> None:
    """The program runs alone in its pod and cannot import components.metric_table."""
    assert (proxy_program.REQUESTS, proxy_program.UNSERVED) == (PROXY_REQUESTS, PROXY_UNSERVED)
    assert (proxy_program.ANSWERED, proxy_program.IN_FLIGHT) == (PROXY_ANSWERED, PROXY_IN_FLIGHT)
    assert proxy_program.LAST_REQUEST == PROXY_LAST_REQUEST


def test_the_exposition_is_prometheus_text_with_every_series_from_start() -> None:
    families = {family.name: family for family in text_string_to_metric_families(exposition(Counts()))}
    # The parser names a counter's family without _total, as OpenMetrics does; its samples keep it.
    assert {name: family.type for name, family in families.items()} == {
        PROXY_REQUESTS.removesuffix("_total"): "counter",
        PROXY_UNSERVED.removesuffix("_total"): "counter",
        PROXY_ANSWERED.removesuffix("_total"): "counter",
        PROXY_IN_FLIGHT: "gauge",
        PROXY_LAST_REQUEST: "gauge",
    }
    values = {(s.name, tuple(s.labels.items())): s.value for f in families.values() for s in f.samples}
    assert values == {
        (PROXY_REQUESTS, ()): 0,
        (PROXY_UNSERVED, (("backend", "prefill"),)): 0,
        (PROXY_UNSERVED, (("backend", "decode"),)): 0,
        (PROXY_ANSWERED, ()): 0,
        (PROXY_IN_FLIGHT, ()): 0,
        (PROXY_LAST_REQUEST, ()): 0,
    }


def test_the_exposition_carries_the_counts() -> None:
    counts = Counts(requests=7, answered=3, in_flight=2, last_request=1764590400.25)
    counts.unserved_by(["prefill", "decode"])
    counts.unserved_by(["decode"])
    text = exposition(counts)
    values = {
        (s.name, tuple(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples
    }
    assert values[(PROXY_REQUESTS, ())] == 7
    assert values[(PROXY_UNSERVED, (("backend", "prefill"),))] == 1
    assert values[(PROXY_UNSERVED, (("backend", "decode"),))] == 2
    assert (values[(PROXY_ANSWERED, ())], values[(PROXY_IN_FLIGHT, ())]) == (3, 2)
    assert values[(PROXY_LAST_REQUEST, ())] == 1764590400.25


def test_the_answer_at_zero_says_so_and_when_to_retry() -> None:
    answer = proxy_program.scaled_to_zero(["prefill", "decode"], 45)
    assert (answer.status, answer.headers["Retry-After"]) == (503, "45")
    assert answer.text is not None
    assert json.loads(answer.text) == {
        "error": {
            "message": "prefill and decode scaled to zero: this request wakes them; retry in a few minutes",
            "type": "scaled_to_zero",
            "code": 503,
        }
    }
    one = proxy_program.scaled_to_zero(["decode"], 30)
    assert one.text is not None
    assert json.loads(one.text)["error"]["message"].startswith("decode scaled to zero: this request wakes it;")


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


def with_min_replicas(prefill: int | None, decode: int | None, enabled: bool = True) -> PlacedEndpoint:
    """A split endpoint whose roles autoscale from these minimums (None: no autoscaler for the role)."""
    blocks = {
        role: {"min_replicas": low, "max_replicas": 4}
        for role, low in (("prefill", prefill), ("decode", decode))
        if low is not None
    }
    return split(autoscaling={"enabled": enabled, **blocks})


@pytest.mark.parametrize(
    ("prefill", "decode", "roles"),
    [(0, 0, ["prefill", "decode"]), (0, 1, ["prefill"]), (None, 0, ["decode"]), (1, 1, []), (2, None, [])],
)
def test_the_roles_autoscaled_from_zero_are_the_proxys_scale_to_zero(
    prefill: int | None, decode: int | None, roles: list[str]
) -> None:
    endpoint = with_min_replicas(prefill, decode)
    (container,) = proxy_pod(endpoint)["spec"]["containers"]
    assert parse_arguments(container["args"]).scale_to_zero == roles


def test_a_disabled_autoscaler_puts_no_role_at_zero() -> None:
    assert proxy.scaled_to_zero_roles(with_min_replicas(0, 0, enabled=False)) == []


def test_the_proxy_serves_its_metrics_on_a_port_of_their_own() -> None:
    (container,) = proxy_pod(split())["spec"]["containers"]
    assert parse_arguments(container["args"]).metrics_port == proxy.PROXY_METRICS_PORT == 8090
    assert {"name": "metrics", "containerPort": 8090, "protocol": "TCP"} in container["ports"]
    assert [port["containerPort"] for port in container["ports"]] == [proxy.PROXY_PORT, proxy.PROXY_METRICS_PORT]


def test_verify_recognises_the_answer_at_zero_by_the_programs_error_type() -> None:
    """fleetctl verify waits for an endpoint whose proxy answers this type (and reads /health's key)."""
    assert proxy_program.SCALED_TO_ZERO == verify_schemas.SCALED_TO_ZERO


def test_promtool_finds_nothing_to_lint_in_the_exposition() -> None:
    """Prometheus's own linter (Debian's promtool, `check metrics`: counter suffixes, HELP, units)."""
    counts = Counts(requests=2, answered=1, in_flight=1)
    counts.unserved_by(["decode"])
    checked = subprocess.run(
        [binary("promtool"), "check", "metrics"], input=exposition(counts), capture_output=True, text=True, check=False
    )
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")
