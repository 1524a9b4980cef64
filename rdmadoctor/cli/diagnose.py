"""``rdmadoctor diagnose [FILE ...|-]``: what a job printed, read for root causes; with a node, joined to its checks."""

from __future__ import annotations

import json
import os
import sys
from typing import List, Optional

import typer

from rdmadoctor.cli.errors import fail_usage, pipe_closed, say
from rdmadoctor.cli.options import BundleOpt, ConfigOpt, ExampleOpt, JsonOpt, PoolOpt, ProfileOpt, RootOpt

SEE_HELP = "see `rdmadoctor diagnose --help`"
# Inputs bigger than this get a progress line on stderr when a terminal watches.
PROGRESS_MIN_BYTES = 64 << 20

HELP = """Read what a training job printed and say why it failed or ran slowly.

FILE is anything a person pastes or attaches, with no flag saying what it is: NCCL_DEBUG=INFO output of any rank or many (2.5 .. 2.30, with or without timestamps), PyTorch tracebacks and watchdog messages, `kubectl logs` (with --prefix / --timestamps), mpirun --tag-output, a terminal session with prompts ($ ibstat, # ulimit -a, root@pod:/# ibv_devinfo) and their outputs, dmesg and journalctl -k. Gzipped files, CRLF, colour codes and bad bytes are fine. `-` (or no FILE with a pipe) reads stdin: kubectl logs job/train | rdmadoctor diagnose

Findings come root cause first, each with the line it was seen on; errors that follow from an earlier one are folded under it. The NCCL block says what NCCL really did: version, network (IB or Socket), devices, GPUDirect RDMA.

With --live (this pod), --root, --bundle or --example the checks run too and are joined with the log: "NCCL fell back to sockets" next to "this node has 8 ACTIVE ports" becomes one finding that names the reason. Exit codes: 0 no known problem in what was read, or only warnings (GPUDirect RDMA off, a setting to revisit; --strict makes them 1), 1 an error (a job killed by a signal is one), 2 nothing could be read, nothing in it could be judged (no NCCL line, error or tool output: run the job with NCCL_DEBUG=INFO), or a usage error.
"""


def register(app: typer.Typer) -> None:
    app.command("diagnose", help=HELP, short_help="Read a job's log (NCCL, PyTorch, dmesg, pasted commands) and say why it failed.")(diagnose)


def diagnose(
    files: List[str] = typer.Argument(None, metavar="FILE", help="Log files (plain or .gz); - for stdin."),
    live: bool = typer.Option(False, "--live", help="Also check this machine / pod, as `rdmadoctor check` does, and join the two."),
    root: Optional[str] = RootOpt,
    bundle: Optional[str] = BundleOpt,
    example: Optional[str] = ExampleOpt,
    profile: str = ProfileOpt,
    config: Optional[str] = ConfigOpt,
    pool: Optional[str] = PoolOpt,
    sets: List[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="Override one expectation (with a node), e.g. --set min_rate_gbps=200."),
    as_json: bool = JsonOpt,
    verbose: bool = typer.Option(False, "--verbose", help="Also show informational findings."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 on warnings too."),
) -> None:
    raise typer.Exit(run_diagnose(files=list(files or []), live=live, root=root, bundle=bundle, example=example,
                                  profile=profile, config=config, pool=pool, sets=sets, as_json=as_json,
                                  verbose=verbose, strict=strict))


def run_diagnose(
    *,
    files: list[str],
    live: bool = False,
    root: str | None = None,
    bundle: str | None = None,
    example: str | None = None,
    profile: str = "generic",
    config: str | None = None,
    pool: str | None = None,
    sets: list[str] | None = None,
    as_json: bool = False,
    verbose: bool = False,
    strict: bool = False,
    stdin=None,  # a binary stream, for tests
) -> int:
    node = [name for name, given in (("--live", live), ("--root", root), ("--bundle", bundle), ("--example", example)) if given]
    if len(node) > 1:
        return fail_usage(f"{' and '.join(node)} are exclusive: give one node to join the log with", SEE_HELP)
    if not files:
        if sys.stdin is not None and not sys.stdin.isatty():
            files = ["-"]
        elif not node:
            return fail_usage("no log given", "give log files (rdmadoctor diagnose job.log rank*.log.gz) or pipe one: kubectl logs POD | rdmadoctor diagnose")
    if files.count("-") > 1:
        return fail_usage("stdin (-) can be read only once", SEE_HELP)

    from rdmadoctor.logs import Diagnoser

    # Read the files here, before the checks: a progress line on a terminal, stdin read once, and
    # "nothing could be read" known before anything runs. The logs.diagnose check finishes it.
    reader = None
    if files:
        reader = Diagnoser()
        tick = _progress(files)
        for path in files:
            reader.read(path, stdin=stdin, progress=tick)
        for src in reader.sources:
            if src.get("error"):
                say(f"rdmadoctor: warning: {src['error']}")
        if not any(s.get("bytes") for s in reader.sources) and not node:
            errors = [s["error"] for s in reader.sources if s.get("error")]
            why = "; ".join(errors) if errors else "every input was empty"
            return fail_usage(f"nothing could be read: {why}", "give a log file with text in it (NCCL_DEBUG=INFO output, kubectl logs, a pasted terminal session)")

    from rdmadoctor.runner import Options, UsageError
    from rdmadoctor.runner import diagnose as run_checks

    opts = Options(
        root=root if root is not None else ("/" if live else None),
        bundle=bundle,
        example=example,
        profile="generic" if profile is None else profile,
        config=config,
        pool=pool,
        sets=list(sets or []),
        strict=strict,
        logs=files,
        log_diagnosis=reader,
    )
    host = None
    if not node:
        from rdmadoctor.host import logs_only_host

        opts.only = ["logs"]
        host = logs_only_host(_label(files))
    try:
        result = run_checks(opts, host=host)
    except UsageError as e:
        return fail_usage(str(e), e.hint or SEE_HELP)
    rep = result.report
    notes = ((rep.get("inventory") or {}).get("logs") or {}).get("notes") or []
    try:
        if as_json:
            sys.stdout.write(json.dumps(rep, indent=2) + "\n")
        else:
            from rdmadoctor.output.text import render_report

            render_report(rep, verbose=verbose)
            for note in notes:
                say(f"rdmadoctor: note: {note}")
        sys.stdout.flush()
    except BrokenPipeError:
        pipe_closed()
        return rep["exit_code"]
    return rep["exit_code"]


def _label(files: list[str]) -> str:
    names = ["stdin" if f == "-" else f for f in files]
    return names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"


def _progress(files: list[str]):  # a callback or None
    """A progress line on stderr when a terminal watches and the input is large."""
    if not sys.stderr.isatty():
        return None
    total = 0
    for f in files:
        try:
            total += os.path.getsize(f) if f != "-" else 0
        except OSError:
            pass
    if total < PROGRESS_MIN_BYTES:
        return None
    done = [0, -1]

    def tick(n: int) -> None:
        done[0] += n
        pct = min(100, done[0] * 100 // total)  # a .gz grows past its size: capped
        if pct != done[1]:
            done[1] = pct
            end = "\n" if pct >= 100 else ""
            sys.stderr.write(f"\rrdmadoctor: reading {done[0] >> 20} MiB of {total >> 20} MiB ({pct}%){end}")
            sys.stderr.flush()

    return tick
