"""Text output: a pasted fix runs whether read through a pipe or on a terminal; causes fold."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys

import pytest

from rdmadoctor.output.text import render_report, summary_line

PRINTF = "printf '[Service]\\nLimitMEMLOCK=infinity\\n' > /etc/systemd/system/containerd.service.d/memlock.conf"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE")}
    env.update(more)
    return env


def _through_pty(args: list[str], columns: int = 80) -> str:
    """Run rdmadoctor with its stdout on a pseudo-terminal (what a person at a shell has)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rdmadoctor", *args], stdout=slave, stderr=subprocess.DEVNULL,
        env=_env(COLUMNS=str(columns), TERM="xterm-256color"),
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    proc.wait(timeout=60)
    return ANSI.sub("", b"".join(chunks).decode()).replace("\r\n", "\n")


def _remedy_command_lines(args: list[str]) -> list[str]:
    """The lines of every multi-line remedy that are commands or YAML (indented or '- ')."""
    proc = subprocess.run([sys.executable, "-m", "rdmadoctor", *args, "--json"], capture_output=True, text=True, env=_env())
    rep = json.loads(proc.stdout)
    out = []
    for c in rep["checks"]:
        for f in c["findings"]:
            lines = f["remedy"].rstrip().splitlines()
            if len(lines) > 1:
                out += [ln.strip() for ln in lines if ln[:1].isspace() or ln.startswith("- ")]
    return out


def test_through_a_pipe_a_fix_command_stays_one_line_and_nothing_is_padded():
    proc = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "check", "--example", "broken-pod"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
    )
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert [ln.strip() for ln in lines if "printf" in ln] == [PRINTF]
    assert [ln for ln in lines if ln != ln.rstrip()] == []
    assert "\x1b[" not in proc.stdout  # no colours in a log either
    # Every line of every finding is whole: the headline too.
    assert lines[0].startswith("FAIL: ") and lines[0].endswith(")")


def test_on_a_terminal_commands_and_yaml_are_never_broken_mid_line():
    out = _through_pty(["check", "--example", "broken-pod"], columns=80)
    lines = out.splitlines()
    assert lines[0].startswith("FAIL: ")
    assert [ln.strip() for ln in lines if "printf" in ln] == [PRINTF]
    assert [ln for ln in lines if ln != ln.rstrip()] == []
    stripped = {ln.strip() for ln in lines}
    commands = _remedy_command_lines(["check", "--example", "broken-pod"])
    assert len(commands) >= 8  # the containerd drop-in, the capabilities and /dev/shm YAML
    assert [c for c in commands if c not in stripped] == []
    # Prose is wrapped to the terminal, and only command lines may be wider.
    wide = [ln for ln in lines if len(ln) > 80]
    assert wide and all(ln.strip() in commands for ln in wide), wide
    # A `backticked command` inside prose is never split either.
    for ln in lines:
        assert ln.count("`") % 2 == 0, ln


def _finding(code, severity, subject, message, remedy="", cause=None):
    f = {"code": code, "severity": severity, "subject": subject, "message": message, "remedy": remedy}
    if cause:
        f["cause"] = cause
    return f


def _report(checks: list[dict], status: str = "fail") -> dict:
    counts = {s: sum(1 for c in checks if c["status"] == s) for s in ("pass", "warn", "fail", "unknown", "skip")}
    findings = [f for c in checks for f in c["findings"]]
    return {
        "schema": "rdmadoctor.report/v1", "version": "0", "status": status, "exit_code": {"pass": 0, "warn": 0, "fail": 1}.get(status, 2),
        "host": {"label": "/", "kind": "live", "hostname": "gpu-17"}, "profile": "generic", "scope": "all",
        "summary": {"checks": len(checks), **counts, "errors": sum(f["severity"] == "error" for f in findings),
                    "warnings": sum(f["severity"] == "warning" for f in findings)},
        "checks": checks, "inventory": {}, "labels": {}, "plugin_errors": [],
    }


def _no_rdma_report(cause: str | None = "IB_NO_DEVICES") -> dict:
    mods = [
        _finding("MOD_MISSING", "error", m, f"kernel module {m} is not loaded", f"modprobe {m}", cause=cause)
        for m in ("ib_uverbs", "ib_core", "mlx5_ib")
    ]
    return _report([
        {"id": "ib.devices", "title": "RDMA devices", "status": "fail",
         "findings": [_finding("IB_NO_DEVICES", "error", "host", "no RDMA devices found", "install MLNX_OFED")]},
        {"id": "kernel.modules", "title": "RDMA kernel modules", "status": "fail", "findings": mods},
    ])


def _render(rep: dict, verbose: bool = False) -> list[str]:
    out = io.StringIO()
    sys_stdout, sys.stdout = sys.stdout, out
    try:
        render_report(rep, verbose=verbose)
    finally:
        sys.stdout = sys_stdout
    return out.getvalue().splitlines()


def test_what_follows_from_a_root_cause_is_folded_under_it():
    rep = _no_rdma_report()
    assert "- 1 problem (and 3 that follow from it);" in summary_line(rep)
    lines = _render(rep)
    root = next(i for i, ln in enumerate(lines) if ln.strip().startswith("IB_NO_DEVICES host:"))
    folded = [i for i, ln in enumerate(lines) if "MOD_MISSING" in ln]
    assert folded == [root + 2, root + 3, root + 4]  # right under it, after its fix
    indent = len(lines[root]) - len(lines[root].lstrip())
    for i, m in zip(folded, ("ib_uverbs", "ib_core", "mlx5_ib")):
        assert lines[i].startswith(" " * (indent + 2) + f"follows from IB_NO_DEVICES: MOD_MISSING {m}: ")
    # The followers' own fixes are not repeated, and their check says where they went.
    assert not any("modprobe" in ln for ln in lines)
    assert any("(3 findings following from IB_NO_DEVICES, shown under it)" in ln for ln in lines)


def test_a_cause_that_is_not_in_the_report_folds_nothing():
    rep = _no_rdma_report(cause="NO_SUCH_CODE")
    assert "- 4 problems;" in summary_line(rep)
    lines = _render(rep)
    assert sum(ln.startswith("    MOD_MISSING ") for ln in lines) == 3
    assert not any("follows from" in ln for ln in lines)


def test_causes_in_a_cycle_fold_nothing():
    rep = _report([
        {"id": "a.one", "title": "One", "status": "fail", "findings": [_finding("A_BAD", "error", "x", "bad", cause="B_BAD")]},
        {"id": "b.two", "title": "Two", "status": "fail", "findings": [_finding("B_BAD", "error", "y", "bad", cause="A_BAD")]},
    ])
    assert "- 2 problems;" in summary_line(rep)
    lines = _render(rep)
    assert any(ln.startswith("    A_BAD") for ln in lines) and any(ln.startswith("    B_BAD") for ln in lines)


def test_several_roots_and_mixed_severities_are_counted_in_words():
    rep = _no_rdma_report()
    rep["checks"].append({"id": "shm.size", "title": "/dev/shm size", "status": "warn",
                          "findings": [_finding("SHM_TOO_SMALL", "warning", "/dev/shm", "64 MiB")]})
    assert "- 2 problems (1 error, 1 warning) (and 3 that follow from them);" in summary_line(rep)


@pytest.mark.parametrize("only", [["ib"], ["ib.devices"]])
def test_the_unknown_headline_is_a_sentence_naming_what_could_not_be_established(tmp_path, only):
    proc = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "check", "--bundle", str(tmp_path), *sum((["--only", o] for o in only), [])],
        capture_output=True, text=True, env=_env(),
    )
    assert proc.returncode == 2
    head = proc.stdout.splitlines()[0]
    assert head.startswith(f"UNKNOWN: {tmp_path} (bundle, profile generic): could not decide: RDMA devices (ib.devices) could not be established - ")
    assert "is could not" not in head


def test_names_from_a_bundle_are_shown_escaped_never_obeyed(tmp_path):
    """Issue 10 item 6: a device name with an escape sequence reached the terminal raw."""
    import shutil
    import subprocess
    import sys

    bundle = tmp_path / "b"
    shutil.copytree(os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "port-down"), bundle, symlinks=True)
    cls = bundle / "sys" / "class" / "infiniband"
    evil = "mlx5_1\x1b[2J\x1b]0;pwned\x07"
    target = os.readlink(cls / "mlx5_1")
    os.unlink(cls / "mlx5_1")
    os.symlink(target, cls / evil)
    out = subprocess.run([sys.executable, "-m", "rdmadoctor", "check", "--bundle", str(bundle)],
                         capture_output=True, text=True, errors="surrogateescape")
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    assert "mlx5_1\\x1b[2J\\x1b]0;pwned\\x07" in out.stdout  # shown, so a person sees what the name holds
    pre = subprocess.run([sys.executable, "-m", "rdmadoctor", "preflight", "--bundle", str(bundle), "--only", "ib"],
                         capture_output=True, text=True, errors="surrogateescape")
    assert "pwned" in pre.stdout and "\x1b" not in pre.stdout and "\x07" not in pre.stdout
    # On a terminal (rich) as well.
    from io import StringIO

    from rich.console import Console

    from rdmadoctor.output.text import write_lines

    buf = StringIO()
    write_lines([(0, [(f"IB_PORT_DOWN {evil}/1: state DOWN", "")], False)], console=Console(file=buf, force_terminal=True, width=100))
    assert "\x1b[2J" not in buf.getvalue() and "\\x1b[2J" in buf.getvalue()


def test_a_socket_pool_headline_says_where_it_trains():
    """Profile tcp: the verdict is nccl.env's ("ready to train over sockets on eth0 at 25 Gb/s"),
    never "ready to train over RDMA" nor "NCCL will fall back to TCP"."""
    fixtures = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")
    ok = subprocess.run([sys.executable, "-m", "rdmadoctor", "check", "--bundle", os.path.join(fixtures, "tcp-pool"),
                         "--profile", "tcp"], capture_output=True, text=True)
    slow = subprocess.run([sys.executable, "-m", "rdmadoctor", "check", "--bundle", os.path.join(fixtures, "tcp-pool-slow"),
                           "--profile", "tcp"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.splitlines()[0].startswith(
        "PASS: eni-node-04 (bundle, profile tcp) is ready to train over sockets on eth0 at 25 Gb/s")
    assert slow.returncode == 1 and "is NOT ready to train over sockets" in slow.stdout.splitlines()[0]
    assert "RDMA" not in ok.stdout.splitlines()[0] and "fall back" not in slow.stdout.splitlines()[0]
