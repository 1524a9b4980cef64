"""rdmadoctor run: the gate, then CMD as a child process, all with real processes (python -c
scripts and sh): exit statuses, signals to the child's process group, byte-exact passthrough,
bounded memory under a flood, NCCL's transport line, the diagnosis of a failed job, the
environment, the terminal. No wall-clock time is asserted; timeouts only keep a hang from
hanging the suite."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

JOB_ENV = ("MASTER_ADDR", "MASTER_PORT", "PET_MASTER_ADDR", "PET_MASTER_PORT", "RANK", "NODE_RANK",
           "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NO_COLOR")
RUN = [sys.executable, "-m", "rdmadoctor", "run"]
PY = sys.executable


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in JOB_ENV and not (k.startswith("VC_") and k.endswith("_HOSTS"))}
    env["RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.update(extra)
    return env


def _default_signals() -> None:
    # A background CI runner may start everything with INT or HUP ignored, and rdmadoctor then
    # rightly keeps them ignored for its child: give the disposition a terminal gives.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """`rdmadoctor run ARGS`, bytes in and out."""
    return subprocess.run([*RUN, *args], env=env if env is not None else clean_env(), capture_output=True,
                          timeout=timeout, preexec_fn=_default_signals, **kw)


def start(*args: str, env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([*RUN, *args], env=env if env is not None else clean_env(),
                            preexec_fn=_default_signals, **kw)


def read_until(fd: int, needle: bytes, limit: float = 120) -> bytes:
    """Read ``fd`` until ``needle`` has come (a hang guard, not a timing assertion)."""
    got = b""
    deadline = time.monotonic() + limit
    while needle not in got:
        left = deadline - time.monotonic()
        assert left > 0, f"never saw {needle!r}; got {got[-2000:]!r}"
        r, _, _ = select.select([fd], [], [], left)
        if r:
            chunk = os.read(fd, 65536)
            assert chunk, f"EOF before {needle!r}; got {got[-2000:]!r}"
            got += chunk
    return got


def wait_for_file(path: Path, limit: float = 60) -> str:
    deadline = time.monotonic() + limit
    while not path.exists() or not path.read_text().endswith("\n"):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.02)
    return path.read_text()


# --- NCCL output, as NCCL 2.21 prints it (strings from NVIDIA/nccl src/init.cc, src/transport/net_ib,
# src/transport/net_socket.cc, src/transport/net.cc) ------------------------------------------------------

IB_LOG = """\
node1:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
node1:1234:1234 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation
NCCL version 2.21.5+cuda12.4
node1:1234:1290 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB eth0:10.0.0.1<0>
node1:1234:1290 [0] NCCL INFO Using network IB
node1:1234:1290 [0] NCCL INFO comm 0x55d5c8 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1 - Init START
node1:1234:1290 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
node1:1234:1290 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA
node1:1234:1290 [0] NCCL INFO Connected all rings
node1:1234:1290 [0] NCCL INFO comm 0x55d5c8 rank 0 nranks 16 cudaDev 0 busId 18000 commId 0x1 - Init COMPLETE
"""
IB_LINE = "rdmadoctor: NCCL 2.21.5 uses NET/IB on mlx5_0..mlx5_3 (InfiniBand) with GPUDirect RDMA"

SOCKET_LOG = """\
node1:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
NCCL version 2.18.5+cuda12.2
node1:1234:1290 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
node1:1234:1290 [0] NCCL INFO Using network Socket
node1:1234:1290 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0
node1:1234:1290 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0
node1:1234:1290 [0] NCCL INFO Connected all rings
"""

# A work completion error (status 12, retry exceeded) and the flush (status 5) that follows it,
# as net_ib.cc words them in 2.7-2.21.
WC_LOG = """\
node1:1234:1290 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>
node1:1234:1290 [0] NCCL INFO Using network IB
node1:1234:1290 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
node1:1234:1300 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<42345> with error 12, opcode 0, len 0, vendor err 129
node1:1234:1300 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<42345> with error 5, opcode 0, len 0, vendor err 249
"""


def printer(text: str, code: int = 0, stream: str = "stdout", then: str = "") -> list[str]:
    """A python -c child that prints ``text`` (flushed), runs ``then``, and exits ``code``."""
    return [PY, "-c", f"import sys; sys.{stream}.write({text!r}); sys.{stream}.flush()\n{then}\nsys.exit({code})"]


# --- exit statuses --------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [0, 3])
def test_exit_status_is_the_childs(code):
    r = run("--no-gate", "--", "sh", "-c", f"exit {code}")
    assert r.returncode == code
    if code == 0:
        assert r.stderr == b""  # a job that succeeds: rdmadoctor says nothing of its own
    else:
        assert r.stderr.decode().splitlines()[0] == f"rdmadoctor: sh -c 'exit {code}' exited with status {code}"


def test_killed_by_a_signal_exits_128_plus_n():
    r = run("--no-gate", "--", PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert r.returncode == 128 + signal.SIGTERM
    err = r.stderr.decode()
    assert "was killed by signal 15 (SIGTERM)" in err
    assert all(line.startswith("rdmadoctor: ") for line in err.splitlines())


def test_command_not_found_127_and_not_executable_126(tmp_path):
    r = run("--no-gate", "--", "rdmadoctor-no-such-command", "--x")
    assert r.returncode == 127
    err = r.stderr.decode()
    assert err.startswith("rdmadoctor: error: cannot run 'rdmadoctor-no-such-command': command not found\n")
    assert "  hint: is it installed in this image? PATH=" in err and "Traceback" not in err
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    r = run("--no-gate", "--", str(script))
    assert r.returncode == 126
    assert r.stderr.decode().startswith(f"rdmadoctor: error: cannot run '{script}': Permission denied\n")
    assert f"chmod +x {script}" in r.stderr.decode()
    r = run("--no-gate", "--", str(tmp_path))
    assert r.returncode == 126 and "it is a directory" in r.stderr.decode()
    r = run("--no-gate", "--", "./no-such-script.sh")
    assert r.returncode == 127 and "no such file (relative to " in r.stderr.decode()


def test_usage_errors_exit_2():
    for args in (["--no-gate"], ["--no-gate", "--"], ["--example", "no-such", "--", "true"],
                 ["--example", "hgx-h100-ib", "--only", "no.such", "--", "true"],
                 ["--report-file", "/no/such/dir/r.json", "--no-gate", "--", "true"], ["--exec", "--", "true"]):
        code, out, err = run_cli(["run", *args])
        assert code == 2, (args, err)
        assert err.startswith("rdmadoctor: error: "), (args, err)
        assert out == ""


# --- signals -----------------------------------------------------------------------------------------

# The child and a grandchild (same process group) each trap the signal and write a marker.
TRAP = textwrap.dedent("""\
    import os, signal, subprocess, sys, time
    sig, marker, code, role = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    def on(s, f):
        with open(marker + "." + role, "w") as fh:
            fh.write(f"{role} got {s} in group {os.getpgrp()}\\n")
        sys.exit(code)
    signal.signal(sig, on)
    if role == "child":
        kid = subprocess.Popen([sys.executable, __file__, str(sig), marker, "0", "grandchild"])
    print(role, "ready", os.getpgrp(), flush=True)
    while True:
        time.sleep(0.05)
""")


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 42), (signal.SIGINT, 43), (signal.SIGHUP, 44)])
def test_signals_reach_the_childs_process_group(tmp_path, sig, code):
    script = tmp_path / "trap.py"
    script.write_text(TRAP)
    marker = tmp_path / "marker"
    p = start("--no-gate", "--", PY, str(script), str(int(sig)), str(marker), str(code), "child")
    got = read_until(p.stdout.fileno(), b"grandchild ready")
    assert b"child ready" in got
    group = int(re.search(rb"child ready (\d+)", got).group(1))
    assert group != os.getpgid(p.pid)  # its own process group, not rdmadoctor's
    p.send_signal(sig)
    p.wait(timeout=120)
    assert p.returncode == code  # the child's own exit status
    assert wait_for_file(Path(f"{marker}.child")) == f"child got {int(sig)} in group {group}\n"
    assert wait_for_file(Path(f"{marker}.grandchild")) == f"grandchild got {int(sig)} in group {group}\n"
    p.stdout.close()
    p.stderr.close()


def test_a_second_ctrl_c_is_only_forwarded(tmp_path):
    # The child decides: it counts Ctrl-Cs and leaves at the second; rdmadoctor stays until then.
    script = textwrap.dedent("""\
        import signal, sys, time
        n = 0
        def on(s, f):
            global n
            n += 1
            print("INT", n, flush=True)
            if n == 2:
                sys.exit(7)
        signal.signal(signal.SIGINT, on)
        print("ready", flush=True)
        while True:
            time.sleep(0.05)
    """)
    p = start("--no-gate", "--", PY, "-c", script)
    read_until(p.stdout.fileno(), b"ready")
    p.send_signal(signal.SIGINT)
    read_until(p.stdout.fileno(), b"INT 1")
    assert p.poll() is None  # rdmadoctor did not leave at the first Ctrl-C
    p.send_signal(signal.SIGINT)
    rest = read_until(p.stdout.fileno(), b"INT 2")
    assert p.wait(timeout=120) == 7
    assert b"INT 3" not in rest + p.stdout.read()
    p.stdout.close()
    p.stderr.close()


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan waits for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_child_gets_sigterm_when_rdmadoctor_is_killed(tmp_path):
    """What is asserted is behaviour: the job got SIGTERM (it says which signal, once) and is gone.

    Race-free under load: the job installs its handler before it says it is ready; the handler
    writes the marker in one write(2) of a file it creates whole (a reader never sees a part) and
    leaves with os._exit (no interpreter shutdown to stall on rdmadoctor's dead pipes); every wait
    polls for the outcome with a generous deadline, and a job left running is killed, not leaked.
    """
    marker = tmp_path / "orphan"
    script = textwrap.dedent(f"""\
        import os, signal, time
        def on(s, f):
            tmp = {str(marker)!r} + ".tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, (signal.Signals(s).name + "\\n").encode())
            os.close(fd)
            os.rename(tmp, {str(marker)!r})
            os._exit(0)
        signal.signal(signal.SIGTERM, on)
        print("ready", os.getpid(), flush=True)
        while True:
            time.sleep(0.05)
    """)
    p = start("--no-gate", "--", PY, "-c", script)
    job = None
    try:
        got = read_until(p.stdout.fileno(), b"\n")
        job = int(re.search(rb"ready (\d+)", got).group(1))
        p.kill()  # SIGKILL: rdmadoctor cannot forward anything; only the kernel's PDEATHSIG can
        assert p.wait(timeout=120) == -signal.SIGKILL
        assert wait_for_file(marker, limit=180) == "SIGTERM\n"
        deadline = time.monotonic() + 120
        while _alive(job):
            assert time.monotonic() < deadline, f"job {job} still running after its SIGTERM"
            time.sleep(0.05)
    finally:
        if job is not None and _alive(job):
            os.kill(job, signal.SIGKILL)
        if p.poll() is None:
            p.kill()
            p.wait(timeout=120)
        p.stdout.close()
        p.stderr.close()


# --- passthrough ---------------------------------------------------------------------------------------

# Invalid UTF-8, NUL, CR, an ANSI colour, and no newline at the end.
OUT_BYTES = b"\xff\xfe bad utf-8 \xc3\x28\x00 nul\r\n\x1b[31mred\x1b[0m\nno newline at the end"
ERR_BYTES = b"stderr \x80\x81 line\nand a partial one \xe2\x82"


def test_stdout_and_stderr_pass_through_byte_for_byte():
    script = (f"import os; os.write(1, {OUT_BYTES!r}); os.write(2, {ERR_BYTES!r}); "
              f"os.write(1, b'+'); os.write(2, b'-')")
    r = run("--no-gate", "--", PY, "-c", script)
    assert r.returncode == 0
    assert r.stdout == OUT_BYTES + b"+"
    assert r.stderr == ERR_BYTES + b"-"


def test_output_passes_as_it_arrives_not_by_line():
    # Half a line, then the child waits for its stdin: the half line must already be out.
    script = "import os, sys; os.write(1, b'half a line'); os.write(2, b'err half'); sys.stdin.readline(); os.write(1, b' and the rest\\n')"
    p = start("--no-gate", "--", PY, "-c", script, stdin=subprocess.PIPE)
    assert read_until(p.stdout.fileno(), b"half a line") == b"half a line"
    assert read_until(p.stderr.fileno(), b"err half") == b"err half"
    p.stdin.write(b"go\n")
    p.stdin.close()
    assert p.stdout.read() == b" and the rest\n"
    assert p.wait(timeout=120) == 0
    p.stdout.close()
    p.stderr.close()


def test_large_output_passes_through_whole():
    # 8 MB of numbered lines on stdout and 4 MB on stderr, interleaved.
    script = textwrap.dedent("""\
        import os
        for i in range(100000):
            os.write(1, b"line %07d of the job's stdout, some words to make it longer\\n" % i)
            if i % 1000 == 0:
                os.write(2, b"e" * 40000 + b"\\n")
    """)
    r = run("--no-gate", "--", PY, "-c", script)
    assert r.returncode == 0
    expect = b"".join(b"line %07d of the job's stdout, some words to make it longer\n" % i for i in range(100000))
    assert r.stdout == expect
    assert r.stderr == (b"e" * 40000 + b"\n") * 100


def test_stdout_reader_going_away_does_not_stop_the_job(tmp_path):
    # `rdmadoctor run -- job | head -1`: head leaves, the job keeps running to its end (its output
    # is drained and dropped), and its exit status is rdmadoctor's.
    marker = tmp_path / "done"
    script = textwrap.dedent(f"""\
        import sys
        for i in range(200000):
            print("line", i)
        sys.stdout.flush()
        open({str(marker)!r}, "w").write("all printed\\n")
        sys.exit(5)
    """)
    r, w = os.pipe()
    p = start("--no-gate", "--", PY, "-c", script, stdout=w)
    os.close(w)
    assert read_until(r, b"line").startswith(b"line")
    os.close(r)  # the reader leaves
    _, err = p.communicate(timeout=120)
    assert p.returncode == 5
    assert marker.read_text() == "all printed\n"
    assert b"Traceback" not in err and b"Broken pipe" not in err


def test_a_grandchild_holding_the_pipes_does_not_keep_rdmadoctor(tmp_path):
    # The job leaves a daemon behind with its stdout: rdmadoctor ends with the job, not the daemon.
    p = start("--no-gate", "--", "sh", "-c", "sleep 600 & echo $!; echo job done; exit 4")
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 4
    pid = int(out.split()[0])
    assert out.endswith(b"job done\n")
    os.kill(pid, signal.SIGKILL)


def _vm_hwm_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_a_flood_without_newline_keeps_memory_bounded():
    # 50 MB without one newline: rdmadoctor's peak RSS must not grow with it.
    total = 50 * 1024 * 1024
    script = textwrap.dedent(f"""\
        import os, sys
        os.write(1, b"R")
        sys.stdin.readline()
        block = b"x" * (1 << 20)
        for _ in range({total} >> 20):
            os.write(1, block)
        sys.stdin.readline()
    """)
    p = start("--no-gate", "--", PY, "-c", script, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert os.read(p.stdout.fileno(), 1) == b"R"  # the job runs; rdmadoctor's imports are done
    before = _vm_hwm_kib(p.pid)
    p.stdin.write(b"\n")
    p.stdin.flush()
    got = 0
    while got < total:
        chunk = os.read(p.stdout.fileno(), 1 << 20)
        assert chunk and chunk.count(b"x") == len(chunk)
        got += len(chunk)
    assert got == total
    after = _vm_hwm_kib(p.pid)
    p.stdin.write(b"\n")
    p.stdin.close()
    assert p.wait(timeout=120) == 0
    p.stdout.close()
    # Pipe and read buffers, one cut line for the Diagnoser: a few MB, never the 50 MB.
    assert after - before < 16 * 1024, (before, after)


# --- what NCCL did -------------------------------------------------------------------------------------


def test_transport_line_for_ib_with_gdrdma_is_printed_once_while_the_job_runs():
    script = f"import sys; sys.stdout.write({IB_LOG!r}); sys.stdout.flush(); sys.stdin.readline(); sys.stdout.write({IB_LOG!r})"
    p = start("--no-gate", "--", PY, "-c", script, stdin=subprocess.PIPE)
    # The line comes while the job still runs (it is waiting on its stdin).
    seen = read_until(p.stderr.fileno(), IB_LINE.encode() + b"\n")
    assert seen == IB_LINE.encode() + b"\n"
    p.stdin.write(b"\n")
    p.stdin.close()
    out = p.stdout.read()
    rest = p.stderr.read()
    assert p.wait(timeout=120) == 0
    assert out == (IB_LOG * 2).encode()
    assert rest == b""  # once, and nothing more for a job that succeeded
    p.stdout.close()
    p.stderr.close()


def test_transport_line_warns_when_nccl_uses_sockets():
    # NCCL prints to stdout; the job's own stderr has a progress bar with no newline in between
    # (the bar comes first: the job waits on its stdin until the test has seen it).
    script = (f"import sys; sys.stderr.write('progress 10%\\r progress 20%'); sys.stderr.flush(); sys.stdin.readline(); "
              f"sys.stdout.write({SOCKET_LOG!r}); sys.stdout.flush()")
    p = start("--no-gate", "--", PY, "-c", script, stdin=subprocess.PIPE)
    bar = read_until(p.stderr.fileno(), b"20%")
    p.stdin.write(b"\n")
    p.stdin.close()
    out = p.stdout.read()
    err = bar + p.stderr.read()
    assert p.wait(timeout=120) == 0
    p.stdout.close()
    p.stderr.close()
    assert out == SOCKET_LOG.encode()
    # rdmadoctor's line starts a line of its own, after the bar's last bytes as they were.
    assert err.decode() == (
        "progress 10%\r progress 20%\n"
        "rdmadoctor: WARNING: NCCL 2.18.5 uses NET/Socket over eth0: inter-node traffic goes over TCP, not RDMA; "
        "expect a fraction of the fabric's bandwidth\n"
    )


def test_socket_warning_names_the_reason_the_output_showed():
    # NCCL_IB_DISABLE=1 in the job's environment: NCCL says so (src/misc/param.cc), then uses sockets.
    log = "node1:1234:1234 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n" + SOCKET_LOG
    r = run("--no-gate", "--", *printer(log))
    assert r.returncode == 0 and r.stdout == log.encode()
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("rdmadoctor: WARNING: NCCL 2.18.5 uses NET/Socket over eth0: inter-node traffic goes over TCP")
    assert re.search(r"; reason: NCCL_IB_DISABLE is set to 1\b.* \(NCCL_IB_DISABLED_BY_ENV\)$", lines[0]), lines[0]


def test_transport_message_without_a_reason():
    from rdmadoctor.logs import Diagnoser
    from rdmadoctor.supervise import transport_message

    for log, want in ((SOCKET_LOG, "WARNING: NCCL 2.18.5 uses NET/Socket over eth0: inter-node traffic goes over TCP, "
                                   "not RDMA; expect a fraction of the fabric's bandwidth"),
                      (IB_LOG, IB_LINE[len("rdmadoctor: "):])):
        d = Diagnoser()
        d.feed(log.encode())
        assert transport_message(d.finish().nccl, d) == want


def test_a_failed_job_gets_the_diagnosis_root_cause_first():
    r = run("--no-gate", "--", *printer(WC_LOG, code=1, stream="stderr"))
    assert r.returncode == 1
    assert r.stdout == b""
    err = r.stderr.decode()
    assert err.startswith(WC_LOG)  # the job's own stderr first, untouched
    ours = err[len(WC_LOG):].splitlines()
    assert all(line.startswith("rdmadoctor: ") for line in ours), ours
    assert ours[0] == "rdmadoctor: NCCL uses NET/IB on mlx5_0, mlx5_1 (InfiniBand) with GPUDirect RDMA"
    assert re.match(r"rdmadoctor: .* exited with status 1$", ours[1])
    # The retry-exceeded error is the root cause; the flushed completion follows from it.
    assert ours[2].startswith("rdmadoctor: NCCL_IB_COMPLETION_ERROR status 12 IBV_WC_RETRY_EXC_ERR")
    assert "vendor err 129" in ours[2]
    assert any("Got completion from peer 10.0.0.2<42345> with error 12" in x for x in ours[3:6])
    assert any(x.startswith("rdmadoctor:   fix: ") and "ib_write_bw" in x for x in ours)
    assert "status 5" not in ours[2] and "1 finding follow" in err


def test_a_job_killed_by_a_signal_gets_the_diagnosis_too():
    then = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    r = run("--no-gate", "--", *printer(WC_LOG, then=then))
    assert r.returncode == 128 + signal.SIGKILL
    assert "was killed by signal 9 (SIGKILL)" in r.stderr.decode()
    assert "rdmadoctor: NCCL_IB_COMPLETION_ERROR status 12" in r.stderr.decode()


def test_a_failed_job_without_a_known_error_says_so():
    r = run("--no-gate", "--", *printer("training...\nstep 1 loss 2.3\n", code=2))
    assert r.returncode == 2
    assert r.stderr.decode().splitlines()[-1] == "rdmadoctor: no known error in the output"


def test_a_failed_job_with_an_unexplained_error_line_quotes_it():
    # Never a silent pass: a failure-shaped line no row knows is LOG_ERROR_UNKNOWN, quoted.
    r = run("--no-gate", "--", *printer("training...\nValueError: bad batch\n", code=2))
    assert r.returncode == 2
    err = r.stderr.decode()
    assert 'rdmadoctor: LOG_ERROR_UNKNOWN error: ' in err and '"ValueError: bad batch"' in err
    assert "no known error in the output" not in err


# --- the environment -----------------------------------------------------------------------------------

DUMP_ENV = "import json, os, sys; sys.stdout.write(json.dumps(dict(os.environ), sort_keys=True))"


def test_environment_is_untouched_without_nccl_debug():
    env = clean_env(SOME_JOB_SETTING="x y\tz", NCCL_IB_HCA="=mlx5_0")
    direct = subprocess.run([PY, "-c", DUMP_ENV], env=env, capture_output=True, timeout=60).stdout
    r = run("--no-gate", "--", PY, "-c", DUMP_ENV, env=env)
    assert r.returncode == 0
    assert json.loads(r.stdout) == json.loads(direct)


def test_nccl_debug_sets_only_what_is_unset():
    r = run("--no-gate", "--nccl-debug", "--", PY, "-c", DUMP_ENV)
    env = json.loads(r.stdout)
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert r.stderr == b""
    r = run("--no-gate", "--nccl-debug", "--", PY, "-c", DUMP_ENV, env=clean_env(NCCL_DEBUG="WARN"))
    env = json.loads(r.stdout)
    assert env["NCCL_DEBUG"] == "WARN" and env["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    # What the person asked for stays, and rdmadoctor says why it will not see the transport.
    assert r.stderr.decode() == (
        "rdmadoctor: note: NCCL_DEBUG=WARN is set: NCCL will not print which transport it uses "
        "(NCCL_DEBUG=INFO does; --nccl-debug sets it only where it is unset)\n"
    )


# --- the gate ------------------------------------------------------------------------------------------


def test_go_runs_the_job_with_the_verdict_on_stderr_only():
    r = run("--example", "hgx-h100-ib", "--", *printer("job output\n"))
    assert r.returncode == 0
    assert r.stdout == b"job output\n"  # stdout is the job's alone
    err = r.stderr.decode()
    pf = subprocess.run([sys.executable, "-m", "rdmadoctor", "preflight", "--example", "hgx-h100-ib"],
                        capture_output=True, text=True, env=clean_env(), timeout=120)
    # preflight's own verdict, word for word, then the line that says what starts.
    assert err.startswith(pf.stdout)
    assert err[len(pf.stdout):].startswith("rdmadoctor: running ")


def test_no_go_does_not_start_the_job(tmp_path):
    marker = tmp_path / "ran"
    r = run("--example", "broken-pod", "--", "touch", str(marker))
    assert r.returncode == 1
    assert not marker.exists()
    assert r.stdout == b""
    err = r.stderr.decode()
    pf = subprocess.run([sys.executable, "-m", "rdmadoctor", "preflight", "--example", "broken-pod"],
                        capture_output=True, text=True, env=clean_env(), timeout=120)
    assert err == pf.stdout + f"rdmadoctor: NO-GO: not running touch {marker}\n"


def test_json_puts_the_gate_document_on_stderr():
    r = run("--example", "hgx-h100-ib", "--json", "--", *printer("job\n"))
    assert r.returncode == 0 and r.stdout == b"job\n"
    doc, end = json.JSONDecoder().raw_decode(r.stderr.decode())
    assert doc["schema"] == "rdmadoctor.preflight/v1" and doc["verdict"] == "go"
    assert r.stderr.decode()[end:].startswith("\nrdmadoctor: running ")


def test_json_ends_stderr_with_the_run_document():
    """Issue 29: `run --json` emitted only the gate's verdict; the run's document (what
    --report-file gets: how the job ended, the diagnosis, the live hangs) is now the last line of
    stderr, after the job's own stderr (here cut mid-line) and rdmadoctor's lines."""
    r = run("--example", "hgx-h100-ib", "--json", "--",
            *printer(WC_LOG, code=1, then="sys.stderr.write('50%'); sys.stderr.flush()"))
    assert r.returncode == 1 and r.stdout == WC_LOG.encode()
    err = r.stderr.decode()
    assert "\n50%\nrdmadoctor: " in err
    gate, _ = json.JSONDecoder().raw_decode(err)
    assert gate["schema"] == "rdmadoctor.preflight/v1"
    *before, last = err.rstrip("\n").split("\n")
    doc = json.loads(last)
    assert doc["schema"] == "rdmadoctor.run/v1" and doc["exit_code"] == 1 and doc["gate"] == gate
    assert doc["child"]["exit_code"] == 1 and doc["findings"] and doc["hangs"] == [] and doc["started"]
    assert before[-1].startswith("rdmadoctor: ")  # the diagnosis came before it
    # Without --json, stderr has no such line.
    plain = run("--example", "hgx-h100-ib", "--", *printer(WC_LOG, code=1)).stderr.decode()
    assert '"rdmadoctor.run/v1"' not in plain


def test_json_after_no_go_ends_with_the_run_document_too():
    r = run("--example", "broken-pod", "--json", "--", "true")
    err = r.stderr.decode().rstrip("\n").split("\n")
    assert r.returncode == 1 and err[-2].startswith("rdmadoctor: NO-GO: not running true")
    doc = json.loads(err[-1])
    assert doc["exit_code"] == 1 and doc["child"] is None and doc["gate"]["verdict"] == "no-go"


def test_no_gate_skips_the_checks():
    # broken-pod would say NO-GO: without the gate the job runs anyway.
    r = run("--no-gate", "--example", "broken-pod", "--", *printer("ran\n"))
    assert r.returncode == 0 and r.stdout == b"ran\n" and r.stderr == b""


def test_report_file_after_a_failed_job(tmp_path):
    path = tmp_path / "run.json"
    r = run("--example", "hgx-h100-ib", "--report-file", str(path), "--", *printer(WC_LOG, code=1))
    assert r.returncode == 1
    doc = json.loads(path.read_text())
    assert doc["schema"] == "rdmadoctor.run/v1"
    assert doc["gate"]["verdict"] == "go" and doc["exit_code"] == 1
    assert doc["child"]["exit_code"] == 1 and doc["child"]["signal"] is None
    assert doc["child"]["stdout_bytes"] == len(WC_LOG.encode())
    assert doc["nccl"]["network"] == "IB" and doc["nccl"]["gdr"] is True
    assert doc["transport"].startswith("NCCL uses NET/IB on mlx5_0, mlx5_1")
    codes = [f["code"] for f in doc["findings"]]
    assert codes[0] == "NCCL_IB_COMPLETION_ERROR" and doc["findings"][0]["subject"].startswith("status 12 IBV_WC_RETRY_EXC_ERR")
    assert [f.get("cause") for f in doc["findings"]][1] == "NCCL_IB_COMPLETION_ERROR"
    assert not list(tmp_path.glob(".*.tmp"))


def test_report_file_when_the_command_is_not_found(tmp_path):
    path = tmp_path / "run.json"
    r = run("--no-gate", "--report-file", str(path), "--", "rdmadoctor-no-such-command")
    assert r.returncode == 127
    doc = json.loads(path.read_text())
    assert doc["exit_code"] == 127 and doc["child"] is None and doc["gate"] is None
    assert doc["notes"] == ["cannot run 'rdmadoctor-no-such-command': command not found"]


def test_report_file_when_the_gate_stops_the_job(tmp_path):
    path = tmp_path / "run.json"
    r = run("--example", "broken-pod", "--report-file", str(path), "--", "true")
    assert r.returncode == 1
    doc = json.loads(path.read_text())
    assert doc["gate"]["verdict"] == "no-go" and doc["child"] is None and doc["exit_code"] == 1
    assert {p["code"] for p in doc["gate"]["problems"]} >= {"MEMLOCK_LIMITED", "SHM_TOO_SMALL"}


# --- the terminal --------------------------------------------------------------------------------------


def _pty_run(args: list[str], send: list[tuple[bytes, bytes]], limit: float = 120) -> tuple[int, bytes]:
    """Run rdmadoctor on a new terminal; for each (wait_for, then_type): read the terminal until
    wait_for, then type then_type. Returns (exit status, everything the terminal showed)."""
    import pty

    pid, master = pty.fork()
    if pid == 0:  # the session leader, its terminal the pty: as a shell would start it
        try:
            _default_signals()
            os.execve(sys.executable, [*RUN, *args], clean_env())
        finally:
            os._exit(99)
    shown = b""
    try:
        for wait_for, typed in send:
            deadline = time.monotonic() + limit
            while wait_for not in shown:
                assert time.monotonic() < deadline, shown
                r, _, _ = select.select([master], [], [], 1)
                if r:
                    try:
                        shown += os.read(master, 4096)
                    except OSError:  # EIO: the terminal's other side closed
                        break
            os.write(master, typed)
        while True:
            r, _, _ = select.select([master], [], [], limit)
            if not r:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(master)
    return os.waitstatus_to_exitcode(status), shown


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pty job control as on Linux")
def test_on_a_terminal_the_job_reads_it_and_gets_ctrl_c_once():
    # A debugger's prompt must work under `run` (the job reads the terminal: it is the foreground
    # group), and Ctrl-C typed there reaches the job once, not twice (the kernel's and a forward).
    script = textwrap.dedent("""\
        import signal, sys, time
        n = 0
        def on(s, f):
            global n
            n += 1
            print("INT", n, flush=True)
        signal.signal(signal.SIGINT, on)
        line = input("prompt> ")
        print("got", line.upper(), flush=True)
        while n == 0:
            time.sleep(0.05)
        time.sleep(0.5)
        print("INTs", n, flush=True)
        sys.exit(9)
    """)
    code, shown = _pty_run(["--no-gate", "--", PY, "-c", script], [(b"prompt> ", b"hello\n"), (b"got HELLO", b"\x03")])
    assert code == 9, shown
    assert b"got HELLO" in shown and b"INTs 1" in shown, shown


@pytest.mark.skipif(not Path("/bin/bash").exists() or not sys.platform.startswith("linux"), reason="needs bash")
def test_ctrl_z_and_fg_in_an_interactive_shell():
    # The job holds the terminal; Ctrl-Z stops it, and rdmadoctor stops with it so the shell sees
    # a stopped job (not a hung one); `fg` gives the terminal back to the job, which reads it.
    import pty

    job = f"{PY} -c 'print(\"ready\", flush=True); print(\"got\", input(), flush=True)'"
    line = f"{' '.join(RUN)} --no-gate -- {job}\n".encode()
    pid, master = pty.fork()
    if pid == 0:
        try:
            env = dict(clean_env(), PS1="PROMPT$ ", TERM="dumb", HOME="/tmp")
            os.execve("/bin/bash", ["bash", "--norc", "--noprofile", "-i"], env)
        finally:
            os._exit(99)
    shown = b""

    def until(needle: bytes, limit: float = 120) -> None:
        nonlocal shown
        deadline = time.monotonic() + limit
        while needle not in shown:
            assert time.monotonic() < deadline, shown[-2000:]
            r, _, _ = select.select([master], [], [], 1)
            if r:
                try:
                    shown += os.read(master, 4096)
                except OSError:
                    break

    try:
        until(b"PROMPT$ ")
        os.write(master, line)
        until(b"ready\r\n")
        os.write(master, b"\x1a")  # Ctrl-Z
        until(b"Stopped")
        shown = b""
        os.write(master, b"fg\n")
        until(b"--no-gate -- ")  # bash names the job it brings back
        os.write(master, b"hello\n")
        until(b"got hello")
        until(b"PROMPT$ ")
        os.write(master, b"echo status=$?\n")
        until(b"status=0")
        os.write(master, b"exit\n")
    finally:
        os.kill(pid, signal.SIGKILL) if not _reaped(pid) else None
        os.close(master)


def _reaped(pid: int, limit: float = 30) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return True
        time.sleep(0.05)
    return False


# --- the command line ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--example", "hgx-h100-ib", "--", "torchrun", "--nproc_per_node=8", "--", "-h"],
        ["--root", "/host", "--profile", "hgx-8gpu-ndr", "--set", "a=1", "--skip", "gpu.topology", "--expect-hcas", "8",
         "--min-rate", "400", "--strict", "--verbose", "--only", "ib", "--job-uid", "1000", "--", "x"],
        ["--bundle", "b.tar.gz", "--wait-for-master", "--master-addr", "m", "--master-port", "23456",
         "--master-timeout", "5", "--timeout", "2.5", "--json", "--", "x", "--json"],
        ["--no-gate", "--nccl-debug", "--report-file", "/tmp/r.json", "--", "python", "-u", "train.py"],
    ],
)
def test_fast_parser_matches_typer(args, monkeypatch):
    from typer.testing import CliRunner

    from rdmadoctor.cli import run as cli_run
    from rdmadoctor.cli.app import app

    seen: list[dict] = []
    monkeypatch.setattr(cli_run, "run_command", lambda args: seen.append(args) or 0)
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 0, result.output
    assert cli_run.parse_argv(args) == seen[0]


def test_gate_options_are_preflights():
    # `run` takes every option of `preflight` but --exec, and its own six.
    from typer.main import get_command

    from rdmadoctor.cli.app import app

    cmd = get_command(app)
    opts = {c: {o for p in cmd.commands[c].params for o in p.opts if o.startswith("--")} for c in ("run", "preflight")}
    assert opts["run"] == (opts["preflight"] - {"--exec"}) | {"--no-gate", "--nccl-debug", "--report-file", "--read-all",
                                                                     "--metrics-port", "--drain-timeout"}
    r = run("--no-gate", "python3", "-c", "import sys; print(sys.argv[1:])", "--json")  # no `--`: still CMD's
    assert r.returncode == 0 and r.stdout == b"['--json']\n"


def test_examples_show_the_run_prefix_form():
    yaml = pytest.importorskip("yaml")
    from typer.main import get_command

    from rdmadoctor.cli.app import app

    known = {o for p in get_command(app).commands["run"].params for o in p.opts}
    def commands(node):
        if isinstance(node, dict):
            if isinstance(node.get("command"), list):
                yield node["command"]
            for v in node.values():
                yield from commands(v)
        elif isinstance(node, list):
            for v in node:
                yield from commands(v)

    found: dict[str, list] = {}
    for path in sorted((ROOT / "deploy" / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            for argv in commands(doc):
                if argv[:2] == ["rdmadoctor", "run"]:
                    found.setdefault(doc["kind"], []).append(argv)
    assert set(found) >= {"PyTorchJob", "Job"}
    for kind, calls in found.items():
        for argv in calls:
            rest = argv[2:]
            assert "--" in rest and rest[rest.index("--") + 1] == "torchrun", (kind, argv)
            flags = [a.split("=", 1)[0] for a in rest[: rest.index("--")] if a.startswith("--")]
            assert set(flags) <= known, (kind, set(flags) - known)


def test_line_feed_keeps_streams_apart_and_cuts_long_lines():
    from rdmadoctor.supervise import LINE_LIMIT, LineFeed

    fed: list[bytes] = []
    out, err = LineFeed(fed.append), LineFeed(fed.append)
    err.push(b"progress 10%\r progress")
    out.push(b"NCCL INFO Using network IB\nNCCL INFO Chan")
    err.push(b" 20%")
    out.push(b"nel 00/0\n")
    err.close()
    assert fed == [b"NCCL INFO Using network IB\n", b"NCCL INFO Channel 00/0\n", b"progress 10%\r progress 20%\n"]
    fed.clear()
    big = LineFeed(fed.append)
    for _ in range(10):
        big.push(b"y" * (LINE_LIMIT // 2))
    big.push(b"yyy\nnext\n")
    assert [len(x) for x in fed] == [LINE_LIMIT + 1, 5] and fed[1] == b"next\n"
    assert big.pending == b""


def test_the_middle_of_a_long_output_is_counted_not_read(monkeypatch):
    """run reads CMD's first and last READ_HEAD/READ_TAIL bytes (and NCCL lines until the
    transport is known); the lines after the middle keep their true numbers."""
    from rdmadoctor.logs import Diagnoser
    from rdmadoctor.supervise import diagnosis

    monkeypatch.setattr(diagnosis, "READ_HEAD", 1000)
    monkeypatch.setattr(diagnosis, "READ_TAIL", 1000)
    init = [b"h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n",
            b"h:1:1 [0] NCCL INFO Using network IB\n",
            b"h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n"]
    warn = (b"h:1:2 [0] transport/net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer p<1> with error 12, "
            b"opcode 0, len 0, vendor err 129\n")
    filler = b"step 000000 loss 2.0000 lr 1e-4 tokens/s 123456\n"  # 48 bytes
    tail_warn = warn.replace(b"error 12", b"error 4")

    def watch(lines, read_all=False):
        d = Diagnoser()
        w = diagnosis.Watch(d, "job output", read_all=read_all)
        for ln in lines:
            w.feed(ln)
        w.close()
        return d.finish()

    # The transport is known from the head: the WARN at line 74 (past the head, long before the
    # tail) is counted, not read; the one at line 575 is in the tail and keeps its number.
    lines = init + [filler] * 20 + [filler] * 50 + [warn] + [filler] * 500 + [tail_warn] + [filler] * 5
    got = watch(lines)
    assert [(f.subject.split(",")[0], f.data["evidence"][0]["line"]) for f in got.findings] == [
        ("status 4 IBV_WC_LOC_PROT_ERR", 575)]
    assert got.sources[0]["lines"] == len(lines)
    assert any("in the middle of the output were not read" in n for n in got.notes)
    # --read-all: everything.
    assert [f.data["evidence"][0]["line"] for f in watch(lines, read_all=True).findings] == [74, 575]
    # The transport not known yet: an NCCL line in the middle is read, with its true number.
    lines = [filler] * 70 + [warn] + [filler] * 500 + [tail_warn] + [filler] * 5
    assert [f.data["evidence"][0]["line"] for f in watch(lines).findings] == [71, 572]
