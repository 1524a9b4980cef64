"""``rdmadoctor run [gate options] -- CMD ...``: the gate, then CMD as a watched child process.

The gate options are preflight's own: the typer command takes the parameters of
``rdmadoctor preflight`` (read from its signature, less ``--exec`` and its command) and the fast
parser takes its table, so the two commands cannot drift apart. Like cli/preflight.py: no
``from __future__ import annotations`` (typer reads the annotations).
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HELP = """Run the pre-job gate, then CMD as a child process, and tell what NCCL really did.

Exit status: CMD's (128+N when signal N killed it); 1 or 2 when the gate says NO-GO or UNKNOWN (CMD does not start, as with preflight); 127 when CMD is not found, 126 when it cannot be executed; 2 for a usage error.

rdmadoctor run --expect-hcas 8 --wait-for-master -- torchrun --nproc_per_node=8 train.py

stdout belongs to CMD: its stdout and stderr pass through byte for byte, as they arrive (they are pipes: a program that buffers when not on a terminal prints in bursts; for Python, `python -u` or PYTHONUNBUFFERED=1). Everything rdmadoctor says goes to stderr: first the gate's verdict as `rdmadoctor preflight` prints it (text whose fix lines paste as they are, or with --json its JSON document, schema rdmadoctor.preflight/v1); then lines starting with `rdmadoctor: `: the moment NCCL's init lines show the transport, one line saying which (NET/IB on which HCAs, with or without GPUDirect RDMA), or a warning when NCCL fell back to TCP sockets; and, when CMD fails, the diagnosis of its output: root causes first, with the line that shows each and its fix.

INT, TERM and HUP sent to rdmadoctor go to CMD's process group (a second Ctrl-C too: CMD decides); on a terminal CMD gets the terminal. CMD's environment is rdmadoctor's, unchanged unless --nccl-debug.
"""

# Preflight's typer parameters that `run` does not take, and the names run_preflight gives the
# ones whose typer name differs.
NOT_TAKEN = ("exec_", "command")
RENAMED = {"wait_for_master": "wait"}
JSON_HELP = (
    "Print the gate's verdict as JSON (schema rdmadoctor.preflight/v1, as `preflight --json` prints it) on stderr, "
    "not as text: stdout carries only CMD's output. For one JSON document about the whole run, use --report-file."
)


def _fast_tables() -> "tuple[dict[str, tuple[str, str]], dict[str, Any]]":
    from rdmadoctor.cli import preflight

    options = {k: v for k, v in preflight.FAST_OPTIONS.items() if v[0] not in ("exec_",)}
    options.update({"--no-gate": ("no_gate", "flag"), "--nccl-debug": ("nccl_debug", "flag"),
                    "--report-file": ("report_file", "str"), "--read-all": ("read_all", "flag")})
    defaults = {k: v for k, v in preflight.DEFAULTS.items() if k != "exec_"}
    defaults.update(no_gate=False, nccl_debug=False, report_file=None, read_all=False)
    return options, defaults


def parse_argv(args: "list[str]") -> "dict[str, Any] | None":
    """Keyword arguments for :func:`run_run`, or None to let typer handle (and explain) the line."""
    from rdmadoctor.cli.fast import parse

    options, defaults = _fast_tables()
    out = parse(args, options, defaults, rest=True)
    if out is None or not out.get("--"):
        return None  # no `--`, or nothing after it: typer explains
    out["command"] = out.pop("--")
    return out


def run_run(*, command: "list[str]", no_gate: bool = False, nccl_debug: bool = False, read_all: bool = False,
            report_file: "str | None" = None, as_json: bool = False, **gate: "Any") -> int:
    """Run it; a usage problem becomes ``rdmadoctor: error: ...`` (exit 2, or 127/126 for CMD)."""
    from rdmadoctor.cli.errors import fail_usage
    from rdmadoctor.cli.preflight import _bad_number
    from rdmadoctor.runner import UsageError
    from rdmadoctor.supervise import SpawnError, run_job

    bad = _bad_number(gate)  # with --no-gate too: a bad number is a typo, whether the gate runs or not
    if bad is not None:
        return bad
    try:
        return run_job(list(command), gate_kwargs=gate, no_gate=no_gate, as_json=as_json,
                       nccl_debug=nccl_debug, report_file=report_file, read_all=read_all)
    except SpawnError as e:
        fail_usage(str(e), e.hint)
        return e.code
    except UsageError as e:
        return fail_usage(str(e), e.hint)


def gate_parameters() -> "list[Any]":
    """preflight's typer parameters, less the ones of --exec, with --json said for `run`."""
    import inspect
    from copy import copy

    import typer

    from rdmadoctor.cli import preflight

    scratch = typer.Typer()
    preflight.register(scratch)
    callback = next(c.callback for c in scratch.registered_commands if c.name == "preflight")
    params = []
    for p in inspect.signature(callback).parameters.values():
        if p.name in NOT_TAKEN:
            continue
        if p.name == "as_json":
            info = copy(p.default)
            info.help = JSON_HELP
            p = p.replace(default=info)
        params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))
    return params


def register(app: "Any") -> None:
    """Add ``run`` to the typer app."""
    import inspect
    from typing import List, Optional

    import typer

    own = [
        inspect.Parameter("no_gate", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
            False, "--no-gate", help="Do not run the gate: start CMD at once (the output is still read).")),
        inspect.Parameter("nccl_debug", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
            False, "--nccl-debug",
            help="Set NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET for CMD, each only when unset, so that NCCL "
                 "says which transport it uses. Without it CMD's environment is exactly rdmadoctor's.")),
        inspect.Parameter("read_all", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
            False, "--read-all",
            help="Read all of CMD's output for the diagnosis. By default rdmadoctor reads the first 16 MiB (NCCL's "
                 "init, where it picks its transport), the last 16 MiB (where a job fails) and any NCCL line until "
                 "the transport is known, and only counts the middle: reading all costs about 2% of a core more at "
                 "50k lines/s (passing through costs about 1.1%).")),
        inspect.Parameter("report_file", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str], default=typer.Option(
            None, "--report-file", metavar="PATH",
            help="At exit, write one JSON document there (schema rdmadoctor.run/v1): the gate's verdict, how CMD "
                 "ended, what NCCL did (the `nccl` section) and the findings from its output. Written even "
                 "when the gate stops CMD.")),
        inspect.Parameter("command", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[List[str]], default=typer.Argument(
            None, metavar="-- CMD ARGS", help="The command to run, after `--`; everything after it reaches CMD untouched.")),
    ]
    params = gate_parameters() + own

    def run(**kw: "Any") -> None:
        from rdmadoctor.cli.errors import fail_usage

        command = list(kw.pop("command") or [])
        if not command:
            raise typer.Exit(fail_usage("run needs a command after --", "rdmadoctor run -- torchrun --nproc_per_node=8 train.py"))
        gate = {RENAMED.get(k, k): v for k, v in kw.items()}
        raise typer.Exit(run_run(command=command, **gate))

    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params}
    app.command(
        "run",
        help=HELP,
        short_help="The gate, then CMD as a child: its output passes through, NCCL's transport is named, a failure is diagnosed.",
        # Everything from the first word of CMD on is CMD's, `--` or not (as with env or nohup).
        context_settings={"allow_interspersed_args": False},
    )(run)
