"""Pure renderers: validated spec in, Kubernetes-shaped dicts out (DESIGN decision 2)."""
