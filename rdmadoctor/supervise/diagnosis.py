"""What of CMD's output the Diagnoser reads, and on which thread.

- :class:`Watch`: the head, the tail and NCCL's lines until the transport is known; the middle
  is counted, not read (``--read-all`` reads everything).
- :class:`Diagnosing`: the :class:`~rdmadoctor.logs.Diagnoser` on a thread of its own, fed
  through a bounded queue, so that the copy to rdmadoctor's stdout and stderr never waits for
  diagnosis.
- :func:`transport_message`: the one line printed when NCCL's transport is known.
"""

from __future__ import annotations

from rdmadoctor.options import DRAIN_TIMEOUT_DEFAULT
from rdmadoctor.supervise.process import COALESCE_BYTES

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
# The thread reads a batch in slices of whole lines of at most this: no one call into the scan
# holds the GIL long (about 10 ms at the scan's slowest, NCCL WARN lines, 10 MB/s).
SLICE_BYTES = 64 << 10
# Output pours when the copy hands over a batch of POUR_BYTES or more (a read that did not wait:
# process.COALESCE_BYTES); for POUR_S after one, the thread sleeps between slices.
POUR_BYTES = COALESCE_BYTES
POUR_S = 0.02
# After the job ends, what is queued is read for at most DRAIN_S (`run --drain-timeout`, counted
# from the job's exit, as the copy's drain of the pipes); then the rest is counted, not read, but
# for its last FINAL_BYTES (where a job fails).
DRAIN_S = DRAIN_TIMEOUT_DEFAULT
FINAL_BYTES = 256 << 10
STOP_S = 30.0  # a call into the scan that has not returned this long after the cut is given up


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
    never waits for diagnosis (a long line, a burst of NCCL lines), and so that rdmadoctor exits
    a bounded time after the job.

    The copy loop cuts the output into lines and chooses what is read (LineFeed, Watch: cheap,
    in C); what Watch hands the Diagnoser is queued here and read on the thread. When more than
    QUEUE_BYTES wait, a batch is counted instead of queued (its lines keep their numbers, the
    report says how many were not read): never waited for. Only the thread touches the
    Diagnoser until ``close`` has joined it.

    The thread reads in slices of at most SLICE_BYTES of whole lines, so that no one call into
    the scan holds the GIL long. While the job's output pours (a batch of POUR_BYTES or more
    handed over in the last POUR_S), it sleeps between slices as long as the slice took (the copy
    loop, which gives the GIL up at every read and write, otherwise waits up to the interpreter's
    switch interval, 5 ms, to get it back each time): the scan keeps at most half of the GIL
    while the copy needs it, and what it cannot read in time is dropped and said.

    Once the job has ended (``job_ended``), ``feed`` queues without a limit (Watch's tail, in
    memory already) and ``close`` waits at most ``drain_s`` for the thread to read what is
    queued. Past it, the reading is cut: what is left is counted, not read, except its last
    FINAL_BYTES (where a job fails), and a note says how many lines were not read.
    """

    def __init__(self, diagnoser: Any, limit: int | None = None, drain_s: float | None = None):
        import threading
        from collections import deque

        self.d = diagnoser
        self.limit = QUEUE_BYTES if limit is None else limit
        self.drain_s = DRAIN_S if drain_s is None else drain_s
        self.queue: Any = deque()
        self.queued = 0  # bytes in the queue
        self.in_hand = 0  # bytes the thread took and is reading
        self.cond = threading.Condition()
        self.done = False
        self.ended = False  # the job has ended: feed queues without a limit
        self.ended_at = 0.0
        self.cut = False  # past drain_s after the job's end: what is left is counted, not read
        self.poured_at = -1.0  # when the copy last handed over a batch of POUR_BYTES or more
        self.error: BaseException | None = None
        self.transport_shown = False  # the Diagnoser's, as of the last batch read
        self.behind_lines = self.behind_bytes = 0
        self.cut_lines = self.cut_bytes = 0
        self.thread = threading.Thread(target=self._work, name="rdmadoctor-diagnosis", daemon=True)
        self.thread.start()

    # What Watch calls on its Diagnoser (on the copy loop's side).
    @property
    def notes(self) -> list[str]:
        return self.d.notes  # appended to once the job has ended only

    def job_ended(self, at: float | None = None) -> None:
        """Nothing is copied any more: from now on ``feed`` queues whatever comes (Watch's tail,
        already in memory) and ``close`` waits at most ``drain_s`` for it to be read, counted from
        ``at`` (time.monotonic() when the job exited; now by default): the copy's own drain of the
        pipes and this one share one bound."""
        import time

        with self.cond:
            self.ended = True
            self.ended_at = time.monotonic() if at is None else at
            self.cond.notify_all()

    def feed(self, data: bytes, source: str = "-") -> None:
        if len(data) >= POUR_BYTES:
            import time

            self.poured_at = time.monotonic()
        with self.cond:
            if not self.queue:
                self.cond.notify()  # the thread waits only on an empty queue
            if self.ended or self.queued + self.in_hand + len(data) <= self.limit:
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
            try:
                if self.cut:
                    self._read_cut(batch)
                else:
                    self._read(batch)
            except BaseException as e:  # noqa: BLE001 - re-raised by close(), on the main thread
                self.error = e
            if self.error is None:
                self.transport_shown = self.d.transport_shown
            with self.cond:
                self.in_hand = 0
                self.cond.notify_all()  # close(), waiting for the queue to be read
            if small and not done and not self.ended:
                time.sleep(DIAGNOSIS_S)

    def _read(self, batch: Any) -> None:
        """Read a batch slice by slice, giving way to the copy while output pours; once cut,
        what is left goes to _read_cut."""
        import time

        while batch:
            kind, source, data = batch.popleft()
            if self.error is not None:
                continue  # keep draining: nothing is read after a failure
            if kind == "skip":
                self.d.skip(data[0], data[1], source=source)
                continue
            start = 0
            while start < len(data):
                if self.cut:
                    batch.appendleft((kind, source, data[start:]))
                    with self.cond:  # nothing is fed once cut (close() comes after Watch.close)
                        batch.extend(self.queue)
                        self.queue.clear()
                        self.queued = 0
                    self._read_cut(batch)
                    return
                end = len(data) if len(data) - start <= SLICE_BYTES else data.rfind(b"\n", start, start + SLICE_BYTES) + 1
                if end <= start:  # one line longer than a slice (LineFeed cuts them at 64 KiB)
                    end = data.find(b"\n", start + SLICE_BYTES) + 1 or len(data)
                t0 = time.monotonic()
                self.d.feed(data if start == 0 and end == len(data) else data[start:end], source=source)
                start = end
                t1 = time.monotonic()
                if not self.ended and t1 - self.poured_at < POUR_S:
                    time.sleep(min(t1 - t0, POUR_S))  # the copy takes the GIL meanwhile

    def _read_cut(self, batch: Any) -> None:
        """Past the deadline: count what is left, read only its last FINAL_BYTES (whole lines)."""
        final: list[tuple[str, bytes]] = []
        budget = FINAL_BYTES
        while batch and budget > 0:  # the last lines, newest first
            kind, source, data = batch[-1]
            if kind != "feed":
                break
            if len(data) <= budget:
                final.append((source, data))
                budget -= len(data)
                batch.pop()
                continue
            cut = data.find(b"\n", len(data) - budget - 1) + 1
            if 0 < cut < len(data):
                final.append((source, data[cut:]))
                batch[-1] = (kind, source, data[:cut])
            break
        for kind, source, data in batch:
            if kind == "skip":
                lines, nbytes = data
            else:
                lines, nbytes = data.count(b"\n"), len(data)
                self.cut_lines += lines
                self.cut_bytes += nbytes
            if self.error is None:
                self.d.skip(lines, nbytes, source=source)
        batch.clear()
        for source, data in reversed(final):
            if self.error is None:
                self.d.feed(data, source=source)

    def close(self) -> None:
        """Wait for what is queued to be read, at most ``drain_s`` after the job's end (then the
        rest is counted, not read, but for its last lines); re-raise what failed on the thread."""
        import time

        with self.cond:
            if not self.ended:
                self.ended, self.ended_at = True, time.monotonic()
            self.done = True
            self.cond.notify_all()
            deadline = self.ended_at + self.drain_s
            while self.queue or self.in_hand:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.cut = True
                    break
                self.cond.wait(left)
        self.thread.join(self.drain_s + STOP_S)
        if self.thread.is_alive():  # one call into the scan that never returns: said, not waited for
            self.d.notes.append(
                f"the diagnosis did not stop within {self.drain_s + STOP_S:g} s of the job's end: it was left "
                "unfinished, and what follows may miss what it was reading (`rdmadoctor diagnose` on a saved log)")
        if self.behind_lines:
            self.d.notes.append(
                f"{self.behind_lines} lines ({self.behind_bytes} bytes) of the output were not read: the diagnosis "
                f"fell behind the job's output (the copy never waits for it; at most {self.limit >> 20} MiB wait to "
                "be read)")
            self.behind_lines = self.behind_bytes = 0
        if self.cut_lines:
            self.d.notes.append(
                f"{self.cut_lines} lines ({self.cut_bytes} bytes) of the output were not read: the diagnosis was cut "
                f"{self.drain_s:g} s after the job ended, so that rdmadoctor exits with it; the job's last "
                f"{FINAL_BYTES >> 10} KiB were read (`rdmadoctor diagnose` on a saved log reads it whole)")
            self.cut_lines = self.cut_bytes = 0
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
