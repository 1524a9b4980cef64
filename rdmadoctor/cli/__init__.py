"""Command line. ``main`` serves plain ``rdmadoctor check ...`` runs without importing typer.

`check` runs in init containers and every minute on every node; typer and its click core cost
~30 ms to import, more than the whole check. So a ``check`` command line made only of the
options :data:`rdmadoctor.cli.options.OPTIONS` gives it (and a ``preflight`` or ``run`` one made
of theirs) is parsed here (rdmadoctor.cli.options.parse), and everything else (``--help``, other
commands, a typo) goes to the typer app, which owns the errors and help texts. Both parsers are
built from that one table and hand the command one ``Args`` record; tests/unit/cli/test_cli.py keeps
them in step.
"""

from __future__ import annotations

import os
import sys

# Set by the shell when it asks for completions (typer's add_completion): typer answers those.
COMPLETE_VAR = "_RDMADOCTOR_COMPLETE"


def main(argv: list[str] | None = None) -> None:
    from rdmadoctor.cli.streams import OutputError, install, output_failed

    install()  # a closed or full stdout/stderr: one error line (or none), never a traceback
    code: int | str | None  # SystemExit's own: a message (printed, exit 1) passes through as it was
    try:
        code = _dispatch(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:  # Ctrl-C (during `check --sample`, a long read): one line, no traceback
        try:
            sys.stderr.write("\nrdmadoctor: interrupted (Ctrl-C); nothing was reported\n")
        except (OSError, ValueError):
            pass
        raise SystemExit(130) from None
    except OutputError as e:
        raise SystemExit(output_failed(e)) from None
    try:
        if sys.stdout is not None:
            sys.stdout.flush()  # here, not at exit, where a failure would be a traceback
    except OutputError as e:
        code = output_failed(e)
    except BrokenPipeError:
        from rdmadoctor.cli.errors import pipe_closed

        pipe_closed()
    raise SystemExit(code)


def _dispatch(args: list[str]) -> int | None:
    if COMPLETE_VAR in os.environ:
        pass
    elif args and args[0] == "check":
        from rdmadoctor.cli.options import parse

        parsed = parse(args[1:])
        if parsed is not None:
            from rdmadoctor.cli.check import check_command

            return check_command(parsed)
    elif args and args[0] == "preflight":
        # Every init container of every job runs it: the same typer-free path as `check`.
        from rdmadoctor.cli.preflight import parse_argv, preflight_command

        parsed = parse_argv(args[1:])
        if parsed is not None:
            return preflight_command(parsed)
    elif args and args[0] == "run":
        # The prefix of every rank's command line (mpirun ... rdmadoctor run -- python train.py).
        from rdmadoctor.cli.run import parse_argv, run_command

        parsed = parse_argv(args[1:])
        if parsed is not None:
            return run_command(parsed)
    from rdmadoctor.cli.app import app

    app(args=args, prog_name="rdmadoctor")
    return 0
