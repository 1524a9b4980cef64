"""Command line. ``main`` serves plain ``rdmadoctor check ...`` runs without importing typer.

`check` runs in init containers and every minute on every node; typer and its click core cost
~30 ms to import, more than the whole check. So a ``check`` command line made only of the
options in :data:`rdmadoctor.cli.fast.OPTIONS` (and a ``preflight`` or ``run`` one made of
theirs) is parsed here, and everything else (``--help``,
other commands, a typo) goes to the typer app, which owns the errors and help texts.
tests/test_cli.py keeps both parsers in step.
"""

from __future__ import annotations

import os
import sys

# Set by the shell when it asks for completions (typer's add_completion): typer answers those.
COMPLETE_VAR = "_RDMADOCTOR_COMPLETE"


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if COMPLETE_VAR in os.environ:
        pass
    elif args and args[0] == "check":
        from rdmadoctor.cli.fast import parse

        parsed = parse(args[1:])
        if parsed is not None:
            from rdmadoctor.cli.check import run_check

            raise SystemExit(run_check(**parsed))
    elif args and args[0] == "preflight":
        # Every init container of every job runs it: the same typer-free path as `check`.
        from rdmadoctor.cli.preflight import parse_argv, run_preflight

        parsed = parse_argv(args[1:])
        if parsed is not None:
            raise SystemExit(run_preflight(**parsed))
    elif args and args[0] == "run":
        # The prefix of every rank's command line (mpirun ... rdmadoctor run -- python train.py).
        from rdmadoctor.cli.run import parse_argv, run_run

        parsed = parse_argv(args[1:])
        if parsed is not None:
            raise SystemExit(run_run(**parsed))
    from rdmadoctor.cli.app import app

    app(args=args, prog_name="rdmadoctor")
