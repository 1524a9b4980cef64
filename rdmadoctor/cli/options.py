"""One definition per shared option, reused by every command that takes it (typer only)."""

from __future__ import annotations

import typer

from rdmadoctor.cli import complete

RootOpt = typer.Option(None, "--root", metavar="DIR", help="Read the host mounted at DIR (DIR/sys, DIR/proc, DIR/etc, ...). Default: /. The DaemonSet mounts the node at /host.")
BundleOpt = typer.Option(None, "--bundle", metavar="DIR|FILE.tar.gz", help="Analyse a bundle made by `rdmadoctor collect` (or a folder with cmd/ibstat.txt and other pasted outputs).")
ExampleOpt = typer.Option(None, "--example", metavar="NAME", autocompletion=complete.examples, help="Analyse a bundle shipped with rdmadoctor; `rdmadoctor examples` lists them.")
JsonOpt = typer.Option(False, "--json", help="Print the report as JSON instead of text (schema rdmadoctor.report/v1; `rdmadoctor schema` prints its JSON Schema).")


def _profile_help() -> str:
    # From the profiles themselves, so the help lists what --profile takes (~0.3 ms to import).
    from rdmadoctor.engine.expectations import PROFILES

    return f"Expectations to judge against: {', '.join(PROFILES)} (default generic)."


ProfileOpt = typer.Option("generic", "--profile", autocompletion=complete.profiles, help=_profile_help())
ConfigOpt = typer.Option(None, "--config", metavar="FILE", help="TOML or JSON file overriding expectations (per node pool with \\[pools.NAME]).")
PoolOpt = typer.Option(None, "--pool", metavar="NAME", help="Use the \\[pools.NAME] table of --config.")
