"""The plan-level invariants of inference-fleet: pure rules (``rules.py``), run by the
Pulumi CrossGuard pack (``__main__.py``) and offline by ``fleetctl plan --policy``."""
