"""``rdmadoctor preflight``: the pre-job gate (init container, or a prefix to the training command).

Its options are rows of :data:`rdmadoctor.cli.options.OPTIONS` (``commands`` naming
``preflight``), read by two parsers: :func:`parse_argv`, the typer-free fast path (every init
container of every job runs this line; importing typer costs more than the checks), and the
typer command of :func:`register`, which owns ``--help`` and explains a line the fast parser
leaves to it. Both hand one :class:`~rdmadoctor.cli.options.Args` to :func:`preflight_command`,
which builds one :class:`~rdmadoctor.preflight.request.Request` of it (:func:`request`: the record,
the expectations its rows set, the command for --exec), runs
:func:`rdmadoctor.preflight.run.run_preflight` on it and prints what it raises.
tests/unit/preflight/test_preflight.py keeps the parsers in step; ``rdmadoctor run`` (cli/run.py) takes the
same rows but --exec.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HELP = """Decide whether this pod can train over RDMA before the job starts: GO (exit 0), NO-GO (exit 1), UNKNOWN (exit 2; also a usage error).

Runs the checks that gate a pod (each check declares it; `rdmadoctor list-checks` shows them: devices visible, ports ACTIVE, verbs userspace, kernel modules, memlock and IPC_LOCK, /dev/shm, NCCL settings, GPU-HCA affinity) and prints each problem with what was seen, what was expected, and the YAML to add to the pod spec. Warnings are listed but do not block (unless --strict).

As an init container: rdmadoctor preflight --wait-for-master

As a prefix: rdmadoctor preflight --wait-for-master --master-timeout 600 --exec -- torchrun --nproc_per_node=8 train.py

With --exec, on GO the command replaces rdmadoctor in the same process (same PID); on NO-GO it is not run. Everything after `--` is passed to it untouched.
"""


def parse_argv(args: list[str]) -> Any:
    """The :class:`~rdmadoctor.cli.options.Args` of a preflight line, or None to let typer handle
    (and explain) it."""
    from rdmadoctor.cli.options import parse

    out = parse(args, "preflight", rest=True)
    if out is None or (out.command and not out.exec_):
        return None  # typer says what is wrong with a stray command
    return out


def request(args: Any, command: str, exec_argv: list[str] | None = None) -> Any:
    """The gate's :class:`~rdmadoctor.preflight.request.Request` of ``command``'s record: the record
    itself, with the expectations its option rows set (``sets=`` in the table)."""
    from rdmadoctor.cli.options import overrides
    from rdmadoctor.preflight.request import Request

    return Request(args, overrides=overrides(args, command), exec_argv=exec_argv)


def preflight_command(args: Any) -> int:
    """Run the gate for one command line; a usage problem the library raises becomes
    ``rdmadoctor: error: ...`` and exit 2."""
    from rdmadoctor.preflight.run import run_preflight
    from rdmadoctor.runner import UsageError

    argv = list(args.command or [])
    if argv and not args.exec_:
        return _fail_usage(f"unexpected argument {argv[0]!r}", "to run a command after the checks: --exec -- CMD ARGS...")
    bad = _bad_number(args)
    if bad is not None:
        return bad
    try:
        # --exec without a command: the library explains that it needs one after --.
        return run_preflight(request(args, "preflight", exec_argv=argv if args.exec_ else None))
    except UsageError as e:
        return _fail_usage(str(e), e.hint)


def _fail_usage(message: str, hint: str) -> int:
    # rdmadoctor.cli.errors on demand: a plain line that passes (the fast path's) has nothing to say.
    from rdmadoctor.cli.errors import fail_usage

    return fail_usage(message, hint)


# The number options: (option, field, low, the name of the highest in rdmadoctor.cli.errors,
# low_open, unit, hint).
NUMBERS = (
    ("--timeout", "timeout", 0, "TOOL_TIMEOUT_MAX", True, "seconds",
     "it bounds each tool the checks run, as in `check` (default 5, at most an hour); the wait for rank 0 is --master-timeout"),
    ("--master-timeout", "master_timeout", 0, "MASTER_TIMEOUT_MAX", False, "seconds",
     "how long --wait-for-master waits for rank 0, e.g. --master-timeout 600 (default 300, at most a day)"),
    ("--min-rate", "min_rate", 0, "MIN_RATE_MAX", True, "Gb/s",
     "the lowest acceptable port rate, e.g. --min-rate 400 for NDR, 200 for HDR"),
    ("--gang-timeout", "gang_timeout", 0, "MASTER_TIMEOUT_MAX", True, "seconds",
     "how long rank 0 waits for every member, and a member for rank 0, e.g. --gang-timeout 300 (default 120)"),
    ("--drain-timeout", "drain_timeout", 0, "DRAIN_TIMEOUT_MAX", False, "seconds",
     "how long `run` reads the job's output and its diagnosis after the job exits, e.g. --drain-timeout 30 (default 5)"),
)


def _bad_number(args: Any) -> int | None:
    """The number options, finite and in range, before anything runs (both parsers end here).
    --master-port is judged with MASTER_PORT, where rank 0 is found (preflight.master)."""
    for option, key, low, high, low_open, unit, hint in NUMBERS:
        value = getattr(args, key)
        if value is None:
            continue
        from rdmadoctor.cli import errors as E

        bad = E.check_number(option, value, low=low, high=getattr(E, high), low_open=low_open, unit=unit, hint=hint)
        if bad is not None:
            return bad
    return None


def register(app: Any) -> None:
    """Add the command(s) of this module to the typer app."""
    import inspect
    from typing import List, Optional

    import typer

    from rdmadoctor.cli import options

    argument = inspect.Parameter("command", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[List[str]],
                                 default=typer.Argument(None, metavar="-- CMD ARGS", help="The command for --exec, after `--`."))
    app.command(
        "preflight",
        help=HELP,
        short_help="The pre-job gate: GO / NO-GO for this pod, then optionally wait for rank 0 and exec the job.",
    )(options.command("preflight", lambda args: preflight_command(args), [argument]))
