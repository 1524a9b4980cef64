"""``rdmadoctor run [gate options] -- CMD ...``: the gate, then CMD as a watched child process.

The gate options are preflight's own: rows of :data:`rdmadoctor.cli.options.OPTIONS` that name
both commands (all but --exec), with run's own rows after them, so the two commands cannot
drift apart. Both parsers hand one :class:`~rdmadoctor.cli.options.Args` to :func:`run_command`,
which hands it on as one :class:`~rdmadoctor.preflight.request.Request` (as `preflight` builds it).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HELP = """Run the pre-job gate, then CMD as a child process, and tell what NCCL really did.

Exit status: CMD's (128+N when signal N killed it); 1 or 2 when the gate says NO-GO or UNKNOWN (CMD does not start, as with preflight); 127 when CMD is not found, 126 when it cannot be executed; 2 for a usage error.

rdmadoctor run --expect-hcas 8 --wait-for-master -- torchrun --nproc_per_node=8 train.py

stdout belongs to CMD: its stdout and stderr pass through byte for byte, as they arrive (they are pipes: a program that buffers when not on a terminal prints in bursts; for Python, `python -u` or PYTHONUNBUFFERED=1). Everything rdmadoctor says goes to stderr: first the gate's verdict as `rdmadoctor preflight` prints it (text whose fix lines paste as they are, or with --json its JSON document, schema rdmadoctor.preflight/v1); then lines starting with `rdmadoctor: `: the moment NCCL's init lines show the transport, one line saying which (NET/IB on which HCAs, with or without GPUDirect RDMA), or a warning when NCCL fell back to TCP sockets; and, when CMD fails, the diagnosis of its output: root causes first, with the line that shows each and its fix. With --json, the last line of stderr at exit is the run's JSON document (schema rdmadoctor.run/v1, the --report-file's: the gate's verdict, how CMD ended, the findings, the live hangs), on one line.

INT, TERM and HUP sent to rdmadoctor go to CMD's process group (a second Ctrl-C too: CMD decides); on a terminal CMD gets the terminal. CMD's environment is rdmadoctor's, unchanged unless --nccl-debug.

A live hang: when CMD prints nothing for hang_after_s (default 300 s, below PyTorch's 10-minute watchdog; --set hang_after_s=N, null turns it off) or PyTorch's watchdog reports a timeout, rdmadoctor asks NCCL's RAS (NCCL 2.24+, NCCL_RAS_ADDR or localhost:28028) which ranks are dead, missing or behind, reads this node's ports and counters again, and says both on stderr, repeated while the hang lasts; the --report-file, --json's last line and --metrics-port carry it (docs/live-hangs.md).
"""

def parse_argv(args: list[str]) -> Any:
    """The :class:`~rdmadoctor.cli.options.Args` of a run line, or None to let typer handle
    (and explain) it."""
    from rdmadoctor.cli.options import parse

    out = parse(args, "run", rest=True)
    if out is None or not out.command:
        return None  # no `--`, or nothing after it: typer explains
    return out


def run_command(args: Any) -> int:
    """Run it; a usage problem becomes ``rdmadoctor: error: ...`` (exit 2, or 127/126 for CMD)."""
    from rdmadoctor.cli.errors import fail_usage
    from rdmadoctor.cli.preflight import _bad_number, request
    from rdmadoctor.runner import UsageError
    from rdmadoctor.supervise import SpawnError, run_job

    command = list(args.command or [])
    if not command:
        return fail_usage("run needs a command after --", "rdmadoctor run -- torchrun --nproc_per_node=8 train.py")
    bad = _bad_number(args)  # with --no-gate too: a bad number is a typo, whether the gate runs or not
    if bad is not None:
        return bad
    try:
        return run_job(command, request(args, "run"))
    except SpawnError as e:
        fail_usage(str(e), e.hint)
        return e.code
    except UsageError as e:
        return fail_usage(str(e), e.hint)


def register(app: Any) -> None:
    """Add ``run`` to the typer app."""
    import inspect
    from typing import List, Optional

    import typer

    from rdmadoctor.cli import options

    argument = inspect.Parameter("command", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[List[str]], default=typer.Argument(
        None, metavar="-- CMD ARGS", help="The command to run, after `--`; everything after it reaches CMD untouched."))
    app.command(
        "run",
        help=HELP,
        short_help="The gate, then CMD as a child: its output passes through, NCCL's transport is named, a failure is diagnosed.",
        # Everything from the first word of CMD on is CMD's, `--` or not (as with env or nohup).
        context_settings={"allow_interspersed_args": False},
    )(options.command("run", lambda args: run_command(args), [argument]))
