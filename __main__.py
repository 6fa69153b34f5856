"""inference-fleet: LLM inference endpoints on EKS, declared in stack config.

The composition root: parse the config once, create one AWS provider per region,
hand both to the fleet, export what operators and other tools need.
"""

import pulumi
import pulumi_aws as aws

from components import naming
from components.fleet import Fleet, FleetArgs
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

providers = {
    region: aws.Provider(
        naming.aws_provider_name(region),
        region=region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=naming.aws_tags(stack)),
    )
    for region in spec.regions
}

fleet = Fleet(naming.fleet_name(stack), FleetArgs(stack=stack, spec=spec, aws_providers=providers))

pulumi.export("regions", fleet.regions)
pulumi.export("kubeconfigs", fleet.kubeconfigs)
pulumi.export("placements", fleet.placements)
pulumi.export("endpoints", fleet.endpoints)
