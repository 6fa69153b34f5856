"""Accept and reject rules of the stack config (docs/config-reference.md).

Each reject case is the minimal valid stack of ``stack_builders`` with one thing
changed; it must produce exactly one problem, at the dotted path named, whose
message carries the fragment named.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.catalog import pins
from components.naming import MAX_CANARY_ENDPOINT_NAME_LENGTH, MAX_ENDPOINT_NAME_LENGTH
from components.spec import Endpoint, Problem, SpecError, StackSpec, parse_stack_config
from components.spec.mooncake_checks import vllm_release
from components.spec.region import ClusterAccess

from .stack_builders import (
    DELETE,
    IMAGE,
    REGION,
    RUNNER_CIDR,
    classic_endpoint,
    mooncake_endpoint,
    region,
    stack_config,
    with_classic,
    with_mooncake,
    with_region,
)

CPU_IMAGE = "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.33.0"
"""vLLM's CPU build, which runs without a GPU (components/spec/value_checks.py)."""
ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/llm/server:1.2"
CI_ROLE = "arn:aws:iam::123456789012:role/inference-fleet-ci"
CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d"
SUBNETS = ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]


def rejected(config: dict[str, Any]) -> tuple[Problem, ...]:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(config)
    return caught.value.problems


def only_problem(config: dict[str, Any]) -> Problem:
    problems = rejected(config)
    assert len(problems) == 1, "\n".join(map(str, problems))
    return problems[0]


def case(case_id: str, config: dict[str, Any], path: str, fragment: str, *marks: Any) -> Any:
    return pytest.param(config, path, fragment, id=case_id, marks=marks)


def mooncake_block(overrides: dict[str, Any]) -> dict[str, Any]:
    return with_mooncake({"mooncake": overrides})


def store_mode(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    return mooncake_block({"mode": "store", "topology": DELETE, **(overrides or {})})


def two_regions(
    endpoints: dict[str, dict[str, Any]], second: str = "eu-west-1", second_overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    return stack_config(
        regions={REGION: region(), second: region(second_overrides, name=second)},
        endpoints=endpoints,
    )


# Section 0: regions and node groups.

REGION_REJECTS = [
    case(
        "region_name_that_is_not_an_aws_region_code",
        stack_config(regions={"us-east-9": region(name="us-east-9")}),
        "regions.us-east-9",
        "'us-east-9' is not an AWS region code",
    ),
    case(
        "no_regions_key",
        {"endpoints": {}},
        "regions",
        "is required",
    ),
    case(
        "empty_regions",
        {"regions": {}},
        "regions",
        "is empty: declare at least one region",
    ),
    case(
        "efa_group_without_availability_zone",
        with_region({"node_groups": {"p5": {"availability_zone": DELETE}}}),
        "regions.us-east-1.node_groups.p5.availability_zone",
        "is required because efa is true",
    ),
    case(
        "availability_zone_outside_the_region",
        with_region({"node_groups": {"p5": {"availability_zone": "us-west-2a"}}}),
        "regions.us-east-1.node_groups.p5.availability_zone",
        "'us-west-2a' is not a zone of us-east-1",
    ),
    case(
        "availability_zone_not_among_the_vpc_zones",
        with_region({"node_groups": {"p5": {"availability_zone": "us-east-1c"}}}),
        "regions.us-east-1.node_groups.p5.availability_zone",
        "'us-east-1c' is not among the VPC's availability_zones (us-east-1a, us-east-1b)",
    ),
    case(
        "efa_on_an_instance_type_without_efa",
        with_region(
            {"node_groups": {"gpu": {"instance_types": ["g6e.xlarge"], "efa": True, "availability_zone": "us-east-1a"}}}
        ),
        "regions.us-east-1.node_groups.gpu.instance_types",
        "efa is true but g6e.xlarge has no EFA support",
    ),
    case(
        "unknown_instance_type",
        with_region({"node_groups": {"gpu": {"instance_types": ["g9.huge"]}}}),
        "regions.us-east-1.node_groups.gpu.instance_types[0]",
        "unknown instance type 'g9.huge'",
    ),
    case(
        "instance_types_that_differ_in_accelerators",
        with_region({"node_groups": {"gpu": {"instance_types": ["g6e.12xlarge", "m7i.xlarge"]}}}),
        "regions.us-east-1.node_groups.gpu.instance_types[1]",
        "m7i.xlarge differs from g6e.12xlarge",
    ),
    case(
        "min_size_above_desired_size",
        with_region({"node_groups": {"gpu": {"min_size": 2, "desired_size": 1}}}),
        "regions.us-east-1.node_groups.gpu",
        "min_size <= desired_size <= max_size must hold, got 2 <= 1 <= 2",
    ),
    case(
        "desired_size_above_max_size",
        with_region({"node_groups": {"gpu": {"desired_size": 3}}}),
        "regions.us-east-1.node_groups.gpu",
        "got 0 <= 3 <= 2",
    ),
    case(
        "capacity_block_without_reservation_id",
        with_region({"node_groups": {"p5": {"capacity_type": "capacity-block"}}}),
        "regions.us-east-1.node_groups.p5.capacity_reservation_id",
        "is required with capacity_type 'capacity-block'",
    ),
    case(
        "reservation_id_without_capacity_block",
        with_region({"node_groups": {"p5": {"capacity_reservation_id": "cr-0123456789abcdef0"}}}),
        "regions.us-east-1.node_groups.p5.capacity_reservation_id",
        "is only used with capacity_type 'capacity-block'",
    ),
    case(
        "capacity_block_without_availability_zone",
        with_region(
            {
                "node_groups": {
                    "gpu": {"capacity_type": "capacity-block", "capacity_reservation_id": "cr-0123456789abcdef0"}
                }
            }
        ),
        "regions.us-east-1.node_groups.gpu.availability_zone",
        "the capacity block lives in one zone",
    ),
    case(
        "region_without_a_system_group",
        with_region({"node_groups": {"system": DELETE}}),
        "regions.us-east-1.node_groups",
        "has no group without GPUs for system pods",
    ),
    case(
        "vpc_that_both_creates_and_adopts",
        with_region({"vpc": {"id": "vpc-0123456789abcdef0", "private_subnet_ids": SUBNETS}}),
        "regions.us-east-1.vpc",
        "to use an existing one, not both",
    ),
    case(
        "created_vpc_without_zones",
        with_region({"vpc": {"availability_zones": DELETE}}),
        "regions.us-east-1.vpc",
        "a created VPC needs both cidr and availability_zones",
    ),
    case(
        "existing_vpc_without_private_subnets",
        with_region({"vpc": {"cidr": DELETE, "availability_zones": DELETE, "id": "vpc-0123456789abcdef0"}}),
        "regions.us-east-1.vpc",
        "an existing VPC needs both id and private_subnet_ids",
    ),
    case(
        "empty_vpc",
        with_region({"vpc": {"cidr": DELETE, "availability_zones": DELETE}}),
        "regions.us-east-1.vpc",
        "is empty",
    ),
    case(
        "created_vpc_with_one_zone",
        with_region({"vpc": {"availability_zones": ["us-east-1a"]}, "node_groups": {"p5": DELETE}}),
        "regions.us-east-1.vpc.availability_zones",
        "needs at least 2 items, got 1",
    ),
    case(
        "internet_facing_ingress_without_certificate",
        with_region({"ingress": {"scheme": "internet-facing", "allowed_cidrs": ["10.0.0.0/8"]}}),
        "regions.us-east-1.ingress",
        "scheme 'internet-facing' needs certificate_arn and a non-empty allowed_cidrs",
    ),
    case(
        "internet_facing_ingress_without_allowed_cidrs",
        with_region({"ingress": {"scheme": "internet-facing", "certificate_arn": CERTIFICATE}}),
        "regions.us-east-1.ingress",
        "scheme 'internet-facing' needs certificate_arn and a non-empty allowed_cidrs",
    ),
    case(
        "kubernetes_version_as_an_unquoted_float",
        with_region({"kubernetes_version": 1.33}),
        "regions.us-east-1.kubernetes_version",
        "must be a string, got 1.33 (a number); quote it",
    ),
    case(
        "unsupported_kubernetes_version",
        with_region({"kubernetes_version": "1.20"}),
        "regions.us-east-1.kubernetes_version",
        "must be one of 1.30, 1.31, 1.32, 1.33, 1.34, 1.35, 1.36 (a quoted string)",
    ),
    case(
        "cold_tier_expiring_after_zero_days",
        with_region({"cold_tier": {"expiration_days": 0}}),
        "regions.us-east-1.cold_tier.expiration_days",
        "must be an integer in [1, 3650], got 0",
    ),
    case(
        "cluster_admin_that_is_not_an_arn",
        with_region({"cluster_access": {"admins": [CI_ROLE, "inference-fleet-ci"]}}),
        "regions.us-east-1.cluster_access.admins[1]",
        "must be the ARN of an IAM role or user (arn:aws:iam::<12-digit account>:role/<name> or "
        "arn:aws:iam::<12-digit account>:user/<name>), got 'inference-fleet-ci'",
    ),
    case(
        "cluster_admin_with_a_short_account_id",
        with_region({"cluster_access": {"admins": ["arn:aws:iam::12345678901:role/ci"]}}),
        "regions.us-east-1.cluster_access.admins[0]",
        "must be the ARN of an IAM role or user",
    ),
    case(
        "cluster_admin_that_is_a_group",
        with_region({"cluster_access": {"admins": ["arn:aws:iam::123456789012:group/admins"]}}),
        "regions.us-east-1.cluster_access.admins[0]",
        "got 'arn:aws:iam::123456789012:group/admins'",
    ),
    case(
        "cluster_admin_that_is_an_assumed_role_session",
        with_region({"cluster_access": {"admins": ["arn:aws:sts::123456789012:assumed-role/ci/gh-run-42"]}}),
        "regions.us-east-1.cluster_access.admins[0]",
        "is the ARN of an assumed-role session, which EKS cannot grant: give the role's own ARN, "
        "arn:aws:iam::123456789012:role/ci (with the role's path before its name, if it has one)",
    ),
    case(
        "cluster_admin_that_is_a_service_linked_role",
        with_region(
            {
                "cluster_access": {
                    "admins": [
                        "arn:aws:iam::123456789012:role/aws-service-role/eks.amazonaws.com/AWSServiceRoleForAmazonEKS"
                    ]
                }
            }
        ),
        "regions.us-east-1.cluster_access.admins[0]",
        "is a service-linked role, which EKS access entries do not accept",
    ),
    case(
        "cluster_admin_listed_twice",
        with_region(
            {"cluster_access": {"admins": [CI_ROLE, "arn:aws:iam::123456789012:role/team/inference-fleet-ci"]}}
        ),
        "regions.us-east-1.cluster_access.admins[1]",
        "names a principal already listed ('arn:aws:iam::123456789012:role/team/inference-fleet-ci'): "
        "list each role or user once",
    ),
    case(
        "public_access_cidr_with_host_bits",
        with_region({"cluster_access": {"public_access_cidrs": ["203.0.113.7/24"]}}),
        "regions.us-east-1.cluster_access.public_access_cidrs[0]",
        "must be an IPv4 CIDR block with no host bits set (e.g. 10.20.0.0/16), got '203.0.113.7/24'",
    ),
    case(
        "public_access_cidr_in_ipv6",
        with_region({"cluster_access": {"public_access_cidrs": ["203.0.113.0/24", "2001:db8::/32"]}}),
        "regions.us-east-1.cluster_access.public_access_cidrs[1]",
        "must be an IPv4 CIDR block",
    ),
    case(
        "public_access_cidr_listed_twice",
        with_region({"cluster_access": {"public_access_cidrs": ["198.51.100.7", "198.51.100.7/32"]}}),
        "regions.us-east-1.cluster_access.public_access_cidrs[1]",
        "repeats '198.51.100.7/32': list each CIDR once",
    ),
    case(
        "public_access_cidrs_as_one_string",
        with_region({"cluster_access": {"public_access_cidrs": "203.0.113.0/24"}}),
        "regions.us-east-1.cluster_access.public_access_cidrs",
        "must be a list, got '203.0.113.0/24'",
    ),
    case(
        "unknown_cluster_access_key",
        with_region({"cluster_access": {"admin": [CI_ROLE]}}),
        "regions.us-east-1.cluster_access.admin",
        "unknown key; did you mean 'admins'?",
    ),
]


@pytest.mark.parametrize(("config", "path", "fragment"), REGION_REJECTS)
def test_rejects_invalid_region(config: dict[str, Any], path: str, fragment: str) -> None:
    problem = only_problem(config)
    assert problem.path == path
    assert fragment in problem.message


# Section 0: where an endpoint is placed, and whether it fits there.

PLACEMENT_REJECTS = [
    case(
        "target_regions_as_an_empty_list",
        with_classic({"target_regions": []}),
        "endpoints.chat.target_regions",
        "is empty (no regions): remove the endpoint instead",
    ),
    case(
        "target_regions_listing_a_region_twice",
        with_classic({"target_regions": [REGION, REGION]}),
        "endpoints.chat.target_regions[1]",
        "twice",
    ),
    case(
        "target_region_not_declared_in_the_stack",
        with_classic({"target_regions": [REGION, "eu-west-1"]}),
        "endpoints.chat.target_regions[1]",
        "'eu-west-1' is not a region of this stack (regions: us-east-1)",
    ),
    case(
        "region_image_uri_outside_the_target_regions",
        two_regions(
            {"chat": classic_endpoint({"target_regions": [REGION], "region_image_uris": {"eu-west-1": "x:1"}})}
        ),
        "endpoints.chat.region_image_uris.eu-west-1",
        "'eu-west-1' is not a target region of the endpoint",
    ),
    case(
        "node_group_missing_in_one_target_region",
        two_regions({"chat": classic_endpoint()}, "us-west-2", {"node_groups": {"gpu": DELETE}}),
        "endpoints.chat.node_group",
        "node group 'gpu' does not exist in us-west-2 (groups there: system, p5)",
    ),
    case(
        "default_node_group_that_is_ambiguous",
        with_classic({"node_group": DELETE}),
        "endpoints.chat.node_group",
        "is ambiguous in us-east-1: p5, gpu are all nvidia GPU groups; set node_group",
    ),
    case(
        "default_node_group_that_is_missing",
        stack_config(
            region_overrides={"node_groups": {"p5": DELETE, "gpu": DELETE}},
            endpoints={"chat": classic_endpoint({"node_group": DELETE})},
        ),
        "endpoints.chat.node_group",
        "us-east-1 has no nvidia GPU node group to default to",
    ),
    case(
        "default_efa_node_group_that_is_missing_for_rdma",
        stack_config(region_overrides={"node_groups": {"p5": DELETE}}, endpoints={"chat": mooncake_endpoint()}),
        "endpoints.chat.node_group",
        "us-east-1 has no EFA nvidia GPU node group to default to",
    ),
    case(
        "gpu_count_on_a_group_without_gpus",
        with_classic({"node_group": "system"}),
        "endpoints.chat.node_group",
        "regions.us-east-1.node_groups.system has no nvidia accelerators but gpu_count is 1",
    ),
    case(
        "rdma_on_a_group_without_efa",
        with_mooncake({"node_group": "gpu"}),
        "endpoints.chat.mooncake.transfer.protocol",
        "'rdma' needs an EFA node group, but regions.us-east-1.node_groups.gpu has efa false",
    ),
    case(
        "gpu_count_larger_than_one_instance",
        with_classic({"gpu_count": 5}),
        "endpoints.chat.gpu_count",
        "5 GPUs per pod do not fit one node of regions.us-east-1.node_groups.gpu (4 per instance)",
    ),
    case(
        "capacity_type_no_node_of_the_group_has",
        with_classic({"capacity_type": "spot"}),
        "endpoints.chat.capacity_type",
        "is 'spot' but regions.us-east-1.node_groups.gpu is 'on-demand'; no node would match",
    ),
    case(
        "cold_tier_in_a_region_whose_cold_tier_is_disabled",
        mooncake_block({"mode": "both", "store": {"cold_tier_enabled": True}}),
        "endpoints.chat.mooncake.store.cold_tier_enabled",
        "needs the cold tier of us-east-1: set regions.us-east-1.cold_tier.enabled to true",
    ),
]


@pytest.mark.parametrize(("config", "path", "fragment"), PLACEMENT_REJECTS)
def test_rejects_endpoint_that_does_not_fit_its_regions(config: dict[str, Any], path: str, fragment: str) -> None:
    problem = only_problem(config)
    assert problem.path == path
    assert fragment in problem.message


# Section 1: endpoint fields.

ENDPOINT_REJECTS = [
    case(
        "endpoint_name_that_is_not_a_dns_1035_label",
        stack_config(endpoints={"Chat_1": classic_endpoint()}),
        "endpoints.Chat_1",
        "endpoint name 'Chat_1' must be a DNS-1035 label",
    ),
    case(
        "endpoint_name_starting_with_a_digit",
        stack_config(endpoints={"1chat": classic_endpoint()}),
        "endpoints.1chat",
        "must be a DNS-1035 label",
    ),
    case(
        "endpoint_name_of_45_characters",
        stack_config(endpoints={"a" * 45: classic_endpoint()}),
        f"endpoints.{'a' * 45}",
        f"of at most {MAX_ENDPOINT_NAME_LENGTH} characters",
    ),
    case(
        "classic_endpoint_without_image",
        with_classic({"image": DELETE}),
        "endpoints.chat.image",
        "is required for a classic endpoint",
    ),
    case(
        "canary_while_stopped",
        with_classic({"desired_state": "stopped", "canary": {"image": "x:2"}}),
        "endpoints.chat.canary",
        "is allowed only while desired_state is 'running'",
    ),
    case(
        "env_key_that_looks_like_a_credential",
        with_classic({"env": {"HF_TOKEN": "hf_abc"}}),
        "endpoints.chat.env.HF_TOKEN",
        "looks like a credential; move it to secret_env",
    ),
    case(
        "env_key_also_in_secret_env",
        with_classic({"env": {"HF_HOME": "/cache"}, "secret_env": {"HF_HOME": {"secret": "hf", "key": "home"}}}),
        "endpoints.chat.env.HF_HOME",
        "is also in secret_env; keep one",
    ),
    case(
        "env_key_that_is_not_a_variable_name",
        with_classic({"env": {"1BAD": "x"}}),
        "endpoints.chat.env.1BAD",
        "key '1BAD': must be an environment variable name",
    ),
    case(
        "label_under_the_reserved_app_kubernetes_io_prefix",
        with_classic({"labels": {"app.kubernetes.io/name": "mine"}}),
        "endpoints.chat.labels['app.kubernetes.io/name']",
        "is set by inference-fleet (the app.kubernetes.io/ labels are its selectors)",
    ),
    case(
        "health_check_path_without_leading_slash",
        with_classic({"health_check_path": "health"}),
        "endpoints.chat.health_check_path",
        "must start with '/'",
    ),
    case(
        "classic_endpoint_that_names_no_model",
        with_classic({"model": DELETE}),
        "endpoints.chat.model",
        "is required: say what the endpoint serves with model (a Hugging Face Hub id such as Qwen/Qwen3-8B, which "
        "the server downloads), model_source (an s3:// URI of the weights, streamed or synced into the pod) or "
        "model_path",
    ),
    case(
        "mooncake_endpoint_that_names_no_model",
        with_mooncake({"model": DELETE}),
        "endpoints.chat.model",
        "is required: say what the endpoint serves with model",
    ),
    case(
        "downloaded_model_that_is_not_an_org_slash_name_hub_id",
        with_classic({"model": "llama-3-8b"}),
        "endpoints.chat.model",
        "the server downloads the model from the Hugging Face Hub, so it must be a Hub id org/name such as "
        "Qwen/Qwen3-8B, got 'llama-3-8b'; to serve local weights under this name, set model_source or model_path",
    ),
    case(
        "served_name_that_would_read_as_a_flag",
        with_classic({"model": "--chat", "model_source": "s3://models/llama"}),
        "endpoints.chat.model",
        "must be a model name such as Qwen/Qwen3-8B (at most 256 letters, digits and '_.:/@+-', starting with a "
        "letter, digit or '_'), got '--chat'",
    ),
    case(
        "hub_model_for_triton_which_serves_a_repository",
        with_classic({"image": "nvcr.io/nvidia/tritonserver:25.10-py3"}),
        "endpoints.chat.model",
        "triton serves a model repository and downloads nothing from the Hub: set model_source",
    ),
    case(
        "arg_that_repeats_the_served_model_name",
        with_classic({"args": ["--enforce-eager", "--served-model-name", "chat"]}),
        "endpoints.chat.args[1]",
        "'--served-model-name' is rendered from model; set model instead of passing it in args",
    ),
    case(
        "arg_that_repeats_the_served_model_name_of_sglang",
        with_classic({"image": "lmsysorg/sglang:v0.5.6", "args": ["--served-model-name=chat"]}),
        "endpoints.chat.args[0]",
        "'--served-model-name' is rendered from model; set model instead of passing it in args",
    ),
    case(
        "arg_that_is_a_second_positional_vllm_model",
        with_classic({"args": ["Qwen/Qwen3-0.6B", "--dtype", "bfloat16"]}),
        "endpoints.chat.args[0]",
        "'Qwen/Qwen3-0.6B' would be a second positional model; the model is rendered from model: set model "
        "instead of passing it in args",
    ),
    case(
        "arg_that_names_the_hub_model_of_a_mooncake_role",
        with_mooncake({"args": ["--model", "Qwen/Qwen3-0.6B"]}),
        "endpoints.chat.args[0]",
        "'--model' is rendered from model; set model instead",
    ),
    case(
        "model_source_that_is_not_s3",
        with_classic({"model_source": "https://example.com/model"}),
        "endpoints.chat.model_source",
        "must be an s3:// URI",
    ),
    case(
        "port_zero",
        with_classic({"port": 0}),
        "endpoints.chat.port",
        "must be an integer in [1, 65535], got 0 (a number)",
    ),
    case(
        "unknown_framework",
        with_classic({"framework": "trt"}),
        "endpoints.chat.framework",
        "must be one of {sglang, tgi, triton, vllm}, got 'trt'",
    ),
    case(
        "unknown_desired_state",
        with_classic({"desired_state": "paused"}),
        "endpoints.chat.desired_state",
        "must be one of {running, stopped}, got 'paused'",
    ),
    case(
        "arg_that_repeats_a_flag_rendered_from_the_engine_record",
        with_classic({"engine": {"context_length": 8192}, "args": ["--dtype", "bfloat16", "--max-model-len=4096"]}),
        "endpoints.chat.args[2]",
        "'--max-model-len' is rendered from engine.context_length; set engine.context_length instead",
    ),
    case(
        "arg_that_names_the_model_when_model_path_is_set",
        with_classic({"model_source": "s3://models/llama", "model_loading": "sync", "args": ["--model", "/elsewhere"]}),
        "endpoints.chat.args[0]",
        "'--model' is rendered from model_path",
    ),
    case(
        "arg_that_sets_the_port_of_a_tgi_server",
        with_classic({"image": "ghcr.io/huggingface/text-generation-inference:3.3.6", "args": ["--port", "9000"]}),
        "endpoints.chat.args[0]",
        "'--port' is rendered from port; set port instead",
    ),
    case(
        "env_that_the_tgi_adapter_renders_from_the_engine_record",
        with_classic(
            {
                "image": "ghcr.io/huggingface/text-generation-inference:3.3.6",
                "engine": {"enable_prefix_caching": True},
                "env": {"PREFIX_CACHING": "0"},
            }
        ),
        "endpoints.chat.env.PREFIX_CACHING",
        "'PREFIX_CACHING' is set by inference-fleet from engine.enable_prefix_caching; remove it",
    ),
    case(
        "node_selector_on_the_node_group_label",
        with_classic({"node_selector": {"inference-fleet/node-group": "p5"}}),
        "endpoints.chat.node_selector",
        "'inference-fleet/node-group' is set from node_group; use that field",
    ),
    case(
        "cpu_of_zero",
        with_classic({"resources": {"cpu": "0m"}}),
        "endpoints.chat.resources.cpu",
        "must be a positive CPU count",
    ),
    case(
        "memory_in_si_units",
        with_classic({"resources": {"memory": "16GB"}}),
        "endpoints.chat.resources.memory",
        "GB",
    ),
    case(
        "classic_autoscaling_max_below_min",
        with_classic({"autoscaling": {"min_replicas": 3, "max_replicas": 2}}),
        "endpoints.chat.autoscaling",
        "max_replicas must be >= min_replicas, got max_replicas 2 < min_replicas 3",
    ),
]


@pytest.mark.parametrize(("config", "path", "fragment"), ENDPOINT_REJECTS)
def test_rejects_invalid_endpoint_field(config: dict[str, Any], path: str, fragment: str) -> None:
    problem = only_problem(config)
    assert problem.path == path
    assert fragment in problem.message


# Section 5: canaries.

CANARY_REJECTS = [
    case(
        f"canary_weight_{value!r}",
        with_classic({"canary": {"image": "x:2", "weight": value}}),
        "endpoints.chat.canary.weight",
        f"must be an integer in [1, 99], got {received}",
    )
    for value, received in [(0, "0 (a number)"), (100, "100 (a number)"), (True, "True (a boolean)")]
] + [
    case(
        "canary_image_that_is_blank",
        with_classic({"canary": {"image": "   "}}),
        "endpoints.chat.canary.image",
        "must not be empty",
    ),
    case(
        "canary_with_zero_replicas",
        with_classic({"canary": {"image": "x:2", "replicas": 0}}),
        "endpoints.chat.canary.replicas",
        "must be an integer >= 1, got 0 (a number)",
    ),
]


@pytest.mark.parametrize(("config", "path", "fragment"), CANARY_REJECTS)
def test_rejects_invalid_canary(config: dict[str, Any], path: str, fragment: str) -> None:
    problem = only_problem(config)
    assert problem.path == path
    assert fragment in problem.message


# Section 3: the mooncake block.

IMAGES_ON_0_32: list[tuple[str, dict[str, Any]]] = [
    ("image", {"image": "vllm/vllm-openai:v0.32.0"}),
    ("canary.image", {"canary": {"image": "registry.example:5000/ml/vllm:0.32.0-cu12", "weight": 5}}),
    ("region_image_uris.us-east-1", {"region_image_uris": {"us-east-1": "vllm/vllm-openai:v0.32.0"}}),
]
"""Each place a mode-both endpoint names an image, on a vLLM release before ``BOTH_RELEASE``."""

MOONCAKE_REJECTS = [
    case(
        "mooncake_with_a_framework_other_than_vllm",
        with_mooncake({"framework": "sglang"}),
        "endpoints.chat.framework",
        "must be 'vllm' with mooncake",
    ),
    case(
        "mooncake_with_replicas",
        with_mooncake({"replicas": 2}),
        "endpoints.chat.replicas",
        "size Mooncake roles with mooncake.topology",
    ),
    case(
        "mooncake_with_classic_autoscaling",
        with_mooncake({"autoscaling": {"max_replicas": 2}}),
        "endpoints.chat.autoscaling",
        "is for classic endpoints; use mooncake.autoscaling",
    ),
    case(
        "mooncake_canary_with_replicas",
        with_mooncake({"canary": {"image": "x:2", "replicas": 2}}),
        "endpoints.chat.canary.replicas",
        "sized with canary.topology (default: mooncake.topology); remove it",
    ),
    case(
        "store_canary_with_replicas",
        with_mooncake({"canary": {"image": "x:2", "replicas": 1}, "mooncake": {"mode": "store", "topology": DELETE}}),
        "endpoints.chat.canary.replicas",
        "sized with nothing: mode 'store' runs one",
    ),
    case(
        "store_canary_with_a_topology",
        with_mooncake(
            {"canary": {"image": "x:2", "topology": {"prefill": 1}}, "mooncake": {"mode": "store", "topology": DELETE}}
        ),
        "endpoints.chat.canary.topology",
        "is not used by mode 'store'",
    ),
    case(
        "classic_canary_with_a_topology",
        with_classic({"canary": {"image": "x:2", "topology": {"prefill": 1}}}),
        "endpoints.chat.canary.topology",
        "a classic endpoint's canary is sized with canary.replicas",
    ),
    case(
        "mooncake_canary_topology_of_zero_decoders",
        with_mooncake({"canary": {"image": "x:2", "topology": {"decode": 0}}}),
        "endpoints.chat.canary.topology.decode",
        "must be an integer in [1, 1000]",
    ),
    case(
        "mooncake_canary_on_a_name_too_long_for_its_set",
        with_mooncake({"canary": {"image": "x:2"}}, name="c" * (MAX_CANARY_ENDPOINT_NAME_LENGTH + 1)),
        f"endpoints.{'c' * (MAX_CANARY_ENDPOINT_NAME_LENGTH + 1)}.canary",
        f"is 53 characters, past the 52 a StatefulSet name may have; an endpoint with a Mooncake canary has a "
        f"name of at most {MAX_CANARY_ENDPOINT_NAME_LENGTH} characters",
    ),
    case(
        "canary_named_like_another_endpoint",
        stack_config(
            endpoints={"chat": mooncake_endpoint({"canary": {"image": "x:2"}}), "chat-canary": mooncake_endpoint()}
        ),
        "endpoints.chat.canary",
        "the canary's objects are named 'chat-canary', the name of another endpoint of the stack",
    ),
    case(
        "mooncake_on_neuron",
        with_mooncake({"accelerator": "neuron"}),
        "endpoints.chat.accelerator",
        "must be 'nvidia' with mooncake",
    ),
    case(
        "mode_split",
        mooncake_block({"mode": "split"}),
        "endpoints.chat.mooncake.mode",
        "must be one of {both, disaggregated, store}, got 'split'",
    ),
    *(
        case(
            f"{mode}_mode_without_topology",
            mooncake_block({"mode": mode, "topology": DELETE}),
            "endpoints.chat.mooncake.topology",
            "is required for mode",
        )
        for mode in ("disaggregated", "both")
    ),
    *(
        case(
            f"topology_decode_{value!r}",
            mooncake_block({"topology": {"decode": value}}),
            "endpoints.chat.mooncake.topology.decode",
            f"must be an integer in [1, 1000], got {received}",
        )
        for value, received in [(True, "True (a boolean)"), (0, "0 (a number)"), (1001, "1001 (a number)")]
    ),
    *(
        case(
            f"split_topology_without_{missing}",
            mooncake_block({"topology": {given: 2, missing: DELETE}}),
            f"endpoints.chat.mooncake.topology.{missing}",
            "is required: a split topology names both counts",
        )
        for given, missing in [("prefill", "decode"), ("decode", "prefill")]
    ),
    case(
        "topology_prefill_as_a_string",
        mooncake_block({"topology": {"prefill": "2"}}),
        "endpoints.chat.mooncake.topology.prefill",
        "must be an integer in [1, 1000], got '2'",
    ),
    case(
        "topology_in_store_mode",
        mooncake_block({"mode": "store"}),
        "endpoints.chat.mooncake.topology",
        "is not used by mode 'store'; remove it",
    ),
    case(
        "proxy_in_store_mode",
        store_mode({"proxy": {"scheduling": "round_robin"}}),
        "endpoints.chat.mooncake.proxy",
        "is only used by 'disaggregated' and 'both'",
    ),
    *(
        case(
            f"both_mode_on_vllm_0_32_in_{at}",
            with_mooncake({"mooncake": {"mode": "both"}, **fields}),
            f"endpoints.chat.{at}",
            "is vLLM 0.32.0: its MultiConnector stops the server at the first transfer in mode 'both'",
        )
        for at, fields in IMAGES_ON_0_32
    ),
    case(
        "store_disabled_in_both_mode",
        mooncake_block({"mode": "both", "store": {"enabled": False}}),
        "endpoints.chat.mooncake.store.enabled",
        "must be true for mode 'both'",
    ),
    case(
        "store_enabled_in_disaggregated_mode",
        mooncake_block({"store": {"enabled": True}}),
        "endpoints.chat.mooncake.store.enabled",
        "mode 'disaggregated' runs no store; use mode 'both'",
    ),
    case(
        "cold_tier_without_the_store",
        mooncake_block({"store": {"cold_tier_enabled": True}}),
        "endpoints.chat.mooncake.store.cold_tier_enabled",
        "requires mooncake.store.enabled to be true",
    ),
    case(
        "cold_tier_with_the_store_switched_off",
        mooncake_block({"store": {"enabled": False, "cold_tier_enabled": True}}),
        "endpoints.chat.mooncake.store.cold_tier_enabled",
        "requires mooncake.store.enabled to be true",
    ),
    case(
        "autoscaling_in_store_mode",
        store_mode({"autoscaling": {"enabled": True}}),
        "endpoints.chat.mooncake.autoscaling.enabled",
        "requires a 'disaggregated' or 'both' mode",
    ),
    case(
        "autoscaling_that_names_no_role",
        mooncake_block({"autoscaling": {"enabled": True}}),
        "endpoints.chat.mooncake.autoscaling",
        "names no role: add prefill, decode or both",
    ),
    case(
        "role_autoscaling_max_below_min",
        mooncake_block({"autoscaling": {"enabled": True, "prefill": {"min_replicas": 3, "max_replicas": 2}}}),
        "endpoints.chat.mooncake.autoscaling.prefill",
        "max_replicas must be >= min_replicas, got max_replicas 2 < min_replicas 3",
    ),
    case(
        "role_autoscaling_max_as_a_boolean",
        mooncake_block({"autoscaling": {"enabled": True, "decode": {"max_replicas": True}}}),
        "endpoints.chat.mooncake.autoscaling.decode.max_replicas",
        "must be an integer >= 1, got True (a boolean)",
    ),
    case(
        "role_autoscaling_without_max",
        mooncake_block({"autoscaling": {"enabled": True, "decode": {"min_replicas": 1}}}),
        "endpoints.chat.mooncake.autoscaling.decode.max_replicas",
        "is required",
    ),
    case(
        "offload_outside_the_set",
        store_mode({"store": {"offload": "ssd"}}),
        "endpoints.chat.mooncake.store.offload",
        "must be one of {cpu, disk, none}, got 'ssd'",
    ),
    case(
        "proxy_scheduling_other_than_round_robin",
        mooncake_block({"proxy": {"scheduling": "least_loaded"}}),
        "endpoints.chat.mooncake.proxy.scheduling",
        "must be one of {round_robin}, got 'least_loaded'",
    ),
    case(
        "transfer_protocol_outside_the_set",
        mooncake_block({"transfer": {"protocol": "ib"}}),
        "endpoints.chat.mooncake.transfer.protocol",
        "must be one of {rdma, tcp}, got 'ib'",
    ),
    *(
        case(
            f"bootstrap_base_port_{port}",
            mooncake_block({"transfer": {"bootstrap_base_port": port}}),
            "endpoints.chat.mooncake.transfer.bootstrap_base_port",
            f"must be an integer in [1, 65535], got {port} (a number)",
        )
        for port in (0, 65536)
    ),
    case(
        "transfer_with_zero_workers",
        mooncake_block({"transfer": {"num_workers": 0}}),
        "endpoints.chat.mooncake.transfer.num_workers",
        "must be an integer >= 1, got 0 (a number)",
    ),
    case(
        "transfer_abort_timeout_of_zero",
        mooncake_block({"transfer": {"abort_request_timeout": 0}}),
        "endpoints.chat.mooncake.transfer.abort_request_timeout",
        "must be an integer >= 1, got 0 (a number)",
    ),
    case(
        "store_size_of_zero_while_the_store_runs",
        store_mode({"store": {"global_segment_size": "0"}}),
        "endpoints.chat.mooncake.store.global_segment_size",
        "must be greater than 0",
    ),
    case(
        "env_that_mooncake_roles_set",
        with_mooncake({"env": {"PYTHONHASHSEED": "42"}}),
        "endpoints.chat.env.PYTHONHASHSEED",
        "'PYTHONHASHSEED' is set by inference-fleet from the same seed on every role",
    ),
    case(
        "kv_transfer_config_in_args",
        with_mooncake({"args": ["--kv-transfer-config", "{}"]}),
        "endpoints.chat.args[0]",
        "'--kv-transfer-config' is rendered from mooncake",
    ),
    case(
        "disk_offload_over_rdma",
        store_mode({"store": {"offload": "disk"}}),
        "endpoints.chat.mooncake.store.offload",
        "cannot share the pod's EFA devices",
    ),
    case(
        "disk_size_without_disk_offload",
        store_mode({"store": {"offload_disk_size": "100GiB"}}),
        "endpoints.chat.mooncake.store.offload_disk_size",
        "is only read with offload 'disk', got offload 'cpu'",
    ),
    case(
        "store_size_in_si_units",
        store_mode({"store": {"local_buffer_size": "4GB"}}),
        "endpoints.chat.mooncake.store.local_buffer_size",
        "is ambiguous (Mooncake reads GB as 2^30, SI as 10^9)",
    ),
]


@pytest.mark.parametrize(("config", "path", "fragment"), MOONCAKE_REJECTS)
def test_rejects_invalid_mooncake_block(config: dict[str, Any], path: str, fragment: str) -> None:
    problem = only_problem(config)
    assert problem.path == path
    assert fragment in problem.message


# Unknown keys and wrong types, at every level.

SHAPE_REJECTS = [
    case(
        "unknown_top_level_key",
        {**with_classic(), "endpoint": {}},
        "endpoint",
        "unknown key 'inference-fleet:endpoint'; did you mean 'inference-fleet:endpoints'?",
    ),
    case(
        "unknown_region_key",
        with_region({"vpcs": {}}),
        "regions.us-east-1.vpcs",
        "unknown key; did you mean 'vpc'?",
    ),
    case(
        "unknown_node_group_key",
        with_region({"node_groups": {"gpu": {"instance_type": "g6e.12xlarge"}}}),
        "regions.us-east-1.node_groups.gpu.instance_type",
        "unknown key; did you mean 'instance_types'?",
    ),
    case(
        "unknown_endpoint_key",
        with_classic({"replica": 2}),
        "endpoints.chat.replica",
        "unknown key; did you mean 'replicas'?",
    ),
    case(
        "unknown_mooncake_key",
        mooncake_block({"topolgy": {"prefill": 1}}),
        "endpoints.chat.mooncake.topolgy",
        "unknown key; did you mean 'topology'?",
    ),
    case(
        "unknown_top_level_key_like_no_other",
        {**with_classic(), "zones": {}},
        "zones",
        "unknown key 'inference-fleet:zones'; allowed keys: regions, endpoints",
    ),
    case(
        "unknown_region_key_like_no_other",
        with_region({"quota": 3}),
        "regions.us-east-1.quota",
        "unknown key; allowed keys: protect, kubernetes_version, cluster_access, vpc, node_groups, cold_tier, ingress",
    ),
    case(
        "unknown_endpoint_key_like_no_other",
        with_classic({"zzz": 2}),
        "endpoints.chat.zzz",
        "unknown key; allowed keys: image, framework, target_regions, replicas, gpu_count",
    ),
    case(
        "string_for_an_integer",
        with_classic({"gpu_count": "8"}),
        "endpoints.chat.gpu_count",
        "must be an integer >= 0, got '8'",
    ),
    case(
        "integer_for_a_string",
        with_classic({"node_group": 5}),
        "endpoints.chat.node_group",
        "must be a string, got 5 (a number); quote it",
    ),
    case(
        "boolean_for_an_integer",
        with_classic({"replicas": True}),
        "endpoints.chat.replicas",
        "must be an integer >= 0, got True (a boolean)",
    ),
    case(
        "boolean_for_a_node_group_size",
        with_region({"node_groups": {"gpu": {"min_size": False}}}),
        "regions.us-east-1.node_groups.gpu.min_size",
        "must be an integer >= 0, got False (a boolean)",
    ),
    case(
        "float_for_an_integer",
        with_classic({"port": 8000.0}),
        "endpoints.chat.port",
        "must be an integer in [1, 65535], got 8000.0 (a number)",
    ),
    case(
        "string_for_a_boolean",
        with_region({"node_groups": {"p5": {"efa": "yes"}}}),
        "regions.us-east-1.node_groups.p5.efa",
        "must be true or false, got 'yes'",
    ),
    case(
        "string_for_a_list",
        with_classic({"args": "--max-model-len 4096"}),
        "endpoints.chat.args",
        "must be a list, got '--max-model-len 4096'",
    ),
    case(
        "list_for_a_mapping",
        with_classic({"mooncake": ["disaggregated"]}),
        "endpoints.chat.mooncake",
        "must be a mapping, got a list",
    ),
]


@pytest.mark.parametrize(("config", "path", "fragment"), SHAPE_REJECTS)
def test_rejects_unknown_key_or_wrong_type(config: dict[str, Any], path: str, fragment: str) -> None:
    problem = only_problem(config)
    assert problem.path == path
    assert fragment in problem.message


# Messages quote the value received (the wording users see).

QUOTED = [
    case(
        "unknown_instance_type",
        with_region({"node_groups": {"gpu": {"instance_types": ["g9.huge"]}}}),
        "regions.us-east-1.node_groups.gpu.instance_types[0]",
        "'g9.huge'",
    ),
    case(
        "topology_decode_true",
        mooncake_block({"topology": {"decode": True}}),
        "endpoints.chat.mooncake.topology.decode",
        "must be an integer in [1, 1000], got True",
    ),
    case(
        "mode_split",
        mooncake_block({"mode": "split"}),
        "endpoints.chat.mooncake.mode",
        "must be one of {both, disaggregated, store}, got 'split'",
    ),
    case(
        "autoscaling_in_store_mode",
        store_mode({"autoscaling": {"enabled": True}}),
        "endpoints.chat.mooncake.autoscaling.enabled",
        "requires a 'disaggregated' or 'both' mode, got 'store'",
    ),
    case(
        "topology_missing_in_both_mode",
        mooncake_block({"mode": "both", "topology": DELETE}),
        "endpoints.chat.mooncake.topology",
        "is required for mode 'both'",
    ),
    case(
        "mooncake_framework_sglang",
        with_mooncake({"framework": "sglang"}),
        "endpoints.chat.framework",
        "got 'sglang'",
    ),
    case(
        "unsupported_kubernetes_version",
        with_region({"kubernetes_version": "1.20"}),
        "regions.us-east-1.kubernetes_version",
        "got '1.20'",
    ),
    case(
        "duplicate_target_region",
        with_classic({"target_regions": [REGION, REGION]}),
        "endpoints.chat.target_regions[1]",
        "lists 'us-east-1' twice",
    ),
    case(
        "credential_in_env",
        with_classic({"env": {"HF_TOKEN": "hf_abc"}}),
        "endpoints.chat.env.HF_TOKEN",
        "'HF_TOKEN' looks like a credential",
    ),
    case(
        "health_check_path_without_slash",
        with_classic({"health_check_path": "health"}),
        "endpoints.chat.health_check_path",
        "got 'health'",
    ),
    case(
        "vpc_cidr_with_host_bits",
        with_region({"vpc": {"cidr": "10.20.0.1/16"}}),
        "regions.us-east-1.vpc.cidr",
        "got '10.20.0.1/16'",
    ),
    case(
        "store_size_with_a_sign",
        store_mode({"store": {"local_buffer_size": "-1"}}),
        "endpoints.chat.mooncake.store.local_buffer_size",
        "got '-1'",
    ),
    case(
        "store_size_as_a_boolean",
        store_mode({"store": {"local_buffer_size": True}}),
        "endpoints.chat.mooncake.store.local_buffer_size",
        "got True",
    ),
    case(
        "vpc_that_both_creates_and_adopts",
        with_region({"vpc": {"id": "vpc-0123456789abcdef0", "private_subnet_ids": SUBNETS}}),
        "regions.us-east-1.vpc",
        "give either {cidr, availability_zones} to create a VPC",
    ),
]

_UNFILLED = re.compile(r"\{\{|\}\}|\{\w+![rsa]\}")


@pytest.mark.parametrize(("config", "path", "received"), QUOTED)
def test_message_quotes_the_value_received(config: dict[str, Any], path: str, received: str) -> None:
    problem = only_problem(config)
    assert problem.path == path
    assert not _UNFILLED.search(problem.message), problem.message
    assert received in problem.message


def test_reports_every_problem_of_every_endpoint_and_region_in_one_error() -> None:
    config = two_regions(
        {
            "wide": classic_endpoint({"gpu_count": 5}),
            "pd": mooncake_endpoint({"mooncake": {"mode": "split"}}),
            "lost": classic_endpoint({"target_regions": ["eu-west-1"], "node_group": "nope"}),
            "Bad_Name": classic_endpoint(),
        },
        "eu-west-1",
        {"node_groups": {"p5": {"availability_zone": "eu-west-1c"}}},
    )
    problems = rejected(config)
    assert [problem.path for problem in problems] == [
        "endpoints.Bad_Name",
        "endpoints.lost.node_group",
        "endpoints.pd.mooncake.mode",
        "endpoints.wide.gpu_count",
        "endpoints.wide.gpu_count",
        "regions.eu-west-1.node_groups.p5.availability_zone",
    ]
    messages = "\n".join(problem.message for problem in problems)
    for fragment in (
        "endpoint name 'Bad_Name' must be a DNS-1035 label",
        "node group 'nope' does not exist in eu-west-1",
        "must be one of {both, disaggregated, store}, got 'split'",
        "do not fit one node of regions.us-east-1.node_groups.gpu (4 per instance)",
        "do not fit one node of regions.eu-west-1.node_groups.gpu (4 per instance)",
        "'eu-west-1c' is not among the VPC's availability_zones",
    ):
        assert fragment in messages


# Accepted configs and the defaults they resolve to.


def parsed(config: dict[str, Any]) -> StackSpec:
    return parse_stack_config(config)


def chat(config: dict[str, Any]) -> Endpoint:
    return parsed(config).endpoints["chat"]


def test_accepts_the_minimal_stack_with_both_kinds_of_endpoint() -> None:
    spec = parsed(stack_config(endpoints={"classic": classic_endpoint(), "pd": mooncake_endpoint()}))
    assert [(placement.endpoint, placement.region, placement.node_group) for placement in spec.placements] == [
        ("classic", REGION, "gpu"),
        ("pd", REGION, "p5"),
    ]


def test_accepts_an_existing_vpc_and_an_internet_facing_ingress_with_certificate_and_cidrs() -> None:
    spec = parsed(
        with_region(
            {
                "vpc": {
                    "cidr": DELETE,
                    "availability_zones": DELETE,
                    "id": "vpc-0123456789abcdef0",
                    "private_subnet_ids": SUBNETS,
                },
                "ingress": {
                    "scheme": "internet-facing",
                    "certificate_arn": CERTIFICATE,
                    "allowed_cidrs": ["10.0.0.0/8"],
                },
            }
        )
    )
    assert spec.regions[REGION].created_vpc.creates is False
    assert spec.regions[REGION].ingress.allowed_cidrs == ("10.0.0.0/8",)


def test_cluster_access_defaults_to_no_admins_and_no_public_endpoint() -> None:
    access = ClusterAccess.model_validate({})
    assert (access.admins, access.public_access_cidrs, access.private_access_cidrs) == ((), (), ())
    assert access.private_only


EXISTING_VPC = {
    "vpc": {
        "cidr": DELETE,
        "availability_zones": DELETE,
        "id": "vpc-0123456789abcdef0",
        "private_subnet_ids": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    },
    "node_groups": {"p5": {"availability_zone": DELETE, "efa": False, "hugepages_2mi": DELETE}},
}


def test_a_created_vpc_without_public_cidrs_leaves_the_runner_no_way_to_the_api() -> None:
    """pulumi-eks polls /healthz only for a public endpoint (nodejs/eks/cluster/cluster.ts, ``!isDryRun() &&
    args.endpointPublicAccess``, v4.3.0 and main at 7bf0c1b) and, with skipDefaultSecurityGroups, the endpoint
    carries only the security group EKS creates, which admits its own members: a private-only endpoint in a VPC
    the same run creates answers no runner, and every Kubernetes resource after the clusters times out. Refused
    at validation, naming the keys that give a path; private CIDRs alone do not, on a VPC nothing reaches yet."""
    for access in (
        {"public_access_cidrs": DELETE},
        {"public_access_cidrs": DELETE, "private_access_cidrs": ["10.0.0.0/8"]},
    ):
        problem = only_problem(with_region({"cluster_access": access}))
        assert problem.path == f"regions.{REGION}.cluster_access.public_access_cidrs"
        for key in ("cluster_access.public_access_cidrs", "vpc.id", "cluster_access.private_access_cidrs"):
            assert key in problem.message


def test_an_existing_vpc_without_public_cidrs_needs_the_runners_network_listed() -> None:
    problem = only_problem(with_region(EXISTING_VPC | {"cluster_access": {"public_access_cidrs": DELETE}}))
    assert problem.path == f"regions.{REGION}.cluster_access.private_access_cidrs"
    assert "cluster_access.public_access_cidrs" in problem.message


def test_either_path_to_the_api_validates() -> None:
    private = EXISTING_VPC | {
        "cluster_access": {"public_access_cidrs": DELETE, "private_access_cidrs": ["10.8.0.0/16"]}
    }
    assert parsed(with_region(private)).regions[REGION].cluster_access.private_only
    public = parsed(with_region({})).regions[REGION].cluster_access
    assert (public.private_only, public.public_access_cidrs) == (False, (RUNNER_CIDR,))


def test_private_access_cidrs_are_canonical_and_listed_once() -> None:
    access = {"private_access_cidrs": ["10.8.0.0/16", "10.8.0.0/16"]}
    problem = only_problem(with_region({"cluster_access": access}))
    assert problem.path == f"regions.{REGION}.cluster_access.private_access_cidrs[1]"


def test_accepts_role_and_user_admins_with_paths_in_any_partition_and_canonical_cidrs() -> None:
    admins = [
        CI_ROLE,
        "arn:aws:iam::123456789012:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_Admin_0123456789abcdef",
        "arn:aws:iam::210987654321:user/ops/alice",
        "arn:aws-us-gov:iam::123456789012:role/deployer",
        "arn:aws-cn:iam::123456789012:user/bob+ops@example.com",
    ]
    cidrs = ["198.51.100.7", "203.0.113.0/24"]
    spec = parsed(with_region({"cluster_access": {"admins": admins, "public_access_cidrs": cidrs}}))
    access = spec.regions[REGION].cluster_access
    assert access.admins == tuple(admins)
    assert access.public_access_cidrs == ("198.51.100.7/32", "203.0.113.0/24")


def test_accepts_a_capacity_block_with_its_reservation_and_zone() -> None:
    group = {"capacity_type": "capacity-block", "capacity_reservation_id": "cr-0123456789abcdef0"}
    spec = parsed(with_region({"node_groups": {"p5": group}}))
    assert spec.regions[REGION].node_groups["p5"].capacity_reservation_id == "cr-0123456789abcdef0"


@pytest.mark.parametrize(
    "name",
    ["a" * MAX_ENDPOINT_NAME_LENGTH, "chat-7b", "x"],
    ids=["name_of_44_characters", "name_with_dash_and_digit", "one_letter_name"],
)
def test_accepts_dns_1035_endpoint_names_up_to_44_characters(name: str) -> None:
    assert MAX_ENDPOINT_NAME_LENGTH == 44
    assert list(parsed(stack_config(endpoints={name: classic_endpoint()})).endpoints) == [name]


@settings(max_examples=100, deadline=None)
@given(st.from_regex(r"\A[a-z]([-a-z0-9]{0,58}[a-z0-9])?\Z"))
def test_a_dns_1035_name_is_accepted_exactly_when_it_has_at_most_44_characters(name: str) -> None:
    config = stack_config(endpoints={name: classic_endpoint()})
    if len(name) <= MAX_ENDPOINT_NAME_LENGTH:
        assert name in parse_stack_config(config).endpoints
    else:
        assert [problem.path for problem in rejected(config)] == [f"endpoints.{name}"]


@pytest.mark.parametrize("weight", [1, 99], ids=["weight_1", "weight_99"])
def test_accepts_canary_weights_at_the_bounds(weight: int) -> None:
    canary = chat(with_classic({"canary": {"image": "x:2", "weight": weight}})).canary
    assert canary is not None
    assert canary.weight == weight


def test_canary_image_is_trimmed_and_weight_and_replicas_default() -> None:
    canary = chat(with_classic({"canary": {"image": "  vllm/vllm-openai:v0.34.0 \n"}})).canary
    assert canary is not None
    assert (canary.image, canary.weight, canary.replicas) == ("vllm/vllm-openai:v0.34.0", 10, 1)


def test_endpoint_without_gpus_needs_no_gpu_group() -> None:
    spec = parsed(with_classic({"gpu_count": 0, "node_group": DELETE, "image": CPU_IMAGE}))
    assert [placement.node_group for placement in spec.placements] == [None]


def test_absent_target_regions_means_every_region_of_the_stack() -> None:
    spec = parsed(two_regions({"chat": classic_endpoint()}))
    assert [placement.region for placement in spec.placements] == [REGION, "eu-west-1"]


def test_classic_replicas_default_to_one() -> None:
    assert chat(with_classic()).replicas == 1


@pytest.mark.parametrize(
    ("image", "framework", "health_check_path"),
    [
        ("nvcr.io/nvidia/tritonserver:25.01-py3", "triton", "/v2/health/ready"),
        ("ghcr.io/huggingface/text-generation-inference:3.0", "tgi", "/health"),
        ("lmsysorg/sglang:v0.5.0-cu126", "sglang", "/health"),
        (IMAGE, "vllm", "/health"),
        ("registry.example.com/team/llm-server:1", "vllm", "/health"),
    ],
    ids=[
        "tritonserver_is_triton",
        "text_generation_inference_is_tgi",
        "sglang_is_sglang",
        "vllm_is_vllm",
        "unknown_is_vllm",
    ],
)
def test_framework_is_recognised_from_the_image(image: str, framework: str, health_check_path: str) -> None:
    endpoint = chat(with_classic({"image": image, "model_source": "s3://models/qwen3-8b"}))  # Triton: a repository
    assert (endpoint.framework, endpoint.health_check_path) == (framework, health_check_path)


@pytest.mark.parametrize(
    "model", ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-70B-Instruct", "org_1/name.v2", "a/" + "b" * 96]
)
def test_accepts_hub_ids_as_models_the_server_downloads(model: str) -> None:
    assert chat(with_classic({"model": model})).served_model_name == model


@pytest.mark.parametrize(
    "model",
    [
        "Qwen3-8B",
        "a/b/c",
        "org/-name",
        "org/name-",
        "org/.name",
        "org/na--me",
        "org/na..me",
        "org/name.git",
        "a/" + "b" * 97,
    ],
    ids=[
        "no_namespace",
        "two_slashes",
        "leading_dash",
        "trailing_dash",
        "leading_dot",
        "double_dash",
        "double_dot",
        "git_suffix",
        "name_over_96",
    ],
)
def test_refuses_what_the_hub_would_not_take_as_a_repository_id(model: str) -> None:
    problem = only_problem(with_classic({"model": model}))
    assert (problem.path, "must be a Hub id org/name" in problem.message) == ("endpoints.chat.model", True)


def test_with_local_weights_the_model_is_only_the_served_name() -> None:
    endpoint = chat(with_classic({"model": "chat-large", "model_source": "s3://models/llama", "model_loading": "sync"}))
    assert (endpoint.model_path, endpoint.served_model_name) == ("/models/llama", "chat-large")


@pytest.mark.parametrize(
    "weights",
    [{"model_source": "s3://models/llama", "model_loading": "sync"}, {"model_path": "/opt/weights/llama"}],
    ids=["source", "path"],
)
def test_local_weights_alone_are_served_under_their_path(weights: dict[str, str]) -> None:
    endpoint = chat(with_classic({"model": DELETE, **weights}))
    assert endpoint.served_model_name == endpoint.model_path


def test_a_triton_repository_is_served_under_the_model_named_or_none() -> None:
    triton = {"image": "nvcr.io/nvidia/tritonserver:25.10-py3", "model_source": "s3://models/repository"}
    assert chat(with_classic({**triton, "model": DELETE})).served_model_name is None
    assert chat(with_classic({**triton, "model": "identity"})).served_model_name == "identity"


def test_explicit_framework_and_health_path_win_over_the_image() -> None:
    endpoint = chat(
        with_classic({"image": "nvcr.io/nvidia/tritonserver:25.01", "framework": "vllm", "health_check_path": "/ok"})
    )
    assert (endpoint.framework, endpoint.health_check_path) == ("vllm", "/ok")


def test_mooncake_framework_defaults_to_vllm() -> None:
    endpoint = chat(with_mooncake())
    assert (endpoint.framework, endpoint.health_check_path) == ("vllm", "/health")


def test_mooncake_image_defaults_to_the_pinned_efa_image_for_rdma() -> None:
    assert chat(with_mooncake()).image == pins().vllm.efa_image


def test_mooncake_image_defaults_to_the_pinned_plain_image_for_tcp() -> None:
    endpoint = chat(with_mooncake({"node_group": "gpu", "mooncake": {"transfer": {"protocol": "tcp"}}}))
    assert endpoint.image == pins().vllm.image
    assert endpoint.image != pins().vllm.efa_image


def test_explicit_mooncake_image_is_kept() -> None:
    assert chat(with_mooncake({"image": "vllm/vllm-openai:v0.34.0-efa"})).image == "vllm/vllm-openai:v0.34.0-efa"


@pytest.mark.parametrize(
    ("overrides", "enabled"),
    [
        ({"mode": "store", "topology": DELETE}, True),
        ({"mode": "both"}, True),
        ({"mode": "disaggregated"}, False),
    ],
    ids=["store_mode_enables_the_store", "both_mode_enables_the_store", "disaggregated_mode_runs_no_store"],
)
def test_store_enabled_defaults_by_mode(overrides: dict[str, Any], enabled: bool) -> None:
    mooncake = chat(mooncake_block(overrides)).mooncake
    assert mooncake is not None
    assert mooncake.store.enabled is enabled


def test_store_mode_may_not_switch_its_store_off() -> None:
    """Its server would get a MultiConnector of no connectors (fleetctl store configure --disable)."""
    problem = only_problem(store_mode({"store": {"enabled": False}}))
    assert problem.path == "endpoints.chat.mooncake.store.enabled"
    assert "must be true for mode 'store'" in problem.message
    assert "remove the mooncake block and set image" in problem.message


@pytest.mark.parametrize("mode", ["disaggregated", "both"])
def test_proxy_image_defaults_to_the_endpoint_image_in_split_modes(mode: str) -> None:
    endpoint = chat(with_mooncake({"image": "vllm/vllm-openai:v0.34.0-efa", "mooncake": {"mode": mode}}))
    assert endpoint.mooncake is not None
    assert endpoint.mooncake.proxy is not None
    assert (endpoint.mooncake.proxy.image, endpoint.mooncake.proxy.scheduling) == (
        "vllm/vllm-openai:v0.34.0-efa",
        "round_robin",
    )


def test_autoscaled_prefill_keeps_the_proxy_image_and_admin_key() -> None:
    """The proxy program finds autoscaled prefill pods itself: same image, and it sends the key."""
    autoscaling = {"enabled": True, "prefill": {"max_replicas": 2}}
    endpoint = chat(mooncake_block({"proxy": {"admin_api_key_secret": "chat-admin"}, "autoscaling": autoscaling}))
    assert endpoint.mooncake is not None
    proxy = endpoint.mooncake.proxy
    assert proxy is not None
    assert (proxy.image, proxy.admin_api_key_secret) == (endpoint.image, "chat-admin")


def test_explicit_proxy_image_wins_and_keeps_the_other_proxy_fields() -> None:
    proxy = {"image": "example.com/pd-proxy:1", "admin_api_key_secret": "proxy-admin"}
    mooncake = chat(mooncake_block({"proxy": proxy})).mooncake
    assert mooncake is not None
    assert mooncake.proxy is not None
    assert (mooncake.proxy.image, mooncake.proxy.admin_api_key_secret) == ("example.com/pd-proxy:1", "proxy-admin")


def test_store_mode_has_no_proxy() -> None:
    mooncake = chat(store_mode()).mooncake
    assert mooncake is not None
    assert mooncake.proxy is None


def test_store_sizes_default_to_the_pins() -> None:
    mooncake = chat(store_mode()).mooncake
    assert mooncake is not None
    assert (mooncake.store.global_segment_size, mooncake.store.local_buffer_size) == (
        pins().mooncake.global_segment_size,
        pins().mooncake.local_buffer_size,
    )


def test_store_sizes_are_canonicalised() -> None:
    store = {"global_segment_size": " 0008388608 ", "local_buffer_size": "2GiB"}
    mooncake = chat(store_mode({"store": store})).mooncake
    assert mooncake is not None
    assert (mooncake.store.global_segment_size, mooncake.store.local_buffer_size) == ("8388608", str(2 * 2**30))


def test_store_protocol_and_device_name_inherit_transfer() -> None:
    transfer = {"protocol": "tcp", "device_name": "eth0"}
    endpoint = chat(
        with_mooncake({"node_group": "gpu", "mooncake": {"mode": "store", "topology": DELETE, "transfer": transfer}})
    )
    assert endpoint.mooncake is not None
    assert (endpoint.mooncake.store.protocol, endpoint.mooncake.store.device_name) == ("tcp", "eth0")


def test_explicit_store_protocol_and_empty_device_name_win_over_transfer() -> None:
    mooncake = chat(
        store_mode({"transfer": {"device_name": "rdmap0s6"}, "store": {"protocol": "tcp", "device_name": ""}})
    ).mooncake
    assert mooncake is not None
    assert (mooncake.store.protocol, mooncake.store.device_name) == ("tcp", "")


def test_transfer_defaults() -> None:
    mooncake = chat(with_mooncake()).mooncake
    assert mooncake is not None
    transfer = mooncake.transfer
    assert (
        transfer.protocol,
        transfer.device_name,
        transfer.num_workers,
        transfer.bootstrap_base_port,
        transfer.abort_request_timeout,
    ) == ("rdma", "", 10, 8998, 480)
    assert (mooncake.store.offload, mooncake.store.cold_tier_enabled, mooncake.autoscaling.enabled) == (
        "cpu",
        False,
        False,
    )


def test_cold_tier_is_accepted_when_the_store_runs_and_the_region_has_one() -> None:
    config = stack_config(
        region_overrides={"cold_tier": {"enabled": True}},
        endpoints={"chat": mooncake_endpoint({"mooncake": {"mode": "both", "store": {"cold_tier_enabled": True}}})},
    )
    mooncake = chat(config).mooncake
    assert mooncake is not None
    assert (mooncake.store.enabled, mooncake.store.cold_tier_enabled) == (True, True)


def test_ecr_image_is_rewritten_to_each_target_region() -> None:
    spec = parsed(two_regions({"chat": classic_endpoint({"image": ECR_IMAGE})}))
    assert {placement.region: placement.image for placement in spec.placements} == {
        REGION: ECR_IMAGE,
        "eu-west-1": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/llm/server:1.2",
    }


def test_non_ecr_image_is_never_rewritten() -> None:
    spec = parsed(two_regions({"chat": classic_endpoint({"image": "ghcr.io/acme/llm-server:1.2"})}))
    assert {placement.image for placement in spec.placements} == {"ghcr.io/acme/llm-server:1.2"}


def test_rewrite_image_false_keeps_the_ecr_image_everywhere() -> None:
    spec = parsed(two_regions({"chat": classic_endpoint({"image": ECR_IMAGE, "rewrite_image": False})}))
    assert {placement.image for placement in spec.placements} == {ECR_IMAGE}


def test_explicit_region_image_uri_wins_over_the_rewrite() -> None:
    mirror = "mirror.example.com/llm/server:1.2"
    spec = parsed(
        two_regions({"chat": classic_endpoint({"image": ECR_IMAGE, "region_image_uris": {"eu-west-1": mirror}})})
    )
    assert {placement.region: placement.image for placement in spec.placements} == {
        REGION: ECR_IMAGE,
        "eu-west-1": mirror,
    }


def test_an_invalid_metric_is_one_problem_not_also_an_empty_list() -> None:
    problems = rejected(with_classic({"autoscaling": {"metrics": ["cpu:170"]}}))
    assert [problem.path for problem in problems] == ["endpoints.chat.autoscaling.metrics[0]"]


def test_an_unknown_region_code_is_reported_once_against_the_region() -> None:
    endpoints = {"chat": classic_endpoint({"node_group": "absent"})}
    config = stack_config(regions={"us-east-9": region(name="us-east-9")}, endpoints=endpoints)
    problems = rejected(config)
    assert [problem.path for problem in problems] == ["regions.us-east-9"]
    assert "'us-east-9' is not an AWS region code" in problems[0].message


@pytest.mark.parametrize(
    ("vpc", "path", "fragment"),
    [
        pytest.param(
            {"cidr": "10.0.0.0/24"}, "regions.us-east-1.vpc.cidr", "must be a /16 to /22 block", id="a_vpc_too_small"
        ),
        pytest.param({"cidr": "10.0.0.0/8"}, "regions.us-east-1.vpc.cidr", "got '10.0.0.0/8'", id="a_vpc_too_large"),
        pytest.param(
            {"availability_zones": ["us-east-1a", "eu-west-1b"]},
            "regions.us-east-1.vpc.availability_zones[1]",
            "'eu-west-1b' is not a zone of us-east-1",
            id="a_vpc_zone_of_another_region",
        ),
        pytest.param(
            {"availability_zones": ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e"]},
            "regions.us-east-1.vpc.availability_zones",
            "allows at most 4 items, got 5",
            id="more_than_four_vpc_zones",
        ),
    ],
)
def test_rejects_a_created_vpc_outside_its_bounds(vpc: dict[str, Any], path: str, fragment: str) -> None:
    problems = rejected(with_region({"vpc": vpc}))
    assert any(problem.path == path and fragment in problem.message for problem in problems), problems


def test_a_stack_name_too_long_for_the_derived_aws_names_is_refused_with_the_name() -> None:
    config = stack_config(region_overrides={"cold_tier": {"enabled": True}}, endpoints={})
    with pytest.raises(SpecError) as raised:
        parse_stack_config(config, stack="x" * 40)
    problems = {problem.path: problem.message for problem in raised.value.problems}
    assert "is not a valid S3 bucket name" in problems["regions.us-east-1.cold_tier"]
    assert "over EKS's 63" in problems["regions.us-east-1.node_groups.system"]


def test_an_uppercase_stack_name_cannot_name_a_bucket() -> None:
    config = stack_config(region_overrides={"cold_tier": {"enabled": True}}, endpoints={})
    with pytest.raises(SpecError, match="inference-fleet-Prod-kv-000000000000-us-east-1"):
        parse_stack_config(config, stack="Prod")


def test_the_example_stack_names_fit_every_derived_aws_name() -> None:
    config = stack_config(region_overrides={"cold_tier": {"enabled": True}}, endpoints={})
    for stack in ("dev", "prod", "staging-eu"):
        parse_stack_config(config, stack=stack)


# Every problem at once: a model reports all the rules it breaks, with those of the models inside it.

CI_TWICE = [CI_ROLE, CI_ROLE.replace("inference-fleet-ci", "INFERENCE-FLEET-CI")]


def chat_at(*paths: str) -> list[str]:
    return [f"endpoints.chat.{path}" for path in paths]


def region_at(*paths: str) -> list[str]:
    return [f"regions.{REGION}.{path}" for path in paths]


SEVERAL_MISTAKES = [
    pytest.param(
        {
            **stack_config(
                regions={REGION: region(), "us-east-9": region(name="us-east-9")},
                endpoints={"Chat": classic_endpoint(), "docs": classic_endpoint({"target_regions": ["eu-west-1"]})},
            ),
            "endpoint": {},
        },
        ["endpoint", "endpoints.Chat", "endpoints.docs.target_regions[0]", "regions.us-east-9"],
        id="stack",
    ),
    pytest.param(
        with_region(
            {
                "kubernetes_version": "1.0",
                "vpc": {"cidr": "10.0.0.0/8", "availability_zones": DELETE},
                "ingress": {"scheme": "internet-facing"},
                "cluster_access": {"admins": CI_TWICE, "public_access_cidrs": ["203.0.113.0/24"] * 2},
            }
        ),
        region_at(
            "cluster_access.admins[1]",
            "cluster_access.public_access_cidrs[1]",
            "ingress",
            "kubernetes_version",
            "vpc",
            "vpc.cidr",
        ),
        id="region",
    ),
    pytest.param(
        with_region(
            {
                "node_groups": {
                    "gpu": {
                        "min_size": 2,
                        "desired_size": 1,
                        "capacity_type": "capacity-block",
                        "hugepages_2mi": "2MiB",
                    }
                }
            }
        ),
        region_at(
            *(
                f"node_groups.gpu{field}"
                for field in ("", ".availability_zone", ".capacity_reservation_id", ".hugepages_2mi")
            )
        ),
        id="node_group",
    ),
    pytest.param(
        with_classic(
            {
                "model": "qwen3",
                "env": {"HF_TOKEN": "hf_x"},
                "node_selector": {"inference-fleet/node-group": "gpu"},
                "target_regions": [REGION, REGION],
                "args": ["--api-key=sk-1", "--served-model-name", "chat"],
            }
        ),
        chat_at("args[0]", "args[1]", "env.HF_TOKEN", "model", "node_selector", "target_regions[1]"),
        id="endpoint",
    ),
    pytest.param(
        with_mooncake(
            {"replicas": 2, "mooncake": {"store": {"cold_tier_enabled": True}, "autoscaling": {"enabled": True}}}
        ),
        chat_at("mooncake.autoscaling", "mooncake.store.cold_tier_enabled", "replicas"),
        id="endpoint_and_its_mooncake_block",
    ),
    pytest.param(
        store_mode({"topology": {"prefill": 1, "decode": 1}, "proxy": {}, "autoscaling": {"enabled": True}}),
        chat_at("mooncake.autoscaling.enabled", "mooncake.proxy", "mooncake.topology"),
        id="mooncake",
    ),
    pytest.param(
        mooncake_block(
            {
                "mode": "both",
                "store": {"global_segment_size": "0", "local_buffer_size": "3MiB", "offload_disk_size": "10GiB"},
            }
        ),
        chat_at(
            *(f"mooncake.store.{key}" for key in ("global_segment_size", "local_buffer_size", "offload_disk_size"))
        ),
        id="store",
    ),
    pytest.param(
        with_classic({"canary": {"image": "Not An Image", "weight": 100, "replicas": 0}}),
        chat_at("canary.image", "canary.replicas", "canary.weight"),
        id="canary_fields",
    ),
    pytest.param(
        with_mooncake({"desired_state": "stopped", "canary": {"image": IMAGE, "replicas": 2}}),
        chat_at("canary", "canary.replicas"),
        id="canary_rules",
    ),
]


@pytest.mark.parametrize(("config", "paths"), SEVERAL_MISTAKES)
def test_every_mistake_is_reported_at_once(config: dict[str, Any], paths: list[str]) -> None:
    problems = rejected(config)
    assert sorted(problem.path for problem in problems) == paths, "\n".join(map(str, problems))


@pytest.mark.parametrize(
    ("image", "release"),
    [
        ("vllm/vllm-openai:v0.32.0", (0, 32, 0)),
        ("registry.example:5000/ml/vllm:0.33.1-cu12", (0, 33, 1)),
        ("vllm/vllm-openai:latest", None),
        ("vllm/vllm-openai@sha256:" + "a" * 64, None),
        ("registry.example:5000/ml/vllm", None),
        ("lmsysorg/sglang:v0.5.2", None),
    ],
)
def test_the_vllm_release_of_an_image_is_read_from_its_tag_only(image: str, release: tuple[int, ...] | None) -> None:
    assert vllm_release(image) == release


def test_mode_both_takes_vllm_033_an_untagged_image_and_the_default() -> None:
    for fields in ({"image": "vllm/vllm-openai:v0.33.0"}, {"image": "vllm/vllm-openai:latest"}, {}):
        parse_stack_config(with_mooncake({"mooncake": {"mode": "both"}, **fields}))
