"""`rdmadoctor label` (being written)."""

from __future__ import annotations


def register(app) -> None:
    """Add the command(s) of this module to the typer app."""
