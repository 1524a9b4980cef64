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


# ---- --report-file: only a regular file (or a new one) is replaced; refused at start -----------


def _targets(tmp_path):
    """Name -> path of things that are not regular files (a device node only as root)."""
    import stat

    out = {}
    os.mkfifo(tmp_path / "fifo")
    out["a FIFO (named pipe)"] = "fifo"
    (tmp_path / "target.json").write_text("{}\n")
    os.symlink(tmp_path / "target.json", tmp_path / "slink.json")
    out["a symlink"] = "slink.json"
    (tmp_path / "somedir").mkdir()
    out["a directory"] = "somedir"
    try:
        os.mknod(tmp_path / "fakenull", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        out["a character device"] = "fakenull"
    except (PermissionError, OSError):
        pass
    return out


def _unchanged(tmp_path):
    assert (tmp_path / "fifo").is_fifo() and (tmp_path / "slink.json").is_symlink()
    assert (tmp_path / "target.json").read_text() == "{}\n" and (tmp_path / "somedir").is_dir()
    if (tmp_path / "fakenull").exists():
        assert (tmp_path / "fakenull").is_char_device()


def test_run_report_file_refuses_what_is_not_a_regular_file_before_the_job(tmp_path):
    for what, name in _targets(tmp_path).items():
        p = rdmadoctor(["run", "--no-gate", "--report-file", name, "--", "touch", "ran.flag"], cwd=tmp_path)
        err = p.stderr.decode()
        assert p.returncode == 2 and not (tmp_path / "ran.flag").exists(), (what, err)
        assert f"refusing to write --report-file {name}: it is {what}, not a regular file" in err, err
    _unchanged(tmp_path)
    for name, says in (("-", "stdout belongs to CMD"), ("", "an empty file name")):
        p = rdmadoctor(["run", "--no-gate", "--report-file", name, "--", "touch", "ran.flag"], cwd=tmp_path)
        err = p.stderr.decode()
        assert p.returncode == 2 and says in err and not (tmp_path / "ran.flag").exists(), err
        assert not (tmp_path / "-").exists()
    # A new file and an existing regular file are written, as before.
    (tmp_path / "old.json").write_text("old")
    for name in ("new.json", "old.json"):
        p = rdmadoctor(["run", "--no-gate", "--report-file", name, "--", "true"], cwd=tmp_path)
        assert p.returncode == 0 and '"schema": "rdmadoctor.run/v1"' in (tmp_path / name).read_text(), p.stderr.decode()


def test_agent_report_file_refuses_what_is_not_a_regular_file_before_the_first_cycle(tmp_path):
    agent = ["agent", "--example", "hgx-h100-ib", "--once", "--publish", "stdout", "--metrics-port", "0", "--report-file"]
    for what, name in _targets(tmp_path).items():
        p = rdmadoctor([*agent, name], cwd=tmp_path, stdout=subprocess.PIPE)
        err = p.stderr.decode()
        assert p.returncode == 2 and p.stdout == b"", (what, err)  # no cycle: nothing published
        assert f"refusing to write --report-file {name}: it is {what}, not a regular file" in err, err
    _unchanged(tmp_path)
    p = rdmadoctor([*agent, ""], cwd=tmp_path, stdout=subprocess.PIPE)
    assert p.returncode == 2 and "an empty file name" in p.stderr.decode()


def test_write_atomic_regular_only_leaves_a_symlink_and_its_target(tmp_path):
    from rdmadoctor.publish.fsutil import NotRegularFile, target_problem, write_atomic

    (tmp_path / "target.json").write_text("{}\n")
    os.symlink(tmp_path / "target.json", tmp_path / "slink.json")
    with pytest.raises(NotRegularFile):
        write_atomic(tmp_path / "slink.json", b"new", regular_only=True)
    assert (tmp_path / "slink.json").is_symlink() and (tmp_path / "target.json").read_text() == "{}\n"
    assert sorted(os.listdir(tmp_path)) == ["slink.json", "target.json"]  # no temp file left
    assert target_problem(str(tmp_path / "slink.json")) == "a symlink"
    assert target_problem(str(tmp_path / "new.json")) is None and target_problem("") == "an empty name"


# ---- what the user typed is quoted with its control characters shown, never obeyed -------------

EVIL = "evil\x1b[2J\x1b[31mname"


@pytest.mark.parametrize("args", [
    ["diagnose", EVIL],
    ["check", "--bundle", EVIL],
    ["check", "--root", EVIL],
    ["collect", "-o", EVIL + "/x.tar.gz"],
    ["run", "--no-gate", "--report-file", EVIL + "/", "--", "true"],
], ids=["diagnose", "check-bundle", "check-root", "collect", "run-report-file"])
def test_an_escape_sequence_in_a_file_name_is_shown_escaped(args, tmp_path):
    p = rdmadoctor(args, cwd=tmp_path)
    err = p.stderr.decode()
    assert p.returncode == 2 and "rdmadoctor: error: " in err, err
    assert "\x1b" not in err and "evil\\x1b[2J\\x1b[31mname" in err, err


def test_fail_usage_escapes_control_characters_but_keeps_line_breaks(capsys):
    from rdmadoctor.cli.errors import fail_usage

    assert fail_usage("bad \x1b[31mred\x9b\r", "two\nlines\tand a tab") == 2
    assert capsys.readouterr().err == "rdmadoctor: error: bad \\x1b[31mred\\x9b\\x0d\n  hint: two\nlines\tand a tab\n"


# ---- a command that cannot start: the same words from run and preflight --exec -----------------

RUN = ["run", "--no-gate", "--"]
EXEC = ["preflight", "--example", "hgx-h100-ib", "--exec", "--"]


@pytest.mark.parametrize("prefix", [RUN, EXEC], ids=["run", "preflight-exec"])
def test_an_empty_command_name_is_command_not_found_before_the_gate(prefix):
    p = rdmadoctor([*prefix, ""], stdout=subprocess.PIPE)
    err = p.stderr.decode()
    assert p.returncode == 127, err
    assert "command not found: '' (an empty command name)" in err and "unset shell variable" in err, err
    assert "Traceback" not in err and "chmod" not in err and b"GO" not in p.stdout, err


@pytest.mark.parametrize("prefix", [RUN, EXEC], ids=["run", "preflight-exec"])
def test_a_script_whose_interpreter_is_missing_says_so(prefix, tmp_path):
    script = tmp_path / "badinterp.sh"
    script.write_text("#!/nonexistent/interp\necho hi\n")
    script.chmod(0o755)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "badcmd").write_bytes(script.read_bytes())
    (bindir / "badcmd").chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    for cmd in ("./badinterp.sh", "badcmd"):
        p = rdmadoctor([*prefix, cmd], cwd=tmp_path, env=env, stdout=subprocess.PIPE)
        err = p.stderr.decode()
        assert p.returncode == 127, err
        assert "the file exists but its interpreter (#! line: /nonexistent/interp) is missing" in err, err
        assert "no such file" not in err and "command not found" not in err, err


@pytest.mark.parametrize("prefix", [RUN, EXEC], ids=["run", "preflight-exec"])
def test_a_directory_as_the_command_is_said_to_be_one(prefix, tmp_path):
    (tmp_path / "somedir").mkdir()
    p = rdmadoctor([*prefix, "./somedir"], cwd=tmp_path, stdout=subprocess.PIPE)
    err = p.stderr.decode()
    assert p.returncode == 126 and "cannot run './somedir': it is a directory" in err and "Permission denied" not in err, err
