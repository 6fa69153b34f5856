"""fleetctl: validate, plan and (later) edit inference-fleet stack files."""
