"""Help texts and shell completion (issue 19, item 4): rich's markup eats an unescaped
`[pools.NAME]`, the command list cuts a long first paragraph mid-word, and completion offers the
names the registries know."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from rdmadoctor.cli.app import app

# A `[...]` as the reader should see it (no nesting, within one line).
BRACKETS = re.compile(r"\[[^\[\]\n]*\]")


def _commands() -> list[tuple[list[str], object]]:
    root = typer.main.get_command(app)
    return [([], root)] + [([name], cmd) for name, cmd in sorted(root.commands.items())]


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def _source_helps(cmd) -> list[str]:
    helps = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
    # Rich markup's escape is the source's way to write a bracket the reader sees.
    return [h.replace("\\[", "[") for h in helps if h]


def test_every_command_is_covered() -> None:
    names = {tuple(argv) for argv, _ in _commands()}
    assert {("check",), ("agent",), ("label",), ("preflight",), ("run",), ("list-patterns",), ()} <= names


@pytest.mark.parametrize(("argv", "cmd"), _commands(), ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_no_bracket_of_the_source_vanishes_from_help(argv: list[str], cmd) -> None:
    res = CliRunner().invoke(app, [*argv, "--help"], env={"COLUMNS": "4000"})
    assert res.exit_code == 0, res.output
    shown = _flat(res.stdout)
    helps = _source_helps(cmd)
    assert helps, argv
    for text in helps:
        # Each bracket with the words around it, so the same bracket shown elsewhere (an option's
        # help) does not hide one eaten here.
        for m in BRACKETS.finditer(text):
            around = _flat(text[max(0, m.start() - 20):m.end() + 20])
            around = around[around.find(" ") + 1:around.rfind(" ")] if around.count(" ") >= 2 else around
            assert around in shown, f"rdmadoctor {' '.join(argv)} --help lost {m.group(0)!r} ({around!r})"
        # And the help as a whole reads as written.
        assert _flat(text) in shown, f"rdmadoctor {' '.join(argv)} --help changed {text[:60]!r}..."


def test_agent_help_names_the_pool_table() -> None:
    res = CliRunner().invoke(app, ["agent", "--help"], env={"COLUMNS": "4000"})
    assert "--pool picks its [pools.NAME] table" in _flat(res.stdout)
    assert "picks its  table" not in res.stdout


@pytest.mark.parametrize("columns", ["80", "100", "200"])
def test_command_list_cuts_no_description(columns: str) -> None:
    """Each command's line in `rdmadoctor --help` is its first paragraph, whole: no ellipsis."""
    res = CliRunner().invoke(app, ["--help"], env={"COLUMNS": columns})
    assert res.exit_code == 0 and "…" not in res.stdout, res.stdout
    root = typer.main.get_command(app)
    shown = _flat(res.stdout)
    for name, cmd in root.commands.items():
        first = (cmd.short_help or cmd.help or "").split("\n\n")[0]
        assert _flat(first.replace("\\[", "[")) in shown, name
        assert len(first) <= 160, f"{name}: a command list entry is one or two lines, not {len(first)} characters"


# ---- counted nouns -------------------------------------------------------------------------------
def test_count_says_one_and_many() -> None:
    from rdmadoctor.core.words import count

    assert [count(n, "pattern") for n in (0, 1, 2)] == ["0 patterns", "1 pattern", "2 patterns"]
    assert count(1, "entry", "entries") == "1 entry" and count(3, "entry", "entries") == "3 entries"


def _strings(path) -> list[tuple[int, str]]:
    """The string literals of a module (f-strings' literal parts too), docstrings left out."""
    import ast

    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_no_message_says_word_s() -> None:
    """'problem(s)' and friends: every message counts with rdmadoctor.core.words.count instead."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = [f"{p.relative_to(root)}:{line}: {text!r}"
             for p in sorted([*(root / "rdmadoctor").rglob("*.py"), *(root / "checks").rglob("*.py")])
             for line, text in _strings(p) if re.search(r"[A-Za-z]\(s\)", text)]
    assert not found, "\n".join(found)


# ---- list-patterns: a table per source -----------------------------------------------------------
def _patterns() -> list[dict]:
    import json

    res = CliRunner().invoke(app, ["list-patterns", "--json"])
    return json.loads(res.stdout)["patterns"]


def test_list_patterns_is_a_table_per_source_with_a_source_column() -> None:
    from rdmadoctor.cli.info import SOURCE_TITLES
    from rdmadoctor.core.words import count
    from rdmadoctor.logs import kb

    rows = _patterns()
    res = CliRunner().invoke(app, ["list-patterns"])
    assert res.exit_code == 0 and res.stderr == ""
    lines = res.stdout.splitlines()
    titles = [ln for ln in lines if re.fullmatch(r"[A-Za-z][A-Za-z -]*: \d+ patterns?", ln)]
    want = [s for s in kb.SOURCES if any(r["source"] == s for r in rows)]
    assert titles == [f"{SOURCE_TITLES[s]}: {count(sum(r['source'] == s for r in rows), 'pattern')}" for s in want]
    for i, title in enumerate(titles):
        head = lines[lines.index(title) + 1].split()
        assert head == ["pattern", "code", "severity", "source"], head
    for r in rows:
        line = next(ln for ln in lines if ln.startswith(r["id"] + " "))
        assert r["code"] in line and line.endswith(r["ref"]), line
    assert lines[-1].startswith(f"{len(rows)} patterns. ")


def test_one_pattern_is_one_pattern() -> None:
    rows = _patterns()
    single = next(code for code in sorted({r["code"] for r in rows}) if sum(r["code"] == code for r in rows) == 1)
    res = CliRunner().invoke(app, ["list-patterns", "--code", single])
    assert res.exit_code == 0
    assert "1 pattern." in res.stdout and "1 patterns" not in res.stdout
    assert re.search(r"^[A-Za-z ]+: 1 pattern$", res.stdout, re.M)


def test_list_patterns_on_a_terminal_is_rich_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from rdmadoctor.output import text

    buf = io.StringIO()
    monkeypatch.setattr(text, "console", lambda *a, **k: Console(file=buf, force_terminal=True, width=160, color_system=None))
    code = _patterns()[0]["code"]
    res = CliRunner().invoke(app, ["list-patterns", "--code", code])
    assert res.exit_code == 0, res.output
    shown = buf.getvalue()
    assert "┃ pattern / code / severity" in shown and "source" in shown and "message (an example)" in shown
    mine = [r for r in _patterns() if r["code"] == code]
    assert mine and all(f"│ {r['id']} " in shown for r in mine)


# ---- shell completion ----------------------------------------------------------------------------
def _complete(line: str, shell: str = "bash") -> list[str]:
    """What the shell gets for the last word of `line`, through the env protocol the installed
    completion script uses (`rdmadoctor --install-completion`), run as the shell runs it."""
    import os
    import subprocess
    import sys

    words = line.split(" ")
    env = {**os.environ, "_RDMADOCTOR_COMPLETE": f"complete_{shell}", "COMP_WORDS": line,
           "COMP_CWORD": str(len(words) - 1), "_TYPER_COMPLETE_ARGS": line}
    proc = subprocess.run([sys.executable, "-c", "from rdmadoctor.cli import main; main()"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return proc.stdout.splitlines()


def test_completion_offers_profiles_examples_checks_and_codes() -> None:
    from rdmadoctor.cli.info import _all_codes, _load
    from rdmadoctor.engine.expectations import PROFILES
    from rdmadoctor.engine.registry import load_checks
    from rdmadoctor.examples import EXAMPLES
    from rdmadoctor.logs import kb

    checks, _ = _load()  # as explain and list-checks list them (plugins.load too)
    ids = [c.id for c in load_checks()[0]]  # what a run has, for --only/--skip
    assert _complete("rdmadoctor check --profile ") == list(PROFILES)
    assert _complete("rdmadoctor check --profile hgx") == [p for p in PROFILES if p.startswith("hgx")]
    assert _complete("rdmadoctor preflight --example ") == list(EXAMPLES)
    assert _complete("rdmadoctor topo --example b") == ["broken-pod"]
    only = _complete("rdmadoctor check --only ")
    assert set(ids) <= set(only) and {"ib", "limits"} <= set(only)
    # A comma-separated value: the last item completes, the ones before stay.
    assert _complete("rdmadoctor run --skip ib.ports,gpu.") == ["ib.ports,gpu.topology"]
    assert "ib.ports,ib.ports" not in _complete("rdmadoctor preflight --only ib.ports,ib")
    codes = sorted(_all_codes(checks))
    assert _complete("rdmadoctor explain IB_PORT_") == [c for c in codes if c.startswith("IB_PORT_")]
    assert _complete("rdmadoctor explain ib.po") == ["ib.ports"]
    assert _complete("rdmadoctor explain plugins.") == ["plugins.load"]
    with_patterns = sorted({p.code for p in kb.patterns()})
    assert _complete("rdmadoctor list-patterns --code ") == with_patterns


def test_completion_describes_each_name_where_the_shell_shows_it() -> None:
    from rdmadoctor.examples import EXAMPLES

    out = "\n".join(_complete("rdmadoctor check --example broken", shell="zsh"))
    assert '"broken-pod":' in out and EXAMPLES["broken-pod"].split(":")[0] in out
