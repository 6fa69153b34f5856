"""An example stack moved onto the local cluster: each of its regions becomes an
``existing_cluster`` reached by ``kubeconfig: env:LOCAL_CLUSTER_KUBECONFIG`` (the local cluster's
kubeconfig text, set by tests/engine/conftest.py), every platform add-on ``present`` (their Helm
charts cannot be fetched here;
the CRDs the program applies itself it still applies), node groups *described* as the program
would make them (its labels and taints, components/scheduling.py), and what a region reached by
kubeconfig alone cannot have dropped: the VPC, cluster access, protect and cold tier belong to a
created cluster, and weights synced from S3 (``model_source``) and a store's cold tier to a Pod
Identity role; those endpoints serve ``model`` from the Hugging Face Hub instead, and a store keeps
its memory and disk tiers. The one local cluster is one region: a stack of several regions is moved
there one region at a time (``region``), the others dropped. The stack file keeps its encrypted
secrets (the offline plan and `fleetctl` read them so); the engine gets ``secret_value`` for each,
set as a Pulumi secret (``engine_config``, ``SECRETS``)."""

from __future__ import annotations

import copy
import json
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
SECRETS_KEY = "inference-fleet:secrets"
SECRETS = frozenset({SECRETS_KEY})
"""The config keys the engine holds as secrets."""
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


def secret_value(secret: str, key: str) -> str:
    """What the tests set as the value of a stack's encrypted secret ``secret``.``key``."""
    return f"engine-tests-{secret}-{key}"


def local_config(stack: str, region: str | None = None) -> dict[str, Any]:
    """The stack's config (``inference-fleet:*`` keys) on the local cluster: every region, or only
    ``region``."""
    config = copy.deepcopy(read_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml").project_config)
    if region is not None:
        config["regions"] = {region: config["regions"][region]}
    present = dict.fromkeys(Addons.model_fields, "present")
    for settings in config["regions"].values():
        for key in CREATED_CLUSTER_KEYS:
            settings.pop(key, None)
        settings["existing_cluster"] = {"kubeconfig": f"env:{KUBECONFIG_VARIABLE}", "addons": present}
        settings["node_groups"] = {name: _described(name, group) for name, group in settings["node_groups"].items()}
    for endpoint in config["endpoints"].values():
        endpoint.pop("model_source", None)
        endpoint.get("mooncake", {}).get("store", {}).pop("cold_tier_enabled", None)
    if "global" in config:
        config["global"] = {**config["global"], "enabled": False}
    return {f"inference-fleet:{key}": value for key, value in config.items()}


def engine_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` as the engine gets it: each encrypted secret's value ``secret_value``, the key under
    ``SECRETS`` (tests/engine/driver.py sets those keys as Pulumi secrets)."""
    if SECRETS_KEY not in config:
        return config
    values = {name: {key: secret_value(name, key) for key in keys} for name, keys in config[SECRETS_KEY].items()}
    return {**config, SECRETS_KEY: values}


def write_stack_file(config: dict[str, Any], path: Path) -> Path:
    """``config`` as a stack file (for the offline plan and `fleetctl` of the same stack)."""
    yaml = YAML()
    yaml.width = 4096  # no value folded onto a line of its own: `fleetctl` edits keep every line as written
    with path.open("w") as handle:
        # A copy sharing no object: ruamel writes an object met twice as an alias, which stack files refuse.
        yaml.dump({"config": json.loads(json.dumps(config))}, handle)
    return path
