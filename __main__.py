"""inference-fleet: LLM inference endpoints on EKS, declared in stack config.

The composition root: parse the config once, create one AWS provider per region,
hand both to the fleet, export what operators and other tools need.
"""

import pulumi
import pulumi_aws as aws

from components import naming
from components.fleet import Fleet, FleetArgs, aws_regions
from components.platform import global_front
from components.spec import CONFIG_KEYS, SpecError
from components.validation import validate_stack

config = pulumi.Config()
stack = pulumi.get_stack()
try:
    raw = {key: config.get_object(key) for key in CONFIG_KEYS if config.get(key) is not None}
    spec = validate_stack(raw, stack=stack)
except SpecError as error:
    # Every problem at once, before any resource is registered; no traceback.
    raise pulumi.RunError(f"invalid stack config:\n{error}") from None

# A region on a cluster given by kubeconfig calls no AWS API: it gets no AWS provider, so the
# program needs no AWS credentials there (docs/existing-cluster.md).
providers = {
    region: aws.Provider(
        naming.aws_provider_name(region),
        region=region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=naming.aws_tags(stack)),
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
    )
    if spec.global_front.enabled and spec.global_front.kind == global_front.ACCELERATOR
    else None
)

fleet = Fleet(
    naming.fleet_name(stack),
    FleetArgs(stack=stack, spec=spec, aws_providers=providers, global_provider=global_provider),
)

pulumi.export("regions", fleet.regions)
pulumi.export("kubeconfigs", fleet.kubeconfigs)
pulumi.export("placements", fleet.placements)
pulumi.export("endpoints", fleet.endpoints)
if fleet.front is not None:
    pulumi.export("global", {"dns_name": fleet.front.dns_name, "addresses": fleet.front.addresses})
