"""KEDA, the metrics pipeline's scaling layer: the pinned chart and its vendored CustomResourceDefinitions."""

from __future__ import annotations

import kubernetes_validate

from components import naming
from components.catalog import CONFIG_DIR, chart_crds, pins
from components.platform.keda import COMPONENTS, METRICS_PORT, keda_values
from components.schedulability.platform_pods import facts as platform_facts
from components.schedulability.platform_pods import platform_workloads
from components.schedulability.quantities import amounts
from components.spec import parse_stack_config
from tests.chart_values import chart_defaults, unknown_paths
from tests.vendored import git_blob_id, vendored_parts

from .stack_builders import REGION, stack_config

CLUSTER_VERSION = "1.34"
COMPONENT_KEYS = {"operator", "metricsServer", "webhooks"}

LEFT_OUT_HEAD = (
    "    {{- if (or .Values.crds.additionalAnnotations .Values.additionalAnnotations) }}\n"
    "    {{- toYaml (merge .Values.crds.additionalAnnotations .Values.additionalAnnotations) | nindent 4 }}\n"
    "    {{- end }}\n"
)
NAME_LABEL = "    app.kubernetes.io/name: keda-operator\n"
NAME_TEMPLATE = "    app.kubernetes.io/name: {{ .Values.operator.name }}\n"
LABELS_INCLUDE = '    {{- include "keda.crd-labels" . | indent 4 }}\n'


def template_of(part: str) -> bytes:
    """The chart template a vendored part was rendered from, with the lines the file's header says
    were left out put back (kedacore/charts v2.20.2 keda/templates/crds/*.yaml all share them)."""
    lines = part.splitlines(keepends=True)
    assert lines[6] == NAME_LABEL, lines[:8]
    restored = [
        "{{- if .Values.crds.install }}\n",
        *lines[:5],
        LEFT_OUT_HEAD,
        lines[5],
        NAME_TEMPLATE,
        LABELS_INCLUDE,
        *lines[7:],
        "{{- end -}}\n",
    ]
    return "".join(restored).encode()


def test_the_chart_is_kedas_own_at_the_pinned_version_with_its_crds_vendored() -> None:
    chart = pins().charts.keda
    assert (chart.repo, chart.chart, chart.version) == ("https://kedacore.github.io/charts", "keda", "2.20.2")
    assert chart.crds == f"keda-{chart.version}-crds.yaml"


def test_the_vendored_crds_are_the_charts_templates_less_the_lines_the_header_names() -> None:
    """Each part, with the Helm directives and chart labels put back, is byte for byte the chart's
    template its header names, by git blob id."""
    text = (CONFIG_DIR / "keda-2.20.2-crds.yaml").read_text(encoding="utf-8")
    header, named = vendored_parts(text, "keda/templates/crds")
    assert all(line.startswith("#") or not line for line in header.splitlines())
    assert sorted(path.rsplit("/", 1)[1] for path, _ in named) == [
        "crd-cloudeventsources.yaml",
        "crd-clustercloudeventsources.yaml",
        "crd-clustertriggerauthentications.yaml",
        "crd-scaledjobs.yaml",
        "crd-scaledobjects.yaml",
        "crd-triggerauthentications.yaml",
    ]
    for (path, blob), part in named.items():
        data = template_of(part)
        assert git_blob_id(data) == blob, path
        assert "{{" not in part, path


def test_every_kind_the_operator_watches_has_its_crd_and_each_is_a_valid_object() -> None:
    crds = chart_crds(pins().charts.keda)
    assert sorted(crd["spec"]["names"]["kind"] for crd in crds) == [
        "CloudEventSource",
        "ClusterCloudEventSource",
        "ClusterTriggerAuthentication",
        "ScaledJob",
        "ScaledObject",
        "TriggerAuthentication",
    ]
    for crd in crds:
        kubernetes_validate.validate(crd, CLUSTER_VERSION, strict=True)


def test_the_scaledobject_schema_has_what_the_scalers_render() -> None:
    """keda.sh/v1alpha1 ScaledObject: a scale target, replica bounds down to zero, triggers."""
    (scaled_object,) = [crd for crd in chart_crds(pins().charts.keda) if crd["spec"]["names"]["kind"] == "ScaledObject"]
    (version,) = scaled_object["spec"]["versions"]
    assert (scaled_object["spec"]["group"], version["name"], version["served"]) == ("keda.sh", "v1alpha1", True)
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert {"scaleTargetRef", "minReplicaCount", "maxReplicaCount", "triggers"} <= set(spec["properties"])
    assert set(spec["required"]) == {"scaleTargetRef", "triggers"}


# Values and the pods they make.


def test_values_set_only_keys_the_pinned_charts_values_declare() -> None:
    assert list(unknown_paths(keda_values(), chart_defaults("keda-2.20.2-values.yaml"))) == []


def test_the_release_renders_no_crds_and_serves_each_components_metrics() -> None:
    values = keda_values()
    assert values["crds"] == {"install": False}
    assert {component: settings["enabled"] for component, settings in values["prometheus"].items()} == {
        "operator": True,
        "metricServer": True,
        "webhooks": True,
    }
    defaults = chart_defaults("keda-2.20.2-values.yaml")["prometheus"]
    assert {settings["port"] for settings in defaults.values()} == {METRICS_PORT}


def test_the_recorded_scheduling_facts_are_the_charts_defaults() -> None:
    """config/platform_pods.yaml charts.keda against the chart's values.yaml."""
    chart = chart_defaults("keda-2.20.2-values.yaml")
    recorded = platform_facts()["charts"]["keda"]
    assert recorded["version"] == pins().charts.keda.version
    for key, value in recorded["defaults"].items():
        if key == "resources":
            for component, resources in value.items():
                assert resources["requests"] == chart["resources"][component]["requests"]
        elif isinstance(value, dict) and key in COMPONENT_KEYS:
            for field, default in value.items():
                assert chart[key][field] == default, (key, field)
        else:
            assert chart[key] == value, key
    assert {key for key, _ in COMPONENTS.values()} == COMPONENT_KEYS


def test_keda_runs_three_deployments_on_system_nodes_only_where_the_pipeline_runs() -> None:
    on = parse_stack_config(stack_config(region_overrides={"metrics": {"enabled": True}})).regions[REGION]
    found = {w.name: w for w in platform_workloads(REGION, on) if w.name.startswith("keda-")}
    assert sorted(found) == sorted(COMPONENTS)
    for workload in found.values():
        assert workload.namespace == naming.METRICS_NAMESPACE
        assert workload.replicas == 1
        assert workload.requests == amounts({"cpu": "100m", "memory": "100Mi"})
        assert workload.pod["nodeSelector"] == {"kubernetes.io/os": "linux", "inference-fleet/accelerator": "none"}
        assert workload.pod["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    off = parse_stack_config(stack_config()).regions[REGION]
    assert not [w for w in platform_workloads(REGION, off) if w.namespace == naming.METRICS_NAMESPACE]
