"""The operations of docs/operations.md as edits of a stack file's ``config:`` mapping, one module per
family: fleetctl/edit/endpoint_edits.py (an endpoint as a whole), autoscaling_edits.py, region_edits.py,
canary_edits.py, on what they share in fleetctl/edit/sections.py.

Each function edits the round-trip mapping in place and returns notes for the
user. It refuses (EditError) what it can tell is wrong before editing; every
other rule is left to the validation of the whole resulting config, so the
messages are those of ``fleetctl validate``. Nothing here reads or writes files.
"""

from __future__ import annotations

from fleetctl.edit.autoscaling_edits import set_autoscaling
from fleetctl.edit.canary_edits import promote_canary, rollback_canary, set_canary_weight, start_canary
from fleetctl.edit.endpoint_edits import (
    add_endpoint,
    configure_store,
    remove_endpoint,
    scale,
    set_desired_state,
    set_image,
    set_topology,
)
from fleetctl.edit.region_edits import add_region, remove_region
from fleetctl.edit.sections import EditError, declared_regions, endpoint_names

__all__ = [
    "EditError",
    "add_endpoint",
    "add_region",
    "configure_store",
    "declared_regions",
    "endpoint_names",
    "promote_canary",
    "remove_endpoint",
    "remove_region",
    "rollback_canary",
    "scale",
    "set_autoscaling",
    "set_canary_weight",
    "set_desired_state",
    "set_image",
    "set_topology",
    "start_canary",
]
