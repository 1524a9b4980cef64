"""rdmadoctor's own streams: a closed or full stdout/stderr, --report-file targets, messages that
quote what the user typed. Real processes and real fds throughout (closed in the child, /dev/full)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

TIMEOUT = 120
FULL = "/dev/full"
needs_full = pytest.mark.skipif(not os.path.exists(FULL), reason="no /dev/full here")


def rdmadoctor(args, *, close=(), stdout=None, stderr=subprocess.PIPE, cwd=None, **kw):
    """Run ``python -m rdmadoctor ARGS`` with the fds in ``close`` closed (as ``>&-`` / ``2>&-``)."""

    def closer() -> None:
        for fd in close:
            os.close(fd)

    return subprocess.run(
        [sys.executable, "-m", "rdmadoctor", *args], stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
        preexec_fn=closer if close else None, cwd=cwd, timeout=TIMEOUT, **kw,
    )


# ---- a closed or full stdout: one error line, exit 2, never a traceback --------------------------

COMMANDS = [
    ["check", "--example", "broken-pod"],  # the fast path (no typer)
    ["check", "--example", "broken-pod", "--json"],
    ["preflight", "--example", "broken-pod"],  # the fast path of preflight
    ["explain", "IB_PORT_DOWN"],  # typer from here on
    ["diagnose", "--example", "broken-pod"],
    ["topo", "--example", "hgx-h100-ib"],
    ["examples"],
    ["list-checks"],
    ["list-patterns"],
    ["schema"],
    ["--help"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_a_closed_stdout_is_one_error_line_and_exit_2(args):
    p = rdmadoctor(args, close=(1,))
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert "rdmadoctor: error: cannot write the output: stdout is closed" in err, err
    assert err.count("rdmadoctor: error:") == 1, err


@needs_full
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_a_full_stdout_is_one_error_line_and_exit_2(args):
    with open(FULL, "wb") as full:
        p = rdmadoctor(args, stdout=full)
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert "rdmadoctor: error: cannot write the output: No space left on device" in err, err
    assert err.count("rdmadoctor: error:") == 1, err


def test_stdout_and_stderr_both_closed_exit_2_silently():
    p = rdmadoctor(["check", "--example", "broken-pod"], close=(1, 2), stderr=None)
    assert p.returncode == 2


def test_bare_rdmadoctor_with_a_closed_stdout_is_still_the_usage_error():
    p = rdmadoctor([], close=(1,))
    err = p.stderr.decode()
    assert p.returncode == 2 and "rdmadoctor: error: no command given" in err and "Traceback" not in err, err


@pytest.mark.parametrize("args,expected", [
    (["preflight", "--example", "hgx-h100-ib", "--json"], 0),
    (["preflight", "--example", "broken-pod", "--json"], 1),
])
def test_preflight_to_a_pipe_without_reader_keeps_its_exit_code(args, expected):
    r, w = os.pipe()
    os.close(r)
    try:
        p = rdmadoctor(args, stdout=w)
    finally:
        os.close(w)
    assert p.returncode == expected and b"Traceback" not in p.stderr, p.stderr.decode()


@needs_full
def test_preflight_exec_starts_the_job_though_the_verdict_cannot_be_written(tmp_path):
    with open(FULL, "wb") as full:
        p = rdmadoctor(["preflight", "--example", "hgx-h100-ib", "--json", "--exec", "--", "touch", "ran.flag"],
                       stdout=full, cwd=tmp_path)
    err = p.stderr.decode()
    assert p.returncode == 0 and (tmp_path / "ran.flag").exists(), err
    assert "the verdict could not be written to stdout (No space left on device)" in err and "Traceback" not in err
    with open(FULL, "wb") as full:  # NO-GO: still 1 (the job is not run), not 2
        p = rdmadoctor(["preflight", "--example", "broken-pod", "--json", "--exec", "--", "touch", "no.flag"],
                       stdout=full, cwd=tmp_path)
    assert p.returncode == 1 and not (tmp_path / "no.flag").exists(), p.stderr.decode()


# ---- run: its own messages failing never stop the job ------------------------------------------

JOB = ["sh", "-c", "touch ran.flag; echo out; echo err >&2; exit 3"]


def test_run_with_its_stderr_closed_still_runs_the_job(tmp_path):
    p = rdmadoctor(["run", "--example", "hgx-h100-ib", "--", *JOB], close=(2,), stdout=subprocess.PIPE, stderr=None, cwd=tmp_path)
    assert p.returncode == 3 and (tmp_path / "ran.flag").exists()
    assert p.stdout == b"out\n"


@needs_full
def test_run_with_its_stderr_full_still_runs_the_job(tmp_path):
    with open(FULL, "wb") as full:
        p = rdmadoctor(["run", "--example", "hgx-h100-ib", "--", *JOB], stdout=subprocess.PIPE, stderr=full, cwd=tmp_path)
    assert p.returncode == 3 and (tmp_path / "ran.flag").exists()
    assert p.stdout == b"out\n"


def test_run_with_its_stdout_closed_still_runs_the_job(tmp_path):
    p = rdmadoctor(["run", "--no-gate", "--", *JOB], close=(1,), cwd=tmp_path)
    err = p.stderr.decode()
    assert p.returncode == 3 and (tmp_path / "ran.flag").exists(), err
    assert "err\n" in err and "writing the job's stdout failed (Bad file descriptor)" in err, err
    assert "Traceback" not in err


@needs_full
def test_run_with_its_stdout_full_still_runs_the_job(tmp_path):
    with open(FULL, "wb") as full:
        p = rdmadoctor(["run", "--example", "hgx-h100-ib", "--", *JOB], stdout=full, cwd=tmp_path)
    err = p.stderr.decode()
    assert p.returncode == 3 and (tmp_path / "ran.flag").exists(), err
    assert "writing the job's stdout failed (No space left on device)" in err and "Traceback" not in err, err
