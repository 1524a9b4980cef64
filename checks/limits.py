"""limits checks (to be written)."""

CHECKS: list = []
