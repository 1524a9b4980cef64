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


def _source_helps(cmd) -> list[str]:  # noqa: ANN001
    helps = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
    # Rich markup's escape is the source's way to write a bracket the reader sees.
    return [h.replace("\\[", "[") for h in helps if h]


def test_every_command_is_covered() -> None:
    names = {tuple(argv) for argv, _ in _commands()}
    assert {("check",), ("agent",), ("label",), ("preflight",), ("run",), ("list-patterns",), ()} <= names


@pytest.mark.parametrize(("argv", "cmd"), _commands(), ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_no_bracket_of_the_source_vanishes_from_help(argv: list[str], cmd) -> None:  # noqa: ANN001
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
