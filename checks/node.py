"""node checks (to be written)."""

CHECKS: list = []
