"""An example stack moved onto the local cluster: each of its regions becomes an
``existing_cluster`` reached by ``kubeconfig: env:LOCAL_CLUSTER_KUBECONFIG`` (the local cluster's
kubeconfig text, set by tests/engine/conftest.py), every platform add-on ``present`` (their Helm
charts cannot be fetched here;
the CRDs the program applies itself it still applies), node groups *described* as the program
would make them (its labels and taints, components/scheduling.py), and what a region reached by
kubeconfig alone cannot have dropped: the VPC, cluster access, protect and cold tier belong to a
created cluster, and weights synced from S3 (``model_source``) to a Pod Identity role; those
endpoints serve ``model`` from the Hugging Face Hub instead."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from components.catalog import instance_catalog
from components.scheduling import node_labels, node_taints
from components.spec.existing import Addons
from fleetctl.stackfile import read_stack_file
from tests.cluster.namespace import ROOT

REGIONS = "inference-fleet:regions"
ENDPOINTS = "inference-fleet:endpoints"
KUBECONFIG_VARIABLE = "LOCAL_CLUSTER_KUBECONFIG"
"""Holds the local cluster's kubeconfig text (``env:VAR`` is the text, not a path: components/spec/existing.py)."""
CREATED_CLUSTER_KEYS = ("vpc", "cluster_access", "protect", "cold_tier")
CREATED_GROUP_KEYS = ("min_size", "desired_size", "capacity_type")


def _described(name: str, group: dict[str, Any]) -> dict[str, Any]:
    facts = instance_catalog().instance_types[group["instance_types"][0]]
    described = {key: value for key, value in group.items() if key not in CREATED_GROUP_KEYS}
    efa = bool(group.get("efa", False))
    described["labels"] = node_labels(name, efa, facts)
    taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in node_taints(efa, facts)]
    if taints:
        described["taints"] = taints
    return described


def local_config(stack: str) -> dict[str, Any]:
    """The stack's config (``inference-fleet:*`` keys) on the local cluster."""
    config = copy.deepcopy(read_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml").project_config)
    present = dict.fromkeys(Addons.model_fields, "present")
    for region in config["regions"].values():
        for key in CREATED_CLUSTER_KEYS:
            region.pop(key, None)
        region["existing_cluster"] = {"kubeconfig": f"env:{KUBECONFIG_VARIABLE}", "addons": present}
        region["node_groups"] = {name: _described(name, group) for name, group in region["node_groups"].items()}
    for endpoint in config["endpoints"].values():
        endpoint.pop("model_source", None)
    if "global" in config:
        config["global"] = {**config["global"], "enabled": False}
    return {f"inference-fleet:{key}": value for key, value in config.items()}


def write_stack_file(config: dict[str, Any], path: Path) -> Path:
    """``config`` as a stack file (for the offline plan and `fleetctl` of the same stack)."""
    yaml = YAML()
    with path.open("w") as handle:
        yaml.dump({"config": config}, handle)
    return path
