"""The remover of the EFA nodes' startup taint in prod's plan (issue 28, item 8; the program's own
test is tests/unit/test_efa_startup_taint.py): in each region with EFA groups, its ServiceAccount,
ClusterRole, binding, ConfigMap with the program and DaemonSet, in kube-system, each after the one
before; the EFA node groups register with the taint, the system group without, and the node
templates Cluster Autoscaler scales from at zero leave it out (it would drop it anyway:
kubernetes/autoscaler cluster-autoscaler-1.34.5 utils/taints/taints.go SanitizeTaints)."""

from __future__ import annotations

import itertools
import json

import pytest

from components import scheduling
from components.platform import efa_ready
from tests.component.programs import by_type, example_plan

KINDS = ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "NetworkPolicy", "DaemonSet"]


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1"])
def test_each_region_with_efa_groups_runs_the_remover(region: str) -> None:
    plan = example_plan("prod")
    found = [
        r
        for r in plan.resources
        if r["type"].startswith("kubernetes:") and r["name"].startswith(f"{region}-{efa_ready.NAME}-")
    ]
    assert sorted(r["inputs"]["kind"] for r in found) == sorted(KINDS)
    by_kind = {r["inputs"]["kind"]: r for r in found}
    for before, after in itertools.pairwise(KINDS):
        assert by_kind[before]["urn"] in by_kind[after]["options"]["dependsOn"]
    pod = by_kind["DaemonSet"]["inputs"]["spec"]["template"]["spec"]
    assert pod == json.loads(json.dumps(efa_ready.pod_spec()))
    assert by_kind["ConfigMap"]["inputs"]["data"] == {efa_ready.PROGRAM_FILE: efa_ready.program_text()}


def test_efa_groups_register_with_the_startup_taint_and_their_templates_leave_it_out() -> None:
    plan = example_plan("prod")
    key = scheduling.EFA_STARTUP_TAINT.key
    for group in by_type(plan, "eks:index:ManagedNodeGroup"):
        keys = {taint["key"] for taint in group["inputs"].get("taints") or []}
        assert (key in keys) == ("-system" not in group["name"]), group["name"]
    tags = [tag["inputs"]["tag"]["key"] for tag in by_type(plan, "aws:autoscaling/tag:Tag")]
    assert tags
    assert not [tag for tag in tags if key in tag]
