"""``rdmadoctor preflight``: the pre-job gate (init container, or a prefix to the training command).

Two parsers of one command line: :func:`parse_argv` (no typer: every init container of every
job runs this, and typer with the pydantic it pulls in costs ~70 ms) and the typer command of
:func:`register`, which owns ``--help`` and explains a line the fast parser leaves to it.
tests/test_preflight.py keeps both in step. Both end in :func:`run_preflight`, which prints
what the library raises. No ``from __future__ import annotations`` and no module-level typing
import: typer reads the annotations of the command, written inside :func:`register`.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HELP = """Decide whether this pod can train over RDMA before the job starts: GO (exit 0), NO-GO (exit 1), UNKNOWN (exit 2; also a usage error).

Runs the checks that gate a pod (each check declares it; `rdmadoctor list-checks` shows them: devices visible, ports ACTIVE, verbs userspace, kernel modules, memlock and IPC_LOCK, /dev/shm, NCCL settings, GPU-HCA affinity) and prints each problem with what was seen, what was expected, and the YAML to add to the pod spec. Warnings are listed but do not block (unless --strict).

As an init container: rdmadoctor preflight --wait-for-master

As a prefix: rdmadoctor preflight --wait-for-master --master-timeout 600 --exec -- torchrun --nproc_per_node=8 train.py

With --exec, on GO the command replaces rdmadoctor in the same process (same PID); on NO-GO it is not run. Everything after `--` is passed to it untouched.
"""

# option -> (keyword of run_preflight, kind): "str"/"int"/"float" take a value, "list" may repeat,
# "flag" takes none.
FAST_OPTIONS = {
    "--root": ("root", "str"),
    "--bundle": ("bundle", "str"),
    "--example": ("example", "str"),
    "--profile": ("profile", "str"),
    "--config": ("config", "str"),
    "--pool": ("pool", "str"),
    "--set": ("sets", "list"),
    "--only": ("only", "list"),
    "--skip": ("skip", "list"),
    "--expect-hcas": ("expect_hcas", "int"),
    "--min-rate": ("min_rate", "float"),
    "--job-uid": ("job_uid", "int"),
    "--strict": ("strict", "flag"),
    "--verbose": ("verbose", "flag"),
    "--timeout": ("timeout", "float"),
    "--wait-for-master": ("wait", "flag"),
    "--master-addr": ("master_addr", "str"),
    "--master-port": ("master_port", "int"),
    "--master-timeout": ("master_timeout", "float"),
    "--json": ("as_json", "flag"),
    "--exec": ("exec_", "flag"),
    # The gang (rdmadoctor.gang): kept together, declared like the others.
    "--gang": ("gang", "flag"),
    "--gang-rank": ("gang_rank", "int"),
    "--gang-size": ("gang_size", "int"),
    "--gang-master": ("gang_master", "str"),
    "--gang-port": ("gang_port", "int"),
    "--gang-timeout": ("gang_timeout", "float"),
    "--gang-token": ("gang_token", "str"),
    "--bandwidth": ("bandwidth", "flag"),
}

DEFAULTS = {
    "root": None, "bundle": None, "example": None, "profile": "generic", "config": None, "pool": None,
    "sets": [], "only": [], "skip": [], "expect_hcas": None, "min_rate": None, "job_uid": None,
    "strict": False, "verbose": False, "timeout": None, "wait": False, "master_addr": None,
    "master_port": None, "master_timeout": None, "as_json": False, "exec_": False,
    "gang": False, "gang_rank": None, "gang_size": None, "gang_master": None, "gang_port": None,
    "gang_timeout": None, "gang_token": None, "bandwidth": False,
}


def parse_argv(args: "list[str]") -> "dict[str, Any] | None":
    """Keyword arguments for :func:`run_preflight`, or None to let typer handle (and explain) the line."""
    from rdmadoctor.cli.fast import parse

    out = parse(args, FAST_OPTIONS, DEFAULTS, rest=True)
    if out is None:
        return None
    command = out.pop("--", None)
    exec_ = out.pop("exec_")
    if command and not exec_:
        return None  # typer says what is wrong with a stray command
    out["exec_argv"] = command if exec_ else None
    if exec_ and command is None:
        out["exec_argv"] = []  # the library explains: --exec needs a command after --
    return out


def run_preflight(**kwargs: "Any") -> int:
    """Run the gate; a usage problem it raises becomes ``rdmadoctor: error: ...`` and exit 2."""
    from rdmadoctor.cli import errors as E
    from rdmadoctor.preflight.run import run_preflight as run
    from rdmadoctor.runner import UsageError

    bad = _bad_number(kwargs)
    if bad is not None:
        return bad
    try:
        return run(**kwargs)
    except UsageError as e:
        return E.fail_usage(str(e), e.hint)


def _bad_number(kwargs: "dict[str, Any]") -> "int | None":
    """The number options, finite and in range, before anything runs (both parsers end here).
    --master-port is judged with MASTER_PORT, where rank 0 is found (preflight.master)."""
    from rdmadoctor.cli import errors as E

    for option, key, low, high, low_open, unit, hint in (
        ("--timeout", "timeout", 0, E.TOOL_TIMEOUT_MAX, True, "seconds",
         "it bounds each tool the checks run, as in `check` (default 5, at most an hour); the wait for rank 0 is --master-timeout"),
        ("--master-timeout", "master_timeout", 0, E.MASTER_TIMEOUT_MAX, False, "seconds",
         "how long --wait-for-master waits for rank 0, e.g. --master-timeout 600 (default 300, at most a day)"),
        ("--min-rate", "min_rate", 0, E.MIN_RATE_MAX, True, "Gb/s",
         "the lowest acceptable port rate, e.g. --min-rate 400 for NDR, 200 for HDR"),
        ("--gang-timeout", "gang_timeout", 0, E.MASTER_TIMEOUT_MAX, True, "seconds",
         "how long rank 0 waits for every member, and a member for rank 0, e.g. --gang-timeout 300 (default 120)"),
    ):
        bad = E.check_number(option, kwargs.get(key), low=low, high=high, low_open=low_open, unit=unit, hint=hint)
        if bad is not None:
            return bad
    return None


def register(app: "Any") -> None:
    """Add the command(s) of this module to the typer app."""
    from typing import List, Optional

    import typer

    from rdmadoctor.cli import complete
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
        only: List[str] = typer.Option([], "--only", metavar="ID", autocompletion=complete.check_ids, help="Run only these of the gating checks (ids or families: ib, limits.memlock; repeatable or comma-separated)."),
        skip: List[str] = typer.Option([], "--skip", metavar="ID", autocompletion=complete.check_ids, help="Skip these checks (e.g. gpu.topology; repeatable or comma-separated)."),
        expect_hcas: Optional[int] = typer.Option(None, "--expect-hcas", metavar="N", help="Expect N RDMA devices (sets expected_hcas; wins over --set and --config)."),
        min_rate: Optional[float] = typer.Option(None, "--min-rate", metavar="GBPS", help="Minimum rate of every port in Gb/s, e.g. 400 for NDR (sets min_rate_gbps)."),
        job_uid: Optional[int] = typer.Option(None, "--job-uid", metavar="UID", help="The uid the job runs as, when it is not this process' (an init container): sets job_uid, so the verdict holds for the job's user."),
        strict: bool = typer.Option(False, "--strict", help="Warnings block too (NO-GO)."),
        verbose: bool = typer.Option(False, "--verbose", help="Also list each check's status and the informational findings."),
        timeout: Optional[float] = typer.Option(None, "--timeout", metavar="SECONDS", help="Kill a tool that runs longer than this (default 5), as in `check`."),
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
        master_timeout: Optional[float] = typer.Option(None, "--master-timeout", metavar="SECONDS", help="How long --wait-for-master waits (DNS retries and TCP connects, with backoff) before NO-GO (default 300)."),
        as_json: bool = typer.Option(False, "--json", help="Print the verdict as JSON (schema rdmadoctor.preflight/v1, with the full report)."),
        exec_: bool = typer.Option(False, "--exec", help="On GO, exec the command given after `--` in this process (same PID); on NO-GO do not run it. A command not found exits 127."),
        gang: bool = typer.Option(False, "--gang", help="After this pod's checks, meet the job's other members at rank 0 (README: Gang preflight): rank 0 compares what NCCL needs alike (transport, link layer, rails and rates, MTU, RoCE GID, IB subnet, GPUDirect RDMA, NCCL_* protocol settings, NCCL version) and every member prints the same gang verdict. Rank and size from NODE_RANK/RANK, NNODES/WORLD_SIZE, OMPI_COMM_WORLD_*, PMI_*, SLURM_*; rank 0 from MASTER_ADDR."),
        gang_rank: Optional[int] = typer.Option(None, "--gang-rank", metavar="N", help="This node's rank in the gang (0 listens), instead of the launcher's env."),
        gang_size: Optional[int] = typer.Option(None, "--gang-size", metavar="N", help="The number of nodes in the gang, instead of the launcher's env."),
        gang_master: Optional[str] = typer.Option(None, "--gang-master", metavar="HOST[:PORT]", help="Rank 0's address (and gang port), instead of MASTER_ADDR."),
        gang_port: Optional[int] = typer.Option(None, "--gang-port", metavar="PORT", help="The port rank 0 listens on for the gang (default 9471; not the launcher's MASTER_PORT)."),
        gang_timeout: Optional[float] = typer.Option(None, "--gang-timeout", metavar="SECONDS", help="How long rank 0 waits for every member, and a member for rank 0 (default 120)."),
        gang_token: Optional[str] = typer.Option(None, "--gang-token", metavar="TOKEN", help="The job's token (default: RDMADOCTOR_GANG_TOKEN, SLURM_JOB_ID, PMIX_NAMESPACE, ...): a member with another is refused."),
        bandwidth: bool = typer.Option(False, "--bandwidth", help="With --gang: a short bandwidth test between members (a ring, then a shifted ring; ib_write_bw per rail on RDMA pools, a TCP stream on socket pools); a member under gang_slow_share (--set, default 0.7) of the median is GANG_MEMBER_SLOW."),
        command: Optional[List[str]] = typer.Argument(None, metavar="-- CMD ARGS", help="The command for --exec, after `--`."),
    ) -> None:
        from rdmadoctor.cli.errors import fail_usage

        argv = list(command or [])
        if argv and not exec_:
            raise typer.Exit(fail_usage(f"unexpected argument {argv[0]!r}", "to run a command after the checks: --exec -- CMD ARGS..."))
        raise typer.Exit(
            run_preflight(
                root=root, bundle=bundle, example=example, profile=profile, config=config, pool=pool,
                sets=sets, only=only, skip=skip, expect_hcas=expect_hcas, min_rate=min_rate, job_uid=job_uid,
                strict=strict, verbose=verbose, timeout=timeout, wait=wait_for_master, master_addr=master_addr,
                master_port=master_port, master_timeout=master_timeout, as_json=as_json,
                exec_argv=argv if exec_ else None, gang=gang, gang_rank=gang_rank, gang_size=gang_size,
                gang_master=gang_master, gang_port=gang_port, gang_timeout=gang_timeout, gang_token=gang_token,
                bandwidth=bandwidth,
            )
        )
