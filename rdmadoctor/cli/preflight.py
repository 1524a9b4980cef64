"""``rdmadoctor preflight``: the pre-job gate (init container, or a prefix to the training command)."""

from __future__ import annotations

from typing import List, Optional

HELP = """Decide whether this pod can train over RDMA before the job starts: GO (exit 0), NO-GO (exit 1), UNKNOWN (exit 2; also a usage error).

Runs the checks that matter to a pod (devices visible, ports ACTIVE, verbs userspace, kernel modules, memlock and IPC_LOCK, /dev/shm, NCCL settings, GPU-HCA affinity) and prints each problem with what was seen, what was expected, and the YAML to add to the pod spec. Warnings are listed but do not block (unless --strict).

As an init container: rdmadoctor preflight --wait-for-master

As a prefix: rdmadoctor preflight --exec -- torchrun --nproc_per_node=8 train.py

With --exec, on GO the command replaces rdmadoctor in the same process (same PID); on NO-GO it is not run. Everything after `--` is passed to it untouched.
"""


def register(app) -> None:
    """Add the command(s) of this module to the typer app."""
    import typer

    from rdmadoctor.cli.options import BundleOpt, ConfigOpt, ExampleOpt, PoolOpt, ProfileOpt, RootOpt

    @app.command(
        "preflight",
        help=HELP,
        short_help="The pre-job gate: GO / NO-GO for this pod, then optionally wait for rank 0 and exec the job.",
    )
    def preflight(
        root: Optional[str] = RootOpt,
        bundle: Optional[str] = BundleOpt,
        example: Optional[str] = ExampleOpt,
        profile: str = ProfileOpt,
        config: Optional[str] = ConfigOpt,
        pool: Optional[str] = PoolOpt,
        sets: List[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="Override one expectation, e.g. --set shm_min_bytes=8589934592 (repeatable)."),
        expect_hcas: Optional[int] = typer.Option(None, "--expect-hcas", metavar="N", help="Expect N RDMA devices (sets expected_hcas; wins over --set and --config)."),
        min_rate: Optional[float] = typer.Option(None, "--min-rate", metavar="GBPS", help="Minimum rate of every port in Gb/s, e.g. 400 for NDR (sets min_rate_gbps)."),
        skip: List[str] = typer.Option([], "--skip", metavar="ID", help="Skip these checks (e.g. gpu.topology; repeatable or comma-separated)."),
        strict: bool = typer.Option(False, "--strict", help="Warnings block too (NO-GO)."),
        wait_for_master: bool = typer.Option(
            False,
            "--wait-for-master",
            help=(
                "After GO, wait until rank 0 accepts a TCP connection on MASTER_ADDR:MASTER_PORT (from this "
                "process' environment, even with --bundle/--example). Without MASTER_ADDR: the first host of "
                "Volcano's VC_MASTER_HOSTS (or of the only VC_<TASK>_HOSTS), port MASTER_PORT, else 23456 "
                "(Volcano's pytorch plugin) for a Volcano host and 29500 (torchrun) otherwise. Rank 0 "
                "(RANK=0, or MASTER_ADDR names this pod) does not wait."
            ),
        ),
        master_addr: Optional[str] = typer.Option(None, "--master-addr", metavar="HOST", help="Rank 0's address, instead of MASTER_ADDR (a comma-separated list: its first host)."),
        master_port: Optional[int] = typer.Option(None, "--master-port", metavar="PORT", help="Rank 0's port, instead of MASTER_PORT."),
        timeout: float = typer.Option(300.0, "--timeout", metavar="SECONDS", help="How long --wait-for-master waits (DNS retries and TCP connects, with backoff) before NO-GO."),
        as_json: bool = typer.Option(False, "--json", help="Print the verdict as JSON (schema rdmadoctor.preflight/v1, with the full report)."),
        exec_: bool = typer.Option(False, "--exec", help="On GO, exec the command given after `--` in this process (same PID); on NO-GO do not run it. A command not found exits 127."),
        command: Optional[List[str]] = typer.Argument(None, metavar="-- CMD ARGS", help="The command for --exec, after `--`."),
    ) -> None:
        from rdmadoctor.preflight import run_preflight
        from rdmadoctor.cli.errors import fail_usage

        argv = list(command or [])
        if argv and not exec_:
            raise typer.Exit(fail_usage(f"unexpected argument {argv[0]!r}", "to run a command after the checks: --exec -- CMD ARGS..."))
        raise typer.Exit(
            run_preflight(
                root=root, bundle=bundle, example=example, profile=profile, config=config, pool=pool,
                sets=sets, skip=skip, expect_hcas=expect_hcas, min_rate=min_rate, strict=strict,
                wait=wait_for_master, master_addr=master_addr, master_port=master_port, timeout=timeout,
                as_json=as_json, exec_argv=argv if exec_ else None,
            )
        )
