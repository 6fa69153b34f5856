"""Routing quality measured as users measure it: the simulation (simulation.py) and its report."""
