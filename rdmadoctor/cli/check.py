"""``rdmadoctor check``: run every check, print the report, exit 0 / 1 / 2."""

from __future__ import annotations

import json
import sys

from rdmadoctor.cli.errors import TOOL_TIMEOUT_MAX, check_number, fail_usage, pipe_closed
from rdmadoctor.runner import Options, UsageError, diagnose

SEE_HELP = "see `rdmadoctor check --help`"
TIMEOUT_HINT = "seconds a tool may run before it is killed, e.g. --timeout 10 (default 5, at most an hour)"


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
    bad = check_number("--timeout", timeout, low=0, high=TOOL_TIMEOUT_MAX, hint=TIMEOUT_HINT)
    if bad is not None:
        return bad
    try:
        diag = diagnose(opts)
    except UsageError as e:
        return fail_usage(str(e), e.hint or SEE_HELP)
    rep = diag.report
    try:
        if as_json:
            sys.stdout.write(json.dumps(rep, indent=2, sort_keys=False) + "\n")
        else:
            from rdmadoctor.output.text import render_report

            render_report(rep, verbose=verbose)
        sys.stdout.flush()
    except BrokenPipeError:
        # `check | head -1` read what it wanted; the verdict is the exit code, not the write.
        pipe_closed()
    return int(rep["exit_code"])
