"""``rdmadoctor check``: run every check, print the report, exit 0 / 1 / 2."""

from __future__ import annotations

import json
import sys

from rdmadoctor.runner import UsageError, diagnose, options_of

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

SEE_HELP = "see `rdmadoctor check --help`"
TIMEOUT_HINT = "seconds a tool may run before it is killed, e.g. --timeout 10 (default 5, at most an hour)"
SAMPLE_HINT = "seconds over which the ports' counters are read, e.g. --sample 10 (at most an hour)"
SAMPLE_MAX = 3600.0
# --format: text (default; rich on a terminal), json (as --json), npd (one line for Node Problem
# Detector's custom plugin monitor: rdmadoctor/output/npd.py, deploy/npd/).
FORMATS = ("text", "json", "npd")


def check_command(args: Any) -> int:
    """``rdmadoctor check`` for one command line (an :class:`rdmadoctor.cli.options.Args`)."""
    timeout, as_json, output_format = args.timeout, args.as_json, args.output_format
    opts = options_of(args, scope="all" if args.scope is None else args.scope)  # as the node's commands take them
    if args.sample is not None:  # rdmadoctor.cli.errors is imported when there is a number to judge
        from rdmadoctor.cli.errors import check_number

        bad = check_number("--sample", args.sample, low=0, high=SAMPLE_MAX, hint=SAMPLE_HINT)
        if bad is not None:
            return bad
    if output_format is not None and not output_format.strip():
        return _fail_usage("--format is empty", f"--format takes one of {', '.join(FORMATS)}; leave it out for text")
    fmt = (output_format or ("json" if as_json else "text")).lower()
    if fmt not in FORMATS:
        return _fail_usage(f"--format {output_format}: expected one of {', '.join(FORMATS)}", "e.g. --format npd for Node Problem Detector")
    if as_json and fmt != "json":
        return _fail_usage(f"--json and --format {fmt} ask for two outputs", "give one: --json is --format json")
    if timeout is not None:
        from rdmadoctor.cli.errors import TOOL_TIMEOUT_MAX, check_number

        bad = check_number("--timeout", timeout, low=0, high=TOOL_TIMEOUT_MAX, hint=TIMEOUT_HINT)
        if bad is not None:
            if fmt == "npd":
                _npd_line(f"--timeout {timeout!r}: {TIMEOUT_HINT}")
            return bad
    try:
        if args.sample:  # progress on stderr: the report waits for the sample
            sys.stderr.write(f"rdmadoctor: reading the ports' counters for {args.sample:g} s (--sample); Ctrl-C stops\n")
            sys.stderr.flush()
        diag = diagnose(opts)
    except UsageError as e:
        return _usage(fmt, str(e), e.hint or SEE_HELP)
    rep = diag.report
    try:
        if fmt == "npd":
            from rdmadoctor.output.npd import npd_line

            sys.stdout.write(npd_line(rep) + "\n")
        elif fmt == "json":
            sys.stdout.write(json.dumps(rep, indent=2, sort_keys=False) + "\n")
        else:
            from rdmadoctor.output.text import render_report

            render_report(rep, verbose=args.verbose)
        sys.stdout.flush()
    except BrokenPipeError:
        # `check | head -1` read what it wanted; the verdict is the exit code, not the write.
        _pipe_closed()
    return int(rep["exit_code"])


def _npd_line(message: str) -> None:
    """A usage error as the one stdout line NPD shows as the condition's message (with exit 2,
    NPD marks the condition Unknown); the error itself goes to stderr as always."""
    from rdmadoctor.output.npd import npd_error_line

    try:
        sys.stdout.write(npd_error_line(message) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _pipe_closed()


def _usage(fmt: str, message: str, hint: str) -> int:
    if fmt == "npd":
        _npd_line(message)
    return _fail_usage(message, hint)


# rdmadoctor.cli.errors on demand: a plain healthy `check` line (the fast path's) has nothing to say.
def _fail_usage(message: str, hint: str = "") -> int:
    from rdmadoctor.cli.errors import fail_usage as fail

    return fail(message, hint)


def _pipe_closed() -> None:
    from rdmadoctor.cli.errors import pipe_closed

    pipe_closed()
