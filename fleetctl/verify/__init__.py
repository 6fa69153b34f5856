"""fleetctl verify: prove each deployed endpoint serves through its route (issue 9, partly)."""
