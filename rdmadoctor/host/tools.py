"""Tools a live host may run (ibstat, nvidia-smi, ...), each with a hard deadline and a cap on
its output, and their results.

subprocess and shutil are imported only when a tool is actually run: a bundle or a sysfs-only
run never pays for them.
"""

from __future__ import annotations

import os
import time

from rdmadoctor.core.record import record

# Commands a live host may run, by the bundle name they are recorded under. Each gets a timeout:
# a hung tool (ibstat waiting on a stuck umad, nvidia-smi on a fallen-off GPU) must not hang us
# (Host.timeout, rdmadoctor.host.DEFAULT_TIMEOUT unless --timeout says otherwise).
COMMANDS: dict[str, tuple[str, ...]] = {
    "ibstat": ("ibstat",),
    "ibv_devinfo": ("ibv_devinfo", "-v"),
    "nvidia-smi-topo": ("nvidia-smi", "topo", "-m"),
    "ibdev2netdev": ("ibdev2netdev",),
    "show_gids": ("show_gids",),
    "ofed_info": ("ofed_info", "-s"),
    "lspci": ("lspci", "-vvv"),
}

MAX_OUTPUT = 4 * 1024 * 1024  # bytes of a tool's output kept: `lspci -vvv` of a 512-VF node is ~2 MiB
_READ = 1 << 16
_REAP_GRACE = 1.0  # seconds a killed tool gets to be reaped; one in D state is left to subprocess


@record(frozen=False)
class CmdResult:
    """A tool's output: recorded in a bundle or run now. ``text`` is None when unavailable."""

    name: str
    text: str | None
    error: str | None = None  # why there is no text, or what went wrong while running
    timed_out: bool = False
    source: str = ""  # "bundle:cmd/ibstat.txt" or "ran: ibstat"
    truncated: bool = False  # ``text`` is the first MAX_OUTPUT bytes; the tool was stopped there


def cut_message(cap: int) -> str:
    return f"output cut at {cap} bytes (the tool was stopped there; what it printed after is not known)"


def run_tool(argv: tuple[str, ...], timeout: float, name: str | None = None, cap: int = MAX_OUTPUT) -> CmdResult:
    """Run ``argv`` with stdin closed, stdout and stderr together, for at most ``timeout`` seconds.

    The deadline is hard: past it nothing is read or waited for, whatever holds the pipe. The
    tool runs in a session of its own; when it is stopped (deadline or ``cap`` bytes of output)
    its process group, its session and any process still holding its output pipe (a grandchild
    that called setsid) are killed. A tool that exited in time keeps its output even when such
    a straggler held the pipe to the deadline (said in ``error``).
    """
    import shutil  # with subprocess, ~3 ms of imports a bundle or a sysfs-only run never needs
    import subprocess

    name = name or argv[0]
    shown = " ".join(argv)
    exe = shutil.which(argv[0])
    if exe is None:
        return CmdResult(name, None, error=f"{argv[0]} not installed")
    start = time.monotonic()
    deadline = start + timeout
    try:
        proc = subprocess.Popen(
            (exe, *argv[1:]),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as e:
        return CmdResult(name, None, error=f"cannot run {argv[0]}: {e}")
    pipe = proc.stdout
    assert pipe is not None  # stdout=PIPE
    fd = pipe.fileno()
    inode = os.fstat(fd).st_ino
    try:
        out, eof = _read_until(fd, deadline, cap)
        cut = len(out) > cap
        exited = _exited(proc.pid, 0.0 if cut else deadline - time.monotonic() if eof else 0.0)
        if cut or not exited or not eof:
            _kill_all(proc.pid, inode)
    finally:
        pipe.close()
    code = _reap(proc)
    took = time.monotonic() - start
    if cut:
        text = out[:cap].decode("utf-8", "replace")
        return CmdResult(name, text, error=f"{shown}: {cut_message(cap)}", truncated=True, source=f"ran: {shown}")
    if not exited:
        return CmdResult(name, None, error=f"{shown} did not finish within {timeout:g} s (killed after {took:.1f} s)", timed_out=True)
    text = out.decode("utf-8", "replace")
    err = None if code == 0 else f"{shown} exited with {code}"
    if not eof:
        err = (f"{err}; " if err else f"{shown} exited, but ") + (
            f"a process it started kept its output open past the {timeout:g} s deadline (killed; its output so far is kept)"
        )
    return CmdResult(name, text, error=err, source=f"ran: {shown}")


def _read_until(fd: int, deadline: float, cap: int) -> tuple[bytes, bool]:
    """What the pipe gives until end of file, the deadline or ``cap`` + 1 bytes; (data, at EOF)."""
    import select

    os.set_blocking(fd, False)
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    chunks: list[bytes] = []
    kept = 0
    while kept <= cap:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"".join(chunks), False
        if not poller.poll(max(1, int(left * 1000) + 1)):
            continue  # the deadline, checked above
        try:
            data = os.read(fd, min(_READ, cap + 1 - kept))
        except BlockingIOError:
            continue
        except OSError:
            return b"".join(chunks), True
        if not data:
            return b"".join(chunks), True
        chunks.append(data)
        kept += len(data)
    return b"".join(chunks), False


def _exited(pid: int, wait: float) -> bool:
    """Whether ``pid`` has exited (within ``wait`` seconds), leaving it unreaped: until it is
    reaped its number still names its group and session, so killing those can hit nothing else."""
    end = time.monotonic() + max(wait, 0.0)
    pause = 0.001
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return True
        left = end - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)


def _kill_all(leader: int, pipe_inode: int) -> None:
    """SIGKILL the tool's process group and session, and every process holding the write end of
    its output pipe (a grandchild gone to a session of its own still has it)."""
    import signal

    try:
        os.killpg(leader, signal.SIGKILL)
    except OSError:
        pass
    me = os.getpid()
    target = f"pipe:[{pipe_inode}]"
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return
    for pid in pids:
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
            pgrp, session = int(fields[2]), int(fields[3])
        except (OSError, ValueError, IndexError):
            continue
        if leader in (pgrp, session) or _holds_write_end(pid, target):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _holds_write_end(pid: int, target: str) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False  # gone, or not ours to look at
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != target:
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}", "rb") as f:
                flags = next((line.split()[1] for line in f if line.startswith(b"flags:")), b"0")
        except (OSError, IndexError):
            continue
        if int(flags, 8) & os.O_ACCMODE == os.O_WRONLY:  # this process's read end is the same inode
            return True
    return False


def _reap(proc) -> int | None:  # a subprocess.Popen
    """The exit code; a killed tool gets _REAP_GRACE to go (one stuck in the kernel is left to
    subprocess, which reaps it later)."""
    import subprocess

    try:
        return proc.wait(_REAP_GRACE)
    except subprocess.TimeoutExpired:
        return None
