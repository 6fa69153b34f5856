"""Benchmarks of ``fleetctl plan`` against a bare Pulumi floor (``make bench``; not part of the test run)."""
