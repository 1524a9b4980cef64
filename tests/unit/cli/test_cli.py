"""The command line: typer and the typer-free fast path agree; errors are clean."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import typer
from conftest import check_json, codes_of, run_cli

from rdmadoctor.cli import fast


def _typer_params(command: str) -> dict[str, str]:
    import typer.main

    from rdmadoctor.cli.app import app

    cmd = typer.main.get_command(app).commands[command]
    out = {}
    for p in cmd.params:
        for opt in p.opts:
            if opt.startswith("-"):
                out[opt] = p.name
    return out


@pytest.mark.parametrize("command", ["check", "preflight", "run"])
def test_fast_parser_knows_every_option_and_nothing_else(command):
    from rdmadoctor.cli import options

    typer_opts = _typer_params(command)
    typer_opts.pop("--help", None)
    typer_opts.pop("-h", None)
    assert {o: n for o, (n, _) in options.fast_table(command).items()} == typer_opts


def test_the_option_table_says_each_fact_once():
    from rdmadoctor.cli import complete, options

    by_flag: dict[str, tuple] = {}
    by_field: dict[str, str] = {}
    for row in options.OPTIONS:
        assert row.kind in options.KINDS and row.flag.startswith("--") and row.commands, row
        # One row per wording of a flag: the rows of one flag agree on all but the help text.
        same = (row.aliases, row.field, row.kind, row.default, row.metavar)
        assert by_flag.setdefault(row.flag, same) == same, row
        assert by_field.setdefault(row.field, row.flag) == row.flag, f"{row.field} is set by two flags"
        assert row.complete is None or callable(getattr(complete, row.complete)), row
    for command in {c for row in options.OPTIONS for c in row.commands}:
        flags = [flag for row in options.rows(command) for flag in (row.flag, *row.aliases)]
        assert len(flags) == len(set(flags)), f"{command} takes a flag twice"
    assert set(by_field) | {"command"} == set(vars(options.Args()))


def test_a_new_row_reaches_both_parsers_the_help_and_the_record(monkeypatch):
    """Adding an option is one row: the fast parser, typer (its help and parsing) and the record
    follow, for each command the row names and no other."""
    from typer.testing import CliRunner

    from rdmadoctor.cli import options

    row = options.Option("--settle", "settle", "float", "Wait SECONDS for the links first.", metavar="SECONDS",
                         commands=("check", "run"), aliases=("-W",))
    import rdmadoctor.options as table

    monkeypatch.setattr(table, "OPTIONS", table.OPTIONS + (row,))
    line = ["--example", "roce-node", "--settle", "2.5", "--only", "ib"]
    fast_args = fast.parse(line)
    assert fast_args is not None and fast_args.settle == 2.5 and fast_args.only == ["ib"]
    assert fast.parse(["--settle", "soon"]) is None  # typer explains a value that is not a number
    assert fast.parse(["--settle", "1"], "preflight") is None  # not a preflight option
    assert fast.parse(["--settle", "1", "--", "true"], "run", rest=True).settle == 1.0
    assert fast.parse(["-W", "3"]).settle == 3.0

    seen = []
    scratch = typer.Typer()
    scratch.command("check")(options.command("check", lambda args: seen.append(args) or 0))
    scratch.command("other")(lambda: None)
    res = CliRunner().invoke(scratch, ["check", *line])
    assert res.exit_code == 0, res.output
    assert seen == [fast_args]
    res = CliRunner().invoke(scratch, ["check", "--help"], env={"COLUMNS": "200"})
    assert "--settle" in res.stdout and "Wait SECONDS for the links first." in res.stdout
    res = CliRunner().invoke(scratch, ["check", "-W", "3"])
    assert res.exit_code == 0 and seen[-1].settle == 3.0
    res = CliRunner().invoke(scratch, ["check", "--settle", "soon"])
    assert res.exit_code == 2 and "'soon' is not a valid float" in res.output


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--only", "ib"],
        ["--only=ib.devices", "--strict"],
        ["--skip", "ib.ports", "--skip", "ib.devices"],
        ["--set", "min_rate_gbps=100", "--profile", "generic"],
        ["--timeout", "2.5"],
    ],
)
def test_fast_path_and_typer_give_the_same_report(args, monkeypatch, tmp_path):
    (tmp_path / "sys/class/net").mkdir(parents=True)
    base = ["--root", str(tmp_path), "--json"]
    assert fast.parse(base + args) is not None
    code_fast, out_fast, err_fast = run_cli(["check", *base, *args])
    # Force typer: an option spelling the fast parser does not take (-h is typer-only) is not
    # usable here, so call the typer app directly.
    from typer.testing import CliRunner

    from rdmadoctor.cli.app import app

    res = CliRunner().invoke(app, ["check", *base, *args])
    assert res.exit_code == code_fast, res.output
    a, b = json.loads(out_fast), json.loads(res.stdout)
    assert [(c["id"], c["status"]) for c in a["checks"]] == [(c["id"], c["status"]) for c in b["checks"]]
    assert err_fast == ""


@pytest.mark.parametrize("args", [["--bogus"], ["--root"], ["-h"], ["--json=yes"], ["--timeout", "soon"]])
def test_fast_parser_hands_odd_lines_to_typer(args):
    assert fast.parse(args) is None


def test_usage_errors_exit_2_with_a_message(tmp_path):
    code, out, err = run_cli(["check", "--root", str(tmp_path / "nope")])
    assert code == 2 and out == "" and "is not a directory" in err
    code, out, err = run_cli(["check", "--only", "no.such", "--root", str(tmp_path)])
    assert code == 2 and "no check matches 'no.such'" in err and "list-checks" in err
    code, out, err = run_cli(["check", "--profile", "nope", "--root", str(tmp_path)])
    assert code == 2 and "unknown profile" in err
    code, out, err = run_cli(["check", "--example", "nope"])
    assert code == 2 and "no example named" in err
    code, out, err = run_cli(["check", "--root", str(tmp_path), "--bundle", str(tmp_path)])
    assert code == 2 and "exclusive" in err
    code, out, err = run_cli(["check", "--timeout", "0", "--root", str(tmp_path)])
    assert code == 2 and "--timeout" in err


def test_unknown_option_goes_through_typer_and_exits_2():
    proc = subprocess.run([sys.executable, "-m", "rdmadoctor", "check", "--bogus"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--bogus" in proc.stderr and proc.stdout == ""


def test_help_explains():
    proc = subprocess.run([sys.executable, "-m", "rdmadoctor", "check", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    for word in ("--root", "--bundle", "--example", "--json", "--profile", "--only", "Exit", "unknown"):
        assert word in proc.stdout


def test_explain_and_list_checks():
    code, out, err = run_cli(["explain", "ib_port_down"])
    assert code == 0 and "IB_PORT_DOWN" in out and "How to fix it" in out
    code, out, err = run_cli(["explain", "IB_PORT"])
    assert code == 2 and "did you mean" in err
    code, out, err = run_cli(["list-checks", "--json"])
    data = json.loads(out)
    assert code == 0 and {"ib.devices", "ib.ports"} <= {c["id"] for c in data["checks"]}
    code, out, err = run_cli(["examples"])
    assert code == 0 and "broken-pod" in out


def test_empty_root_is_a_clear_no_devices_report(tmp_path):
    (tmp_path / "sys").mkdir()
    code, rep = check_json(["--root", str(tmp_path), "--only", "ib"])
    assert code == 1 and rep["status"] == "fail"
    (devices,) = [c for c in rep["checks"] if c["id"] == "ib.devices"]
    assert devices["findings"][0]["code"] == "IB_NO_DEVICES"
    assert rep["inventory"]["rdma_devices"] == []


def test_bundle_without_any_source_is_unknown(tmp_path):
    code, rep = check_json(["--bundle", str(tmp_path), "--only", "ib"])
    assert code == 2 and rep["status"] == "unknown"


def test_scope_node_skips_the_checks_of_the_running_process():
    """--scope node (what the agent and `label` use) judges the machine: the pod-scope checks
    are skipped with the reason, the node's own problem still fails, and the labels agree."""
    code_all, rep_all = check_json(["--example", "broken-pod"])
    code_node, rep_node = check_json(["--example", "broken-pod", "--scope", "node"])
    pod_scope = {"limits.memlock", "shm.size", "verbs.userspace", "nccl.env"}
    by_id = {c["id"]: c for c in rep_node["checks"]}
    assert {i for i in pod_scope if by_id[i]["status"] == "skip" and "preflight" in by_id[i]["reason"]} == pod_scope
    assert codes_of(rep_all) >= {"MEMLOCK_LIMITED", "SHM_TOO_SMALL", "IB_PORT_DOWN"}
    assert "IB_PORT_DOWN" in codes_of(rep_node) and not codes_of(rep_node) & {"MEMLOCK_LIMITED", "SHM_TOO_SMALL", "CAP_IPC_LOCK_MISSING"}
    assert code_all == code_node == 1 and rep_node["scope"] == "node" and rep_all["scope"] == "all"
    # The healthy node stays healthy either way; a bad scope is a usage error.
    assert check_json(["--example", "roce-node", "--scope", "node"])[0] == 0
    code, _, err = run_cli(["check", "--example", "roce-node", "--scope", "pod"])
    assert code == 2 and "--scope must be one of all, node" in err


# ---- one voice: the parser's errors speak like rdmadoctor's own -----------------------------

PARSE_ERRORS = [
    (["check", "--jsno"], "no such option: --jsno", "did you mean --json? see `rdmadoctor check --help`"),
    (["check", "--skp", "ib"], "no such option: --skp", "did you mean --skip? see `rdmadoctor check --help`"),
    (["check", "-x"], "no such option: -x", "see `rdmadoctor check --help`"),
    (["check", "--root"], "option '--root' requires an argument", "see `rdmadoctor check --help`"),
    (["check", "--json=yes"], "option '--json' does not take a value", "see `rdmadoctor check --help`"),
    (["check", "--timeout", "soon"], "invalid value for '--timeout'", "see `rdmadoctor check --help`"),
    (["check", "extra"], "got unexpected extra argument", "see `rdmadoctor check --help`"),
    (["chek"], "no such command 'chek'", "did you mean `rdmadoctor check`? see `rdmadoctor --help`"),
    (["explain"], "missing argument 'CODE|CHECK'", "see `rdmadoctor explain --help`"),
    (["list-checks", "--jsn"], "no such option: --jsn", "did you mean --json? see `rdmadoctor list-checks --help`"),
    (["--bogus"], "no such option: --bogus", "see `rdmadoctor --help`"),
    ([], "no command given", "start with `rdmadoctor check`"),
]


@pytest.mark.parametrize("args,message,hint", PARSE_ERRORS, ids=lambda a: " ".join(a) if isinstance(a, list) else None)
def test_parse_errors_speak_in_one_voice(args, message, hint):
    proc = subprocess.run([sys.executable, "-m", "rdmadoctor", *args], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    error = [ln for ln in proc.stderr.splitlines() if ln.startswith("rdmadoctor: error: ")]
    assert len(error) == 1 and error[0].startswith(f"rdmadoctor: error: {message}"), proc.stderr
    assert proc.stderr.splitlines()[-1] == f"  hint: {hint}" or f"  hint: {hint}" in proc.stderr.splitlines()[-1]
    assert "Possible options" not in proc.stderr and "Traceback" not in proc.stderr
    assert args == [] or "╭" not in proc.stderr  # `rdmadoctor` alone shows the (boxed) help first


def test_a_misspelled_option_suggests_only_real_options_of_that_command():
    real = set(_typer_params("check"))
    for typo in ("--jsno", "--skp", "--scpe", "--exmaple", "--strct", "--verbos", "--prfile", "--zzzz"):
        code, out, err = run_cli(["check", typo])
        assert code == 2 and out == ""
        suggested = set(re.findall(r"--[a-z-]+", err.split("hint:")[1])) - {"--help"}
        assert suggested <= real, (typo, err)
        assert len(suggested) <= 1 if typo != "--zzzz" else not suggested


@pytest.mark.parametrize(
    "args",
    [
        ["--jsno"], ["--root"], ["--json=yes"], ["--timeout", "soon"], ["extra"], ["--timeout", "0"],
        ["--scope", "pod", "--example", "roce-node"], ["--only", "no.such", "--example", "roce-node"],
        ["--example", "nope"], ["--example", "roce-node", "--set", "nosuchkey=1"],
    ],
)
def test_fast_path_and_typer_give_the_same_result_for_the_same_line(args):
    """The console entry point (fast path first) and the typer app, line for line."""
    from typer.testing import CliRunner

    from rdmadoctor.cli.app import app

    code, out, err = run_cli(["check", *args])
    res = CliRunner().invoke(app, ["check", *args])
    assert (res.exit_code, res.stdout, res.stderr) == (code, out, err)
    assert code == 2 and err.startswith("rdmadoctor: error: ") and "\n  hint: " in err


# ---- exit codes: NPD's contract, whatever reads stdout -----------------------------------------


@pytest.mark.parametrize(
    "args,expected",
    [
        (["check", "--example", "hgx-h100-ib"], 0),
        (["check", "--example", "hgx-h100-ib", "--json"], 0),
        (["check", "--example", "broken-pod", "--verbose"], 1),
        (["list-checks"], 0),
        (["explain", "MEMLOCK_LIMITED"], 0),
    ],
)
def test_a_closed_pipe_keeps_the_exit_code(args, expected):
    cmd = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "rdmadoctor", *args])
    # A real shell pipeline: `| head -1` reads one line and leaves; `| true` never reads.
    script = f"{cmd} | head -1 >/dev/null; a=${{PIPESTATUS[0]}}; {cmd} | true; echo $a ${{PIPESTATUS[0]}}"
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert proc.stdout.split() == [str(expected), str(expected)], proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr
    # And with the reader gone before the first byte (no race with the reader's exit).
    r, w = os.pipe()
    os.close(r)
    p = subprocess.run([sys.executable, "-m", "rdmadoctor", *args], stdout=w, stderr=subprocess.PIPE, text=True)
    os.close(w)
    assert p.returncode == expected and "Traceback" not in p.stderr, p.stderr


# ---- explain and list-checks: codes are a contract with a kind -------------------------------


def test_explain_a_check_id_lists_its_codes_with_their_kinds():
    from rdmadoctor.engine.registry import load_checks

    ports = {c.id: c for c in load_checks()[0]}["ib.ports"]
    code, out, err = run_cli(["explain", "ib.ports"])
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"ib.ports: {ports.title}"
    assert ports.description in out and "condition: link" in out and "preflight gates on it: yes" in out
    words = {"problem": "problem", "unknown": "could not decide", "info": "information"}
    for c in ports.codes:
        (line,) = [ln for ln in lines if ln.strip().startswith(c.code + " ")]
        assert f"{words[c.kind]}: {c.title}" in line
    assert run_cli(["explain", "IB.PORTS"])[0] == 0


def test_explain_a_code_says_its_kind_and_that_codes_are_a_contract():
    from rdmadoctor.engine.registry import load_checks

    words = {"problem": "problem", "unknown": "could not decide", "info": "information"}
    seen = {}
    for chk in load_checks()[0]:
        for c in chk.codes:
            seen.setdefault(c.kind, (c, chk.id))
    assert "problem" in seen
    for kind, (c, check_id) in seen.items():
        code, out, err = run_cli(["explain", c.code.lower()])
        assert code == 0 and err == ""
        assert out.splitlines()[1].startswith(f"kind: {words[kind]} (")
        assert f"raised by check {check_id}" in out and "stable contract" in out
    code, out, err = run_cli(["explain", "ib.prts"])
    assert code == 2 and "no code or check named 'ib.prts'" in err and "did you mean ib.ports?" in err


def test_list_checks_json_gives_each_codes_kind_and_each_checks_condition_gate_scope():
    from rdmadoctor.core.model import CONDITIONS, KINDS
    from rdmadoctor.engine.registry import load_checks

    code, out, err = run_cli(["list-checks", "--json"])
    data = json.loads(out)
    by_id = {c.id: c for c in load_checks(listing=True)[0]}
    assert code == 0 and {c["id"] for c in data["checks"]} == set(by_id)
    for row in data["checks"]:
        chk = by_id[row["id"]]
        assert (row["scope"], row["condition"], row["gate"]) == (chk.scope, chk.condition, chk.gate)
        assert row["scope"] in ("node", "pod") and row["condition"] in (*CONDITIONS, None)
        assert [(k["code"], k["kind"]) for k in row["codes"]] == [(c.code, c.kind) for c in chk.codes]
        assert all(k["kind"] in KINDS for k in row["codes"])
    assert "stable" in data["contract"]


# ---- completion and cold start ---------------------------------------------------------------


def test_shell_completion_is_on_and_answered_by_typer():
    env = dict(os.environ, _RDMADOCTOR_COMPLETE="complete_bash", COMP_WORDS="rdmadoctor check --exa", COMP_CWORD="2")
    proc = subprocess.run([sys.executable, "-m", "rdmadoctor", "check"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and proc.stdout.split() == ["--example"]
    proc = subprocess.run([sys.executable, "-m", "rdmadoctor", "--help"], capture_output=True, text=True)
    assert "--install-completion" in proc.stdout and "--show-completion" in proc.stdout


def test_the_check_fast_path_imports_no_parser_no_schema_lib_and_no_rich_into_a_pipe():
    code = (
        "import sys\n"
        "from rdmadoctor.cli import main\n"
        "try:\n    main(['check', '--example', 'broken-pod'])\n"
        "except SystemExit as e:\n    rc = e.code\n"
        "heavy = ('typer', 'click', 'jsonschema', 'rich', 'prometheus_client', 'difflib', 'typing', 'dataclasses')\n"
        "sys.stderr.write(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stdout.startswith("FAIL: ")
    assert proc.stderr == ""


def test_check_without_logs_imports_no_log_reader_and_no_knowledge_base():
    # logs.diagnose lists the kb's codes only when they are read (LazyCodes): a `check` that skips
    # it (no logs given) loads no rdmadoctor.logs module at all.
    code = (
        "import sys, io, contextlib\n"
        "from rdmadoctor.cli import main\n"
        "for ex in ('roce-node', 'broken-pod'):\n"
        "    try:\n        with contextlib.redirect_stdout(io.StringIO()):\n            main(['check', '--example', ex])\n"
        "    except SystemExit:\n        pass\n"
        "sys.stderr.write(' '.join(sorted(m for m in sys.modules if m.startswith('rdmadoctor.logs'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_the_run_fast_path_imports_no_parser_and_no_rich():
    # `rdmadoctor run -- ...` prefixes every rank's command (mpirun ... rdmadoctor run -- python
    # train.py): like check and preflight, a plain line is parsed without typer, click or rich.
    code = (
        "import sys\n"
        "from rdmadoctor.cli import main\n"
        "try:\n    main(['run', '--example', 'broken-pod', '--no-gate', '--timeout', '3', '--', sys.executable, '-c', 'raise SystemExit(3)'])\n"
        "except SystemExit as e:\n    rc = e.code\n"
        "heavy = ('typer', 'click', 'jsonschema', 'rich', 'prometheus_client', 'pyroute2', 'lightkube')\n"
        "sys.stderr.write('HEAVY: ' + ' '.join(sorted(m for m in sys.modules if m.split('.')[0] in heavy)) + '\\n')\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert "exited with status 3" in proc.stderr and "HEAVY: \n" in proc.stderr, proc.stderr
    # A bad number is refused with --no-gate too (it was taken silently: the gate that reads it did not run).
    proc = subprocess.run([sys.executable, "-m", "rdmadoctor", "run", "--no-gate", "--timeout", "-1", "--", "true"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--timeout must be positive, got -1" in proc.stderr, proc.stderr


def test_a_command_typer_parses_imports_no_pydantic(tmp_path):
    # typer 0.29 builds a pydantic TypeAdapter for every parameter: 140 ms on every command it
    # parses (pyproject.toml keeps typer below it). `diagnose` is one of those commands.
    log = tmp_path / "job.log"
    log.write_text("host1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\nhost1:1:1 [0] NCCL INFO Using network Socket\n"
                   "host1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n")
    code = (
        "import sys\n"
        "from rdmadoctor.cli import main\n"
        f"try:\n    main(['diagnose', {str(log)!r}])\n"
        "except SystemExit as e:\n    rc = e.code\n"
        "sys.stderr.write('TYPER: ' + str('typer' in sys.modules) + '\\n')\n"
        "sys.stderr.write('HEAVY: ' + ' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core'))) + '\\n')\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "NCCL_SOCKET_FALLBACK" in proc.stdout, (proc.stdout, proc.stderr)
    assert "TYPER: True\n" in proc.stderr and "HEAVY: \n" in proc.stderr, proc.stderr


# ---- help texts say what the option does there --------------------------------------------------


def test_json_help_of_the_listing_commands_says_what_they_print():
    from typer.testing import CliRunner

    from rdmadoctor.cli.app import app

    for cmd in ("examples", "list-checks", "list-patterns", "topo"):
        res = CliRunner().invoke(app, [cmd, "--help"], env={"COLUMNS": "400"})
        assert res.exit_code == 0
        line = next(ln for ln in res.stdout.splitlines() if "--json" in ln)
        assert "report" not in line and "rdmadoctor.report/v1" not in line, (cmd, line)


def test_profile_help_lists_every_profile():
    from typer.testing import CliRunner

    from rdmadoctor.cli.app import app
    from rdmadoctor.engine.expectations import PROFILES

    res = CliRunner().invoke(app, ["check", "--help"], env={"COLUMNS": "400"})
    line = next(ln for ln in res.stdout.splitlines() if "--profile" in ln)
    assert all(name in line for name in PROFILES) and {"tcp", "iwarp"} <= set(PROFILES), line


@pytest.mark.parametrize("name,says", [
    ("ib", "ib is a family of checks: ib.devices, ib.ports"),
    ("logs", "logs is a family of checks: logs.diagnose"),
    ("memlock", "did you mean limits.memlock"),
])
def test_explain_of_a_family_or_word_suggests_the_checks(name, says):
    code, out, err = run_cli(["explain", name])
    assert code == 2 and out == "" and says in err, err
