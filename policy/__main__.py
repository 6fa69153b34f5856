"""The inference-fleet policy pack: `pulumi preview --policy-pack policy`."""

from pack import policies
from pulumi_policy import PolicyPack

PolicyPack(name="inference-fleet", policies=policies())
