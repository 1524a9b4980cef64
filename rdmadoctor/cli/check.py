"""``rdmadoctor check``: run every check, print the report, exit 0 / 1 / 2."""

from __future__ import annotations

import json
import sys

from rdmadoctor.cli.errors import fail_usage, pipe_closed
from rdmadoctor.runner import Options, UsageError, diagnose

SEE_HELP = "see `rdmadoctor check --help`"
# --format: text (default; rich on a terminal), json (as --json), npd (one line for Node Problem
# Detector's custom plugin monitor: rdmadoctor/output/npd.py, deploy/npd/).
FORMATS = ("text", "json", "npd")


def run_check(
    *,
    root: str | None = None,
    bundle: str | None = None,
    example: str | None = None,
    profile: str = "generic",
    config: str | None = None,
    pool: str | None = None,
    sets: list[str] | None = None,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    timeout: float | None = None,
    as_json: bool = False,
    strict: bool = False,
    verbose: bool = False,
    scope: str = "all",
    output_format: str | None = None,
) -> int:
    opts = Options(
        root=root,
        bundle=bundle,
        example=example,
        profile=profile or "generic",
        config=config,
        pool=pool,
        sets=list(sets or []),
        only=list(only or []),
        skip=list(skip or []),
        strict=strict,
        timeout=timeout,
        scope=scope or "all",
    )
    fmt = (output_format or ("json" if as_json else "text")).lower()
    if fmt not in FORMATS:
        return fail_usage(f"--format {output_format}: expected one of {', '.join(FORMATS)}", "e.g. --format npd for Node Problem Detector")
    if as_json and fmt != "json":
        return fail_usage(f"--json and --format {fmt} ask for two outputs", "give one: --json is --format json")
    if timeout is not None and timeout <= 0:
        return _usage(fmt, f"--timeout must be positive, got {timeout:g}", "seconds a tool may run, e.g. --timeout 10 (default 5)")
    try:
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

            render_report(rep, verbose=verbose)
        sys.stdout.flush()
    except BrokenPipeError:
        # `check | head -1` read what it wanted; the verdict is the exit code, not the write.
        pipe_closed()
    return int(rep["exit_code"])


def _usage(fmt: str, message: str, hint: str) -> int:
    """A usage error: on stderr as always; with --format npd also as the one stdout line NPD shows
    as the condition's message (exit 2: NPD marks the condition Unknown)."""
    if fmt == "npd":
        from rdmadoctor.output.npd import npd_error_line

        try:
            sys.stdout.write(npd_error_line(message) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            pipe_closed()
    return fail_usage(message, hint)
