"""The typer-free parser of the commands' options (see rdmadoctor.cli): :func:`parse`, which
lives beside its table in rdmadoctor.cli.options (one module to import on the fast path)."""

from rdmadoctor.cli.options import parse

__all__ = ["parse"]
