"""Edits of where an endpoint runs: its ``target_regions``."""

from __future__ import annotations

from collections.abc import Sequence

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from components.spec import NAMESPACE
from components.spec.errors import did_you_mean
from fleetctl.edit.sections import ENDPOINT_ORDER, declared_regions, endpoint_of, refuse
from fleetctl.edit.tree import append_item, flow_seq, remove_entry, remove_item, set_entry


def add_region(config: CommentedMap, name: str, region: str) -> list[str]:
    endpoint = endpoint_of(config, name)
    path: list[str | int] = ["endpoints", name, "target_regions"]
    _check_declared(config, path, region)
    targets = endpoint.get("target_regions")
    if targets is None:
        return [f"{name} has no target_regions, so it already serves every region of the stack, {region} included"]
    if not isinstance(targets, CommentedSeq):
        raise refuse(path, "is not a list; fix it by hand (fleetctl validate shows how)")
    if region in targets:
        return [f"{name} already serves {region}"]
    append_item(targets, region)
    return []


def remove_region(config: CommentedMap, name: str, region: str) -> list[str]:
    endpoint = endpoint_of(config, name)
    path: list[str | int] = ["endpoints", name, "target_regions"]
    last = f"{region!r} is the last region of {name}: remove the endpoint instead (fleetctl endpoint remove {name})"
    targets = endpoint.get("target_regions")
    notes = []
    if targets is None:
        _check_declared(config, path, region)
        others = [other for other in declared_regions(config) if other != region]
        if not others:
            raise refuse(path, last)
        set_entry(endpoint, "target_regions", flow_seq(others), ENDPOINT_ORDER)
        notes.append(f"{name} served every region; target_regions now lists the others: {', '.join(others)}")
    elif not isinstance(targets, CommentedSeq):
        raise refuse(path, "is not a list; fix it by hand (fleetctl validate shows how)")
    elif region not in targets:
        _check_declared(config, path, region)
        return [f"{name} does not serve {region}"]
    elif len(targets) == 1:
        raise refuse(path, last)
    else:
        remove_item(targets, targets.index(region))
    images = endpoint.get("region_image_uris")
    if isinstance(images, CommentedMap) and region in images:
        if len(images) == 1:
            remove_entry(endpoint, "region_image_uris")
        else:
            remove_entry(images, region)
        notes.append(f"region_image_uris.{region} is dropped with the region")
    return notes


def _check_declared(config: CommentedMap, path: Sequence[str | int], region: str) -> None:
    declared = declared_regions(config)
    if region not in declared:
        raise refuse(
            path,
            f"{region!r} is not a region of this stack (regions: {', '.join(declared) or 'none'}); "
            + (did_you_mean(region, declared) or f"declare it under {NAMESPACE}:regions first"),
        )


# Canaries.
