"""The AWS side of a region: network, EKS cluster, node groups, add-ons, cold tier, workload identity."""
