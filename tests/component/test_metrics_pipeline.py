"""The region's metrics pipeline as the offline plan records it: where it runs, what it installs,
and in which order (prod autoscales on gpu, so both its regions run one; dev runs none)."""

from __future__ import annotations

from typing import Any

import pytest

from components import naming
from components.catalog import chart_crds, pins
from fleetctl.plan import Plan, region_of
from tests.component.programs import by_type, example_plan

PROD_REGIONS = ("us-east-1", "eu-west-1")
PIPELINE = "inference-fleet:platform:MetricsPipeline"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
RELEASE = "kubernetes:helm.sh/v3:Release"


def children(plan: Plan, parent: dict[str, Any], resource_type: str) -> list[dict[str, Any]]:
    return [r for r in by_type(plan, resource_type) if r["parent"] == parent["urn"]]


def pipeline_of(plan: Plan, region: str) -> list[dict[str, Any]]:
    by_urn = {resource["urn"]: resource for resource in plan.resources}
    return [r for r in by_type(plan, PIPELINE) if region_of(r, by_urn) == region]


def test_dev_autoscales_on_nothing_the_pipeline_serves_so_runs_none() -> None:
    plan = example_plan("dev")
    assert by_type(plan, PIPELINE) == []
    assert all(release["inputs"]["namespace"] != naming.METRICS_NAMESPACE for release in by_type(plan, RELEASE))


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_keda_is_installed_in_the_metrics_namespace_after_its_crds(region: str) -> None:
    plan = example_plan("prod")
    (pipeline,) = pipeline_of(plan, region)
    assert pipeline["name"] == f"{region}-metrics"
    (namespace,) = children(plan, pipeline, "kubernetes:core/v1:Namespace")
    assert namespace["inputs"]["metadata"]["name"] == naming.METRICS_NAMESPACE
    crds = children(plan, pipeline, CRD)
    vendored = {crd["metadata"]["name"]: crd["spec"] for crd in chart_crds(pins().charts.keda)}
    assert {crd["inputs"]["metadata"]["name"]: crd["inputs"]["spec"] for crd in crds} == vendored
    for crd in crds:
        assert crd["name"] == f"{region}-keda-{crd['inputs']['metadata']['name']}"
        assert crd["options"]["retainOnDelete"] is True
        assert crd["inputs"]["metadata"]["labels"]["app.kubernetes.io/version"] == "2.20.2"
    (keda,) = [r for r in children(plan, pipeline, RELEASE) if r["inputs"]["chart"] == "keda"]
    assert keda["name"] == f"{region}-keda"
    assert (keda["inputs"]["version"], keda["inputs"]["namespace"]) == ("2.20.2", naming.METRICS_NAMESPACE)
    assert keda["inputs"]["values"]["crds"] == {"install": False}
    assert {namespace["urn"], *(crd["urn"] for crd in crds)} <= set(keda["options"]["dependsOn"])


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_the_regions_workloads_wait_for_the_pipeline(region: str) -> None:
    plan = example_plan("prod")
    (pipeline,) = pipeline_of(plan, region)
    deployment = next(r for r in by_type(plan, "kubernetes:apps/v1:Deployment") if r["name"] == f"{region}-summarize")
    # Recorded as the component's resources (a dependency on a component waits for its children).
    installed = {r["urn"] for r in [*children(plan, pipeline, RELEASE), *children(plan, pipeline, CRD)]}
    assert installed <= set(deployment["options"]["dependsOn"])


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_prometheus_is_installed_with_the_regions_settings(region: str) -> None:
    plan = example_plan("prod")
    (pipeline,) = pipeline_of(plan, region)
    (release,) = [r for r in children(plan, pipeline, RELEASE) if r["inputs"]["chart"] == "prometheus"]
    assert release["name"] == f"{region}-prometheus"
    assert (release["inputs"]["version"], release["inputs"]["namespace"]) == ("29.27.0", naming.METRICS_NAMESPACE)
    server = release["inputs"]["values"]["server"]
    assert (server["fullnameOverride"], server["service"]["servicePort"]) == ("prometheus", 9090)
    assert (server["retention"], server["emptyDir"]) == ("7d", {"sizeLimit": "10Gi"})
    (namespace,) = children(plan, pipeline, "kubernetes:core/v1:Namespace")
    assert namespace["urn"] in release["options"]["dependsOn"]


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_the_dcgm_exporter_runs_on_the_regions_nvidia_nodes(region: str) -> None:
    plan = example_plan("prod")
    (pipeline,) = pipeline_of(plan, region)
    (release,) = [r for r in children(plan, pipeline, RELEASE) if r["inputs"]["chart"] == "dcgm-exporter"]
    assert release["name"] == f"{region}-dcgm-exporter"
    assert (release["inputs"]["version"], release["inputs"]["namespace"]) == ("4.8.2", naming.METRICS_NAMESPACE)
    assert release["inputs"]["values"]["nodeSelector"] == {"inference-fleet/accelerator": "nvidia"}
    by_urn = {resource["urn"]: resource for resource in plan.resources}
    plugin = next(
        r
        for r in by_type(plan, RELEASE)
        if r["inputs"]["chart"] == "nvidia-device-plugin" and region_of(r, by_urn) == region
    )
    assert plugin["urn"] in release["options"]["dependsOn"]


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_grafana_is_installed_with_prometheus_as_its_source(region: str) -> None:
    plan = example_plan("prod")
    (pipeline,) = pipeline_of(plan, region)
    (release,) = [r for r in children(plan, pipeline, RELEASE) if r["inputs"]["chart"] == "grafana"]
    assert release["name"] == f"{region}-grafana"
    assert (release["inputs"]["version"], release["inputs"]["namespace"]) == ("12.11.1", naming.METRICS_NAMESPACE)
    (source,) = release["inputs"]["values"]["datasources"]["datasources.yaml"]["datasources"]
    assert source["url"] == naming.prometheus_query_url()
    assert "adminPassword" not in release["inputs"]["values"]


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_metrics_server_serves_the_resource_metrics_api_in_kube_system(region: str) -> None:
    plan = example_plan("prod")
    (pipeline,) = pipeline_of(plan, region)
    (release,) = [r for r in children(plan, pipeline, RELEASE) if r["inputs"]["chart"] == "metrics-server"]
    assert release["name"] == f"{region}-metrics-server"
    assert (release["inputs"]["version"], release["inputs"]["namespace"]) == ("3.13.1", "kube-system")
