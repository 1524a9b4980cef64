"""verbs checks (to be written)."""

CHECKS: list = []
