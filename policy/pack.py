"""The rules of rules.py as CrossGuard stack policies (run in the pack's own virtualenv)."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)
from rules import RULES, Resource, Rule


def resource(policy_resource: PolicyResource) -> Resource:
    return Resource(
        type=policy_resource.resource_type,
        name=policy_resource.name,
        urn=policy_resource.urn,
        props=policy_resource.props,
        protect=bool(policy_resource.opts.protect),
        parent=policy_resource.parent.urn if policy_resource.parent is not None else None,
        provider=policy_resource.provider.urn if policy_resource.provider is not None else None,
    )


def stack_policy(rule: Rule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        for violation in rule.run([resource(each) for each in args.resources]):
            report_violation(violation.message, violation.urn)

    return StackValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate,
        enforcement_level=EnforcementLevel.MANDATORY,
    )


def policies() -> list[StackValidationPolicy]:
    return [stack_policy(rule) for rule in RULES]
