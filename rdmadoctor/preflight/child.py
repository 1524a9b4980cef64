"""``rdmadoctor run``: the gate, then the job as a child process that rdmadoctor watches.

Unlike ``preflight --exec`` (which becomes the job), ``run`` stays the job's parent:

- the child's stdout and stderr are pipes, copied to rdmadoctor's fd 1 and fd 2 as the bytes
  arrive (no decoding, no line buffering), and fed to a :class:`~rdmadoctor.logs.Diagnoser` on
  a thread of its own (:class:`Diagnosing`: the copy never waits for diagnosis), whose
  ``on_transport`` callback prints what NCCL really uses the moment its init lines say so;
- the child runs in a process group of its own: INT, TERM and HUP sent to rdmadoctor go to that
  group (a second Ctrl-C too: the job decides what it means), and the terminal, when rdmadoctor
  has one, is handed to the child so that a debugger's prompt or Ctrl-C reaches it directly;
- rdmadoctor exits with the child's status (128+N when signal N killed it) and, when the child
  failed, prints the diagnosis of its output on stderr.

Memory is bounded whatever the child prints: each read is copied and dropped, a line longer than
:data:`LINE_LIMIT` reaches the Diagnoser cut (as the Diagnoser cuts its own), and the Diagnoser
keeps bounded state. CPU: reads are coalesced (a few milliseconds' worth of output per wake-up)
so a job printing 50k short lines a second costs a few hundred wake-ups, not 50k
(bench/run_passthrough.py measures it).

No typer and no command-line parsing here; usage problems are raised as PreflightError.
"""

from __future__ import annotations

import os
import signal
import sys

from rdmadoctor.preflight.errors import PreflightError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

SCHEMA = "rdmadoctor.run/v1"
PREFIX = "rdmadoctor: "
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

READ_SIZE = 1 << 20
# A pipe holds 64 KiB by default; 1 MiB (the unprivileged maximum, fs.pipe-max-size) lets the
# child write on while rdmadoctor sleeps between coalesced reads.
PIPE_SIZE = 1 << 20
# The Diagnoser cuts lines there too (rdmadoctor.logs.scan.MAX_LINE): no message is longer.
LINE_LIMIT = 64 * 1024
# After a read smaller than COALESCE_BYTES, wait COALESCE_S before the next one: a job printing
# line by line is then read in batches (latency stays far below what a person notices).
COALESCE_S = 0.01
COALESCE_BYTES = 64 * 1024
# Once the child has exited, what it left in the pipes is still copied; a grandchild that keeps
# them open (a daemon started by the job) is not waited for longer than this.
DRAIN_QUIET_S = 0.1
DRAIN_MAX_S = 5.0

NCCL_DEBUG_ENV = (("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", "INIT,NET"))


class SpawnError(PreflightError):
    """CMD could not be started: 127 (not found) or 126 (not executable); printed by the CLI."""

    def __init__(self, message: str, hint: str = "", code: int = 126):
        super().__init__(message, hint)
        self.code = code


def spawn_error(cmd: str, error: BaseException | None, env: dict[str, str]) -> SpawnError:
    """CMD could not be started: said as `preflight --exec` says it (preflight.run.cannot_start)."""
    from rdmadoctor.preflight.run import cannot_start

    return SpawnError(*cannot_start(cmd, error, env.get("PATH", "")))


# -- output --------------------------------------------------------------------------------------


class Sink:
    """One of rdmadoctor's output fds: every byte written, whatever the fd does.

    Partial writes are continued; a non-blocking fd (inherited O_NONBLOCK) is waited on; when
    the reader goes away (EPIPE) or the fd fails (EIO, ENOSPC), the sink closes quietly and
    what follows is dropped, so the child's pipes keep draining and the job goes on.
    """

    __slots__ = ("fd", "closed", "error", "dropped", "at_line_start", "lock")

    def __init__(self, fd: int):
        import threading

        self.fd = fd
        # The copy loop writes the job's bytes, the diagnosis thread rdmadoctor's own lines.
        self.lock = threading.RLock()
        self.closed = False
        self.error: str | None = None  # why it closed, unless the reader simply left (EPIPE)
        self.dropped = 0
        self.at_line_start = True

    def write(self, data: bytes) -> None:
        if not data:
            return
        with self.lock:
            self._write(data)

    def _write(self, data: bytes) -> None:
        self.at_line_start = data.endswith(b"\n")
        if self.closed:
            self.dropped += len(data)
            return
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                import select

                select.select([], [self.fd], [], 1.0)
                continue
            except BrokenPipeError:
                self.closed = True
            except OSError as e:
                self.closed = True
                self.error = e.strerror or str(e)
            if self.closed:
                self.dropped += len(view)
                return
            view = view[n:]

    def line(self, text: str) -> None:
        """Lines of rdmadoctor's own, each prefixed, UTF-8 whatever the locale.

        Each starts a line, so that ``grep '^rdmadoctor: '`` finds it: when the job's output
        stopped mid-line (a progress bar), a newline comes first.
        """
        data = "".join(PREFIX + part + "\n" for part in text.split("\n"))
        with self.lock:
            self.write(("" if self.at_line_start else "\n").encode() + data.encode("utf-8", "replace"))


class LineFeed:
    """One stream's bytes to the Diagnoser in whole lines.

    stdout and stderr interleave in one diagnosis: a line is handed over only when its newline
    has come, so half a line of one stream never joins a line of the other (a progress bar on
    stderr must not swallow NCCL's next INFO line on stdout). A line longer than LINE_LIMIT is
    handed over cut, and its rest is skipped up to its newline: memory stays bounded.
    """

    __slots__ = ("feed", "pending", "skipping")

    def __init__(self, feed: Callable[[bytes], None]):
        self.feed = feed
        self.pending = b""
        self.skipping = False

    def push(self, data: bytes) -> None:
        if self.skipping:
            nl = data.find(b"\n")
            if nl < 0:
                return
            data = data[nl + 1:]
            self.skipping = False
        buf = self.pending + data if self.pending else data
        nl = buf.rfind(b"\n")
        if nl >= 0:
            self.pending = buf[nl + 1:]
            self.feed(buf[: nl + 1])
        else:
            self.pending = buf
        if len(self.pending) > LINE_LIMIT:
            self.feed(self.pending[:LINE_LIMIT] + b"\n")
            self.pending = b""
            self.skipping = True

    def close(self) -> None:
        if self.pending:
            self.feed(self.pending + b"\n")
            self.pending = b""
        self.skipping = False


class Watch:
    """What of CMD's output the Diagnoser reads: the first READ_HEAD bytes (NCCL's init, where it
    chooses its transport), the last READ_TAIL bytes (where the job failed), and any batch with
    "NCCL" in it until the transport is known (at most READ_NCCL bytes of them: a job that prints
    channel lines for ever is not read for ever); the middle is counted, not read.

    Reading costs about 3-4 ns a byte (rdmadoctor.logs.scan): at 50k lines/s of 100 bytes, 1.8%
    of a core on top of the 1.1% that passing the bytes through costs, which a job that prints
    for days would pay all along for lines that are mostly step counters. Counting the middle
    costs about 0.5% (bench/run_passthrough.py, its "steady" column). --read-all reads everything.
    """

    def __init__(self, diagnoser: Any, source: str, read_all: bool = False):
        from collections import deque

        self.d, self.source = diagnoser, source
        self.head_left: int | None = None if read_all else READ_HEAD
        self.nccl_left = READ_NCCL
        self.tail: Any = deque()
        self.tail_bytes = 0
        self.skipped_lines = self.skipped_bytes = 0  # passed over, not yet told to the Diagnoser
        self.total_lines = self.total_bytes = 0  # passed over in all

    def feed(self, data: bytes) -> None:  # whole lines (LineFeed)
        if self.head_left is None or self.head_left > 0:
            if self.head_left is not None:
                self.head_left -= len(data)
            self._tell()
            self.d.feed(data, source=self.source)
            return
        if self.nccl_left > 0 and not self.d.transport_shown and b"NCCL" in data:
            self.nccl_left -= len(data)
            self._pass_over(len(self.tail))  # older than this batch: passed over for good
            self._tell()
            self.d.feed(data, source=self.source)
            return
        self.tail.append(data)
        self.tail_bytes += len(data)
        if self.tail_bytes > READ_TAIL and len(self.tail) > 1:
            self._pass_over(1)

    def _pass_over(self, n: int) -> None:
        for _ in range(n):
            old = self.tail.popleft()
            self.tail_bytes -= len(old)
            n = old.count(b"\n")
            self.skipped_lines += n
            self.skipped_bytes += len(old)
            self.total_lines += n
            self.total_bytes += len(old)

    def _tell(self) -> None:
        if self.skipped_lines:
            self.d.skip(self.skipped_lines, self.skipped_bytes, source=self.source)
            self.skipped_lines = self.skipped_bytes = 0

    def close(self) -> None:
        """At CMD's exit: count what was passed over, then read the tail."""
        self._tell()
        if self.total_lines:
            self.d.notes.append(
                f"{self.total_lines} lines ({self.total_bytes >> 20} MiB) in the middle of the output were not read: "
                f"`rdmadoctor run` reads the first {READ_HEAD >> 20} MiB and the last {READ_TAIL >> 20} MiB "
                "(--read-all reads everything; `rdmadoctor diagnose` reads a saved log whole)")
            self.total_lines = self.total_bytes = 0
        while self.tail:
            data = self.tail.popleft()
            self.d.feed(data, source=self.source)
        self.tail_bytes = 0


READ_HEAD = 16 << 20
READ_TAIL = 16 << 20
READ_NCCL = 16 << 20  # batches with "NCCL" read after the head while the transport is unknown
QUEUE_BYTES = 8 << 20  # output waiting for the diagnosis thread; beyond it, batches are dropped
# A thread woken for every 10 ms read costs more than reading it: after a small batch the
# diagnosis thread lets output gather this long (a big one means output is pouring: no pause).
DIAGNOSIS_S = 0.05
SMALL_BATCH = 256 << 10


class Diagnosing:
    """The Diagnoser on a thread of its own, so that the copy to rdmadoctor's stdout and stderr
    never waits for diagnosis (a long line, a burst of NCCL lines).

    The copy loop cuts the output into lines and chooses what is read (LineFeed, Watch: cheap,
    in C); what Watch hands the Diagnoser is queued here and read on the thread. When more than
    QUEUE_BYTES wait, a batch is counted instead of queued (its lines keep their numbers, the
    report says how many were not read): never waited for. Only the thread touches the
    Diagnoser until ``close`` has joined it. A regular expression holds the GIL while it runs:
    every pattern is linear in the line (tests/test_linear.py), so the copy waits milliseconds
    at most.
    """

    def __init__(self, diagnoser: Any, limit: int | None = None):
        import threading
        from collections import deque

        self.d = diagnoser
        self.limit = QUEUE_BYTES if limit is None else limit
        self.queue: Any = deque()
        self.queued = 0  # bytes in the queue
        self.in_hand = 0  # bytes the thread took and is reading
        self.cond = threading.Condition()
        self.done = False
        self.waits = False  # the job has ended: feed waits for room
        self.error: BaseException | None = None
        self.transport_shown = False  # the Diagnoser's, as of the last batch read
        self.behind_lines = self.behind_bytes = 0
        self.thread = threading.Thread(target=self._work, name="rdmadoctor-diagnosis", daemon=True)
        self.thread.start()

    # What Watch calls on its Diagnoser (on the copy loop's side).
    @property
    def notes(self) -> list[str]:
        return self.d.notes  # appended to once the job has ended only

    def job_ended(self) -> None:
        """Nothing is copied any more: from now on ``feed`` waits for room instead of dropping."""
        self.waits = True

    def feed(self, data: bytes, source: str = "-") -> None:
        with self.cond:
            if not self.queue:
                self.cond.notify()  # the thread waits only on an empty queue
            while self.waits and self.queued + self.in_hand and self.queued + self.in_hand + len(data) > self.limit:
                self.cond.notify()
                self.cond.wait()
            if self.queued + self.in_hand + len(data) <= self.limit or self.waits:
                self.queue.append(("feed", source, data))
                self.queued += len(data)
                return
            lines = data.count(b"\n")  # whole lines (Watch hands over nothing else)
            self.behind_lines += lines
            self.behind_bytes += len(data)
            self._skip(lines, len(data), source)

    def skip(self, lines: int, nbytes: int, source: str = "-") -> None:
        with self.cond:
            if not self.queue:
                self.cond.notify()
            self._skip(lines, nbytes, source)

    def _skip(self, lines: int, nbytes: int, source: str) -> None:
        last = self.queue[-1] if self.queue else None
        if last is not None and last[0] == "skip" and last[1] == source:  # one entry for a run of them
            self.queue[-1] = ("skip", source, (last[2][0] + lines, last[2][1] + nbytes))
        else:
            self.queue.append(("skip", source, (lines, nbytes)))

    def _work(self) -> None:
        import time
        from collections import deque

        while True:
            with self.cond:
                while not self.queue and not self.done:
                    self.cond.wait()
                if not self.queue:
                    return
                batch, self.queue = self.queue, deque()
                self.in_hand, self.queued = self.queued, 0  # still counted against the limit
                done, small = self.done, self.in_hand < SMALL_BATCH
            for kind, source, data in batch:
                if self.error is not None:
                    break  # keep draining: nothing is read after a failure
                try:
                    if kind == "feed":
                        self.d.feed(data, source=source)
                    else:
                        self.d.skip(data[0], data[1], source=source)
                except BaseException as e:  # noqa: BLE001 - re-raised by close(), on the main thread
                    self.error = e
            if self.error is None:
                self.transport_shown = self.d.transport_shown
            with self.cond:
                self.in_hand = 0
                self.cond.notify_all()  # a feed waiting for room (once the job has ended)
            if small and not done and not self.waits:
                time.sleep(DIAGNOSIS_S)

    def close(self) -> None:
        """Wait for what is queued to be read; re-raise what failed on the thread."""
        with self.cond:
            self.done = True
            self.cond.notify()
        self.thread.join()
        if self.behind_lines:
            self.d.notes.append(
                f"{self.behind_lines} lines ({self.behind_bytes} bytes) of the output were not read: the diagnosis "
                f"fell behind the job's output (the copy never waits for it; at most {self.limit >> 20} MiB wait to "
                "be read)")
            self.behind_lines = self.behind_bytes = 0
        if self.error is not None:
            raise self.error


# -- the child -----------------------------------------------------------------------------------


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


def command_text(argv: list[str], limit: int = 160) -> str:
    """CMD as one shell-quoted line for a message (a long ``python -c`` script shortened)."""
    from rdmadoctor.preflight.run import shell_join

    text = shell_join(argv).replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
        on_data, sinks, counts = self.on_data, self.sinks, self.result.bytes
        try:
            while fds:
                if exited_at is not None:
                    timeout = DRAIN_QUIET_S * 1000
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
                        exited_at = time.monotonic()
                    elif 0 < got < COALESCE_BYTES:
                        time.sleep(COALESCE_S)
                elif (not got and not eof) or self.stop_draining or time.monotonic() - exited_at > DRAIN_MAX_S:
                    break
        finally:
            view.release()
            for fd, name in fds.items():
                if self.on_eof is not None:
                    self.on_eof(name)
            proc.stdout.close()
            proc.stderr.close()


# -- the whole command ---------------------------------------------------------------------------


def child_env(env: dict[str, str], nccl_debug: bool) -> tuple[dict[str, str], list[str]]:
    """The child's environment (ours, plus NCCL_DEBUG* with --nccl-debug where unset) and notes
    on why NCCL's transport may not show in its output."""
    env = dict(env)
    notes = []
    if nccl_debug:
        for key, value in NCCL_DEBUG_ENV:
            env.setdefault(key, value)
    level = env.get("NCCL_DEBUG", "").strip().upper()
    if level and level not in ("INFO", "TRACE"):
        notes.append(
            f"NCCL_DEBUG={env['NCCL_DEBUG']} is set: NCCL will not print which transport it uses "
            "(NCCL_DEBUG=INFO does; --nccl-debug sets it only where it is unset)"
        )
    if level in ("INFO", "TRACE") and env.get("NCCL_DEBUG_FILE"):
        notes.append(
            f"NCCL_DEBUG_FILE={env['NCCL_DEBUG_FILE']} is set: NCCL writes its log there, not to the "
            "job's output, so rdmadoctor cannot tell which transport it uses"
        )
    return env, notes


def transport_message(nccl: dict[str, Any], diagnoser: Any = None) -> str | None:
    """The one line printed when NCCL's transport is known; for sockets, with the reason when
    the output already showed one (NCCL_IB_DISABLE set, no IB device, a provider missing)."""
    from rdmadoctor.logs import transport_line
    from rdmadoctor.logs.nccl import is_socket

    line = transport_line(nccl)
    if line is None:
        return None
    if diagnoser is not None and is_socket(nccl.get("network"), nccl.get("plugin")):
        why = fallback_reason(diagnoser)
        if why:
            line += f"; reason: {why}"
    return line


def fallback_reason(diagnoser: Any) -> str | None:
    """The earliest problem seen so far that explains a fall back to sockets (the Diagnoser's own
    wording, as its NCCL_SOCKET_FALLBACK finding gives it)."""
    try:
        return diagnoser.fallback_reason()
    except Exception:  # noqa: BLE001 - a missing reason never stops the job's output
        return None
    return None


def _gate_text(doc: dict[str, Any], strict: bool, verbose: bool, colour: bool) -> str:
    """preflight's text verdict, from its JSON document (the checks ran once, for both)."""
    from rdmadoctor.preflight.gate import Gate
    from rdmadoctor.preflight.master import Master
    from rdmadoctor.preflight.render import render_text

    g = Gate(doc.get("report") or {}, {}, strict)
    g.problems += [p for p in doc.get("problems", []) if p.get("check") in ("master", "gang")]
    g.warnings += [p for p in doc.get("warnings", []) if p.get("check") == "gang"]
    g.unknown += [p for p in doc.get("unknown", []) if p.get("check") == "gang"]
    m = doc.get("master")
    master = Master(m["host"], m["port"], m["host_source"], m["port_source"], m.get("rank0")) if m else None
    return render_text(g, doc["verdict"], master=master, master_note=(m or {}).get("note") or "",
                       colour=colour, verbose=verbose, gang=doc.get("gang"))


def run_gate(gate_kwargs: dict[str, Any], as_json: bool, err: Any) -> tuple[int, dict[str, Any] | None]:
    """preflight's gate with its verdict on stderr (stdout is the job's); (exit code, JSON doc)."""
    import contextlib
    import io
    import json

    from rdmadoctor.preflight.render import tty_colour
    from rdmadoctor.preflight.run import run_preflight

    kwargs = dict(gate_kwargs)
    verbose = bool(kwargs.get("verbose"))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = run_preflight(**kwargs, as_json=True, exec_argv=None)
    try:
        doc = json.loads(buf.getvalue())
    except ValueError:  # stopped by a signal before a verdict
        return code, None
    if as_json:
        err.write(json.dumps(doc, indent=2) + "\n")
    else:
        err.write(_gate_text(doc, bool(kwargs.get("strict")), verbose, tty_colour(err)))
    err.flush()
    return code, doc


REPORT_FILE_HINT = "give a new file name or an existing regular file, e.g. --report-file /tmp/run.json (it is replaced whole at exit)"


def check_report_path(path: str) -> None:
    """Refuse, before the gate and the job, a --report-file that could not be written at exit or
    whose replacing would do harm (``/dev/null`` was deleted, a symlink replaced)."""
    from rdmadoctor.publish.fsutil import target_problem

    if path == "-":
        raise PreflightError("--report-file -: stdout belongs to CMD (its output passes through there), not to the report",
                             "give a file name, e.g. --report-file /tmp/run.json; the gate's verdict is on stderr (--json for JSON)")
    what = target_problem(path)
    if what == "an empty name":
        raise PreflightError("--report-file '': an empty file name (an unset shell variable?)", REPORT_FILE_HINT)
    if what:
        raise PreflightError(f"refusing to write --report-file {path}: it is {what}, not a regular file", REPORT_FILE_HINT)
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(directory):
        raise PreflightError(f"--report-file {path}: no directory {directory}", "create it first, or write the report elsewhere")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PreflightError(f"--report-file {path}: cannot write in {directory}", "choose a writable directory (e.g. /tmp)")


def run_job(
    argv: list[str],
    *,
    gate_kwargs: dict[str, Any] | None = None,
    no_gate: bool = False,
    as_json: bool = False,
    nccl_debug: bool = False,
    report_file: str | None = None,
    env: dict[str, str] | None = None,
    read_all: bool = False,
) -> int:
    """The whole ``rdmadoctor run``; returns the exit code.

    Raises PreflightError (a UsageError) on a usage problem, before anything runs, and
    SpawnError (``.code`` 127 or 126) when CMD cannot be started.
    """
    import time

    from rdmadoctor.preflight.gate import EXIT, GO
    if not argv:
        raise PreflightError("run needs a command after --", "rdmadoctor run -- torchrun --nproc_per_node=8 train.py")
    if not argv[0]:  # nothing could run it: said before the gate, 127 as a shell says it
        raise spawn_error(argv[0], None, dict(os.environ if env is None else env))
    if report_file is not None:
        check_report_path(report_file)
    env, notes = child_env(dict(os.environ if env is None else env), nccl_debug)
    started = time.time()
    report: dict[str, Any] = {"schema": SCHEMA, "command": list(argv), "gate": None, "child": None,
                              "exit_code": None, "transport": None, "nccl": None, "findings": [], "notes": []}
    err = sys.stderr
    if not no_gate:
        code, doc = run_gate(gate_kwargs or {}, as_json, err)
        report["gate"] = doc
        if doc is None or doc.get("verdict") != GO:
            if doc is not None:
                err.write(f"{PREFIX}{doc['verdict'].upper()}: not running {command_text(argv)}\n")
            report["exit_code"] = code if doc is None else EXIT[doc["verdict"]]
            _write_report(report_file, report, started, err)
            return report["exit_code"]
        err.write(f"{PREFIX}running {command_text(argv)}\n")
    for note in notes:
        err.write(f"{PREFIX}note: {note}\n")
    for stream in (sys.stdout, err):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:
        return _run_child(argv, env, notes, report, report_file, started, read_all=read_all)
    except KeyboardInterrupt:  # Ctrl-C after the gate, before the child took over the signal
        err.write(f"{PREFIX}interrupted before {command_text(argv)} started\n")
        report["exit_code"] = 130
        _write_report(report_file, report, started, err)
        return 130


def _run_child(argv: list[str], env: dict[str, str], notes: list[str], report: dict[str, Any],
               report_file: str | None, started: float, read_all: bool = False) -> int:
    from rdmadoctor.logs import Diagnoser

    err = sys.stderr

    out_sink, err_sink = Sink(1), Sink(2)
    shown: list[str] = []
    diagnoser: Any = None

    def on_transport(nccl: dict[str, Any]) -> None:
        line = transport_message(nccl, diagnoser)
        if line and not shown:
            shown.append(line)
            err_sink.line(line)

    diagnoser = Diagnoser(on_transport=on_transport)
    # One source for both streams: the Diagnoser numbers lines per source and starts a new
    # source at every change of name, so two names interleaved would count lines wrongly.
    source = f"{os.path.basename(argv[0]) or argv[0]} output"
    diagnosing = Diagnosing(diagnoser)
    watch = Watch(diagnosing, source, read_all=read_all)
    feeds = {name: LineFeed(watch.feed) for name in ("stdout", "stderr")}
    child = Child(argv, env, out_sink, err_sink,
                  on_data=lambda data, name: feeds[name].push(data),
                  on_eof=lambda name: feeds[name].close())
    try:
        result = child.run()
    except SpawnError as e:
        diagnosing.close()
        report["exit_code"] = e.code
        report["notes"] = notes + [str(e)]
        _write_report(report_file, report, started, err)
        raise
    diagnosing.job_ended()
    watch.close()
    diagnosing.close()
    if result.pid is not None:  # a kill (or `timeout`'s 124) is a finding: never "no known error"
        diagnoser.job_ended(result.signal, result.returncode, command_text(argv))
    diagnosis = diagnoser.finish()
    code = result.exit_code
    report.update(child=result.to_json(), exit_code=code, nccl=diagnosis.nccl,
                  transport=shown[0] if shown else None,
                  findings=[f.to_json() for f in diagnosis.findings], notes=notes + list(diagnosis.notes))
    if result.pid is None:  # a signal came before the job started
        err_sink.line(f"stopped by signal {result.signal} ({signal_name(result.signal or 0)}) before {command_text(argv)} started")
    elif result.failed:
        from rdmadoctor.output.text import log_summary

        err_sink.line(f"{command_text(argv)} {result.describe()}")
        for line in log_summary(report["findings"], diagnosis.nccl):
            err_sink.line(line)
    if out_sink.error:
        err_sink.line(f"writing the job's stdout failed ({out_sink.error}): {out_sink.dropped} bytes were not copied")
    _write_report(report_file, report, started, err, sink=err_sink)
    return code


def _write_report(path: str | None, report: dict[str, Any], started: float, err: Any, sink: Sink | None = None) -> None:
    if path is None:
        return
    import json
    import time

    from rdmadoctor.publish.fsutil import write_atomic

    report["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    try:
        write_atomic(path, (json.dumps(report, indent=2) + "\n").encode(), regular_only=True)
    except OSError as e:
        msg = f"could not write --report-file {path}: {e.strerror or e}"
        if sink is not None:
            sink.line(msg)
        else:
            err.write(PREFIX + msg + "\n")
