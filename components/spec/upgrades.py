"""Kubernetes version changes EKS can make: one minor version forward per update.

EKS updates a cluster's control plane to the next minor version only, and never back ("Update
existing cluster to new Kubernetes version", Amazon EKS User Guide: "you can update only to the
next minor version"; a downgrade is not offered). A jump from 1.34 to 1.36 is therefore two updates,
1.35 first. ``fleetctl diff`` (and ``fleetctl edit --plan``, which plans through it) and the
program itself, against the version a deployed cluster reports, refuse anything else.
"""

from __future__ import annotations


def minor_of(version: str) -> tuple[int, int] | None:
    """``"1.34"`` -> ``(1, 34)``; None for anything that is not ``<major>.<minor>``."""
    major, _, minor = version.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    return int(major), int(minor)


def upgrade_problem(current: str, wanted: str, where: str) -> str | None:
    """Why EKS cannot move ``where`` (a cluster) from ``current`` to ``wanted``, or None when it can."""
    old, new = minor_of(current), minor_of(wanted)
    if old is None or new is None or old == new:
        return None
    if new[0] != old[0] or new[1] < old[1]:
        return (
            f"{where}: kubernetes_version {current} -> {wanted} goes back; EKS never downgrades a cluster: "
            f"keep {current} (or replace the cluster)"
        )
    if new[1] - old[1] > 1:
        steps = [f"{old[0]}.{minor}" for minor in range(old[1] + 1, new[1] + 1)]
        return (
            f"{where}: kubernetes_version {current} -> {wanted} skips {', '.join(steps[:-1])}; EKS upgrades one minor "
            f"version per update: set {steps[0]}, run `pulumi up`, then " + ", then ".join(steps[1:])
        )
    return None
