"""The proxy of split Mooncake endpoints as it is rendered: the front's package (front/, its own tests
in tests/front) in a ConfigMap, run by the pods. The program itself runs against restarting stand-ins
in tests/e2e/test_mooncake_proxy.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import front
from components.render import proxy
from components.render.drain import FRONT_DRAIN_SECONDS, SERVER_DRAIN_SECONDS
from components.render.mooncake import mooncake_objects
from components.render.placement import PlacedEndpoint
from components.render.pods import NON_ROOT_ID
from front.serve import parse_arguments
from tests.unit.stack_builders import mooncake_endpoint, placed_endpoint, stack_config


def split(**mooncake: Any) -> PlacedEndpoint:
    spec = mooncake_endpoint({"node_group": "gpu", "mooncake": {"transfer": {"protocol": "tcp"}, **mooncake}})
    return placed_endpoint(stack_config(endpoints={"chat": spec}))


def proxy_pod(endpoint: PlacedEndpoint) -> dict[str, Any]:
    template: dict[str, Any] = mooncake_objects(endpoint, None)["proxy"]["spec"]["template"]
    return template


def test_the_config_map_carries_every_module_of_the_front_and_the_pods_their_checksum() -> None:
    endpoint = split()
    objects = mooncake_objects(endpoint, None)
    package = Path(front.__file__).parent
    modules = {path.name: path.read_text() for path in package.glob("*.py")}
    assert {"__init__.py", "__main__.py", "proxy.py", "gate.py", "serve.py"} <= modules.keys()
    assert objects["proxy-program"]["data"] == modules
    annotations = objects["proxy"]["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {proxy.PROGRAM_CHECKSUM_ANNOTATION: proxy.program_checksum()}
    (volume,) = [v for v in objects["proxy"]["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    assert volume["configMap"]["name"] == objects["proxy-program"]["metadata"]["name"]
    paths = {item["key"]: item["path"] for item in volume["configMap"]["items"]}
    assert paths == {name: "__main__.py" if name == "__main__.py" else f"front/{name}" for name in modules}


def mounted(tmp_path: Path, objects: dict[str, Any]) -> Path:
    """The program volume as the kubelet writes it: each key at its item's path."""
    (volume,) = [v for v in objects["proxy"]["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    for item in volume["configMap"]["items"]:
        (tmp_path / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / item["path"]).write_text(objects["proxy-program"]["data"][item["key"]])
    return tmp_path


def test_the_pods_command_runs_the_mounted_package_not_another_copy(tmp_path: Path) -> None:
    """``python3 <dir>`` runs ``<dir>/__main__.py`` with ``<dir>`` first on the path, so ``front`` is the
    mounted one (python -v names the file each import came from)."""
    objects = mooncake_objects(split(), None)
    (container,) = objects["proxy"]["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python3", proxy.PROGRAM_DIR]
    directory = mounted(tmp_path / "mount", objects)
    ran = subprocess.run(
        [sys.executable, "-v", str(directory), "--help"], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.startswith("usage:")
    assert str(directory / "front" / "serve.py") in ran.stderr
    assert str(Path(front.__file__).parent / "serve.py") not in ran.stderr


def test_a_change_of_any_module_rolls_the_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = proxy_pod(split())["metadata"]["annotations"]
    for name, text in proxy.program_files().items():
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(proxy, "program_source", lambda: tmp_path)
    assert proxy_pod(split())["metadata"]["annotations"] == before
    (tmp_path / "gate.py").write_text((tmp_path / "gate.py").read_text() + "# changed\n")
    assert proxy_pod(split())["metadata"]["annotations"] != before


def test_the_program_accepts_the_rendered_arguments() -> None:
    (container,) = proxy_pod(split())["spec"]["containers"]
    assert container["command"] == ["python3", proxy.PROGRAM_DIR]
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
