"""The program on an existing cluster (docs/existing-cluster.md), as the offline plan records it: in a
region given by kubeconfig only the Kubernetes half, with a provider built from that kubeconfig."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from components.platform.cluster import KubeconfigCredentials
from components.platform.existing import eks_kubeconfig
from fleetctl.cli import main
from fleetctl.plan import SECRET, Plan, ProgramError, run_program
from fleetctl.policy_check import check_plan
from fleetctl.stackfile import read_stack_file, stack_path
from tests.component.programs import by_type, run_snippet
from tests.unit.stack_builders import REGION, classic_endpoint, existing_region, mooncake_endpoint
from tests.unit.test_existing_cluster import ACCELERATOR_LABELS

KUBECONFIG = "apiVersion: v1\nkind: Config\ncurrent-context: local\n"
KUBERNETES_PROVIDER = "pulumi:providers:kubernetes"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def write_stack(directory: Path, regions: dict[str, Any], endpoints: dict[str, Any], stack: str = "existing") -> Path:
    config = {"inference-fleet:regions": regions, "inference-fleet:endpoints": endpoints}
    path = directory / f"Pulumi.{stack}.yaml"
    with path.open("w") as handle:
        YAML().dump({"config": config}, handle)
    return path


def kubeconfig_plan(tmp_path: Path, cluster: dict[str, Any] | None = None) -> Plan:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    region = existing_region({"kubeconfig": str(kubeconfig), **(cluster or {})})
    path = write_stack(tmp_path, {REGION: region}, {"chat": classic_endpoint()})
    return run_program(read_stack_file(path))


def test_a_region_given_by_kubeconfig_registers_only_the_kubernetes_half(tmp_path: Path) -> None:
    plan = kubeconfig_plan(tmp_path)
    kinds = {resource["type"] for resource in plan.resources}
    assert not [kind for kind in kinds if kind.split(":")[0] in ("aws", "awsx", "eks")]
    assert "pulumi:providers:aws" not in kinds  # no AWS credentials needed at all
    assert "inference-fleet:platform:ExistingCluster" in kinds
    assert not [kind for kind in kinds if kind == "kubernetes:helm.sh/v3:Release"]  # every add-on present
    (provider,) = by_type(plan, KUBERNETES_PROVIDER)
    assert provider["inputs"]["kubeconfig"] == SECRET
    assert provider["inputs"]["enableServerSideApply"] == "true"
    (deployment,) = by_type(plan, DEPLOYMENT)
    assert deployment["provider"].startswith(provider["urn"])
    pod = deployment["inputs"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"role": "gpu"}
    assert plan.outputs["regions"][REGION]["cluster_name"] is None
    assert check_plan(plan.resources) == []  # the policy pack holds a region with no AWS half too


def test_the_provider_takes_the_kubeconfigs_context(tmp_path: Path) -> None:
    (provider,) = by_type(kubeconfig_plan(tmp_path, {"context": "kind-test"}), KUBERNETES_PROVIDER)
    assert provider["inputs"]["context"] == "kind-test"


def test_the_kubeconfig_is_read_when_the_program_runs_file_or_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kube.yaml").write_text(KUBECONFIG)
    monkeypatch.setenv("FLEET_TEST_KUBECONFIG", "from: the variable\n")
    program = f"""
from components.platform.existing import ExistingClusterConnection, ExistingClusterConnectionArgs
from components.spec.existing import ExistingCluster

sources = (
    ("file", "us-east-1", {str(tmp_path / "kube.yaml")!r}),
    ("variable", "us-west-2", "env:FLEET_TEST_KUBECONFIG"),
)
for name, region, source in sources:
    connection = ExistingClusterConnection(
        name, ExistingClusterConnectionArgs(region=region, existing=ExistingCluster(kubeconfig=source))
    )
    pulumi.export(name, pulumi.Output.unsecret(connection.kubeconfig))
"""
    outputs = run_snippet(tmp_path, program).outputs
    assert outputs == {"file": KUBECONFIG, "variable": "from: the variable\n"}


def test_a_missing_kubeconfig_stops_the_program_with_the_field_and_no_traceback(tmp_path: Path) -> None:
    region = existing_region({"kubeconfig": str(tmp_path / "absent")})
    path = write_stack(tmp_path, {REGION: region}, {"chat": classic_endpoint()})
    with pytest.raises(ProgramError) as error:
        run_program(read_stack_file(path))
    message = str(error.value)
    assert f"regions.{REGION}.existing_cluster.kubeconfig" in message
    assert "does not exist" in message
    assert "Traceback" not in message


def test_an_eks_cluster_by_name_reads_its_endpoint_and_ca_from_eks_and_keeps_its_access(tmp_path: Path) -> None:
    region = existing_region(
        {"name": "team-a"}, {"node_groups": {"system": {"labels": {"inference-fleet/accelerator": "none"}}}}
    )
    path = write_stack(tmp_path, {REGION: region}, {"chat": classic_endpoint()})
    plan = run_program(read_stack_file(path))
    kinds = {resource["type"] for resource in plan.resources}
    assert (
        not {"eks:index:Cluster", "awsx:ec2:Vpc", "aws:eks/nodeGroup:NodeGroup", "aws:eks/accessEntry:AccessEntry"}
        & kinds
    )
    associations = by_type(plan, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    assert associations
    assert {association["inputs"]["clusterName"] for association in associations} == {"team-a"}
    addons = {addon["inputs"]["addonName"] for addon in by_type(plan, "aws:eks/addon:Addon")}
    assert addons == {"coredns", "eks-pod-identity-agent"}
    summary = plan.outputs["regions"][REGION]
    assert summary["cluster_name"] == "team-a"
    assert summary["cluster_endpoint"].startswith("https://")
    assert plan.outputs["kubeconfigs"] == SECRET


def test_the_eks_kubeconfig_runs_aws_eks_get_token_for_the_named_cluster() -> None:
    document = eks_kubeconfig("team-a", REGION, "https://example.eks.amazonaws.com", "Q0E=")
    exec_ = document["users"][0]["user"]["exec"]
    assert exec_["command"] == "aws"
    assert exec_["args"] == ["eks", "get-token", "--cluster-name", "team-a", "--region", REGION, "--output", "json"]
    assert document["clusters"][0]["cluster"] == {
        "server": "https://example.eks.amazonaws.com",
        "certificate-authority-data": "Q0E=",
    }
    assert json.loads(json.dumps(document)) == document


def test_the_eks_kubeconfig_gets_its_token_as_the_aws_providers_profile_and_role() -> None:
    """aws:profile and aws:assumeRoles reach the existing cluster's get-token as they reach a created
    cluster's (pulumi-eks generateKubeconfig: ``--role-arn`` and ``AWS_PROFILE``)."""
    role = "arn:aws:iam::123456789012:role/deployer"
    credentials = KubeconfigCredentials(profile="fleet", role_arn=role)
    exec_ = eks_kubeconfig("team-a", REGION, "https://example.eks.amazonaws.com", "Q0E=", credentials)["users"][0][
        "user"
    ]["exec"]
    assert exec_["args"][-2:] == ["--role-arn", role]
    assert exec_["env"] == [{"name": "AWS_PROFILE", "value": "fleet"}]


# fleetctl on a stack whose region is an existing cluster.


def fleetctl(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(argument) for argument in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_an_edit_past_the_described_nodes_is_refused_naming_the_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "Pulumi.existing.yaml"
    shutil.copyfile(stack_path("existing"), path)
    before = path.read_bytes()
    code, _, err = fleetctl(
        capsys, "topology", "set", "chat-pd", "--prefill", "8", "--decode", "1", "--stack-file", path
    )
    assert code == 1
    assert "regions.us-east-2.node_groups.l40s: cannot hold" in err
    assert "max_size 4 x g6e.12xlarge" in err
    assert path.read_bytes() == before


def test_an_edit_and_its_diff_on_an_existing_cluster_touch_only_kubernetes_objects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "Pulumi.existing.yaml"
    shutil.copyfile(stack_path("existing"), path)
    code, _, err = fleetctl(
        capsys, "topology", "set", "chat-pd", "--prefill", "2", "--decode", "1", "--stack-file", path
    )
    assert code == 0, err
    code, out, err = fleetctl(capsys, "diff", stack_path("existing"), path, "--format", "json")
    assert code == 2, err
    changed = [entry for region in json.loads(out)["regions"].values() for entry in region["resources"]]
    assert [(entry["type"], entry["name"], entry["action"]) for entry in changed] == [
        ("kubernetes:apps/v1:Deployment", "us-east-2-chat-pd-prefill", "update")
    ]


KMS_KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def test_a_named_bucket_is_the_cold_tier_of_an_eks_cluster_and_nothing_of_s3_is_created(tmp_path: Path) -> None:
    region = existing_region(
        {"name": "team-a", "addons": {"nvidia_device_plugin": "install", "efa_device_plugin": "install"}},
        {
            "cold_tier": {"enabled": True, "bucket": "team-kv", "kms_key_arn": KMS_KEY},
            "node_groups": ACCELERATOR_LABELS,
        },
    )
    endpoint = mooncake_endpoint({"mooncake": {"mode": "both", "store": {"cold_tier_enabled": True}}})
    plan = run_program(read_stack_file(write_stack(tmp_path, {REGION: region}, {"pd": endpoint})))
    assert not [resource for resource in plan.resources if resource["type"].startswith(("aws:s3", "aws:kms"))]
    policies = [json.loads(policy["inputs"]["policy"]) for policy in by_type(plan, "aws:iam/rolePolicy:RolePolicy")]
    resources = json.dumps([statement.get("Resource") for policy in policies for statement in policy["Statement"]])
    assert "arn:aws:s3:::team-kv/mooncake-kv/pd/*" in resources
    assert KMS_KEY in resources
    assert plan.outputs["regions"][REGION]["cold_tier_bucket"] == "team-kv"


PIPELINE = ("keda", "prometheus", "metrics_server", "dcgm_exporter", "grafana")


@pytest.mark.parametrize("keda", ["present", "crds", "install"])
def test_each_part_of_the_pipeline_is_installed_or_left_to_the_cluster(tmp_path: Path, keda: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    addons = {**dict.fromkeys(PIPELINE, "present"), "keda": keda}
    region = existing_region(
        {"kubeconfig": str(kubeconfig), "addons": addons},
        {"node_groups": {"system": {"labels": {"inference-fleet/accelerator": "none"}}}},
    )
    scaled = classic_endpoint({"autoscaling": {"min_replicas": 1, "max_replicas": 2, "metrics": ["queue:4"]}})
    plan = run_program(read_stack_file(write_stack(tmp_path, {REGION: region}, {"chat": scaled})))
    releases = {release["inputs"]["name"] for release in by_type(plan, "kubernetes:helm.sh/v3:Release")}
    crds = by_type(plan, "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
    namespaces = {
        namespace["inputs"]["metadata"]["name"] for namespace in by_type(plan, "kubernetes:core/v1:Namespace")
    }
    assert by_type(plan, "kubernetes:keda.sh/v1alpha1:ScaledObject")  # the endpoint's autoscaler either way
    if keda == "present":
        assert (releases, crds) == (set(), [])
        assert "inference-fleet-metrics" not in namespaces
    elif keda == "crds":  # the controller is someone else's; its CRDs at the pinned version are ours
        assert releases == set()
        assert {crd["inputs"]["metadata"]["name"] for crd in crds} >= {"scaledobjects.keda.sh"}
        assert "inference-fleet-metrics" not in namespaces
    else:
        assert releases == {"keda"}
        assert crds
        assert "inference-fleet-metrics" in namespaces


def test_the_load_balancer_controllers_crds_alone_on_a_cluster_given_by_kubeconfig(tmp_path: Path) -> None:
    """``crds``: no IAM role, no association, no release; the CRDs, kept on delete like every vendored CRD."""
    plan = kubeconfig_plan(tmp_path, {"addons": {"aws_load_balancer_controller": "crds"}})
    crds = by_type(plan, "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
    assert {crd["inputs"]["metadata"]["name"] for crd in crds} >= {"targetgroupbindings.elbv2.k8s.aws"}
    assert all(crd["options"].get("retainOnDelete") for crd in crds)
    assert not by_type(plan, "kubernetes:helm.sh/v3:Release")
    assert not [resource for resource in plan.resources if resource["type"].startswith("aws:")]
