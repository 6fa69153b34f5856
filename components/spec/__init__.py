"""Pydantic models of the stack config, the only reader of raw config."""

from components.spec.checks import Placement
from components.spec.endpoint import Canary, Endpoint
from components.spec.engine import EndpointRecord, EngineCapabilities
from components.spec.errors import Problem, SpecError
from components.spec.mooncake import Mooncake
from components.spec.region import NodeGroup, Region
from components.spec.stack import CONFIG_KEYS, NAMESPACE, StackConfig, StackSpec, parse_stack_config

__all__ = [
    "CONFIG_KEYS",
    "NAMESPACE",
    "Canary",
    "Endpoint",
    "EndpointRecord",
    "EngineCapabilities",
    "Mooncake",
    "NodeGroup",
    "Placement",
    "Problem",
    "Region",
    "SpecError",
    "StackConfig",
    "StackSpec",
    "parse_stack_config",
]
