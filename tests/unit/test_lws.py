"""LeaderWorkerSet, which runs a Mooncake role spanning nodes: the pinned chart, its vendored
CustomResourceDefinitions, and the schema check every rendered LeaderWorkerSet is held to."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest

from components.catalog import CONFIG_DIR, chart_crds, pins
from tests.crd_schema import schema_problems
from tests.vendored import git_blob_id, vendored_parts

CLUSTER_VERSION = "1.34"


def lws_crd() -> dict[str, Any]:
    (crd,) = [crd for crd in chart_crds(pins().charts.lws) if crd["spec"]["names"]["kind"] == "LeaderWorkerSet"]
    return crd


def test_the_chart_is_the_lws_release_at_the_pinned_version_with_its_crds_vendored() -> None:
    chart = pins().charts.lws
    assert (chart.repo, chart.chart, chart.version) == ("oci://registry.k8s.io/lws/charts", "lws", "0.10.0")
    assert chart.crds == f"lws-{chart.version}-crds.yaml"


def test_the_vendored_crds_are_the_charts_crds_byte_for_byte() -> None:
    """Each part is the file its header names, by git blob id (kubernetes-sigs/lws v0.10.0)."""
    text = (CONFIG_DIR / "lws-0.10.0-crds.yaml").read_text(encoding="utf-8")
    header, named = vendored_parts(text, "charts/lws/crds")
    assert all(line.startswith("#") or not line for line in header.splitlines())
    assert sorted(path.rsplit("/", 1)[1] for path, _ in named) == [
        "disaggregatedset.x-k8s.io_disaggregatedsetrolescalers.yaml",
        "disaggregatedset.x-k8s.io_disaggregatedsets.yaml",
        "leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    ]
    for (path, blob), part in named.items():
        data = part.encode()
        assert git_blob_id(data) == blob, path


def test_each_crd_is_a_valid_object_and_the_webhook_is_where_the_release_puts_it() -> None:
    crds = chart_crds(pins().charts.lws)
    assert sorted(crd["spec"]["names"]["kind"] for crd in crds) == [
        "DisaggregatedSet",
        "DisaggregatedSetRoleScaler",
        "LeaderWorkerSet",
    ]
    for crd in crds:
        kubernetes_validate.validate(crd, CLUSTER_VERSION, strict=True)
    service = lws_crd()["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
    assert (service["namespace"], service["name"]) == ("lws-system", "lws-webhook-service")


def group_of_two() -> dict[str, Any]:
    """A LeaderWorkerSet of one group of two pods, as vLLM 0.33.0's docs/deployment/frameworks/lws.md
    deploys a model over two nodes (multiprocessing)."""
    pod = {
        "containers": [
            {"name": "vllm", "image": "vllm/vllm-openai:v0.33.0", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
        ]
    }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm"},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 2,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {"metadata": {"labels": {"role": "leader"}}, "spec": pod},
                "workerTemplate": {"spec": copy.deepcopy(pod)},
            },
        },
    }


def test_the_schema_check_accepts_a_group_as_the_pinned_vllm_documents_it() -> None:
    assert schema_problems(lws_crd(), group_of_two()) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda lws: lws["spec"]["leaderWorkerTemplate"].update(sizes=2), "'sizes' was unexpected"),
        (lambda lws: lws["spec"]["leaderWorkerTemplate"].update(size="two"), "'two' is not of type 'integer'"),
        (lambda lws: lws["spec"]["leaderWorkerTemplate"].update(restartPolicy="Always"), "is not one of"),
        (lambda lws: lws["spec"]["leaderWorkerTemplate"].pop("workerTemplate"), "'workerTemplate' is a required"),
        (
            lambda lws: lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0].update(
                ports=8000
            ),
            "8000 is not of type 'array'",
        ),
        (lambda lws: lws.update(apiVersion="leaderworkerset.x-k8s.io/v2"), "version 'v2' is not served"),
    ],
)
def test_the_schema_check_refuses_what_the_api_server_refuses(change: Any, problem: str) -> None:
    lws = group_of_two()
    change(lws)
    assert any(problem in found for found in schema_problems(lws_crd(), lws)), schema_problems(lws_crd(), lws)
