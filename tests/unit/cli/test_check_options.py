"""The check options (what to read, what to expect, which checks) are declared once, in the option
table (rdmadoctor/options.py), and `agent`, `label`, `slurm health` and `slurm prolog` take them
from it (rdmadoctor.cli.options.with_rows): each lists the shared set in its --help, each hands
what was given to the checks, and a row added for them reaches all four with nothing else to edit."""

from __future__ import annotations

import re

import pytest
import typer
from conftest import run_cli
from typer.testing import CliRunner

from rdmadoctor.cli import options

# What every command that runs the checks takes, as `check` takes it.
SHARED = ["--root", "--bundle", "--example", "--profile", "--config", "--pool", "--set", "--only", "--skip", "--timeout"]
NODE_COMMANDS = [c.split() for c in options.NODE]


def _help(argv: list[str]) -> str:
    from rdmadoctor.cli.app import app

    res = CliRunner().invoke(app, [*argv, "--help"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    return res.stdout


def _flags(text: str) -> list[str]:
    # An option's own line starts its box row with the flag; its help's lines are indented.
    return [m.group(1) for m in re.finditer(r"^│ (--[\w-]+)", text, re.M)]


@pytest.mark.parametrize("argv", NODE_COMMANDS, ids=" ".join)
def test_each_command_lists_the_shared_check_options(argv):
    flags = _flags(_help(argv))
    assert flags[: len(SHARED)] == SHARED, (argv, flags)  # first, in the table's order
    assert [f for f in flags if f in SHARED] == SHARED  # and once
    for row in options.rows(" ".join(argv)):  # with the table's words
        text = row.help if isinstance(row.help, str) else row.help()
        assert text.split(".")[0].replace("\\[", "[") in " ".join(_help(argv).replace("│", " ").split()), row


@pytest.fixture
def seen(monkeypatch):
    """The checks' options of each run, as rdmadoctor.runner.diagnose receives them; the run then
    stops with a usage error (every command says it and changes nothing)."""
    import rdmadoctor.runner as runner

    got: list = []

    def spy(opts, host=None):
        got.append(opts)
        raise runner.UsageError("stopped by the test after the options were seen")

    import rdmadoctor.agent as agent

    monkeypatch.setattr(runner, "diagnose", spy)
    # The agent's loop binds diagnose when it is defined: its options are taken where it gets them.
    monkeypatch.setattr(agent, "run_agent", lambda opts, **kw: spy(opts))
    return got


@pytest.mark.parametrize("argv", NODE_COMMANDS, ids=" ".join)
def test_a_set_and_the_selection_reach_the_checks(argv, seen, tmp_path):
    own = _own(argv, tmp_path)
    line = [*argv, "--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr", "--set", "min_rate_gbps=123",
            "--only", "ib", "--skip", "ib.ports", "--timeout", "7", *own]
    code, out, err = run_cli(line)
    assert len(seen) == 1, (code, out, err)
    opts = seen[0]
    assert "stopped by the test" in err and code == 2, (code, err)
    assert opts.example == "hgx-h100-ib" and opts.profile == "hgx-8gpu-ndr" and opts.timeout == 7.0
    assert "min_rate_gbps=123" in opts.sets and opts.scope == "node"
    assert opts.skip == ["ib.ports"]
    # The gate (the Prolog's) resolves --only to the gating checks it names; the others pass it on.
    assert opts.only == ["ib"] or (opts.only and all(c.startswith("ib.") for c in opts.only)), opts.only


def _own(argv: list[str], tmp_path) -> list[str]:
    """What each command needs besides the check options to get as far as the checks."""
    return {"agent": ["--publish", "stdout", "--once", "--metrics-port", "0"], "label": ["--publish", "stdout"],
            "slurm health": ["--scontrol", "/bin/true", "--dry-run", "--state-dir", str(tmp_path)],
            "slurm prolog": ["--scontrol", "/bin/true", "--dry-run"]}[" ".join(argv)]


def test_a_new_check_option_reaches_every_command(monkeypatch, seen, tmp_path):
    """A row naming CHECKS is in each node command's --help and arrives in its record (the
    Prolog's: its gate's Request), with nothing to edit in the commands themselves."""
    import rdmadoctor.options as table
    import rdmadoctor.runner as runner
    from rdmadoctor.cli import agent, label, slurm_health, slurm_prolog

    row = table.Option("--settle", "settle", "float", "Wait SECONDS for the links first.", metavar="SECONDS",
                       commands=table.CHECKS)
    monkeypatch.setattr(table, "OPTIONS", table.OPTIONS + (row,))
    records: list = []
    # One function turns every command's record into the checks' options (the Prolog's through its
    # gate, with the gate's Request): the record each hands it is the one its line was parsed into.
    real = runner.options_of
    monkeypatch.setattr(runner, "options_of", lambda record, scope="all", **kw: records.append(record) or real(record, scope, **kw))
    scratch, group = typer.Typer(), typer.Typer()
    agent.register(scratch)
    label.register(scratch)
    slurm_health.register(group)
    slurm_prolog.register(group)
    scratch.add_typer(group, name="slurm")
    for argv in NODE_COMMANDS:
        res = CliRunner().invoke(scratch, [*argv, "--help"], env={"COLUMNS": "300"})
        assert "--settle" in res.stdout and "Wait SECONDS for the links first." in res.stdout, argv
        res = CliRunner().invoke(scratch, [*argv, "--settle", "2.5", "--example", "hgx-h100-ib", *_own(argv, tmp_path)])
        assert "stopped by the test" in res.output, (argv, res.output)
        assert records and records[-1].settle == 2.5, argv
        records.clear()


def test_one_function_hands_every_field_the_record_shares_with_the_checks_options():
    """rdmadoctor.runner.options_of is the one place a record becomes the checks' options (check,
    the node commands, the gate): each field Options and the option table share arrives as given."""
    from rdmadoctor.core.record import fields
    from rdmadoctor.options import Args
    from rdmadoctor.runner import Options, options_of

    shared = sorted(set(fields(Options)) & set(vars(Args())) - {"scope"})  # scope: the command's, an argument
    assert {"root", "example", "sets", "only", "skip", "timeout", "strict"} <= set(shared)
    given = {}
    for name in shared:
        default = getattr(Args(), name)
        given[name] = [f"x-{name}"] if isinstance(default, list) else True if isinstance(default, bool) else (
            7.5 if name in ("timeout", "sample") else f"x-{name}")
    opts = options_of(Args(**given), "node")
    assert {name: getattr(opts, name) for name in shared} == given and opts.scope == "node"
    # The gate's own: its flags' expectations after the user's --set, --only resolved.
    gated = options_of(Args(**given), "all", sets=["a=1"], only=["ib.ports"])
    assert gated.sets == ["a=1"] and gated.only == ["ib.ports"] and gated.root == "x-root"
