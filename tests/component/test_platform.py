"""The regional platform of the example stacks, as the offline plan records it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components import scheduling
from components.catalog import CONFIG_DIR, chart_crds, pins
from components.platform.load_balancer import controller_policy
from components.platform.network import subnet_masks
from fleetctl.plan import SECRET, Plan, region_of, run_program
from fleetctl.stackfile import read_stack_file
from tests.component.programs import by_type, edited, example_plan
from tests.vendored import git_blob_id, vendored_parts

PROD_REGIONS = ("us-east-1", "eu-west-1")


def in_region(plan: Plan, resource_type: str, region: str) -> list[dict[str, Any]]:
    by_urn = {resource["urn"]: resource for resource in plan.resources}
    return [resource for resource in by_type(plan, resource_type) if region_of(resource, by_urn) == region]


def one(plan: Plan, resource_type: str, region: str, name: str | None = None) -> dict[str, Any]:
    found = [r for r in in_region(plan, resource_type, region) if name is None or r["name"] == name]
    assert len(found) == 1, [r["name"] for r in found]
    return found[0]


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_every_aws_resource_of_a_region_uses_that_regions_provider(region: str) -> None:
    plan = example_plan("prod")
    provider = one(plan, "pulumi:providers:aws", region)
    aws_resources = [r for r in plan.resources if r["type"].startswith("aws:") and f"{region}-" in r["name"]]
    assert aws_resources
    by_urn = {resource["urn"]: resource for resource in plan.resources}
    assert {region_of(resource, by_urn) for resource in aws_resources} == {region}
    platform = one(plan, "inference-fleet:platform:RegionalPlatform", region)
    assert platform["options"]["providers"]["aws"] == provider["urn"]


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_the_created_vpc_spans_the_configured_zones_with_nat_and_load_balancer_tags(region: str) -> None:
    vpc = one(example_plan("prod"), "awsx:ec2:Vpc", region)["inputs"]
    zones = {"us-east-1": ["us-east-1a", "us-east-1b", "us-east-1c"], "eu-west-1": ["eu-west-1a", "eu-west-1b"]}
    assert vpc["availabilityZoneNames"] == zones[region]
    assert vpc["natGateways"] == {"strategy": "OnePerAz"}
    specs = {spec["type"]: spec for spec in vpc["subnetSpecs"]}
    assert specs["Private"] == {"type": "Private", "cidrMask": 19, "tags": {"kubernetes.io/role/internal-elb": "1"}}
    assert specs["Public"] == {"type": "Public", "cidrMask": 22, "tags": {"kubernetes.io/role/elb": "1"}}


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_the_eks_cluster_is_pinned_private_to_managed_groups_and_protected(region: str) -> None:
    cluster = one(example_plan("prod"), "eks:index:Cluster", region)
    inputs = cluster["inputs"]
    assert inputs["name"] == f"inference-fleet-prod-{region}"
    assert inputs["version"] == "1.34"
    assert inputs["authenticationMode"] == "API"
    assert inputs["upgradePolicy"] == {"supportType": "STANDARD"}
    assert inputs["skipDefaultNodeGroup"] is True
    assert inputs["corednsAddonOptions"]["enabled"] is False
    assert set(inputs["enabledClusterLogTypes"]) == {"api", "audit", "authenticator", "controllerManager", "scheduler"}
    assert inputs["deletionProtection"] is True
    assert cluster["options"]["protect"] is True


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_node_add_ons_wait_for_the_system_node_group(region: str) -> None:
    plan = example_plan("prod")
    system = one(plan, "eks:index:ManagedNodeGroup", region, f"{region}-system")
    for addon in ("coredns", "eks-pod-identity-agent"):
        resource = one(plan, "aws:eks/addon:Addon", region, f"{region}-{addon}")
        assert resource["inputs"]["addonName"] == addon
        assert system["urn"] in resource["options"]["dependsOn"]


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_device_plugins_tolerate_and_select_the_gpu_and_efa_nodes(region: str) -> None:
    plan = example_plan("prod")
    releases = {r["inputs"]["chart"]: r["inputs"] for r in in_region(plan, "kubernetes:helm.sh/v3:Release", region)}
    charts = pins().charts
    nvidia = releases[charts.nvidia_device_plugin.chart]
    efa = releases[charts.efa_device_plugin.chart]
    assert nvidia["version"] == charts.nvidia_device_plugin.version
    assert efa["version"] == charts.efa_device_plugin.version
    # And the EFA nodes' startup taint: they register the devices whose advertising takes it off (docs/efa.md).
    expected = [
        scheduling.GPU_TAINT.toleration(),
        scheduling.EFA_TAINT.toleration(),
        scheduling.EFA_STARTUP_TAINT.toleration(),
    ]
    assert nvidia["values"]["tolerations"] == expected
    assert efa["values"]["tolerations"] == expected
    assert nvidia["values"]["nodeSelector"] == {scheduling.ACCELERATOR_LABEL: "nvidia"}
    assert nvidia["values"]["mofedEnabled"] is False
    assert efa["values"]["nodeSelector"] == {scheduling.EFA_LABEL: "true"}


def test_a_stack_without_efa_groups_installs_no_efa_plugin() -> None:
    charts = [r["inputs"]["chart"] for r in by_type(example_plan("dev"), "kubernetes:helm.sh/v3:Release")]
    assert pins().charts.efa_device_plugin.chart not in charts
    assert pins().charts.nvidia_device_plugin.chart in charts


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_the_load_balancer_controller_runs_under_pod_identity_with_the_regions_scheme(region: str) -> None:
    plan = example_plan("prod")
    release = one(plan, "kubernetes:helm.sh/v3:Release", region, f"{region}-lb-controller")["inputs"]
    assert release["version"] == pins().charts.aws_load_balancer_controller.version
    assert release["values"]["ingressClassParams"]["spec"]["scheme"] == "internal"
    assert release["values"]["clusterName"] == f"inference-fleet-prod-{region}"
    association = one(plan, "aws:eks/podIdentityAssociation:PodIdentityAssociation", region, f"{region}-lb-controller")
    assert association["inputs"]["serviceAccount"] == "aws-load-balancer-controller"
    assert association["inputs"]["namespace"] == "kube-system"
    role = one(plan, "aws:iam/role:Role", region, f"{region}-lb-controller")
    trust = json.loads(role["inputs"]["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_the_load_balancer_controller_role_has_the_controllers_policy(region: str) -> None:
    policy = one(example_plan("prod"), "aws:iam/rolePolicy:RolePolicy", region, f"{region}-lb-controller")
    assert json.loads(policy["inputs"]["policy"]) == controller_policy("aws")


CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
STACK_REGIONS = [("dev", "us-west-2"), *(("prod", region) for region in PROD_REGIONS)]
CONTROLLER_CRDS = {
    # name: (kind, [(version, served, storage)]) of the chart 3.4.2's crds/
    "albtargetcontrolconfigs.elbv2.k8s.aws": ("ALBTargetControlConfig", [("v1beta1", True, True)]),
    "globalaccelerators.aga.k8s.aws": ("GlobalAccelerator", [("v1beta1", True, True)]),
    "ingressclassparams.elbv2.k8s.aws": ("IngressClassParams", [("v1beta1", True, True)]),
    "targetgroupbindings.elbv2.k8s.aws": ("TargetGroupBinding", [("v1alpha1", True, False), ("v1beta1", True, True)]),
    "listenerruleconfigurations.gateway.k8s.aws": ("ListenerRuleConfiguration", [("v1beta1", True, True)]),
    "loadbalancerconfigurations.gateway.k8s.aws": ("LoadBalancerConfiguration", [("v1beta1", True, True)]),
    "targetgroupconfigurations.gateway.k8s.aws": ("TargetGroupConfiguration", [("v1beta1", True, True)]),
}


@pytest.mark.parametrize(("stack", "region"), STACK_REGIONS)
def test_the_controller_crds_are_applied_once_per_region_by_the_controller_component(stack: str, region: str) -> None:
    plan = example_plan(stack)
    controller = one(plan, "inference-fleet:platform:LoadBalancerController", region)
    provider = one(plan, "pulumi:providers:kubernetes", region)
    controllers = [crd for crd in in_region(plan, CRD, region) if crd["inputs"]["spec"]["group"].endswith(".k8s.aws")]
    crds = {crd["inputs"]["metadata"]["name"]: crd for crd in controllers}
    assert len(crds) == len(controllers)
    assert sorted(crds) == sorted(CONTROLLER_CRDS)
    vendored = {crd["metadata"]["name"]: crd for crd in chart_crds(pins().charts.aws_load_balancer_controller)}
    for name, crd in crds.items():
        inputs = crd["inputs"]
        kind, versions = CONTROLLER_CRDS[name]
        assert crd["name"] == f"{region}-lb-controller-{name}"
        assert (inputs["apiVersion"], inputs["kind"]) == ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        assert inputs["spec"] == vendored[name]["spec"]
        assert inputs["spec"]["names"]["kind"] == kind
        assert [(v["name"], v["served"], v["storage"]) for v in inputs["spec"]["versions"]] == versions
        assert inputs["metadata"]["labels"]["app.kubernetes.io/version"] == "3.4.2"
        assert inputs["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
        assert crd["parent"] == controller["urn"]
        assert crd["provider"] == provider["urn"]
        assert crd["options"]["retainOnDelete"] is True


@pytest.mark.parametrize(("stack", "region"), STACK_REGIONS)
def test_the_controller_release_skips_the_charts_crds_and_waits_for_ours(stack: str, region: str) -> None:
    plan = example_plan(stack)
    release = one(plan, "kubernetes:helm.sh/v3:Release", region, f"{region}-lb-controller")
    assert release["inputs"]["skipCrds"] is True
    controller = one(plan, "inference-fleet:platform:LoadBalancerController", region)
    crds = {crd["urn"] for crd in in_region(plan, CRD, region) if crd["parent"] == controller["urn"]}
    assert len(crds) == len(CONTROLLER_CRDS)
    assert crds <= set(release["options"]["dependsOn"])
    # LeaderWorkerSet's controller applies its CRDs the same way (tests/component/test_leader_worker_sets.py).
    others = [
        r
        for r in in_region(plan, "kubernetes:helm.sh/v3:Release", region)
        if r["urn"] != release["urn"] and r["inputs"].get("name") != "lws"
    ]
    assert others
    assert all("skipCrds" not in other["inputs"] for other in others)


def test_the_vendored_crds_are_the_charts_files_verbatim() -> None:
    """Each part of the vendored file is byte for byte the upstream file its header names, by git blob id."""
    chart = pins().charts.aws_load_balancer_controller
    assert chart.crds == f"aws-load-balancer-controller-{chart.version}-crds.yaml"
    text = (CONFIG_DIR / chart.crds).read_text(encoding="utf-8")
    header, named = vendored_parts(text, "crds", separator="")
    assert sorted(path for path, _ in named) == ["crds/crds.yaml", "crds/gateway-crds.yaml"]
    for (path, blob), part in named.items():
        assert git_blob_id(part.encode()) == blob, path
    assert all(line.startswith("#") or not line for line in header.splitlines())


@pytest.mark.parametrize("region", PROD_REGIONS)
def test_each_region_has_its_own_kubernetes_provider_with_a_secret_kubeconfig(region: str) -> None:
    plan = example_plan("prod")
    provider = one(plan, "pulumi:providers:kubernetes", region)
    assert provider["inputs"]["kubeconfig"] == SECRET
    helm = in_region(plan, "kubernetes:helm.sh/v3:Release", region)
    assert helm
    assert {release["provider"] for release in helm} == {provider["urn"]}


def test_stack_outputs_name_each_regions_cluster_and_keep_kubeconfigs_secret() -> None:
    outputs = example_plan("prod").outputs
    assert outputs["kubeconfigs"] == SECRET
    east = outputs["regions"]["us-east-1"]
    assert east["cluster_name"] == "inference-fleet-prod-us-east-1"
    assert east["cluster_endpoint"].startswith("https://")
    assert set(east["node_groups"]) == {"system", "p5-store", "p5", "g6e"}
    assert east["cold_tier_bucket"] == "inference-fleet-prod-kv-123456789012-us-east-1"
    assert example_plan("dev").outputs["regions"]["us-west-2"]["cold_tier_bucket"] is None


EXISTING_VPC_STACK = """\
config:
  inference-fleet:regions:
    us-east-2:
      cluster_access: {private_access_cidrs: [10.8.0.0/16]}   # the runner's network, connected to the VPC
      vpc:
        id: vpc-0123456789abcdef0
        private_subnet_ids: [subnet-0123456789abcdef0, subnet-0123456789abcdef1]
      node_groups:
        system: {instance_types: [m7i.xlarge], min_size: 1, max_size: 2, desired_size: 1}
"""


def test_an_existing_vpc_is_adopted_without_creating_one(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.adopt.yaml"
    stack.write_text(EXISTING_VPC_STACK)
    plan = run_program(read_stack_file(stack))
    assert by_type(plan, "awsx:ec2:Vpc") == []
    cluster = one(plan, "eks:index:Cluster", "us-east-2")["inputs"]
    assert cluster["vpcId"] == "vpc-0123456789abcdef0"
    assert cluster["privateSubnetIds"] == ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
    assert cluster["publicSubnetIds"] == []
    charts = [release["inputs"]["chart"] for release in by_type(plan, "kubernetes:helm.sh/v3:Release")]
    assert sorted(charts) == [pins().charts.aws_load_balancer_controller.chart, pins().charts.cluster_autoscaler.chart]


@pytest.mark.parametrize(("prefix", "private", "public"), [(16, 19, 22), (21, 24, 27), (22, 25, 27)])
def test_public_subnets_are_never_smaller_than_a_load_balancer_needs(prefix: int, private: int, public: int) -> None:
    """An ALB needs /27 subnets: a /22 VPC's public subnets were /28 before."""
    assert subnet_masks(prefix) == (private, public)


@pytest.mark.parametrize("prefix", range(16, 23))
def test_four_zones_of_subnets_fit_the_vpc(prefix: int) -> None:
    private, public = subnet_masks(prefix)
    assert 4 * (2 ** (32 - private) + 2 ** (32 - public)) <= 2 ** (32 - prefix)


def test_a_slash_22_vpc_is_planned_with_slash_27_public_subnets(tmp_path: Path) -> None:
    path = edited(tmp_path, "dev", ("cidr: 10.40.0.0/16", "cidr: 10.40.0.0/22"))
    vpc = one(run_program(read_stack_file(path)), "awsx:ec2:Vpc", "us-west-2")["inputs"]
    assert {spec["type"]: spec["cidrMask"] for spec in vpc["subnetSpecs"]} == {"Private": 25, "Public": 27}


def test_each_regions_vpc_is_an_output_for_the_security_group_global_accelerator_leaves() -> None:
    """With client IP preservation Global Accelerator makes a security group ``GlobalAccelerator`` in the
    VPC that blocks its deletion, and Pulumi never owns it (pulumi-aws 7.51.1
    EndpointGroupEndpointConfiguration.client_ip_preservation_enabled: "This cannot be resolved by
    re-running the provider"): docs/deploying.md finds it by the VPC id each region exports."""
    outputs = example_plan("prod").outputs
    for region in PROD_REGIONS:
        assert outputs["regions"][region]["vpc_id"] == f"vpc-offline-{region}-vpc"
