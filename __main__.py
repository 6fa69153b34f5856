"""inference-fleet: LLM inference endpoints on EKS, declared in stack config.

The composition root: parse the config once, create one AWS provider per region,
hand both to the fleet, export what operators and other tools need.
"""

from typing import Any

import pulumi
import pulumi_aws as aws
from pulumi.runtime.config import CONFIG, get_config_env

from components import naming
from components.aws_config import aws_settings
from components.fleet import Fleet, FleetArgs, aws_regions
from components.platform import global_front
from components.platform.cluster import KubeconfigCredentials
from components.spec import CONFIG_KEYS, SpecError
from components.spec.secrets import SECRETS_KEY, redacted
from components.validation import validate_stack
from components.workloads.secrets import secret_config

config = pulumi.Config()
stack = pulumi.get_stack()
raw = {key: config.get_object(key) for key in CONFIG_KEYS if config.get(key) is not None}
secret_values = None
if SECRETS_KEY in raw:
    # Validated without its values; they reach the Secret objects as a secret Output only.
    secret_values = secret_config(config)
    raw[SECRETS_KEY] = redacted(raw[SECRETS_KEY])
try:
    spec = validate_stack(raw, stack=stack)
except SpecError as error:
    # Every problem at once, before any resource is registered; no traceback.
    raise pulumi.RunError(f"invalid stack config:\n{error}") from None

# The stack file's aws:* keys configure only Pulumi's default provider, which the program never uses:
# each explicit provider below gets them as arguments (components/aws_config.py).
settings, aws_problems = aws_settings({**get_config_env(), **CONFIG.get()})
if aws_problems:
    raise pulumi.RunError("invalid stack config:\n" + "\n".join(str(problem) for problem in aws_problems))
provider_args: dict[str, Any] = {
    **settings.provider_args,
    "assume_roles": [aws.ProviderAssumeRoleArgs(**role) for role in settings.provider_args.get("assume_roles", [])]
    or None,
}

# A region on a cluster given by kubeconfig calls no AWS API: it gets no AWS provider, so the
# program needs no AWS credentials there (docs/existing-cluster.md).
providers = {
    region: aws.Provider(
        naming.aws_provider_name(region),
        region=region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=naming.aws_tags(stack)),
        **provider_args,
    )
    for region in aws_regions(spec)
}

# Global Accelerator's API answers only in us-west-2, whatever regions it fronts (docs/global.md);
# Route 53 latency records use the regions' own providers.
global_provider = (
    aws.Provider(
        global_front.provider_name(),
        region=global_front.API_REGION,
        default_tags=aws.ProviderDefaultTagsArgs(tags=naming.aws_tags(stack)),
        **provider_args,
    )
    if spec.global_front.enabled and spec.global_front.kind == global_front.ACCELERATOR
    else None
)

fleet = Fleet(
    naming.fleet_name(stack),
    FleetArgs(
        stack=stack,
        spec=spec,
        aws_providers=providers,
        global_provider=global_provider,
        secret_values=secret_values,
        credentials=KubeconfigCredentials(profile=settings.profile, role_arn=settings.role_arn),
    ),
)

pulumi.export("regions", fleet.regions)
pulumi.export("kubeconfigs", fleet.kubeconfigs)
pulumi.export("placements", fleet.placements)
pulumi.export("endpoints", fleet.endpoints)
if fleet.front is not None:
    pulumi.export("global", {"dns_name": fleet.front.dns_name, "addresses": fleet.front.addresses})
