"""Shared test helpers. Third-party check plugins never load in tests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ["RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD"] = "1"

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
# ../shared/realworld beside the project root; absent in a user's fresh clone.
REALWORLD = ROOT.parent / "shared" / "realworld"


@pytest.fixture
def realworld() -> Path:
    if not REALWORLD.is_dir():
        pytest.skip("../shared/realworld is absent")
    return REALWORLD


def sample_text(path: Path) -> str:
    """A realworld sample without its header (everything up to and including '# ---')."""
    text = path.read_text(encoding="utf-8", errors="replace")
    head, sep, body = text.partition("\n# ---\n")
    return body if sep else text


def run_cli(args: list[str]) -> tuple[int, str, str]:
    """Run the console entry point in-process (fast path and typer alike); (code, stdout, stderr)."""
    import contextlib
    import io

    from rdmadoctor.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    return code, out.getvalue(), err.getvalue()


def check_json(args: list[str]) -> tuple[int, dict]:
    code, out, err = run_cli(["check", "--json", *args])
    assert err == "", err
    return code, json.loads(out)


def codes_of(report: dict, check_id: str | None = None) -> set[str]:
    return {
        f["code"]
        for c in report["checks"]
        if check_id is None or c["id"] == check_id
        for f in c["findings"]
        if f["severity"] in ("error", "warning", "unknown")
    }
