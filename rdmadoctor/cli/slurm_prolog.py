"""``rdmadoctor slurm prolog [--gang]``: Slurm's Prolog (rdmadoctor.slurm.prolog does the work)."""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

PROLOG_HELP = """Gate a job's node (or, with --gang, the job's nodes against each other) in Slurm's Prolog, before the job starts.

slurm.conf: Prolog=/usr/local/sbin/rdmadoctor-prolog (a script that runs `rdmadoctor slurm prolog --gang`), PrologFlags=Alloc, SchedulerParameters=nohold_on_prolog_fail (docs/slurm.md).

Without --gang: this node's gating checks; on a problem it sets its drain reason (`rdmadoctor: CODE subject (job N)`) and exits 1, so Slurm drains the node and requeues the job. With --gang: the job's nodes (SLURM_JOB_NODELIST) meet as `preflight --gang` members do, rank 0 at the first node's NodeAddr, the token from SLURM_CLUSTER_NAME and SLURM_JOB_ID. Only a member the verdict blames (its own NO-GO, the odd one out against a clear majority, with --bandwidth a slow one) drains and exits 1; the others print the verdict and exit 0. A gang where nobody can be blamed (a two-two split, a member missing, unknown) drains nobody; with --strict rank 0 requeues the job.
"""


def register(group) -> None:
    from rdmadoctor.cli.options import with_rows

    @group.command("prolog", help=PROLOG_HELP, short_help="Slurm's Prolog: this node's checks, or with --gang the job's nodes against each other.")
    @with_rows("slurm prolog")  # the check options (--root ... --pool, --set, --only, --skip, --timeout): rdmadoctor/options.py
    def prolog(
        args,
        strict: bool = typer.Option(False, "--strict", help="Warnings block too; with --gang, a gang nobody can be blamed for is requeued by rank 0."),
        gang: bool = typer.Option(False, "--gang", help="Meet the job's other nodes and compare what NCCL needs alike (docs/gang.md)."),
        bandwidth: bool = typer.Option(False, "--bandwidth", help="With --gang: a short bandwidth test between the nodes; a slow one is blamed."),
        gang_port: Optional[int] = typer.Option(None, "--gang-port", metavar="PORT", help="The port rank 0 listens on (default 9471)."),
        gang_timeout: Optional[float] = typer.Option(None, "--gang-timeout", metavar="SECONDS", help="How long rank 0 waits for every node, and a node for rank 0 (default 120)."),
        node: Optional[str] = typer.Option(None, "--node", metavar="NAME", help="This node's NodeName when SLURMD_NODENAME is not set."),
        scontrol: Optional[str] = typer.Option(None, "--scontrol", metavar="PATH", help="The scontrol to run (default: the one on PATH, else /usr/bin)."),
        scontrol_timeout: float = typer.Option(20.0, "--scontrol-timeout", metavar="SECONDS", help="Deadline of each scontrol call (default 20)."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the scontrol commands that would change Slurm instead of running them."),
        report_file: Optional[str] = typer.Option(None, "--report-file", metavar="PATH", help="Write the whole run as JSON there (schema rdmadoctor.slurm-prolog/v1)."),
    ) -> None:
        from rdmadoctor.preflight.request import Request

        raise typer.Exit(prolog_command(
            gate_args=Request(args),
            strict=strict, gang=gang, bandwidth=bandwidth, gang_port=gang_port, gang_timeout=gang_timeout, node=node,
            scontrol=scontrol, scontrol_timeout=scontrol_timeout, dry_run=dry_run, report_file=report_file,
        ))


def prolog_command(*, gate_args, strict, gang, bandwidth, gang_port, gang_timeout, node, scontrol,
                   scontrol_timeout, dry_run, report_file) -> int:
    from rdmadoctor.cli import errors as E
    from rdmadoctor.cli.errors import fail_usage
    from rdmadoctor.output.text import safe
    from rdmadoctor.runner import UsageError
    from rdmadoctor.slurm.health import node_name
    from rdmadoctor.slurm.prolog import run_prolog
    from rdmadoctor.slurm.scontrol import Scontrol, SlurmError, find

    for option, value, high, hint in (
        ("--timeout", gate_args.timeout, E.TOOL_TIMEOUT_MAX, "seconds a tool may run before it is killed, e.g. --timeout 10"),
        ("--scontrol-timeout", scontrol_timeout, 3600, "seconds each scontrol call may take, e.g. --scontrol-timeout 20"),
        ("--gang-timeout", gang_timeout, E.MASTER_TIMEOUT_MAX, "how long the nodes wait for each other, e.g. --gang-timeout 120"),
    ):
        if value is not None:
            bad = E.check_number(option, value, low=0, high=high, low_open=True, unit="seconds", hint=hint)
            if bad is not None:
                return bad
    if not gang:
        given = [o for o, v in (("--bandwidth", bandwidth or None), ("--gang-port", gang_port), ("--gang-timeout", gang_timeout)) if v is not None]
        if given:
            return fail_usage(f"{given[0]} needs --gang", f"rdmadoctor slurm prolog --gang {given[0]} ...")
    if report_file is not None and (not report_file.strip() or not os.path.isdir(os.path.dirname(os.path.abspath(report_file)))):
        return fail_usage(f"--report-file {report_file!r}: its directory does not exist", "give a path in an existing directory")
    env = dict(os.environ)

    def say(line: str) -> None:
        sys.stdout.write(safe(line) + "\n")
        sys.stdout.flush()

    def log(line: str) -> None:
        sys.stderr.write(safe(f"rdmadoctor slurm prolog: gang: {line}") + "\n")
        sys.stderr.flush()

    try:
        name = node_name(node, env)
        sc = Scontrol(find(scontrol, env), timeout=scontrol_timeout, dry_run=dry_run,
                      echo=lambda line: say(f"slurm: {'dry-run, would run' if dry_run else 'run'}: {line}"))
        return run_prolog(gate_args=gate_args, name=name, sc=sc, env=env, gang=gang, strict=strict, bandwidth=bandwidth,
                          gang_port=gang_port, gang_timeout=gang_timeout, report_file=report_file, say=say, log=log)
    except UsageError as e:
        return fail_usage(str(e), e.hint)
    except SlurmError as e:
        return fail_usage(str(e), e.hint)
