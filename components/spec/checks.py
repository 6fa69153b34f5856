"""Rules that span fields the models cannot see together: regions against the
instance catalog, and endpoints against the regions they are placed in."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from components import naming
from components.catalog import InstanceCatalog, InstanceType
from components.naming import MAX_CANARY_ENDPOINT_NAME_LENGTH, MAX_ENDPOINT_NAME_LENGTH
from components.spec.base import is_dns_1035_label
from components.spec.endpoint import Endpoint
from components.spec.errors import Problem, did_you_mean, dotted
from components.spec.region import NodeGroup, Region
from components.spec.roles import SPLIT_ROLES


@dataclass(frozen=True)
class Placement:
    """One endpoint in one region, with the node group it is scheduled on."""

    endpoint: str
    region: str
    node_group: str | None
    """The group the endpoint's own fields place it on; for a split endpoint whose roles both name
    a group of their own, the prefill role's."""
    image: str
    role_groups: tuple[tuple[str, str | None], ...] = ()
    """Each role of a split endpoint with its node group (``mooncake.roles``), prefill first."""

    def group_of(self, role: str) -> str | None:
        """The node group ``role``'s pods run on."""
        return dict(self.role_groups).get(role, self.node_group)


def check_region_name(name: str, known_regions: frozenset[str]) -> list[Problem]:
    if name in known_regions:
        return []
    hint = did_you_mean(name, sorted(known_regions)) or "e.g. us-east-1, eu-west-1"
    return [Problem(dotted(["regions", name]), f"{name!r} is not an AWS region code ({hint})")]


def node_group_instance(group: NodeGroup, catalog: InstanceCatalog) -> InstanceType | None:
    """The catalog facts of a group's (first) instance type, as pulumi-eks and terraform size EFA."""
    return catalog.instance_types.get(group.instance_types[0])


def check_region(name: str, region: Region, catalog: InstanceCatalog) -> list[Problem]:
    problems: list[Problem] = []
    system_groups = []
    for group_name, group in region.node_groups.items():
        path: list[str | int] = ["regions", name, "node_groups", group_name]
        facts = _group_facts(path, group, catalog, problems)
        if facts is None:
            continue  # reported; what the group would offer is unknown
        if facts.accelerators == 0:
            system_groups.append(group_name)
        if group.availability_zone is not None:
            problems += _zone_problems(path, name, region, group.availability_zone)
        if group.efa and not facts.efa_supported:
            problems.append(
                Problem(
                    dotted([*path, "instance_types"]),
                    f"efa is true but {group.instance_types[0]} has no EFA support; choose an EFA-capable type "
                    "(e.g. p5.48xlarge, g6e.48xlarge) or set efa to false",
                )
            )
    for index, zone in enumerate(region.vpc.availability_zones or () if region.vpc is not None else ()):
        if not re.fullmatch(re.escape(name) + r"[a-z]", zone):
            problems.append(
                Problem(
                    dotted(["regions", name, "vpc", "availability_zones", index]),
                    f"{zone!r} is not a zone of {name} (zones look like {name}a)",
                )
            )
    if not system_groups and region.node_groups:
        problems.append(
            Problem(
                dotted(["regions", name, "node_groups"]),
                "has no group without GPUs for system pods; add one (e.g. system: {instance_types: [m7i.xlarge], "
                "min_size: 2, max_size: 4, desired_size: 2})",
                follows_from=unknown_groups(name, region, catalog),
            )
        )
    return problems


def unknown_groups(region_name: str, region: Region, catalog: InstanceCatalog) -> tuple[str, ...]:
    """The paths of the region's node groups whose instance type is not in the catalog: a rule
    that looks for a kind of group cannot tell whether one of these is it."""
    return tuple(
        dotted(["regions", region_name, "node_groups", group_name])
        for group_name, group in region.node_groups.items()
        if any(instance_type not in catalog.instance_types for instance_type in group.instance_types)
    )


def _group_facts(
    path: list[str | int], group: NodeGroup, catalog: InstanceCatalog, problems: list[Problem]
) -> InstanceType | None:
    known: list[tuple[str, InstanceType]] = []
    for index, instance_type in enumerate(group.instance_types):
        facts = catalog.instance_types.get(instance_type)
        if facts is None:
            problems.append(
                Problem(
                    dotted([*path, "instance_types", index]),
                    f"unknown instance type {instance_type!r}; use one from config/instances.yaml or add it there "
                    f"with its source{_suggestion(instance_type, catalog.instance_types)}",
                )
            )
        else:
            known.append((instance_type, facts))
    if len(known) != len(group.instance_types):
        return None
    first_type, first = known[0]
    for index, (instance_type, facts) in enumerate(known[1:], start=1):
        shape = (facts.architecture, facts.accelerator, facts.accelerators, facts.efa_interfaces)
        if shape != (first.architecture, first.accelerator, first.accelerators, first.efa_interfaces):
            problems.append(
                Problem(
                    dotted([*path, "instance_types", index]),
                    f"{instance_type} differs from {first_type} in architecture, accelerators or EFA interfaces; "
                    "a node group's types must be interchangeable, so put it in a group of its own",
                )
            )
            return None
    return first


def _suggestion(word: str, choices: Iterable[str]) -> str:
    suggestion = did_you_mean(word, choices)
    return f" ({suggestion})" if suggestion else ""


def _zone_problems(path: list[str | int], region_name: str, region: Region, zone: str) -> list[Problem]:
    if not re.fullmatch(re.escape(region_name) + r"[a-z]", zone):
        return [
            Problem(
                dotted([*path, "availability_zone"]),
                f"{zone!r} is not a zone of {region_name} (zones look like {region_name}a)",
            )
        ]
    zones = region.vpc.availability_zones if region.vpc is not None else None
    if zones is not None and zone not in zones:
        return [
            Problem(
                dotted([*path, "availability_zone"]),
                f"{zone!r} is not among the VPC's availability_zones ({', '.join(zones)}); add it there",
                follows_from=(dotted(["regions", region_name, "vpc", "availability_zones"]),),
            )
        ]
    return []


# Limits of the AWS names derived from the stack, region and group names.
_EKS_CLUSTER_NAME_MAX = 100
_EKS_NODE_GROUP_NAME_MAX = 63
_S3_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
_ACCOUNT_ID_PLACEHOLDER = "0" * 12  # every account id has 12 digits


def check_derived_names(stack: str, name: str, region: Region) -> list[Problem]:
    """The AWS names built from the stack name must fit AWS's limits (naming.py builds them)."""
    problems: list[Problem] = []
    if region.existing:
        return problems  # the program names nothing of AWS there
    path: list[str | int] = ["regions", name]
    cluster = naming.cluster_name(stack, name)
    if len(cluster) > _EKS_CLUSTER_NAME_MAX:
        problems.append(
            Problem(
                dotted(path),
                f"the EKS cluster name {cluster!r} exceeds {_EKS_CLUSTER_NAME_MAX} characters; "
                "use a shorter stack name",
            )
        )
    for group_name in region.node_groups:
        group = naming.node_group_name(stack, name, group_name)
        if len(group) > _EKS_NODE_GROUP_NAME_MAX:
            problems.append(
                Problem(
                    dotted([*path, "node_groups", group_name]),
                    f"the node group name {group!r} is {len(group)} characters, over EKS's {_EKS_NODE_GROUP_NAME_MAX}; "
                    "shorten the group name or the stack name",
                )
            )
    if region.cold_tier.enabled:
        bucket = naming.cold_tier_bucket_name(stack, name, _ACCOUNT_ID_PLACEHOLDER)
        if not _S3_BUCKET_NAME.match(bucket):
            problems.append(
                Problem(
                    dotted([*path, "cold_tier"]),
                    f"the bucket name {bucket!r} is not a valid S3 bucket name (3-63 lowercase letters, digits and "
                    "'-'); use a short, lowercase stack name",
                )
            )
    return problems


def check_endpoint_name(name: str) -> list[Problem]:
    if is_dns_1035_label(name, MAX_ENDPOINT_NAME_LENGTH):
        return []
    return [
        Problem(
            dotted(["endpoints", name]),
            f"endpoint name {name!r} must be a DNS-1035 label (lowercase letters, digits and '-', starting with a "
            f"letter) of at most {MAX_ENDPOINT_NAME_LENGTH} characters, so that '<name>-prefill' fits a "
            "StatefulSet name",
        )
    ]


def check_canary_names(endpoints: Mapping[str, Endpoint]) -> list[Problem]:
    """A canary's objects are named after its endpoint: '<name>-canary' (a classic canary's Deployment and
    Service, a Mooncake canary set's store-mode server) and, for a Mooncake canary set, '<name>-canary-prefill'
    (a StatefulSet, 52 characters at most) and the set's other parts. Refused: a name too long for them, and
    another endpoint already named '<name>-canary'."""
    problems = []
    for name, endpoint in endpoints.items():
        if endpoint.canary is None:
            continue
        path = dotted(["endpoints", name, "canary"])
        set_name = naming.canary_set_name(name)
        if set_name in endpoints:
            problems.append(
                Problem(
                    path,
                    f"the canary's objects are named {set_name!r}, the name of another endpoint of the stack; "
                    f"rename that endpoint, or serve this canary as its own endpoint",
                )
            )
        if endpoint.mooncake is not None and len(name) > MAX_CANARY_ENDPOINT_NAME_LENGTH:
            prefill = naming.object_name(set_name, "prefill")
            problems.append(
                Problem(
                    path,
                    f"the canary set of a Mooncake endpoint is named '<name>-canary-*', and {prefill!r} is "
                    f"{len(prefill)} characters, past the {len(prefill) - len(name) + MAX_CANARY_ENDPOINT_NAME_LENGTH} "
                    f"a StatefulSet name may have; an endpoint with a Mooncake canary has a name of at most "
                    f"{MAX_CANARY_ENDPOINT_NAME_LENGTH} characters ({name!r} has {len(name)}): serve the new image "
                    f"as a new endpoint with a shorter name and move the traffic there, or update the image without "
                    f"a canary",
                )
            )
    return problems


STATEFULSET_NAME_MAX = 52
"""A StatefulSet's name goes into its pods' controller-revision-hash label ('<name>-<10-char hash>',
63 characters at most)."""


def check_group_names(endpoints: Mapping[str, Endpoint]) -> list[Problem]:
    """A role spanning nodes is a LeaderWorkerSet '<name>-<role>'; its controller runs each group's
    workers as a StatefulSet '<name>-<role>-<group index>' (kubernetes-sigs/lws v0.10.0
    pkg/controllers/pod_controller.go, constructWorkerStatefulSetApplyConfiguration: named after the
    leader pod), which must fit a StatefulSet name, for the canary set's groups too."""
    problems = []
    for name, endpoint in endpoints.items():
        mooncake = endpoint.mooncake
        if mooncake is None or not mooncake.split or mooncake.topology is None:
            continue
        sets = [name] + ([naming.canary_set_name(name)] if endpoint.canary is not None else [])
        for role in SPLIT_ROLES:
            if mooncake.roles.nodes(role) == 1:
                continue
            groups = [int(getattr(mooncake.topology, role))]
            if endpoint.canary is not None and endpoint.canary.topology is not None:
                groups.append(int(getattr(endpoint.canary.topology, role)))
            # The last index is the roll's surge group: LWS v0.10.0 bursts to replicas + maxSurge groups
            # (pkg/controllers/leaderworkerset_controller.go rollingUpdateParameters; maxSurge 1 here).
            longest = max(f"{naming.object_name(set_name, role)}-{max(groups)}" for set_name in sets)
            if len(longest) > STATEFULSET_NAME_MAX:
                problems.append(
                    Problem(
                        dotted(["endpoints", name, "mooncake", "roles", role, "nodes"]),
                        f"a role spanning nodes runs each group's workers as a StatefulSet named after its leader "
                        f"pod, and {longest!r} is {len(longest)} characters, past the {STATEFULSET_NAME_MAX} a "
                        f"StatefulSet name may have; shorten the endpoint's name by "
                        f"{len(longest) - STATEFULSET_NAME_MAX}",
                    )
                )
    return problems


def place_endpoint(
    name: str,
    endpoint: Endpoint,
    declared: tuple[str, ...],
    regions: Mapping[str, Region],
    catalog: InstanceCatalog,
) -> tuple[list[Placement], list[Problem]]:
    """Resolve the endpoint's node group in each target region and check it fits there.

    ``declared`` holds every region name of the stack; ``regions`` only those that
    validated, so an invalid region is reported once, against itself.
    """
    path: list[str | int] = ["endpoints", name]
    targets = endpoint.target_regions if endpoint.target_regions is not None else declared
    problems = []
    for index, region in enumerate(targets):
        if region not in declared:
            problems.append(
                Problem(
                    dotted([*path, "target_regions", index]),
                    f"{region!r} is not a region of this stack (regions: {', '.join(declared) or 'none'})",
                )
            )
    for region in endpoint.region_image_uris:
        if region not in targets:
            problems.append(
                Problem(
                    dotted([*path, "region_image_uris", region]),
                    f"{region!r} is not a target region of the endpoint; remove it",
                )
            )
    placements = []
    for region_name in (region for region in targets if region in regions):
        placement, region_problems = _place_in_region(name, endpoint, region_name, regions[region_name], catalog)
        problems += region_problems
        if placement is not None:
            placements.append(placement)
    return placements, problems


def _place_in_region(
    name: str, endpoint: Endpoint, region_name: str, region: Region, catalog: InstanceCatalog
) -> tuple[Placement | None, list[Problem]]:
    """The endpoint's node group in the region, and each split role's (``mooncake.roles``)."""
    path: list[str | int] = ["endpoints", name]
    store = endpoint.mooncake.store if endpoint.mooncake is not None else None
    problems = []
    if store is not None and store.cold_tier_enabled and not region.cold_tier.enabled:
        problems.append(
            Problem(
                dotted([*path, "mooncake", "store", "cold_tier_enabled"]),
                f"needs the cold tier of {region_name}: set regions.{region_name}.cold_tier.enabled to true",
            )
        )
    image = endpoint.image_for(region_name)
    mooncake = endpoint.mooncake
    if mooncake is None or not mooncake.split:
        group_name, group_problems = _place_shape(path, {}, endpoint, region_name, region, catalog)
        problems += group_problems
        return (None if problems else Placement(name, region_name, group_name, image)), problems
    role_groups: list[tuple[str, str | None]] = []
    own_group: list[str | None] = []
    for role in SPLIT_ROLES:
        shape = mooncake.roles.shape(role)
        stated = {key for key in ("gpu_count", "node_group") if shape is not None and getattr(shape, key) is not None}
        fields: dict[str, list[str | int]] = {key: [*path, "mooncake", "roles", role, key] for key in stated}
        group_name, group_problems = _place_shape(path, fields, endpoint.role_spec(role), region_name, region, catalog)
        # A problem of the endpoint's own fields is the same for both roles that inherit them: once.
        problems += [problem for problem in group_problems if problem not in problems]
        role_groups.append((role, group_name))
        if "node_group" not in stated:
            own_group.append(group_name)
    if problems:  # a group that is missing or cannot hold the role: where it is is moot
        return None, problems
    problems += _zone_pair_problems(path, endpoint, dict(role_groups), region_name, region)
    if problems:
        return None, problems
    node_group = own_group[0] if own_group else role_groups[0][1]
    return Placement(name, region_name, node_group, image, tuple(role_groups)), problems


def _zone_pair_problems(
    path: list[str | int], endpoint: Endpoint, groups: Mapping[str, str | None], region_name: str, region: Region
) -> list[Problem]:
    """Over rdma the decoder reads the prefiller's memory through EFA, whose OS-bypass traffic stays in
    one subnet, so one zone (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html, "EFA
    limitations"): prefill and decode on different groups must share it."""
    if endpoint.transfer_protocol != "rdma":
        return []
    prefill, decode = groups.get("prefill"), groups.get("decode")
    if prefill is None or decode is None or prefill == decode:
        return []
    zones = {role: region.node_groups[group].availability_zone for role, group in groups.items() if group is not None}
    if zones["prefill"] == zones["decode"]:
        return []
    return [
        Problem(
            dotted([*path, "mooncake", "roles", "decode", "node_group"]),
            f"decode runs on {decode} in {zones['decode']} and prefill on {prefill} in {zones['prefill']}: over rdma "
            "the decoder pulls KV through EFA, whose traffic does not leave one subnet (one availability zone); "
            f"put both roles on groups of one zone of {region_name}, or use transfer.protocol tcp",
        )
    ]


def _place_shape(
    path: list[str | int],
    fields: Mapping[str, list[str | int]],
    endpoint: Endpoint,
    region_name: str,
    region: Region,
    catalog: InstanceCatalog,
) -> tuple[str | None, list[Problem]]:
    """The node group of pods shaped by ``endpoint`` (the endpoint's own fields, or one role's view
    of them); ``fields`` holds the paths of the fields a role states itself, which its problems name."""

    def at(field: str) -> str:
        return dotted(fields.get(field, [*path, field]))

    rdma = endpoint.transfer_protocol == "rdma"
    problems: list[Problem] = []
    group_name = endpoint.node_group
    if group_name is None:
        if endpoint.gpu_count == 0:
            return None, problems
        group_name, problem = _default_group(path, endpoint, region_name, region, catalog, at("node_group"))
        if problem is not None:
            return None, [*problems, problem]
    group = region.node_groups.get(group_name)
    if group is None:
        problems.append(
            Problem(
                at("node_group"),
                f"node group {group_name!r} does not exist in {region_name} (groups there: "
                f"{', '.join(region.node_groups)}){_suggestion(group_name, region.node_groups)}; add it there or "
                + (
                    f"remove {region_name} from target_regions"
                    if endpoint.target_regions is not None
                    else "serve the endpoint only where it exists (target_regions)"
                ),
            )
        )
        return None, problems
    facts = node_group_instance(group, catalog)
    if facts is None:
        return None, problems  # reported against the region
    group_ref = f"regions.{region_name}.node_groups.{group_name}"
    if endpoint.gpu_count > 0 and (facts.accelerator != endpoint.accelerator or facts.accelerators == 0):
        problems.append(
            Problem(
                at("node_group"),
                f"{group_ref} has no {endpoint.accelerator} accelerators but gpu_count is {endpoint.gpu_count}; "
                "choose a GPU group or set gpu_count to 0",
            )
        )
        return None, problems
    if rdma and not group.efa:
        problems.append(
            Problem(
                dotted([*path, "mooncake", "transfer", "protocol"]),
                f"'rdma' needs an EFA node group, but {group_ref} has efa false; choose an EFA group or "
                "use protocol 'tcp'",
            )
        )
    if endpoint.capacity_type is not None and endpoint.capacity_type != group.capacity_type:
        problems.append(
            Problem(
                dotted([*path, "capacity_type"]),
                f"is {endpoint.capacity_type!r} but {group_ref} is {group.capacity_type!r}; no node would match",
            )
        )
    problems += _capacity_problems(at("gpu_count"), endpoint, group_ref, facts)
    return group_name, problems


def _default_group(
    path: list[str | int], endpoint: Endpoint, region_name: str, region: Region, catalog: InstanceCatalog, at: str
) -> tuple[str, Problem | None]:
    rdma = endpoint.transfer_protocol == "rdma"
    candidates = []
    for group_name, group in region.node_groups.items():
        facts = node_group_instance(group, catalog)
        if facts is None or facts.accelerator != endpoint.accelerator or facts.accelerators == 0:
            continue
        if rdma and not group.efa:
            continue
        candidates.append(group_name)
    kind = f"{'EFA ' if rdma else ''}{endpoint.accelerator} GPU"
    if len(candidates) == 1:
        return candidates[0], None
    if not candidates:
        return "", Problem(
            at,
            f"{region_name} has no {kind} node group to default to; add one to regions.{region_name}.node_groups",
            follows_from=unknown_groups(region_name, region, catalog),
        )
    return "", Problem(
        at,
        f"is ambiguous in {region_name}: {', '.join(candidates)} are all {kind} groups; set node_group",
    )


def _capacity_problems(at: str, endpoint: Endpoint, group_ref: str, facts: InstanceType) -> list[Problem]:
    """A pod never spans nodes. How many pods the group holds at once, with every other pod of
    the region and the rollout surge, is the schedulability check's (components/schedulability)."""
    per_pod = endpoint.gpu_count
    if per_pod <= facts.accelerators:
        return []
    return [
        Problem(
            at,
            f"{per_pod} GPUs per pod do not fit one node of {group_ref} ({facts.accelerators} per instance)",
        )
    ]
