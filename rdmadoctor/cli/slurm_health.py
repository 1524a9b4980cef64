"""``rdmadoctor slurm health``: the checks, then drain / resume this node through scontrol
(rdmadoctor.slurm.health does the work; this only wires and prints)."""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

HEALTH_HELP = """Check this node; drain it in Slurm on a problem, resume it when healthy again. For HealthCheckProgram, cron, or by hand.

A problem drains the node with a reason that starts `rdmadoctor:` and names the root code first (`rdmadoctor: IB_PORT_DOWN mlx5_3/1 (+2 more)`), after quarantine_after consecutive problem runs (default 3), within the partition's quarantine_budget (default 10%) and not when more than storm_share (default 0.3) of the partition fails at once. Healthy for release_after runs (default 3) resumes the node, only when its reason starts `rdmadoctor:`: an administrator's or another tool's drain is never resumed nor rewritten. Unknown (a check could not run) changes nothing unless --unknown drain. A usage error (exit 2) changes nothing. The guardrails are expectations: --set quarantine_after=1, --config, --pool.

The node: $SLURMD_NODENAME, else --node, else the short host name. Exit 0 healthy, 1 a problem, 2 unknown, a usage error, or Slurm could not be read or changed (Slurm only logs a HealthCheckProgram's exit status).
"""


def register(group) -> None:
    from rdmadoctor.cli.options import with_rows

    @group.command("health", help=HEALTH_HELP, short_help="Check this node; drain it on a problem, resume it when healthy (HealthCheckProgram).")
    @with_rows("slurm health")  # the check options (--root ... --pool, --set, --only, --skip, --timeout): rdmadoctor/options.py
    def health(
        args,
        strict: bool = typer.Option(False, "--strict", help="Warnings are problems too (they drain)."),
        node: Optional[str] = typer.Option(None, "--node", metavar="NAME", help="The Slurm NodeName of this node, when SLURMD_NODENAME is not set (default: the short host name)."),
        scontrol: Optional[str] = typer.Option(None, "--scontrol", metavar="PATH", help="The scontrol to run (default: the one on PATH)."),
        scontrol_timeout: float = typer.Option(20.0, "--scontrol-timeout", metavar="SECONDS", help="Deadline of each scontrol call (default 20)."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the scontrol commands that would change Slurm instead of running them (reads still run)."),
        state_dir: str = typer.Option("/var/lib/rdmadoctor/slurm", "--state-dir", metavar="DIR", help="Where each node's state file (its consecutive problem / healthy runs) is kept. On a shared file system every node also sees the others' verdicts for the storm rule."),
        unknown: str = typer.Option("leave", "--unknown", metavar="leave|drain", help="What an unknown verdict does: leave (default: nothing changes, and it says why) or drain (taken as a problem)."),
        features: bool = typer.Option(False, "--features", help="Keep the node's Slurm features rdma, ib/roce and rdma_ready in step with the checks (jobs ask --constraint=rdma_ready); other features are kept."),
        report_file: Optional[str] = typer.Option(None, "--report-file", metavar="PATH", help="Write the whole run as JSON there (schema rdmadoctor.slurm-health/v1: the decision, the commands, the full report)."),
        verbose: bool = typer.Option(False, "--verbose", help="Also show informational findings."),
    ) -> None:
        raise typer.Exit(health_command(
            args, strict=strict, node=node, scontrol=scontrol, scontrol_timeout=scontrol_timeout, dry_run=dry_run,
            state_dir=state_dir, unknown=unknown, features=features, report_file=report_file, verbose=verbose,
        ))


def health_command(args, *, strict, node, scontrol, scontrol_timeout, dry_run, state_dir, unknown, features,
                   report_file, verbose) -> int:
    """The command for ``args`` (its check options, an :class:`rdmadoctor.options.Args`) and its own options."""
    from rdmadoctor.cli import errors as E
    from rdmadoctor.cli.errors import fail_usage
    from rdmadoctor.core.quarantine import GuardError
    from rdmadoctor.runner import UsageError, diagnose, options_of
    from rdmadoctor.slurm import health as H
    from rdmadoctor.slurm.scontrol import Scontrol, SlurmError, find

    # Everything that can be wrong with the line is said before anything runs or changes.
    for option, value, high, hint in (
        ("--timeout", args.timeout, E.TOOL_TIMEOUT_MAX, "seconds a tool may run before it is killed, e.g. --timeout 10"),
        ("--scontrol-timeout", scontrol_timeout, 3600, "seconds each scontrol call may take, e.g. --scontrol-timeout 20"),
    ):
        if value is not None:
            bad = E.check_number(option, value, low=0, high=high, low_open=True, unit="seconds", hint=hint)
            if bad is not None:
                return bad
    if unknown not in H.UNKNOWN_MODES:
        return fail_usage(f"--unknown {unknown!r}: expected leave or drain", "leave (the default) changes nothing on an unknown verdict")
    if report_file is not None and (not report_file.strip() or not os.path.isdir(os.path.dirname(os.path.abspath(report_file)))):
        return fail_usage(f"--report-file {report_file!r}: its directory does not exist", "give a path in an existing directory")
    env = dict(os.environ)
    try:
        name = H.node_name(node, env)
        path = find(scontrol, env)
        H.prepare_state_dir(state_dir)
    except SlurmError as e:
        return fail_usage(str(e), e.hint)
    opts = options_of(args, scope="node")
    opts.strict = strict  # its own --strict, declared by hand: the record's is at its default
    try:
        diag = diagnose(opts)
    except UsageError as e:
        return fail_usage(str(e), e.hint)

    from rdmadoctor.output.text import render_report, safe

    def say(line: str) -> None:
        sys.stdout.write(safe(line) + "\n")
        sys.stdout.flush()

    render_report(diag.report, verbose=verbose)
    sc = Scontrol(path, timeout=scontrol_timeout, dry_run=dry_run,
                  echo=lambda line: say(f"slurm: {'dry-run, would run' if dry_run else 'run'}: {line}"))
    try:
        code, _doc = H.run_health(diag, name=name, sc=sc, state_dir=state_dir, unknown_mode=unknown, features=features,
                                  strict=strict, report_file=report_file, say=say)
    except GuardError as e:
        return fail_usage(str(e), "e.g. --set quarantine_budget=2 or --set quarantine_budget=10%")
    except SlurmError as e:
        sys.stderr.write(safe(f"rdmadoctor slurm health: error: {e}") + (f"\n  hint: {e.hint}" if e.hint else "") + "\n")
        return 2
    return code
