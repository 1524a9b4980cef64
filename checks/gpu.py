"""gpu checks (to be written)."""

CHECKS: list = []
