"""fleetctl diff: what a stack edit does, resource by resource, before anyone runs it.

Compares two offline plans (docs/design.md, decision 13) and reports, per region, the resources
to create, update, replace and delete, the input paths that changed (old -> new), and
a verdict on what each change does to the running fleet. Replacements come from the
table in ``fleetctl/replacements.py``; a stateful or protected resource that would be
replaced or deleted is flagged with ``!!``. Secrets are already ``[secret]`` in a plan;
a value that is secret on either side is shown as ``[secret]`` on both.

Exit status: 0 no change, 2 changes, 1 error.
"""

from fleetctl.diff.command import InputError, main, plan_stack_file
from fleetctl.diff.engine import (
    ABSENT,
    JSON_TEXT,
    Change,
    PlanDiff,
    ResourceChange,
    diff_plans,
    diff_values,
    parse_property_path,
    render_path,
)
from fleetctl.diff.render import render_json, render_markdown, render_text

__all__ = [
    "ABSENT",
    "JSON_TEXT",
    "Change",
    "InputError",
    "PlanDiff",
    "ResourceChange",
    "diff_plans",
    "diff_values",
    "main",
    "parse_property_path",
    "plan_stack_file",
    "render_json",
    "render_markdown",
    "render_path",
    "render_text",
]
