"""KEDA, the metrics pipeline's scaling layer: the pinned chart and its vendored CustomResourceDefinitions."""

from __future__ import annotations

import hashlib
import re

import kubernetes_validate

from components.catalog import CONFIG_DIR, chart_crds, pins

CLUSTER_VERSION = "1.34"

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
    parts = re.split(r"^---\n# part (keda/templates/crds/[\w.-]+) blob ([0-9a-f]{40})\n", text, flags=re.MULTILINE)
    assert all(line.startswith("#") or not line for line in parts[0].splitlines())
    named = {(parts[i], parts[i + 1]): parts[i + 2] for i in range(1, len(parts), 3)}
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
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob, path
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
