"""Kubernetes side: the components that register rendered workloads with a region's cluster."""
