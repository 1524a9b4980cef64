"""The typer app: wires the commands; each lives in its own module."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer
from typer.core import TyperGroup

from rdmadoctor import __version__
from rdmadoctor.cli.errors import parse_error, pipe_closed
from rdmadoctor.cli.streams import OutputError, install, output_failed

# The parser's usage-error base class: click's, or the copy typer >= 0.20 vendors.
UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


class RdmadoctorGroup(TyperGroup):
    """The root command: the parser's own errors speak like every other rdmadoctor error."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        install()  # done by rdmadoctor.cli.main already, unless the app is called directly
        try:
            code = super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra)
        except UsageError as e:
            argv = list(sys.argv[1:] if args is None else args)
            sub = argv[0] if argv and argv[0] in self.commands else ""
            code = parse_error(e, f"rdmadoctor {sub}".strip())
        except typer.Abort:
            sys.stderr.write("rdmadoctor: aborted\n")
            code = 130
        except OutputError as e:  # stdout closed or full (rdmadoctor.cli.streams): one line, exit 2
            code = output_failed(e)
        code = code if isinstance(code, int) else 0
        if not standalone_mode:
            return code
        sys.exit(code)

    def invoke(self, ctx):
        code = None
        try:
            try:
                return super().invoke(ctx)
            except typer.Exit as e:
                code = e.exit_code  # kept if the flush below finds the reader gone
                raise
            finally:
                sys.stdout.flush()
        except BrokenPipeError:
            # typer would exit 1 here: the reader (`| head -1`) leaving is not a problem found;
            # the command's own exit code stands (`agent --once` whose publish failed: 2).
            pipe_closed()
            return 0 if code is None else code


app = typer.Typer(
    cls=RdmadoctorGroup,
    name="rdmadoctor",
    help=(
        "Is this GPU node, and the pod on it, ready to train over RDMA (InfiniBand / RoCE)?\n\n"
        "Start with `rdmadoctor check` (on a node, in a pod, or with --example on a laptop). "
        "Exit codes: 0 healthy, 1 a problem, 2 unknown or a usage error."
    ),
    no_args_is_help=False,  # `rdmadoctor` alone is a usage error: help and the error on stderr, exit 2
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

from rdmadoctor.cli import complete, options
from rdmadoctor.cli.options import BundleOpt, ExampleOpt, RootOpt


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rdmadoctor {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    pass


def _check(args: options.Args) -> int:
    from rdmadoctor.cli.check import check_command

    return check_command(args)


# Its options are rows of rdmadoctor.cli.options.OPTIONS, as the fast path reads them.
app.command("check", help="Run every check and print a health report (exit 0 healthy, 1 a problem, 2 unknown).")(
    options.command("check", _check)
)


@app.command()
def collect(
    output: str = typer.Option(..., "-o", "--output", metavar="FILE.tar.gz|-", help="Where to write the bundle; - streams it to stdout (kubectl exec NODE-POD -- rdmadoctor collect -o - > node.tar.gz)."),
    root: Optional[str] = RootOpt,
    timeout: Optional[float] = typer.Option(None, "--timeout", metavar="SECONDS", help="Kill a tool that runs longer than this (default 5)."),
    log: Optional[List[str]] = typer.Option(
        None, "--log", metavar="FILE",
        help="A job log to put in the bundle under logs/ (repeat for more; .gz is read; - is stdin); `check --bundle` "
        "diagnoses it. Of a log over 32 MiB the first 4 MiB (NCCL's init) and the last 28 MiB (where the job died) "
        "are kept; 128 MiB of logs at most in all.",
    ),
) -> None:
    """Write a bundle of everything the checks read here, for a ticket or for `check --bundle`."""
    from rdmadoctor.cli.collect import run_collect

    raise typer.Exit(run_collect(output=output, root=root, timeout=timeout, logs=list(log or [])))


@app.command()
def explain(
    name: str = typer.Argument(..., metavar="CODE|CHECK", autocompletion=complete.codes_and_checks, help="A finding code (IB_PORT_DOWN) or a check id (ib.ports)."),
) -> None:
    """Explain a finding code (its kind, what it means for a training job, how to fix it) or a check (what it establishes, its codes)."""
    from rdmadoctor.cli.info import run_explain

    raise typer.Exit(run_explain(name))


@app.command()
def schema() -> None:
    """Print the JSON Schema (draft 2020-12) of `check --json` reports."""
    from rdmadoctor.cli.info import run_schema

    raise typer.Exit(run_schema())


@app.command("list-checks")
def list_checks(
    as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON instead of a table: each one's id, title, description, scope, condition, whether preflight gates on it, and its codes with their kinds."),
) -> None:
    """List the checks, their codes, and where they come from."""
    from rdmadoctor.cli.info import run_list_checks

    raise typer.Exit(run_list_checks(as_json))


@app.command("list-patterns")
def list_patterns(
    as_json: bool = typer.Option(False, "--json", help="Print the patterns as JSON instead of text: each one's id, source, code, severity, regex, meaning, fix and reference."),
    code: Optional[str] = typer.Option(None, "--code", metavar="CODE", autocompletion=complete.pattern_codes, help="Only the patterns that give this code."),
) -> None:
    """List the log messages `rdmadoctor diagnose` recognises: pattern, code, source (NCCL, verbs, IB tools, PyTorch, kernel)."""
    from rdmadoctor.cli.info import run_list_patterns

    raise typer.Exit(run_list_patterns(as_json, code))


@app.command()
def examples(
    as_json: bool = typer.Option(False, "--json", help="Print the example names and their descriptions as one JSON object instead of text."),
) -> None:
    """List the example bundles shipped with rdmadoctor (use with `check --example NAME`)."""
    from rdmadoctor.cli.info import run_examples

    raise typer.Exit(run_examples(as_json))


@app.command()
def topo(
    root: Optional[str] = RootOpt,
    bundle: Optional[str] = BundleOpt,
    example: Optional[str] = ExampleOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the matrix as JSON instead of a table: the GPUs, the NICs, the relation of each GPU to each NIC (PIX, PXB, PHB, NODE, SYS), each GPU's NUMA node and where the topology was read."),
) -> None:
    """Print the GPU/NIC PCIe matrix like `nvidia-smi topo -m`, computed from sysfs."""
    from rdmadoctor.cli.info import run_topo

    raise typer.Exit(run_topo(root=root, bundle=bundle, example=example, as_json=as_json))


# The Kubernetes-side commands each live in one module that registers its own command(s):
# label (publish labels), agent (the DaemonSet loop), preflight (the pre-job gate), diagnose (logs).
def _register_more() -> None:
    from rdmadoctor.cli import agent, diagnose, fleet, label, preflight, run, slurm

    for mod in (label, agent, preflight, diagnose, run, fleet, slurm):
        mod.register(app)


_register_more()
