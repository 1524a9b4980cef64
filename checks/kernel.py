"""kernel checks (to be written)."""

CHECKS: list = []
