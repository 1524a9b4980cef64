"""Issue 10, item 13: the numbers people type. Every number option is finite, in its range, or a
usage error in the one error style (``rdmadoctor: error: ...``, a hint, exit 2), before anything
runs or is written: no traceback, no wait that never ends, no busy loop.

Each line goes through the console entry point in-process (``conftest.run_cli``), so the typer-free
fast paths of ``check`` and ``preflight`` are the ones exercised when they take the line, and
typer's command bodies otherwise (``label``, ``agent``).
"""

from __future__ import annotations

import pytest
from conftest import run_cli

BAD = ["nan", "inf", "-inf", "1e400", "-1"]


def _assert_usage_error(code: int, out: str, err: str, option: str) -> None:
    lines = err.splitlines()
    assert code == 2, err
    assert "Traceback" not in err, err
    errors = [ln for ln in lines if ln.startswith("rdmadoctor: error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"rdmadoctor: error: {option} "), err
    assert any(ln.startswith("  hint: ") for ln in lines), err
    assert out == "", out


@pytest.mark.parametrize("value", BAD + ["0", "1e20", "3601"])
def test_check_timeout_is_finite_positive_and_bounded(value, tmp_path):
    # `check --root DIR --timeout X` is a line the fast path (cli/options.py) parses without typer.
    code, out, err = run_cli(["check", "--root", str(tmp_path), "--timeout", value])
    _assert_usage_error(code, out, err, "--timeout")


@pytest.mark.parametrize("value", BAD + ["0", "1e20"])
def test_label_expiry_is_finite_positive_and_bounded(value, tmp_path):
    features = tmp_path / "features.d"
    features.mkdir()
    code, out, err = run_cli(["label", "--example", "roce-node", "--publish", "nfd", "--features-dir", str(features), "--expiry", value])
    _assert_usage_error(code, out, err, "--expiry")
    assert list(features.iterdir()) == []  # nothing was written


@pytest.mark.parametrize(
    "args, option",
    [
        (["--interval", "inf"], "--interval"),
        (["--interval", "nan"], "--interval"),
        (["--interval", "1e-300"], "--interval"),  # a busy loop: a cycle right after the other
        (["--interval", "1e20"], "--interval"),
        (["--interval", "0"], "--interval"),
        (["--expiry", "100000000000000000000"], "--expiry"),
        (["--expiry", "0"], "--expiry"),
        (["--metrics-port", "70000"], "--metrics-port"),
        (["--metrics-port", "-1"], "--metrics-port"),
    ],
)
def test_agent_numbers_are_checked_before_the_first_cycle(args, option, tmp_path):
    features = tmp_path / "features.d"
    features.mkdir()
    line = ["agent", "--once", "--example", "roce-node", "--publish", "nfd", "--features-dir", str(features), "--metrics-port", "0", *args]
    code, out, err = run_cli(line)
    _assert_usage_error(code, out, err, option)
    assert list(features.iterdir()) == []  # no cycle ran: nothing was published


def test_agent_interval_zero_keeps_its_words(tmp_path):
    """The message tests/unit/agent/test_agent.py and people already know stays."""
    code, out, err = run_cli(["agent", "--once", "--example", "roce-node", "--publish", "stdout", "--metrics-port", "0", "--interval", "0"])
    assert code == 2 and "--interval must be positive" in err


@pytest.mark.parametrize(
    "args, option",
    [
        (["--timeout", "inf"], "--timeout"),
        (["--timeout", "nan"], "--timeout"),
        (["--master-timeout", "inf"], "--master-timeout"),
        (["--master-timeout", "1e400"], "--master-timeout"),
        (["--master-timeout", "nan"], "--master-timeout"),
        (["--master-timeout", "1e20"], "--master-timeout"),
        (["--min-rate", "inf"], "--min-rate"),
        (["--min-rate", "nan"], "--min-rate"),
        (["--min-rate", "-5"], "--min-rate"),
    ],
)
def test_preflight_numbers(args, option, monkeypatch):
    # Rank 0 on a closed port: with an unbounded wait this would never end.
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")
    monkeypatch.delenv("RANK", raising=False)
    # A short --master-timeout first (the flag given later wins): a check that let a bad value
    # through fails in seconds, not after the default 300 s.
    code, out, err = run_cli(["preflight", "--example", "hgx-h100-ib", "--wait-for-master", "--master-timeout", "2", "--json", *args])
    _assert_usage_error(code, out, err, option)


@pytest.mark.parametrize("value", ["1e20", "inf"])
def test_preflight_fast_path_and_typer_agree(value, monkeypatch):
    """`--exec` with a stray word sends the line to typer; the fast path takes the other: same error."""
    from typer.testing import CliRunner

    from rdmadoctor.cli.app import app

    args = ["preflight", "--example", "hgx-h100-ib", "--master-timeout", value]
    code, out, err = run_cli(args)
    res = CliRunner().invoke(app, args)
    assert (res.exit_code, res.stdout, res.stderr) == (code, out, err)
    _assert_usage_error(code, out, err, "--master-timeout")


def test_check_number_contract(capsys):
    """The shared helper: None for a good value, else the error printed and exit code 2."""
    from rdmadoctor.cli.errors import check_number

    assert check_number("--x", 5.0, low=0, high=10) is None
    assert check_number("--x", 10, low=0, high=10) is None
    assert check_number("--x", None, low=0, high=10) is None  # not given: the default applies
    assert check_number("--x", 0, low=0, high=10, low_open=False) is None
    for bad in (0, -1, float("nan"), float("inf"), float("-inf"), 10.5, 10**5000, -(10**5000), True):
        assert check_number("--x", bad, low=0, high=10, hint="h") == 2, bad
        err = capsys.readouterr().err
        assert err.startswith("rdmadoctor: error: --x ") and err.endswith("  hint: h\n") and err.count("\n") == 2, err
