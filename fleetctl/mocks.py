"""Pulumi mocks that record what a real engine would receive.

``RecordingMonitor`` keeps every RegisterResource request (inputs, parent,
provider, options) and the stack's outputs. ``FleetMocks`` answers resource
registrations with their inputs and refuses any invoke it does not know, naming
the token, so an offline plan can never silently depend on a cloud call.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from pulumi.runtime import mocks, rpc
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.settings import get_project, get_stack

from components import naming
from components.catalog import instance_catalog

STACK_TYPE = "pulumi:pulumi:Stack"
AWS_PROVIDER_TYPE = "pulumi:providers:aws"
INGRESS_TYPE = "kubernetes:networking.k8s.io/v1:Ingress"
MANAGED_NODE_GROUP_TYPE = "eks:index:ManagedNodeGroup"
NODE_GROUP_TYPE = "aws:eks/nodeGroup:NodeGroup"


class DuplicateUrnError(RuntimeError):
    def __init__(self, urn: str) -> None:
        # The engine's own words (sdk/go/common/diag/errors.go GetDuplicateResourceURNError, raised by
        # pkg/resource/deploy/step_generator.go generateURN): `pulumi up` stops on this registration.
        super().__init__(f"Duplicate resource URN '{urn}'; try giving it a unique name")
        self.urn = urn


class UnmockedInvokeError(RuntimeError):
    def __init__(self, token: str) -> None:
        super().__init__(
            f"unmocked invoke {token}: the offline plan has no answer for it; add one to fleetctl/mocks.py "
            "(INVOKES) with facts known without a cloud account"
        )
        self.token = token


OFFLINE_ACCOUNT_ID = "123456789012"
"""The AWS documentation's example account: every ARN of an offline plan is visibly not real."""

Handler = Callable[[Mapping[str, Any]], dict[str, Any]]


def _caller_identity(_: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "accountId": OFFLINE_ACCOUNT_ID,
        "arn": f"arn:aws:iam::{OFFLINE_ACCOUNT_ID}:user/offline-plan",
        "userId": "OFFLINEPLAN",
        "id": OFFLINE_ACCOUNT_ID,
    }


def _instance_type(args: Mapping[str, Any]) -> dict[str, Any]:
    """The catalog's facts, as ``aws.ec2.get_instance_type`` would report them."""
    name = str(args["instanceType"])
    facts = instance_catalog().instance_types.get(name)
    if facts is None:
        raise UnmockedInvokeError(f"aws:ec2/getInstanceType:getInstanceType for {name} (not in config/instances.yaml)")
    return {
        "instanceType": name,
        "efaSupported": facts.efa_supported,
        "efaMaximumInterfaces": facts.efa_interfaces,
        "maximumNetworkCards": max(facts.efa_interfaces, 1),
        "gpuses": [{"count": facts.accelerators, "manufacturer": "NVIDIA"}] if facts.accelerator == "nvidia" else [],
        "supportedArchitectures": [facts.architecture],
    }


def _subnets(args: Mapping[str, Any]) -> dict[str, Any]:
    """Subnets matching the filters: one per zone filter value, named so no one mistakes them for real ids."""
    filters = {str(item["name"]): [str(value) for value in item["values"]] for item in args.get("filters", [])}
    zones = filters.get("availability-zone", ["any-zone"])
    vpc = filters.get("vpc-id", ["vpc"])[0]
    ids = [f"subnet-offline-{vpc}-{zone}" for zone in zones]
    return {"ids": ids, "id": ",".join(ids), "filters": args.get("filters", [])}


def _load_balancer(args: Mapping[str, Any]) -> dict[str, Any]:
    """The region's shared ALB, as ``aws.lb.get_load_balancer`` finds it by the controller's tags
    (components/platform/global_front.py asks with the region)."""
    region = str(args.get("region") or "")
    tags = {str(key): str(value) for key, value in (args.get("tags") or {}).items()}
    cluster = tags.get("elbv2.k8s.aws/cluster", "cluster")
    name = f"k8s-{naming.INGRESS_GROUP}-offline"
    arn = f"arn:aws:elasticloadbalancing:{region or 'offline'}:{OFFLINE_ACCOUNT_ID}:loadbalancer/app/{name}/{cluster}"
    return {
        "arn": arn,
        "dnsName": load_balancer_hostname(region or None),
        "zoneId": "ZOFFLINEALB",
        "name": name,
        "loadBalancerType": "application",
        "tags": tags,
    }


def _existing_eks_cluster(args: Mapping[str, Any]) -> dict[str, Any]:
    """An existing EKS cluster as ``aws.eks.get_cluster`` reports it (``existing_cluster.name``):
    an endpoint, CA and VPC no one mistakes for real ones."""
    name = str(args["name"])
    return {
        "name": name,
        "id": name,
        "arn": f"arn:aws:eks:offline:{OFFLINE_ACCOUNT_ID}:cluster/{name}",
        "endpoint": f"https://{name}.offline.eks.amazonaws.com",
        "certificateAuthorities": [{"data": "T0ZGTElORS1DQQ=="}],
        "vpcConfig": {"vpcId": f"vpc-offline-{name}", "subnetIds": [], "securityGroupIds": []},
        "version": "",
        "status": "ACTIVE",
    }


INVOKES: dict[str, Handler] = {
    "aws:index/getCallerIdentity:getCallerIdentity": _caller_identity,
    "aws:eks/getCluster:getCluster": _existing_eks_cluster,
    "aws:lb/getLoadBalancer:getLoadBalancer": _load_balancer,
    "aws:ec2/getInstanceType:getInstanceType": _instance_type,
    "aws:ec2/getSubnets:getSubnets": _subnets,
}
"""token -> answer, for invokes the offline plan can answer without a cloud account."""


def _arn(service: str, resource: str) -> str:
    return f"arn:aws:{service}:offline:{OFFLINE_ACCOUNT_ID}:{resource}"


def _kubeconfig(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": f"https://{name}.offline.eks.amazonaws.com"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "users": [{"name": name, "user": {}}],
    }


def _eks_cluster(name: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    cluster = str(inputs.get("name") or name)
    kubeconfig = _kubeconfig(cluster)
    return {
        "kubeconfig": kubeconfig,
        "kubeconfigJson": json.dumps(kubeconfig, sort_keys=True),
        "clusterSecurityGroupId": f"sg-offline-{cluster}-cluster",
        "nodeSecurityGroupId": f"sg-offline-{cluster}-node",
        "oidcIssuer": f"oidc.eks.offline.amazonaws.com/id/{cluster}",
    }


def _vpc(name: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    zones = [str(zone) for zone in inputs.get("availabilityZoneNames", [])]
    return {
        "vpcId": f"vpc-offline-{name}",
        "privateSubnetIds": [f"subnet-offline-vpc-offline-{name}-{zone}-private" for zone in zones],
        "publicSubnetIds": [f"subnet-offline-vpc-offline-{name}-{zone}-public" for zone in zones],
    }


def _managed_node_group(_: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The resources the node group was given, handed back.

    The mock monitor rehydrates resource references of a remote component's inputs
    on its worker thread's event loop, and runs that loop only while serializing
    the answer; without a reference in the answer the rehydration never finishes
    and the program waits forever for its outstanding RPCs.
    """
    return {key: inputs[key] for key in ("cluster", "nodeRole") if inputs.get(key) is not None}


def offline_asg_name(node_group_name: str) -> str:
    """EKS names a managed node group's Auto Scaling group ``eks-<node group>-<uuid>``; offline, ``-offline``."""
    return f"eks-{node_group_name}-offline"


def _node_group_state(node_group_name: str) -> dict[str, Any]:
    """The ``aws.eks.NodeGroup`` pulumi-eks creates inside a ManagedNodeGroup, as far as the program reads it."""
    return {
        "nodeGroupName": node_group_name,
        "resources": [{"autoscalingGroups": [{"name": offline_asg_name(node_group_name)}]}],
    }


def load_balancer_hostname(region: str | None) -> str:
    """The DNS name the load balancer controller writes into every Ingress of a region's cluster: it
    merges all Ingresses of the ingress group (``naming.INGRESS_GROUP``, the chart's IngressClass
    parameters) into one ALB, so they share one name (a real one: ``k8s-<group>-<hash>-<id>.<region>...``)."""
    return f"k8s-{naming.INGRESS_GROUP}-offline{f'.{region}' if region else ''}.elb.amazonaws.com"


OUTPUTS: dict[str, Callable[[str, Mapping[str, Any]], dict[str, Any]]] = {
    "eks:index:ManagedNodeGroup": _managed_node_group,
    "eks:index:Cluster": _eks_cluster,
    "awsx:ec2:Vpc": _vpc,
    "aws:iam/role:Role": lambda name, inputs: {"arn": _arn("iam", f"role/{inputs.get('name') or name}")},
    "aws:iam/policy:Policy": lambda name, inputs: {"arn": _arn("iam", f"policy/{inputs.get('name') or name}")},
    "aws:kms/key:Key": lambda name, _: {"arn": _arn("kms", f"key/{name}"), "keyId": f"{name}-id"},
    "aws:s3/bucket:Bucket": lambda name, inputs: {
        "arn": f"arn:aws:s3:::{inputs.get('bucket') or name}",
        "bucket": inputs.get("bucket") or name,
    },
    "aws:ec2/launchTemplate:LaunchTemplate": lambda name, _: {"latestVersion": 1},
    "aws:ec2/placementGroup:PlacementGroup": lambda name, inputs: {"name": inputs.get("name") or name},
    "aws:globalaccelerator/accelerator:Accelerator": lambda name, _: {
        "arn": f"arn:aws:globalaccelerator::{OFFLINE_ACCOUNT_ID}:accelerator/{name}-offline",
        "dnsName": f"{name}-offline.awsglobalaccelerator.com",
        "ipSets": [{"ipFamily": "IPv4", "ipAddresses": ["192.0.2.1", "192.0.2.2"]}],  # TEST-NET-1 (RFC 5737)
    },
    "aws:globalaccelerator/listener:Listener": lambda name, _: {
        "arn": f"arn:aws:globalaccelerator::{OFFLINE_ACCOUNT_ID}:accelerator/offline/listener/{name}"
    },
}
"""type -> outputs a real create would add to the inputs, computed offline."""


class FleetMocks(mocks.Mocks):
    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        computed = OUTPUTS.get(args.typ)
        # A custom resource echoes its inputs; a (remote) component has only the outputs it computes.
        state = dict(args.inputs) if args.custom else {}
        if computed is not None:
            state.update(computed(args.name, args.inputs))
        return f"{args.name}-id", state

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        handler = INVOKES.get(args.token)
        if handler is None:
            raise UnmockedInvokeError(args.token)
        return handler(args.args), []


@dataclass
class Registration:
    urn: str
    request: dict[str, Any]
    custom: bool


class RecordingMonitor(mocks.MockMonitor):
    def __init__(self, fleet_mocks: mocks.Mocks, *, record_everything: bool = False) -> None:
        super().__init__(fleet_mocks)
        self._record_everything = record_everything
        """Record source positions too (the plain path of fleetctl/plan.py ``run_program``)."""
        self.registrations: list[Registration] = []
        self.stack_outputs: dict[str, Any] = {}
        self._stack_urn = ""
        self._regions: dict[str, str | None] = {}
        """URN -> the AWS region of each registered resource, found as ``fleetctl.plan.region_of`` finds it."""
        self._thread_loops: set[asyncio.AbstractEventLoop] = set()
        self._lock = threading.Lock()
        self._urns: set[str] = set()
        """Every URN registered so far: the engine refuses a second registration of one."""

    def _keep_thread_loop(self) -> None:
        """The base monitor creates an event loop in each worker thread it runs on; remember it to close it."""
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            return
        if not loop.is_running():
            with self._lock:
                self._thread_loops.add(loop)

    def close(self) -> None:
        """Close the worker threads' event loops (left open, they fail noisily at interpreter exit).

        After a failed program, worker threads may still be finishing RPCs: take the set under the lock.
        """
        with self._lock:
            loops, self._thread_loops = self._thread_loops, set()
        for loop in loops:
            if not loop.is_running() and not loop.is_closed():
                loop.close()

    def Invoke(self, request: resource_pb2.ResourceInvokeRequest) -> Any:  # noqa: N802 (gRPC name)
        try:
            return super().Invoke(request)  # type: ignore[no-untyped-call]
        finally:
            self._keep_thread_loop()

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """The URN the engine gives (pkg/resource/deploy/deployment.go generateURN): the type is qualified
        by the parent's whole qualified type, ``<grandparent type>$<parent type>$<type>``, except under the
        stack itself. (The base mock keeps only the parent's own type.)"""
        if parent and parent != self._stack_urn:
            type_ = f"{parent.split('::', 3)[2]}${type_}"  # a name may hold '::', a stack or project not
        return f"urn:pulumi:{get_stack()}::{get_project()}::{type_}::{name}"

    def _region_of(self, request: resource_pb2.RegisterResourceRequest) -> str | None:
        """An AWS provider's ``region``; else the region of the resource's provider (a component's
        AWS provider first, then its first), else its parent's. Both are registered before it."""
        if request.type == AWS_PROVIDER_TYPE:
            region = request.object.fields.get("region")
            return region.string_value if region is not None and region.string_value else None
        providers = dict(sorted(request.providers.items()))
        provider = request.provider or providers.get("aws") or next(iter(providers.values()), "")
        following = provider.rsplit("::", 1)[0] if provider else request.parent
        with self._lock:
            return self._regions.get(following)

    def RegisterResource(self, request: resource_pb2.RegisterResourceRequest) -> Any:  # noqa: N802 (gRPC name)
        urn = self.make_urn(request.parent, request.type, request.name)
        with self._lock:
            if urn in self._urns:
                raise DuplicateUrnError(urn)
            self._urns.add(urn)
        region = self._region_of(request)
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        self._keep_thread_loop()
        with self._lock:
            self._regions[response.urn] = region
        if request.type == STACK_TYPE:
            self._stack_urn = response.urn
        if request.type == INGRESS_TYPE:
            self._answer_ingress(response, region)
        if request.type == MANAGED_NODE_GROUP_TYPE:
            self._answer_node_group(request, response)
        # Where in the program the resource was declared (the SDK's stack trace of every registration:
        # pulumi/runtime/resource.py _get_stack_trace) is no part of a plan (fleetctl/plan.py
        # _resource_entry reads none of it): left out of the record. The SDK is done with the request.
        if not self._record_everything:
            request.ClearField("sourcePosition")
            request.ClearField("stackTrace")
            request.ClearField("parentStackTraceHandle")
        self.registrations.append(
            Registration(
                urn=response.urn,
                request=json_format.MessageToDict(request, preserving_proto_field_name=False),
                custom=bool(request.custom),
            )
        )
        return response

    def _answer_node_group(self, request: resource_pb2.RegisterResourceRequest, response: Any) -> None:
        """Give a ManagedNodeGroup its ``nodeGroup`` output: a reference to the aws.eks.NodeGroup the real
        component creates (not registered by the program, so never in the plan), which the SDK reads back
        through ``pulumi:pulumi:getResource`` when the program asks for its Auto Scaling group."""
        node_group_name = request.object.fields["nodeGroupName"].string_value or request.name
        urn = self.make_urn(response.urn, NODE_GROUP_TYPE, request.name)
        resource_id = f"{request.name}-node-group-id"
        self.resources[urn] = mocks.MockMonitor.ResourceRegistration(
            urn, resource_id, _node_group_state(node_group_name)
        )
        reference = {rpc._special_sig_key: rpc._special_resource_sig, "urn": urn, "id": resource_id}
        response.object.update({"nodeGroup": reference})

    def _answer_ingress(self, response: Any, region: str | None) -> None:
        """The status the load balancer controller writes once the region's ALB exists."""
        status = {"loadBalancer": {"ingress": [{"hostname": load_balancer_hostname(region)}]}}
        response.object.update({"status": status})
        self.resources[response.urn].state["status"] = status

    def RegisterResourceOutputs(self, request: resource_pb2.RegisterResourceOutputsRequest) -> Any:  # noqa: N802
        if request.urn == self._stack_urn:
            self.stack_outputs = json_format.MessageToDict(request.outputs)
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]
