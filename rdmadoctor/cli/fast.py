"""The typer-free parser of the commands' options (see rdmadoctor.cli): :func:`parse`, which
lives beside its table in rdmadoctor.options (rdmadoctor.cli.options names it too; neither
imports typer)."""

from rdmadoctor.cli.options import parse

__all__ = ["parse"]
