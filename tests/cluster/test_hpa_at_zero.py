"""What ``fleetctl verify`` reads of an HPA whose target KEDA scaled to zero is what the pinned
kube-controller-manager writes: its HPA controller (pkg/controller/podautoscaler/horizontal.go,
reconcileAutoscaler) sets ScalingActive False with the reason ``ScalingDisabled`` and this message
while the target has 0 replicas and the HPA a minimum above 0 (KEDA makes the HPA with at least 1).
The control plane of these tests runs without the HPA controller, so the strings are read from
the binary the other cluster tests run."""

from __future__ import annotations

from fleetctl.verify.autoscaler import SCALING_DISABLED
from tests.cluster.conftest import binaries

MESSAGE = b"scaling is disabled since the replica count of the target is zero"


def test_the_reason_verify_reads_at_zero_is_the_pinned_hpa_controllers() -> None:
    program = (binaries() / "kube-controller-manager").read_bytes()
    assert MESSAGE in program
    assert program.count(SCALING_DISABLED.encode()) == 1  # the controller's one use of it
