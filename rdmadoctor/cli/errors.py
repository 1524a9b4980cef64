"""Errors leave through one place: a message and a hint on stderr, exit code 2."""

from __future__ import annotations

import sys

USAGE_EXIT = 2


def fail_usage(message: str, hint: str = "") -> int:
    sys.stderr.write(f"rdmadoctor: error: {message}\n")
    if hint:
        sys.stderr.write(f"  hint: {hint}\n")
    return USAGE_EXIT
