"""The copy of CMD's output: rdmadoctor's fds as sinks that never stop the job, and the cut into
whole lines that the diagnosis reads.

- :class:`Sink`: one of rdmadoctor's output fds (1 or 2), written whatever it does (a reader
  gone, a full disk): the child's pipes keep draining and the job goes on. rdmadoctor's own
  lines go through it too, each prefixed with :data:`PREFIX`.
- :class:`LineFeed`: one stream's bytes handed on in whole lines, a line longer than
  :data:`LINE_LIMIT` cut (memory stays bounded whatever the child prints).
"""

from __future__ import annotations

import os

from rdmadoctor.logs.scan import MAX_LINE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

PREFIX = "rdmadoctor: "
# Where the Diagnoser cuts its lines, so that the feed cuts there too: no message is longer.
LINE_LIMIT = MAX_LINE


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
