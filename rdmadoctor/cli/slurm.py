"""``rdmadoctor slurm``: the command group for Slurm nodes (docs/slurm.md). Each command lives in its
own module (cli/slurm_health.py, cli/slurm_prolog.py); this only wires them."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HELP = """Slurm: drain a broken node with a reason that names the problem, resume it when healthy, gate a job's nodes in the Prolog.

`slurm health` for HealthCheckProgram (or cron); `slurm prolog [--gang]` for Prolog with PrologFlags=Alloc. Every change goes through scontrol; rdmadoctor only ever resumes a node whose drain reason starts `rdmadoctor:`. docs/slurm.md has the slurm.conf lines.
"""


def register(app: Any) -> None:
    import typer

    from rdmadoctor.cli import slurm_health, slurm_prolog

    group = typer.Typer(name="slurm", help=HELP, no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})
    slurm_health.register(group)
    slurm_prolog.register(group)
    app.add_typer(group, name="slurm")
