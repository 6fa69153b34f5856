"""Pure renderers: validated spec in, Kubernetes-shaped dicts out (docs/design.md, decision 2)."""
