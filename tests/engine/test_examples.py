"""Each example stack's Kubernetes half through the real engine, region by region (dev's one; each of
prod's two in turn, the local cluster being one region): the project's own program (__main__.py as an
inline program) with the region an existing cluster reached by kubeconfig, the local cluster, every
add-on present (tests/engine/stacks.py, tests/engine/present.py). `up` converges with the provider's
real awaits (rollouts finish on kwok's nodes), a second `up` does nothing, and `destroy` leaves nothing
of ours but what the program keeps on purpose."""

from __future__ import annotations

import pytest

from components.naming import fleet_labels
from tests.cluster.kube import Kube
from tests.cluster.local_cluster import replace_nodes
from tests.cluster.stacks import spec_of
from tests.engine.engine import Engine, changed
from tests.engine.present import install_present, present_addons
from tests.engine.stacks import SECRETS, engine_config, local_config, write_stack_file

pytestmark = pytest.mark.engine

PROGRAM = "tests.engine.programs:project"
PROJECT = "inference-fleet"
REGIONS = [("dev", "us-west-2"), ("prod", "us-east-1"), ("prod", "eu-west-1")]
KEPT_KINDS = frozenset({"Namespace", "CustomResourceDefinition"})
"""What the program leaves on destroy by design (retain_on_delete: a namespace may hold objects not
ours; deleting a CRD deletes every object of its kind)."""


def _ours(kube: Kube) -> list[str]:
    """Every object in the API server carrying the fleet's labels, but what the program keeps."""
    selector = ",".join(f"{key}={value}" for key, value in fleet_labels().items())
    found = []
    for api_version, kind in [*kube.namespaced_kinds(), ("v1", "Namespace")]:
        if kind in KEPT_KINDS or kind == "Event":
            continue
        path = kube.resource(api_version, kind).path()
        for item in kube.request("GET", path, query={"labelSelector": selector})["items"]:
            found.append(f"{kind} {item['metadata'].get('namespace', '')}/{item['metadata']['name']}")
    return found


@pytest.fixture(params=REGIONS, ids=["-".join(region) for region in REGIONS])
def region_on_local_cluster(
    request: pytest.FixtureRequest, local_cluster: tuple[Kube, Engine], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Kube, Engine, str, dict[str, object]]:
    kube, engine = local_cluster
    stack, region = request.param
    config = local_config(stack, region)
    stack_file = write_stack_file(config, tmp_path_factory.mktemp("stack") / f"Pulumi.{stack}.yaml")
    replace_nodes(kube, spec_of(stack_file).regions[region])
    install_present(kube)
    return kube, engine, f"{stack}-{region}", engine_config(config)


def test_a_region_converges_is_a_no_op_the_second_time_and_destroys_cleanly(
    region_on_local_cluster: tuple[Kube, Engine, str, dict[str, object]],
) -> None:
    kube, engine, stack, config = region_on_local_cluster
    with present_addons(kube):
        first = engine.run(PROGRAM, stack, "up", config, SECRETS, project=PROJECT)
        assert {step["op"] for step in first["steps"]} <= {"create", "same"}
        assert changed(first)
        for deployment in kube.objects("apps/v1", "Deployment"):
            status = deployment["status"]
            assert status.get("readyReplicas", 0) == deployment["spec"]["replicas"], deployment["metadata"]["name"]
        second = engine.run(PROGRAM, stack, "up", config, SECRETS, project=PROJECT)
        assert changed(second) == {}
        engine.run(PROGRAM, stack, "destroy", config, SECRETS, project=PROJECT)
    assert _ours(kube) == []
