"""Stacks hypothesis derives from dev (node group instance types and sizes, replicas, GPUs per pod,
Mooncake topologies), applied to the test cluster in one go: the scheduler must place them as the
offline check predicts, whether the check accepts them or not. A few examples per run, the same
ones every run (each costs a region on the cluster, about 6 s).

One disagreement is known and reported, as a warning, rather than failed on: pods the check places
that the scheduler leaves Pending because the room is spread over nodes (docs/real-control-plane.md,
and the strict expected failure in test_placement.py that pins it). Any other fails."""

from __future__ import annotations

import copy
import warnings
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from components.catalog import instance_catalog
from components.spec import parse_stack_config
from fleetctl.stackfile import read_stack_file, stack_path
from tests.cluster.differential import disagreements, predict
from tests.cluster.kube import Kube
from tests.cluster.region import run_region
from tests.cluster.stacks import rendered_manifests

REGION = "us-west-2"


class KnownDisagreement(UserWarning):
    """The offline check places a pod the scheduler cannot, for want of room spread over nodes."""


GPU_TYPES = ("g6e.12xlarge", "g5.12xlarge", "g6.12xlarge", "g5.48xlarge", "g6e.2xlarge")
SYSTEM_TYPES = ("c7i.large", "c7i.xlarge", "m7i.xlarge", "m7i.2xlarge")


@st.composite
def dev_variants(draw: st.DrawFn) -> dict[str, Any]:
    config = copy.deepcopy(dict(read_stack_file(stack_path("dev")).project_config))
    groups = config["regions"][REGION]["node_groups"]
    gpu_type = draw(st.sampled_from(GPU_TYPES))
    per_node = instance_catalog().instance_types[gpu_type].accelerators
    groups["gpu"].update(instance_types=[gpu_type], min_size=0, max_size=draw(st.integers(1, 4)), desired_size=1)
    groups["system"].update(
        instance_types=[draw(st.sampled_from(SYSTEM_TYPES))],
        min_size=1,
        max_size=draw(st.integers(1, 3)),
        desired_size=1,
    )
    gpus = st.sampled_from([count for count in (1, 2, 4, 8) if count <= per_node])
    endpoints = config["endpoints"]
    endpoints["assistant"].update(replicas=draw(st.integers(0, 6)), gpu_count=draw(gpus))
    endpoints["chat-pd"]["gpu_count"] = draw(gpus)
    endpoints["chat-pd"]["mooncake"]["topology"] = {
        "prefill": draw(st.integers(1, 3)),
        "decode": draw(st.integers(1, 3)),
    }
    endpoints["kv-cache"]["gpu_count"] = draw(gpus)
    return config


@settings(max_examples=5, derandomize=True, deadline=None)
@given(config=dev_variants())
def test_a_generated_stack_is_placed_as_the_offline_check_predicts(control_plane: Kube, config: dict[str, Any]) -> None:
    spec = parse_stack_config(config, stack="generated")
    run = run_region(control_plane, REGION, spec.regions[REGION], rendered_manifests(spec, REGION))
    found = disagreements(predict(spec, REGION), run)
    for known in (d for d in found if d.fragmented):
        warnings.warn(KnownDisagreement(str(known)), stacklevel=1)
    assert [str(d) for d in found if not d.fragmented] == []
