"""nccl checks (to be written)."""

CHECKS: list = []
