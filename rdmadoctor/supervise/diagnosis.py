"""What of CMD's output the Diagnoser reads, and on which thread.

- :class:`Watch`: the head, the tail and NCCL's lines until the transport is known; the middle
  is counted, not read (``--read-all`` reads everything).
- :class:`Diagnosing`: the :class:`~rdmadoctor.logs.Diagnoser` on a thread of its own, fed
  through a bounded queue, so that the copy to rdmadoctor's stdout and stderr never waits for
  diagnosis.
- :func:`transport_message`: the one line printed when NCCL's transport is known.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

READ_HEAD = 16 << 20
READ_TAIL = 16 << 20
READ_NCCL = 16 << 20  # batches with "NCCL" read after the head while the transport is unknown
QUEUE_BYTES = 8 << 20  # output waiting for the diagnosis thread; beyond it, batches are dropped
# A thread woken for every 10 ms read costs more than reading it: after a small batch the
# diagnosis thread lets output gather this long (a big one means output is pouring: no pause).
DIAGNOSIS_S = 0.05
SMALL_BATCH = 256 << 10


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
