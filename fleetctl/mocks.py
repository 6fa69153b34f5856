"""Pulumi mocks that record what a real engine would receive.

``RecordingMonitor`` keeps every RegisterResource request (inputs, parent,
provider, options) and the stack's outputs. ``FleetMocks`` answers resource
registrations with their inputs and refuses any invoke it does not know, naming
the token, so an offline plan can never silently depend on a cloud call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from pulumi.runtime import mocks
from pulumi.runtime.proto import resource_pb2

STACK_TYPE = "pulumi:pulumi:Stack"


class UnmockedInvokeError(RuntimeError):
    def __init__(self, token: str) -> None:
        super().__init__(
            f"unmocked invoke {token}: the offline plan has no answer for it; add one to fleetctl/mocks.py "
            "(INVOKES) with facts known without a cloud account"
        )
        self.token = token


INVOKES: dict[str, Any] = {}
"""token -> function(args) -> result, for invokes the offline plan can answer truthfully."""


class FleetMocks(mocks.Mocks):
    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        handler = INVOKES.get(args.token)
        if handler is None:
            raise UnmockedInvokeError(args.token)
        return handler(args.args), None


@dataclass
class Registration:
    urn: str
    request: dict[str, Any]
    custom: bool


class RecordingMonitor(mocks.MockMonitor):
    def __init__(self, fleet_mocks: mocks.Mocks) -> None:
        super().__init__(fleet_mocks)
        self.registrations: list[Registration] = []
        self.stack_outputs: dict[str, Any] = {}
        self._stack_urn = ""

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        # The engine qualifies a type by its parent's type, except for children of the stack itself.
        if parent and parent == self._stack_urn:
            parent = ""
        return str(super().make_urn(parent, type_, name))

    def RegisterResource(self, request: resource_pb2.RegisterResourceRequest) -> Any:  # noqa: N802 (gRPC name)
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type == STACK_TYPE:
            self._stack_urn = response.urn
        self.registrations.append(
            Registration(
                urn=response.urn,
                request=json_format.MessageToDict(request, preserving_proto_field_name=False),
                custom=bool(request.custom),
            )
        )
        return response

    def RegisterResourceOutputs(self, request: resource_pb2.RegisterResourceOutputsRequest) -> Any:  # noqa: N802
        if request.urn == self._stack_urn:
            self.stack_outputs = json_format.MessageToDict(request.outputs)
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]
