"""roce checks (to be written)."""

CHECKS: list = []
