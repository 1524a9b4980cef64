"""`run --drain-timeout`: after the job exits, what its pipes still carry is copied for at most that
long (a process the job started may hold them open and keep writing), then `run` exits with the
job's status. Behaviour only: no assertion on how long anything took."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import run_cli

from rdmadoctor import supervise
from rdmadoctor.supervise import process

# The grandchild: started by the job, it holds the job's stdout. It waits until the job has exited
# (its parent changes), then writes a numbered line every 20 ms, for up to 120 s, until the pipe
# breaks (rdmadoctor closed it): it writes down why it stopped.
GRANDCHILD = textwrap.dedent("""\
    import os, sys, time
    parent, status = int(sys.argv[1]), sys.argv[2]
    open(status + ".pid", "w").write(str(os.getpid()))
    while os.getppid() == parent:
        time.sleep(0.005)
    deadline = time.monotonic() + 120
    i = 0
    why = "ran out of time"
    while time.monotonic() < deadline:
        try:
            os.write(1, b"after exit %d\\n" % (i + 1))
        except BrokenPipeError:
            why = "broken pipe"
            break
        i += 1
        time.sleep(0.02)
    with open(status + ".tmp", "w") as f:
        f.write(f"{why} after {i} lines")
    os.replace(status + ".tmp", status)
""")

JOB = textwrap.dedent("""\
    import os, subprocess, sys, time
    status = sys.argv[1]
    subprocess.Popen([sys.executable, "-c", sys.argv[2], str(os.getpid()), status])
    while not os.path.exists(status + ".pid"):  # the grandchild runs before the job ends
        time.sleep(0.01)
    print("job done", flush=True)
    sys.exit(3)
""")


def _wait_for(path: Path, limit: float = 120.0) -> str:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def test_output_within_the_drain_is_kept_and_run_ends_after_it(tmp_path, monkeypatch, capfd):
    # The quiet rule (0.1 s without output ends the copy) is made generous, so that on a loaded
    # machine only --drain-timeout ends it: the bound is what is tested.
    monkeypatch.setattr(process, "DRAIN_QUIET_S", 60.0)
    status = tmp_path / "grandchild"
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env["RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        code = supervise.run_job([sys.executable, "-c", JOB, str(status), GRANDCHILD], no_gate=True,
                                 drain_timeout=2.0, report_file=str(report), env=env)
        out, err = capfd.readouterr()
        # The job's status, though its grandchild still writes: run ended on the drain's bound.
        assert code == 3
        why = _wait_for(status)
        assert why.startswith("broken pipe after "), why
        # What came within the drain was copied, in order, none missing.
        lines = out.splitlines()
        assert lines[0] == "job done"
        after = lines[1:]
        assert after, out
        assert after == [f"after exit {i}" for i in range(1, len(after) + 1)]
        assert len(after) <= int(why.split()[-2])  # never more than the grandchild wrote
        note = "rdmadoctor stopped copying it then (--drain-timeout)"
        assert note in err and "2 s after it exited" in err, err
        assert any(note in n for n in json.loads(report.read_text())["notes"])
    finally:
        pid_file = Path(f"{status}.pid")
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_job_that_closes_its_pipes_gets_no_drain_note(capfd):
    code = supervise.run_job([sys.executable, "-c", "print('bye'); raise SystemExit(0)"], no_gate=True,
                             drain_timeout=0)
    out, err = capfd.readouterr()
    assert code == 0 and out == "bye\n" and "--drain-timeout" not in err


@pytest.mark.parametrize("value", ["-1", "nan", "7200"])
def test_a_drain_timeout_out_of_range_is_a_usage_error(value):
    code, out, err = run_cli(["run", "--no-gate", "--drain-timeout", value, "--", "true"])
    assert code == 2 and "--drain-timeout" in err and "Traceback" not in err, err


def test_the_library_call_checks_it_too():
    from rdmadoctor.preflight.errors import PreflightError

    with pytest.raises(PreflightError, match="--drain-timeout"):
        supervise.run_job(["true"], no_gate=True, drain_timeout=-1)
