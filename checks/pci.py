"""pci checks (to be written)."""

CHECKS: list = []
