"""CMD as rdmadoctor's child: started in a process group of its own, its output copied as it
arrives, INT/TERM/HUP forwarded to its group, the terminal handed to it, and reaped.

:class:`Child` runs it; :class:`ChildResult` says how it ended (the exit code rdmadoctor passes
on: its status, 128+N when signal N killed it); :class:`SpawnError` when it could not start.
"""

from __future__ import annotations

import os
import signal
import sys

from rdmadoctor.options import DRAIN_TIMEOUT_DEFAULT
from rdmadoctor.preflight.errors import PreflightError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from rdmadoctor.supervise.streams import Sink

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

READ_SIZE = 1 << 20
# A pipe holds 64 KiB by default; 1 MiB (the unprivileged maximum, fs.pipe-max-size) lets the
# child write on while rdmadoctor sleeps between coalesced reads.
PIPE_SIZE = 1 << 20
# After a read smaller than COALESCE_BYTES, wait COALESCE_S before the next one: a job printing
# line by line is then read in batches (latency stays far below what a person notices).
COALESCE_S = 0.01
COALESCE_BYTES = 64 * 1024
# Once the child has exited, what it left in the pipes is still copied, until they close, stay
# quiet for DRAIN_QUIET_S, or DRAIN_MAX_S (`run --drain-timeout`) have passed since the exit: a
# grandchild that keeps them open (a daemon the job started, a logger) is not waited for longer.
# 5 s: the job's last writes are in the pipes already (the copy reads 1 MiB at once), and the
# diagnosis gets the same bound (diagnosis.DRAIN_S); a scheduler then sees rdmadoctor end with the
# job, well inside a pod's terminationGracePeriodSeconds (30) or Slurm's KillWait (30).
DRAIN_QUIET_S = 0.1
DRAIN_MAX_S = DRAIN_TIMEOUT_DEFAULT


class SpawnError(PreflightError):
    """CMD could not be started: 127 (not found) or 126 (not executable); printed by the CLI."""

    def __init__(self, message: str, hint: str = "", code: int = 126):
        super().__init__(message, hint)
        self.code = code


def spawn_error(cmd: str, error: BaseException | None, env: dict[str, str]) -> SpawnError:
    """CMD could not be started: said as `preflight --exec` says it (preflight.run.cannot_start)."""
    from rdmadoctor.preflight.run import cannot_start

    return SpawnError(*cannot_start(cmd, error, env.get("PATH", "")))


class ChildResult:
    """How the child ended."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.returncode: int | None = None  # its exit status, when it exited
        self.signal: int | None = None  # the signal that killed it
        self.seconds = 0.0
        self.bytes = {"stdout": 0, "stderr": 0}
        self.forwarded: list[int] = []  # signals passed on to its group, in order

    @property
    def exit_code(self) -> int:
        """What rdmadoctor exits with: the child's status, 128+N when signal N killed it."""
        if self.signal is not None:
            return 128 + self.signal
        return self.returncode if self.returncode is not None else 1

    @property
    def failed(self) -> bool:
        return self.exit_code != 0

    def describe(self) -> str:
        if self.signal is not None:
            return f"was killed by signal {self.signal} ({signal_name(self.signal)})"
        return f"exited with status {self.returncode}"

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "exit_code": self.returncode,
            "signal": self.signal,
            "signal_name": signal_name(self.signal) if self.signal is not None else None,
            "seconds": round(self.seconds, 3),
            "stdout_bytes": self.bytes["stdout"],
            "stderr_bytes": self.bytes["stderr"],
            "signals_forwarded": [signal_name(s) for s in self.forwarded],
        }


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _pdeathsig() -> Callable[[], None] | None:
    """A function that asks Linux to send SIGTERM to the calling process when its parent dies.

    rdmadoctor killed with SIGKILL (an OOM kill, a runner's hard stop) must not leave the job
    running on the GPUs without anyone watching it. libc is loaded before the fork: the child
    only calls it.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the call: nobody would say so
            os._exit(128 + int(signal.SIGTERM))

    return arm


class Child:
    """Start ``argv`` in its own process group, copy its output, forward signals, reap it."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        out: Sink,
        err: Sink,
        on_data: Callable[[bytes, str], None] | None = None,
        on_eof: Callable[[str], None] | None = None,
        drain_s: float | None = None,
    ):
        self.argv = list(argv)
        self.env = env
        self.sinks = {"stdout": out, "stderr": err}
        self.on_data = on_data
        self.on_eof = on_eof
        self.result = ChildResult()
        self.pid: int | None = None
        self.pending: list[int] = []  # signals that came before the child existed
        self.reaped = False
        self.tty: int | None = None  # the terminal handed to the child's group
        self.stop_draining = False
        self.drain_s = DRAIN_MAX_S if drain_s is None else drain_s  # after the exit: see DRAIN_MAX_S
        self.exited_at: float | None = None  # time.monotonic() when the child was reaped
        self.drain_cut = False  # the pipes were still carrying output when drain_s ran out

    # -- signals ---------------------------------------------------------------------------
    def _forward(self, signum: int, frame: Any) -> None:
        if self.pid is None:
            self.pending.append(signum)
            return
        self.result.forwarded.append(signum)
        if self.reaped:
            self.stop_draining = True  # the job is over: leave what a grandchild still writes
        try:
            os.killpg(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def _install(self) -> dict[int, Any]:
        """Forward INT, TERM, HUP; wake the output loop on SIGCHLD. Returns what to restore."""
        old: dict[int, Any] = {}
        try:
            for sig in FORWARDED:
                current = signal.getsignal(sig)
                # An ignored signal (nohup, a background job of a shell) stays ignored, so the
                # child inherits it ignored, as it would without rdmadoctor.
                if current == signal.SIG_IGN:
                    continue
                old[sig] = signal.signal(sig, self._forward)
            old[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, lambda s, f: None)
        except ValueError:  # not the main thread (an embedding caller): it keeps its handling
            pass
        return old

    @staticmethod
    def _restore(old: dict[int, Any]) -> None:
        for sig, handler in old.items():
            try:
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            except (ValueError, TypeError):
                pass

    # -- the terminal ----------------------------------------------------------------------
    def _foreground(self, pgid: int) -> None:
        """Make ``pgid`` the terminal's foreground group (from the background too)."""
        if self.tty is None:
            return
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
        try:
            os.tcsetpgrp(self.tty, pgid)
        except OSError:
            pass
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def _stopped(self) -> None:
        """The child's group stopped (Ctrl-Z on the terminal it holds): stop as a shell's job
        would, and give the terminal back to it when the shell brings us to the foreground."""
        assert self.pid is not None
        try:
            if os.tcgetpgrp(self.tty) != self.pid:  # type: ignore[arg-type]
                return
        except OSError:
            return
        self._foreground(os.getpgrp())
        os.killpg(os.getpgrp(), signal.SIGTSTP)  # our job (a pipeline, perhaps) stops here
        # ... continued by `fg` (the terminal is ours again) or `bg` (it is not).
        try:
            if os.tcgetpgrp(self.tty) == os.getpgrp():  # type: ignore[arg-type]
                self._foreground(self.pid)
        except OSError:
            pass
        try:
            os.killpg(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    # -- start -----------------------------------------------------------------------------
    def _spawn(self) -> Any:
        import subprocess

        arm = _pdeathsig()

        def child_setup() -> None:
            os.setpgid(0, 0)
            if arm is not None:
                arm()

        if not self.argv[0]:
            raise spawn_error(self.argv[0], None, self.env)
        try:
            return subprocess.Popen(
                self.argv, env=self.env, stdin=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                preexec_fn=child_setup, close_fds=True, bufsize=0,
            )
        except (OSError, ValueError) as e:  # ValueError: a NUL byte in an argument
            raise spawn_error(self.argv[0], e, self.env) from None
        except subprocess.SubprocessError as e:  # the child's setup failed
            raise spawn_error(self.argv[0], e, self.env) from None

    def run(self) -> ChildResult:
        import time

        old = self._install()
        wake_r = wake_w = -1
        old_wakeup = None
        try:
            if os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp():
                self.tty = 0
        except OSError:
            self.tty = None
        try:
            try:
                wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
                old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
            except (ValueError, OSError, AttributeError):  # not the main thread: poll with a timeout
                for fd in (wake_r, wake_w):
                    if fd >= 0:
                        os.close(fd)
                wake_r = wake_w = -1
            if self.pending:  # stopped before it started: do not start it
                self.result.signal = self.pending[0]
                self.reaped = True
                return self.result
            start = time.monotonic()
            proc = self._spawn()
            self.pid = proc.pid
            self.result.pid = proc.pid
            if self.tty is not None:
                self._foreground(self.pid)
                # It may have read the terminal before it was its own (and stopped on SIGTTIN).
                os.killpg(self.pid, signal.SIGCONT)
            for sig in self.pending:  # came while it was being started
                self._forward(sig, None)
            try:
                self._pump(proc, wake_r, start)
            finally:
                if not self.reaped:
                    self._wait(block=True)
                # Reaped here, not by Popen: tell it, in its own convention (-N: killed by N).
                proc.returncode = -self.result.signal if self.result.signal else self.result.exit_code
                if self.tty is not None:
                    try:
                        if os.tcgetpgrp(self.tty) == self.pid:
                            self._foreground(os.getpgrp())
                    except OSError:
                        pass
                self.result.seconds = time.monotonic() - start
            return self.result
        finally:
            if old_wakeup is not None:
                try:
                    signal.set_wakeup_fd(old_wakeup)
                except ValueError:
                    pass
            for fd in (wake_r, wake_w):
                if fd >= 0:
                    os.close(fd)
            self._restore(old)

    # -- the loop --------------------------------------------------------------------------
    def _wait(self, block: bool) -> None:
        """Reap the child if it ended (a stop of its group is answered, not reaped)."""
        assert self.pid is not None
        flags = os.WUNTRACED | (0 if block else os.WNOHANG)
        while not self.reaped:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped by someone else (SIGCHLD ignored): status unknown
                self.reaped = True
                self.result.returncode = 255
                return
            if pid == 0:
                return
            if os.WIFSTOPPED(status):
                if self.tty is not None:
                    self._stopped()
                if not block:
                    return
                continue
            self.reaped = True
            if os.WIFSIGNALED(status):
                self.result.signal = os.WTERMSIG(status)
            else:
                self.result.returncode = os.waitstatus_to_exitcode(status)

    def _pump(self, proc: Any, wake_r: int, start: float) -> None:
        import select
        import time

        fds = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
        poller = select.poll()
        for fd in fds:
            try:
                import fcntl

                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
            except (OSError, AttributeError, ImportError):  # not Linux, or over fs.pipe-max-size
                pass
            poller.register(fd, select.POLLIN)
        if wake_r >= 0:
            poller.register(wake_r, select.POLLIN)
        # One buffer for every read: os.read would allocate (and for a large size, map and unmap)
        # READ_SIZE bytes each time, which is most of what a small read costs.
        buf = bytearray(READ_SIZE)
        view = memoryview(buf)
        exited_at: float | None = None
        after_exit = 0  # bytes copied since the child exited
        on_data, sinks, counts = self.on_data, self.sinks, self.result.bytes
        try:
            while fds:
                timeout: float | None
                if exited_at is not None:  # quiet for DRAIN_QUIET_S, or the end of drain_s, ends the copy
                    left = self.drain_s - (time.monotonic() - exited_at)
                    timeout = max(0.0, min(DRAIN_QUIET_S, left)) * 1000
                else:
                    timeout = None if wake_r >= 0 else 500
                events = poller.poll(timeout)
                got = 0
                eof = False
                woken = wake_r < 0
                for fd, _ in events:
                    if fd == wake_r:
                        woken = True  # a signal came: SIGCHLD perhaps
                        try:
                            while os.read(wake_r, 512):
                                pass
                        except BlockingIOError:
                            pass
                        continue
                    name = fds.get(fd)
                    if name is None:
                        continue
                    n = os.readv(fd, [buf])
                    if not n:
                        poller.unregister(fd)
                        del fds[fd]
                        eof = woken = True
                        if self.on_eof is not None:
                            self.on_eof(name)
                        continue
                    data = bytes(view[:n])
                    got += n
                    counts[name] += n
                    sinks[name].write(data)
                    if on_data is not None:
                        on_data(data, name)
                if exited_at is None:
                    if woken:
                        self._wait(block=False)
                    if self.reaped:
                        exited_at = self.exited_at = time.monotonic()
                    elif 0 < got < COALESCE_BYTES:
                        time.sleep(COALESCE_S)
                else:
                    after_exit += got
                    if self.stop_draining:
                        break
                    if time.monotonic() - exited_at >= self.drain_s:
                        # Still open, and still carrying output after the job's exit: said.
                        self.drain_cut = bool(fds) and after_exit > 0
                        break
                    if not got and not eof:  # quiet: what the job left is copied
                        break
        finally:
            view.release()
            for fd, name in fds.items():
                if self.on_eof is not None:
                    self.on_eof(name)
            proc.stdout.close()
            proc.stderr.close()


# -- the whole command ---------------------------------------------------------------------------
