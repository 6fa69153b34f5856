"""Identity is a contract (design decision 3): every resource's URN is unique, as the engine
demands; the example stacks keep the URNs they have; a rename ships with aliases that name the
old URN exactly; and no config edit renames a resource it does not mean to replace."""

from __future__ import annotations

import functools
import io
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from components import naming
from components.spec import NAMESPACE
from fleetctl.diff import diff_plans
from fleetctl.edit import operations
from fleetctl.edit.document import Operation, prepare_edit
from fleetctl.plan import Plan, ProgramError, run_program
from fleetctl.stackfile import PROJECT_ROOT, parse_stack_bytes, read_stack_file
from tests.component.programs import by_type, example_plan, run_snippet
from tests.unit.stack_builders import DELETE, classic_endpoint, mooncake_endpoint, region

TEST = "urn:pulumi:test::inference-fleet::"
GOLDEN_URNS = PROJECT_ROOT / "tests" / "golden" / "urns"
STACK_TYPE = "pulumi:pulumi:Stack"
ENTRY = "aws:eks/accessEntry:AccessEntry"
ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"


def urns(plan: Plan) -> list[str]:
    return [str(resource["urn"]) for resource in plan.resources]


def engine_alias_urn(resource: Mapping[str, Any], alias: Mapping[str, Any], stack: str, project: str) -> str:
    """The URN an alias of ``resource`` names, as the engine resolves it: an alias URN as given; an
    alias spec's name, type and parent default to the resource's own, and the stack as parent means
    none (pkg/resource/deploy/step_generator.go collapseAliasToUrn); then the parent's URN up to its
    name, '$', the type, '::', the name (sdk/go/common/resource/alias.go CreateURN). A parent renamed in
    the same update would lend its own old URN; no test here renames one."""
    if "urn" in alias:
        return str(alias["urn"])
    spec = alias["spec"]
    name, kind = spec.get("name") or resource["name"], spec.get("type") or resource["type"]
    parent = spec.get("parentUrn") or resource["parent"] or ""
    if spec.get("noParent") or parent.split("::")[2:3] == [STACK_TYPE]:
        parent = ""
    stack, project = spec.get("stack") or stack, spec.get("project") or project
    prefix = f"{parent[: parent.rindex('::')]}$" if parent else f"urn:pulumi:{stack}::{project}::"
    return f"{prefix}{kind}::{name}"


# Unique, as the engine makes them.

NESTED = """
class Part(pulumi.ComponentResource):
    def __init__(self, name, opts=None):
        super().__init__("inference-fleet:test:Part", name, None, opts)
        aws.s3.Bucket("bucket", opts=pulumi.ResourceOptions(parent=self))

outer = Part("outer")
Part("inner", opts=pulumi.ResourceOptions(parent=outer))
"""


def test_a_type_is_qualified_by_the_whole_chain_of_its_parents_types_as_the_engine_does(tmp_path: Path) -> None:
    """pkg/resource/deploy/deployment.go generateURN: the parent's whole qualified type, not its last."""
    part = "inference-fleet:test:Part"
    assert sorted(urns(run_snippet(tmp_path, NESTED))) == [
        f"urn:pulumi:test::inference-fleet::{part}$aws:s3/bucket:Bucket::bucket",
        f"urn:pulumi:test::inference-fleet::{part}${part}$aws:s3/bucket:Bucket::bucket",
        f"urn:pulumi:test::inference-fleet::{part}${part}::inner",
        f"urn:pulumi:test::inference-fleet::{part}::outer",
        f"urn:pulumi:test::inference-fleet::{STACK_TYPE}::inference-fleet-test",
    ]


def test_a_second_resource_with_the_same_urn_fails_the_plan_in_the_engines_words(tmp_path: Path) -> None:
    program = NESTED + 'aws.s3.Bucket("bucket", opts=pulumi.ResourceOptions(parent=outer))\n'
    duplicate = "urn:pulumi:test::inference-fleet::inference-fleet:test:Part$aws:s3/bucket:Bucket::bucket"
    with pytest.raises(ProgramError) as caught:
        run_snippet(tmp_path, program)
    # sdk/go/common/diag/errors.go GetDuplicateResourceURNError, as pulumi up reports it.
    assert str(caught.value) == f"Duplicate resource URN '{duplicate}'; try giving it a unique name"


# The example stacks keep their URNs.


@pytest.mark.parametrize("stack", ["dev", "prod", "existing"])
def test_the_example_stacks_keep_their_urns(stack: str) -> None:
    """A URN that changes is a resource Pulumi deletes and creates anew, unless an alias names the old one."""
    plan = example_plan(stack)
    current = urns(plan)
    assert len(current) == len(set(current))
    golden = GOLDEN_URNS / f"{stack}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text("".join(f"{urn}\n" for urn in sorted(current)))
    recorded = golden.read_text().splitlines()
    aliased = {
        engine_alias_urn(resource, alias, plan.stack, plan.project): str(resource["urn"])
        for resource in plan.resources
        for alias in resource["options"].get("aliases", [])
    }
    gone = sorted(set(recorded) - set(current))
    renamed = [urn for urn in gone if urn not in aliased]
    added = sorted(set(current) - set(recorded) - {aliased[urn] for urn in gone if urn in aliased})
    assert not renamed, (
        f"a refactor changed these URNs of stack {stack} (Pulumi would delete and recreate each resource): "
        + "".join(f"\n  {urn}" for urn in renamed)
        + "\nadd aliases to the old URNs (design decision 3), or regenerate with UPDATE_GOLDEN=1 if the rename is "
        f"intended; {golden.relative_to(PROJECT_ROOT)} lists the URNs"
    )
    assert (gone, added) == ([], []), (
        f"{golden.relative_to(PROJECT_ROOT)} is stale: regenerate it with UPDATE_GOLDEN=1 and review the diff "
        f"(renamed under aliases: {[urn for urn in gone if urn in aliased]}; new: {added})"
    )
    assert recorded == sorted(recorded)


# A rename ships with aliases that name the old URN.

PLATFORM = """
class Platform(pulumi.ComponentResource):
    def __init__(self, name, opts=None):
        super().__init__("inference-fleet:test:Platform", name, None, opts)

class Tier(pulumi.ComponentResource):
    def __init__(self, name, opts=None):
        super().__init__("inference-fleet:test:Tier", name, None, opts)

platform = Platform("us-east-1")
tier = Tier("us-east-1-tier", opts=pulumi.ResourceOptions(parent=platform))
"""


@pytest.mark.parametrize(
    ("old", "new", "recorded"),
    [
        pytest.param(
            'aws.kms.Key("kv", opts=pulumi.ResourceOptions(parent=tier))',
            'aws.kms.Key("cold-tier", opts=pulumi.ResourceOptions(parent=tier, aliases=[pulumi.Alias(name="kv")]))',
            {"spec": {"name": "kv", "parentUrn": ""}},  # the resource's own parent
            id="renamed_in_its_parent",
        ),
        pytest.param(
            'aws.kms.Key("kv", opts=pulumi.ResourceOptions(parent=platform))',
            'aws.kms.Key("kv", opts=pulumi.ResourceOptions(parent=tier, aliases=[pulumi.Alias(parent=platform)]))',
            {
                "spec": {
                    "parentUrn": f"{TEST}inference-fleet:test:Platform::us-east-1",
                }
            },
            id="moved_into_a_component",
        ),
        pytest.param(
            'aws.kms.Key("kv", opts=pulumi.ResourceOptions(parent=tier))',
            'aws.kms.Key("kv", opts=pulumi.ResourceOptions(aliases=[pulumi.Alias(parent=tier)]))',
            {
                "spec": {
                    "parentUrn": f"{TEST}inference-fleet:test:Platform$inference-fleet:test:Tier::us-east-1-tier",
                }
            },
            id="moved_out_to_the_stack",
        ),
    ],
)
def test_an_alias_names_the_urn_the_resource_had_before(
    tmp_path: Path, old: str, new: str, recorded: dict[str, Any]
) -> None:
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    before = run_snippet(tmp_path / "before", PLATFORM + old + "\n")
    after = run_snippet(tmp_path / "after", PLATFORM + new + "\n")
    (old_key,) = by_type(before, "aws:kms/key:Key")
    (key,) = by_type(after, "aws:kms/key:Key")
    assert key["urn"] != old_key["urn"]
    assert key["options"]["aliases"] == [recorded]  # the plan records the alias as the engine receives it
    assert [engine_alias_urn(key, alias, "test", "inference-fleet") for alias in key["options"]["aliases"]] == [
        old_key["urn"]
    ]
    diff = diff_plans(json.loads(before.to_json()), json.loads(after.to_json()))
    assert [(change.action, change.renamed_from) for change in diff.resources] == [("rename", old_key["urn"])]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_access_entries_alias_exactly_the_urns_pulumi_eks_gave_them(stack: str) -> None:
    """pulumi-eks made each admin's entry a child of its cluster component named `<component>-<key>`, and
    the entry's association its child named `<component>-<key>-cluster-admin` (createAccessEntries,
    nodejs/eks/cluster/authenticationMode.ts, called with the component as parent in createCore); the
    key was naming.access_entry_key of the principal (admin_access_entries, commit f2e8640)."""
    plan = example_plan(stack)
    checked = 0
    for cluster in by_type(plan, "eks:index:Cluster"):
        component, qualified = cluster["name"], cluster["urn"][: cluster["urn"].rindex("::")]
        ours = [resource for resource in plan.resources if resource["parent"] == cluster["parent"]]
        for entry in (resource for resource in ours if resource["type"] == ENTRY):
            legacy = f"{component}-{naming.access_entry_key(entry['inputs']['principalArn'])}"
            (association,) = (
                resource
                for resource in ours
                if resource["type"] == ASSOCIATION
                and resource["inputs"]["principalArn"] == entry["inputs"]["principalArn"]
            )
            expected = {
                entry["urn"]: f"{qualified}${ENTRY}::{legacy}",
                association["urn"]: f"{qualified}${ENTRY}${ASSOCIATION}::{legacy}-cluster-admin",
            }
            for resource in (entry, association):
                resolved = [
                    engine_alias_urn(resource, alias, plan.stack, plan.project)
                    for alias in resource["options"]["aliases"]
                ]
                assert resolved == [expected[resource["urn"]]], resource["name"]
            checked += 1
    assert checked == {"dev": 2, "prod": 2}[stack]


# No config edit renames what it does not replace.

REGIONS = ("us-east-1", "eu-west-1")
NAMES = ("alpha", "beta", "gamma")
KINDS = ("classic", "disaggregated", "store", "both")
NEXT_IMAGE = "vllm/vllm-openai:v0.34.0"
"""A canary's image."""
SET_IMAGE = "vllm/vllm-openai:v0.33.1"
"""What ``image set`` gives an endpoint: never its canary's, which validation refuses (the canary would
compare nothing)."""
ROOMY = {"node_groups": {"system": {"max_size": 12}, "gpu": {"max_size": 12}}}
"""Room for every generated pod: the stacks are about names, not capacity."""


@st.composite
def endpoints(draw: st.DrawFn, regions: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in NAMES[: draw(st.integers(1, len(NAMES)))]:
        kind = draw(st.sampled_from(KINDS))
        targets = draw(st.none() | st.lists(st.sampled_from(regions), min_size=1, unique=True))
        where = {"target_regions": targets} if targets is not None else {}
        if kind == "classic":
            canary = draw(st.none() | st.integers(1, 99))
            found[name] = classic_endpoint(
                {
                    **where,
                    "replicas": draw(st.integers(1, 2)),
                    **({"canary": {"image": NEXT_IMAGE, "weight": canary}} if canary is not None else {}),
                }
            )
            continue
        topology = {"prefill": draw(st.integers(1, 2)), "decode": draw(st.integers(1, 2))}
        found[name] = mooncake_endpoint(
            {
                **where,
                "node_group": "gpu",
                "mooncake": {
                    "mode": kind,
                    "transfer": {"protocol": "tcp"},
                    "topology": topology if kind != "store" else DELETE,
                },
            }
        )
    return found


@st.composite
def stacks(draw: st.DrawFn) -> dict[str, Any]:
    regions = draw(st.lists(st.sampled_from(REGIONS), min_size=1, max_size=2, unique=True))
    return {
        f"{NAMESPACE}:regions": {name: region(ROOMY, name=name) for name in regions},
        f"{NAMESPACE}:endpoints": draw(endpoints(regions)),
    }


def edits(config: Mapping[str, Any]) -> st.SearchStrategy[tuple[str, str, Operation]]:
    """An edit that names nothing anew, or starts a canary, of one endpoint it applies to: a kind of
    edit first, so each is as likely as any other: (what, endpoint, operation)."""
    choices: dict[str, list[st.SearchStrategy[tuple[str, str, Operation]]]] = {}

    def edit(what: str, name: str, operation: Callable[..., list[str]], **arguments: Any) -> None:
        choices.setdefault(what, []).append(
            st.builds(lambda **drawn: (what, name, functools.partial(operation, name=name, **drawn)), **arguments)
        )

    for name, endpoint in config[f"{NAMESPACE}:endpoints"].items():
        edit("image set", name, operations.set_image, image=st.just(SET_IMAGE))
        mooncake = endpoint.get("mooncake")
        if mooncake is None:
            edit("scale", name, operations.scale, replicas=st.integers(1, 3))
            if "canary" in endpoint:
                edit("canary weight", name, operations.set_canary_weight, weight=st.integers(1, 99))
            else:
                edit(
                    "canary start", name, operations.start_canary, image=st.just(NEXT_IMAGE), weight=st.integers(1, 99)
                )
            continue
        if mooncake["mode"] in ("store", "both"):
            sizes = st.sampled_from(["4GiB", "8GiB", "16GiB"])
            edit(
                "store configure", name, operations.configure_store, global_segment_size=sizes, local_buffer_size=sizes
            )
        if mooncake["mode"] in ("disaggregated", "both"):
            edit("topology set", name, operations.set_topology, prefill=st.integers(1, 2), decode=st.integers(1, 2))
    return st.sampled_from(sorted(choices)).flatmap(lambda what: st.one_of(choices[what]))


def stack_text(config: Mapping[str, Any]) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buffer = io.StringIO()
    yaml.dump({"config": dict(config)}, buffer)
    return buffer.getvalue()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_an_edit_never_renames_a_resource_and_every_urn_is_unique(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """A generated stack planned before and after a fleetctl edit (as `fleetctl <edit>` makes it): the
    URNs differ only by what the edit adds (a canary's workload and Service), never by a rename."""
    config = data.draw(stacks(), label="stack")
    what, name, operation = data.draw(edits(config), label="edit")
    path = tmp_path_factory.mktemp("stack") / "Pulumi.generated.yaml"
    path.write_text(stack_text(config))
    before = run_program(read_stack_file(path))
    edit = prepare_edit(path, operation)
    after = run_program(parse_stack_bytes(path, edit.after))
    for plan in (before, after):
        assert len(urns(plan)) == len(set(urns(plan)))
    removed, added = set(urns(before)) - set(urns(after)), set(urns(after)) - set(urns(before))
    assert removed == set(), f"{what} {name} renamed or removed {sorted(removed)}"
    expected: set[tuple[str, str]] = set()
    if what == "canary start":  # the canary's own workload and Service, in each region the endpoint serves
        canaries = {f"{served}-{name}-canary" for served in before.outputs["placements"][name]}
        expected = {(kind, canary) for kind in (DEPLOYMENT, SERVICE) for canary in canaries}
    assert {type_and_name(urn) for urn in added} == expected, f"{what} {name} added {sorted(added)}"


def type_and_name(urn: str) -> tuple[str, str]:
    _, _, qualified, name = urn.split("::", 3)
    return qualified.rsplit("$", 1)[-1], name
