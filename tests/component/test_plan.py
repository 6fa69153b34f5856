"""The real program, and small programs written for a single point, under the recording mocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetctl.mocks import load_balancer_hostname
from fleetctl.plan import SECRET, Plan, ProgramError, manifest_files, region_of, write_plan
from tests.component.programs import by_type, example_plan, run_snippet

PROJECT_STACKS = ("dev", "prod", "existing")


@pytest.mark.parametrize("stack", PROJECT_STACKS)
def test_main_registers_one_aws_provider_per_region(stack: str) -> None:
    plan = example_plan(stack)
    spec_regions = sorted(plan.outputs["regions"])
    # Besides, a stack with the global front has its provider in Global Accelerator's API region (docs/global.md).
    providers = [entry for entry in by_type(plan, "pulumi:providers:aws") if entry["name"] != "aws-global-us-west-2"]
    assert sorted(provider["inputs"]["region"] for provider in providers) == spec_regions
    assert sorted(provider["name"] for provider in providers) == [f"aws-{region}" for region in spec_regions]


def test_prod_serves_each_endpoint_in_both_regions_on_its_node_group() -> None:
    placements = example_plan("prod").outputs["placements"]
    assert placements["chat"]["eu-west-1"] == {"node_group": "p5", "image": "vllm/vllm-openai:v0.33.0-efa"}
    assert placements["summarize"]["eu-west-1"]["image"] == (
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/summarize-vllm:2026.11.1"
    )


def test_children_of_the_stack_have_unqualified_urns_like_the_engine_gives() -> None:
    fleet = by_type(example_plan("dev"), "inference-fleet:fleet:Fleet")[0]
    assert fleet["urn"] == "urn:pulumi:dev::inference-fleet::inference-fleet:fleet:Fleet::inference-fleet-dev"
    assert fleet["parent"] == "urn:pulumi:dev::inference-fleet::pulumi:pulumi:Stack::inference-fleet-dev"


def test_resources_are_sorted_by_urn_with_sorted_keys() -> None:
    plan = example_plan("prod")
    urns = [resource["urn"] for resource in plan.resources]
    assert urns == sorted(urns)
    document = json.loads(plan.to_json())
    assert list(document) == ["outputs", "project", "resources", "stack"]


def test_unmocked_invokes_fail_loudly_naming_the_token(tmp_path: Path) -> None:
    with pytest.raises(ProgramError, match=r"unmocked invoke aws:eks/getAddonVersion:getAddonVersion"):
        run_snippet(tmp_path, 'aws.eks.get_addon_version(addon_name="coredns", kubernetes_version="1.34")\n')


def test_resource_options_are_recorded_as_the_engine_receives_them(tmp_path: Path) -> None:
    plan = run_snippet(
        tmp_path,
        """
        east = aws.Provider("aws-us-east-1", region="us-east-1")
        key = aws.kms.Key("key", opts=pulumi.ResourceOptions(provider=east))
        aws.s3.Bucket(
            "cold",
            opts=pulumi.ResourceOptions(
                provider=east,
                protect=True,
                retain_on_delete=True,
                ignore_changes=["tags"],
                depends_on=[key],
                aliases=[pulumi.Alias(name="old-cold")],
                custom_timeouts=pulumi.CustomTimeouts(create="30m"),
            ),
        )
        """,
    )
    bucket = by_type(plan, "aws:s3/bucket:Bucket")[0]
    key = by_type(plan, "aws:kms/key:Key")[0]
    provider = by_type(plan, "pulumi:providers:aws")[0]
    assert bucket["provider"] == provider["urn"]
    options = bucket["options"]
    assert options["protect"] is True
    assert options["retainOnDelete"] is True
    assert options["ignoreChanges"] == ["tags"]
    assert options["dependsOn"] == [key["urn"]]
    assert options["customTimeouts"] == {"create": "30m"}
    assert any("old-cold" in json.dumps(alias) for alias in options["aliases"])
    assert key["options"].get("protect") is None


def test_secret_inputs_and_outputs_are_masked(tmp_path: Path) -> None:
    plan = run_snippet(
        tmp_path,
        """
        east = aws.Provider("aws-us-east-1", region="us-east-1")
        param = aws.ssm.Parameter(
            "token",
            type="SecureString",
            value=pulumi.Output.secret("hunter2"),
            opts=pulumi.ResourceOptions(provider=east),
        )
        pulumi.export("token", pulumi.Output.secret("hunter2"))
        """,
    )
    assert "hunter2" not in plan.to_json()
    assert by_type(plan, "aws:ssm/parameter:Parameter")[0]["inputs"]["value"] == SECRET
    assert plan.outputs["token"] == SECRET


def test_kubernetes_objects_are_written_per_region_and_namespace(tmp_path: Path) -> None:
    plan = run_snippet(
        tmp_path,
        """
        class Platform(pulumi.ComponentResource):
            def __init__(self, name, provider):
                opts = pulumi.ResourceOptions(providers={"aws": provider})
                super().__init__("inference-fleet:test:Platform", name, None, opts)
                self.k8s = k8s.Provider(f"k8s-{name}", kubeconfig="{}", opts=pulumi.ResourceOptions(parent=self))

        for region in ("us-east-1", "eu-west-1"):
            platform = Platform(region, aws.Provider(f"aws-{region}", region=region))
            opts = pulumi.ResourceOptions(parent=platform, provider=platform.k8s)
            k8s.core.v1.Namespace(f"ns-{region}", metadata={"name": "inference"}, opts=opts)
            metadata = {"name": "chat-mooncake", "namespace": "inference"}
            k8s.core.v1.ConfigMap(f"cm-{region}", metadata=metadata, data={"port": "8000"}, opts=opts)
        """,
    )
    files = manifest_files(plan)
    assert sorted(files) == [
        "manifests/eu-west-1/_cluster/Namespace-inference.yaml",
        "manifests/eu-west-1/inference/ConfigMap-chat-mooncake.yaml",
        "manifests/us-east-1/_cluster/Namespace-inference.yaml",
        "manifests/us-east-1/inference/ConfigMap-chat-mooncake.yaml",
    ]
    config_map = files["manifests/us-east-1/inference/ConfigMap-chat-mooncake.yaml"]
    assert config_map.splitlines()[:2] == ["apiVersion: v1", "kind: ConfigMap"]
    assert "port: '8000'" in config_map


def test_integral_numbers_stay_integers(tmp_path: Path) -> None:
    plan = run_snippet(
        tmp_path,
        """
        k8s.core.v1.Service("svc", metadata={"name": "chat"}, spec={"ports": [{"port": 80, "targetPort": 8000}]})
        """,
    )
    service = by_type(plan, "kubernetes:core/v1:Service")[0]
    assert service["inputs"]["spec"]["ports"] == [{"port": 80, "targetPort": 8000}]
    assert '"port": 80,' in plan.to_json()


def test_a_failed_write_leaves_the_previous_plan_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "plan"
    write_plan(example_plan("dev"), out)
    before = (out / "plan.json").read_bytes()

    def broken(plan: Plan) -> dict[str, str]:
        raise ProgramError("two Kubernetes objects render to the same file")

    monkeypatch.setattr("fleetctl.plan.manifest_files", broken)
    with pytest.raises(ProgramError):
        write_plan(example_plan("prod"), out)
    assert (out / "plan.json").read_bytes() == before
    assert [path.name for path in tmp_path.iterdir()] == ["plan"]


def test_every_route_of_a_region_gets_the_hostname_of_its_one_load_balancer() -> None:
    plan = example_plan("prod")
    by_urn = {resource["urn"]: resource for resource in plan.resources}
    routes = by_type(plan, "kubernetes:networking.k8s.io/v1:Ingress")
    assert sorted(region_of(route, by_urn) or "" for route in routes) == [
        "eu-west-1",
        "eu-west-1",
        "eu-west-1",
        "us-east-1",
        "us-east-1",
        "us-east-1",
    ]
    hosts: dict[str, set[str]] = {}
    for regions in plan.outputs["endpoints"].values():
        for region, record in regions.items():
            hosts.setdefault(region, set()).add(record["address"].split("/")[2])
    assert hosts == {
        "eu-west-1": {load_balancer_hostname("eu-west-1")},
        "us-east-1": {load_balancer_hostname("us-east-1")},
    }
    assert load_balancer_hostname("us-east-1") == "k8s-inference-fleet-offline.us-east-1.elb.amazonaws.com"
