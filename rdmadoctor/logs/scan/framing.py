"""Framing: bytes in any chunking become blocks of whole lines.

A chunk may end in the middle of a line (kept for the next), a CRLF may be cut between two chunks,
a lone CR ends a line as a LF does, and a line longer than ``MAX_LINE`` is cut there (its start is
read, the rest dropped up to its newline, and the cut is said in a note). Sources are named and
counted here: bytes, lines, lines passed over (``skip``) and why one could not be read (``error``).
Each block of whole lines goes to the router (``Diagnoser._block``).
"""

from __future__ import annotations

import re

from rdmadoctor.core.words import count

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

MAX_LINE = 64 * 1024
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def _whole(block: bytes) -> bytes:
    """A block of whole lines as the scan reads it: CR and CRLF end a line, ANSI colour is gone."""
    if b"\r" in block:
        block = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if b"\x1b" in block:
        block = _ANSI.sub(b"", block)
    return block


class Framing:
    """Owns the sources (``sources``, ``_source``, ``_src_index``), the line count ``_lineno``, the
    open end of the last chunk (``_tail``, ``_cr``, ``_skipping``) and the count of cut lines."""

    if TYPE_CHECKING:
        def _block(self, block: bytes) -> None: ...  # the router: one block of whole lines
        def _close_segment(self) -> None: ...  # pastes: a source's end or a gap ends a tool's output
        def _end_errors(self) -> None: ...  # errors: a source's end cuts the traceback being read

    def _start_framing(self) -> None:
        self.sources: list[dict] = []
        self.notes: list[str] = []
        self._source: dict | None = None
        self._src_index = -1
        self._tail = b""
        self._skipping = False  # inside a line longer than MAX_LINE: drop until its newline
        self._cr = False  # the last chunk ended with a CR (made a line end): a LF first in the next is its CRLF
        self._lineno = 0  # lines completed in this source
        self._cut_lines = 0

    def _ensure_source(self, name: str) -> dict:
        if self._source is None or self._source["name"] != name:
            self.end_source()
            self._src_index += 1
            self._source = {"name": name, "bytes": 0, "lines": 0, "error": None}
            self.sources.append(self._source)
            self._lineno = 0
            self._cr = False
        return self._source

    def feed(self, data: bytes, source: str = "-") -> None:
        src = self._ensure_source(source)
        if not data:
            return
        src["bytes"] += len(data)
        if self._cr:
            self._cr = False
            if data[:1] == b"\n":  # the LF of a CRLF cut between two chunks
                data = data[1:]
                if not data:
                    return
        if b"\r" in data:
            # A lone CR ends a line as a LF does (old Mac files, a progress bar that rewrites its
            # line, a log of CRs only), here before the MAX_LINE cut: else a log with CR endings
            # only would be one long line, read for its first MAX_LINE bytes. CRLF is one end.
            self._cr = data.endswith(b"\r")
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                return
            data = data[nl + 1:]
            self._skipping = False
            self._lineno += 1
        last = data.rfind(b"\n")
        if last < 0:
            self._tail += data
        else:
            if self._tail:
                # The line the previous chunk left open, completed: a small block of its own,
                # so the big chunk is never copied just to glue a few bytes in front.
                first = data.find(b"\n") + 1
                self._block(self._tail + data[:first])
                self._tail = b""
                if first <= last:
                    self._block(data[first:last + 1])
            else:
                self._block(data if last + 1 == len(data) else data[:last + 1])
            self._tail = data[last + 1:]
        if len(self._tail) > MAX_LINE:
            # A line longer than any message: keep its start for matching, drop the rest.
            self._block(self._tail[:MAX_LINE] + b"\n")
            self._lineno -= 1  # the cut line continues: it is counted once, at its newline
            self._cut_lines += 1
            self._tail = b""
            self._skipping = True

    def read(self, path: str, *, stdin=None, progress: Callable[[int], None] | None = None) -> None:
        """Read one file (plain or gzip; ``-``: stdin) to its end; what stops it is that source's error."""
        from rdmadoctor.logs import reader

        self._ensure_source(path)
        try:
            stream = reader.open_source(path, stdin=stdin)
        except reader.SourceError as e:
            self.error(str(e), path)
            self.end_source()
            return
        try:
            self.read_stream(path, stream, progress=progress)
        finally:
            if path != "-":
                stream.close()

    def read_stream(self, name: str, stream, *, progress: Callable[[int], None] | None = None) -> None:
        """Read a binary stream (plain, gzip, bzip2 or xz) to its end as the source ``name``."""
        from rdmadoctor.logs import reader

        src = self._ensure_source(name)
        text = reader.Text()  # NUL runs and binary parts skipped, a gzip member after text inflated
        try:
            for chunk in reader.chunks(stream):
                for part in text.parts(chunk):
                    self.feed(part, source=name)
                if text.error is not None:
                    self.error(f"{name}: {text.error}; nothing was read")
                    break
                if progress is not None:
                    progress(len(chunk))
        except reader.SourceError as e:
            self.error(f"{name}: {e}")
        except reader.TruncatedInput as e:
            got = src["bytes"]
            before = f"the {got} bytes before it were diagnosed" if got else "nothing before it could be read"
            self.error(f"{name}: {e}; {before}")
        self.notes.extend(text.notes(name))
        self.end_source()

    def skip(self, lines: int, nbytes: int, source: str = "-") -> None:
        """Count ``lines`` whole lines (``nbytes``) of ``source`` as passed over unread: the
        lines after them keep their true numbers (`rdmadoctor run` reads a job's first and last
        megabytes, not the middle)."""
        src = self._ensure_source(source)
        if lines <= 0:
            return
        self._close_segment()
        self._lineno += lines
        src["bytes"] += nbytes
        src["skipped_lines"] = src.get("skipped_lines", 0) + lines

    def error(self, message: str, source: str | None = None) -> None:
        """Record why a source could not be read (wholly or from some point on)."""
        if source is not None:
            self._ensure_source(source)
        if self._source is not None:
            self._source["error"] = message

    def end_source(self) -> None:
        if self._source is None:
            return
        if self._tail:
            self._block(self._tail + b"\n")
            self._tail = b""
        if self._skipping:
            self._lineno += 1
            self._skipping = False
        self._end_errors()
        self._close_segment()
        self._source["lines"] = self._lineno

    def _framing_notes(self) -> list[str]:
        """Framing's share of the finish: the lines cut for matching."""
        if self._cut_lines:
            return [f"{count(self._cut_lines, 'line')} longer than {MAX_LINE // 1024} KiB were cut for matching"]
        return []
