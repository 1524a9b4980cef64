"""Inputs as byte chunks: files (plain, gzip, bzip2 or xz), stdin, with one clear error each.

A log is never read whole: chunks of at most ``CHUNK`` bytes go to the Diagnoser, so a gigabyte
from 64 ranks costs the same memory as a kilobyte. Compressed input is recognised by its magic
bytes (not its name) and decompressed here with the standard library (zlib, bz2, lzma), stream by
stream (``cat a.gz b.gz`` is a valid gzip file, ``pbzip2`` and ``xz -T`` write several streams),
each step's output bounded, so a small archive that inflates to gigabytes is streamed like any
big log, and a cut archive gives what was before the cut, then an error. zstd has no reader in
the standard library: its magic gives an error that says how to decompress it.

The errors say what happened to the input only; the caller says what it did with the part before
(``diagnose`` diagnosed it, ``collect`` kept it).
"""

from __future__ import annotations

import os
import re
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CHUNK = 1 << 20
_GZIP = b"\x1f\x8b"
_XZ = b"\xfd7zXZ\x00"
_ZSTD = b"\x28\xb5\x2f\xfd"


class SourceError(Exception):
    """This input cannot be read at all (missing, a directory, not a file we can open, stdin
    closed, compressed in a format there is no reader for)."""


class TruncatedInput(Exception):
    """The input ended early (a cut compressed stream, corrupt data, a read error) after some data was read."""


def _readable(stream) -> bool:
    """The fd under ``stream`` is open for reading (not closed, not write-only)."""
    import fcntl
    import io

    try:
        fd = stream.fileno()
    except (io.UnsupportedOperation, AttributeError):  # no fd (a test's BytesIO): it reads
        return True
    except (OSError, ValueError):  # closed
        return False
    try:
        return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_WRONLY
    except OSError:  # EBADF
        return False


def open_source(path: str, stdin=None):  # a binary file object
    """A binary stream for ``path`` ("-": stdin)."""
    if path == "-":
        if stdin is not None:
            return stdin
        import sys

        # Started with stdin closed (`<&-`, a daemon's fd 0): Python sets sys.stdin to None, and
        # the console entry point (rdmadoctor.cli.streams) fills fd 0 with /dev/null opened
        # write-only, so that nothing opened later lands there: either way there is nothing to read.
        buf = getattr(sys.stdin, "buffer", None)
        if buf is None or not _readable(buf):
            raise SourceError("-: stdin is closed, there is nothing to read (pipe the log in: kubectl logs POD | rdmadoctor ..., or give its file)")
        return buf
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SourceError(f"{path}: no such file") from None
    except OSError as e:
        raise SourceError(f"{path}: cannot read it ({e.strerror or e})") from None
    if stat.S_ISDIR(st.st_mode):
        raise SourceError(f"{path}: is a directory; give the log files in it (e.g. {path.rstrip('/')}/*.log)")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        raise SourceError(f"{path}: not a regular file")
    try:
        return open(path, "rb")  # closed by the caller
    except OSError as e:
        raise SourceError(f"{path}: cannot open it ({e.strerror or e})") from None


def compression(head: bytes) -> str | None:
    """"gzip", "bzip2", "xz", "zstd" from the first bytes of an input; None: not compressed."""
    if head[:2] == _GZIP:
        return "gzip"
    if head[:3] == b"BZh" and head[3:4].isdigit() and head[3:4] != b"0" and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
        return "bzip2"
    if head[:6] == _XZ:
        return "xz"
    if head[:4] == _ZSTD:
        return "zstd"
    return None


# C0 control bytes a text log does not hold: all but BEL, BS, TAB, LF, VT, FF, CR and ESC (colours,
# progress bars, terminal captures use those), and DEL. Random or compressed bytes are ~10% these.
_CTRL = bytes(sorted(set(range(32)) - {7, 8, 9, 10, 11, 12, 13, 27})) + b"\x7f"
_C1 = bytes(range(0x80, 0xA0))  # control characters in Latin-1: not in a Latin-1 text either
BINARY_SAMPLE = 8192


def binary_reason(chunk: bytes) -> str | None:
    """Why the start of an input is not a text log ("412 control bytes in its first 8192"), else None.

    A log is text: UTF-8 (or Latin-1) with few control characters besides tabs, line ends and
    colours; random, compressed or encrypted bytes are about 10% C0 controls and mostly invalid
    UTF-8. Only a sample is looked at (once per input), never every byte."""
    head = chunk[:BINARY_SAMPLE]
    n = len(head)
    if not n:
        return None
    nul = head.count(b"\x00")
    if nul > max(8, n // 100):
        return f"{nul} NUL bytes in its first {n}"
    ctrl = n - len(head.translate(None, _CTRL))
    limit = max(2, n // 50)
    if ctrl > limit:
        return f"{ctrl} control bytes in its first {n}"
    if head.isascii():
        return None
    bad = head.decode("utf-8", "replace").count("\ufffd") - head.count("\ufffd".encode())
    if bad > max(2, n // 20):  # not UTF-8: Latin-1 text, or bytes
        c1 = n - len(head.translate(None, _C1))
        # A short input has too few bytes for the count of controls to tell: there, more than a
        # quarter not UTF-8 is bytes (a Latin-1 log is ASCII with a few accented letters).
        if ctrl + c1 > limit or (n < 1024 and bad > n // 4):
            return f"{bad} bytes that are not UTF-8 and {ctrl + c1} control bytes in its first {n}"
    return None


def binary_message(why: str) -> str:
    """What is said of an input whose start is not text (see binary_reason)."""
    return f"binary data: not a text log ({why}); an archive must be unpacked first (gzip, bzip2 and xz are read as they are)"


_HEAP_SET = False


def _keep_heap(size: int) -> None:
    """Once per process: allocate and free ``4 * size`` bytes, so that glibc's malloc keeps the
    memory of a block's buffers for the next block.

    Each chunk makes a few buffers of its size (the chunk, its whole lines, the copy without
    digits), all freed before the next. glibc gives the free memory at the top of its heap back to
    the kernel once there is more than its trim threshold (128 KiB at start); freeing a block it
    had served from mmap raises its mmap threshold to that block's size and the trim threshold to
    twice that. Left as they start, every chunk's buffers came back as fresh pages, a page fault
    each 4 KiB: about a tenth of the time of a dense log (420 faults a MiB; 20 with this). The
    allocation is calloc'd from mmap and never touched; other allocators just free it."""
    global _HEAP_SET
    if not _HEAP_SET:
        _HEAP_SET = True
        bytes(4 * size)


def chunks(stream, size: int = CHUNK):  # yields bytes
    """The content of ``stream`` in chunks of at most ``size`` bytes, decompressed when it is
    gzip, bzip2 or xz.

    Raises :class:`SourceError` before yielding anything for zstd (no reader), and
    :class:`TruncatedInput` after yielding what could be read when the data stops early.
    """
    _keep_heap(size)
    first = _read(stream, size)
    kind = compression(first)
    if kind == "gzip":
        yield from _gunzip(stream, first, size)
        return
    if kind == "bzip2":
        import bz2

        yield from _unpack(stream, first, size, bz2.BZ2Decompressor, "bzip2")
        return
    if kind == "xz":
        import lzma

        yield from _unpack(stream, first, size, lzma.LZMADecompressor, "xz")
        return
    if kind == "zstd":
        raise SourceError("zstd-compressed: decompress it first (zstd -d FILE, or zstdcat FILE | rdmadoctor ...)")
    data = first
    while data:
        yield data
        data = _read(stream, size)


def _read(stream, size: int) -> bytes:
    try:
        return stream.read(size)
    except (OSError, EOFError, ValueError) as e:
        raise TruncatedInput(f"reading stopped: {e}") from None


def _gunzip(stream, first: bytes, size: int):
    import zlib

    d = zlib.decompressobj(wbits=31)
    inp = first
    in_member = True
    while True:
        while inp:
            if not in_member:
                if not inp.strip(b"\x00"):  # tar and dd pad gzip files with zeros
                    inp = b""
                    break
                d = zlib.decompressobj(wbits=31)
                in_member = True
            try:
                out = d.decompress(inp, size)
            except zlib.error as e:
                raise TruncatedInput(f"the gzip data is corrupt ({e})") from None
            if out:
                yield out
            if d.eof:
                inp = d.unused_data
                in_member = False
            else:
                inp = d.unconsumed_tail
        inp = _read(stream, size)
        if not inp:
            if in_member:
                # Output zlib still holds for a member whose end never came.
                try:
                    rest = d.flush()
                except zlib.error:
                    rest = b""
                if rest:
                    yield rest
                raise TruncatedInput("the gzip stream is cut short (no end of stream)")
            return


def _unpack(stream, first: bytes, size: int, make, kind: str):
    """bz2 / lzma decompressors (one API): stream after stream, each call's output at most ``size``."""
    d = make()
    pending = first
    while True:
        if d is None:  # between two streams: zero padding, the next stream, or the end
            pending = pending.lstrip(b"\x00")
            if not pending:
                pending = _read(stream, size)
                if not pending:
                    return
                continue
            d = make()
        try:
            out = d.decompress(pending, size)
        except Exception as e:  # noqa: BLE001 - lzma.LZMAError; bz2 raises OSError, EOFError, ValueError
            raise TruncatedInput(f"the {kind} data is corrupt ({e})") from None
        pending = b""
        if out:
            yield out
        if d.eof:
            pending, d = d.unused_data, None
            continue
        if not d.needs_input:
            continue  # more output is waiting
        pending = _read(stream, size)
        if not pending:
            raise TruncatedInput(f"the {kind} stream is cut short (no end of stream)")


# -- text inside an input ------------------------------------------------------------------------
# A log is not always text from its first byte to its last: logrotate's copytruncate leaves a file
# that starts with a run of NULs (the writer keeps its offset, the hole reads as zeros), `cat a.log
# b.log.gz` puts a gzip member after text, a crash can leave binary garbage in the middle. The text
# around such parts is still the log: only an input that is binary from its first bytes is refused.

TEXT_BLOCK = 8192
_GZIP_MEMBER = b"\x1f\x8b\x08"  # gzip magic and deflate, the only method gzip writes
_NUL_RUN = re.compile(b"(?<=\n)\x00+")
_NUL_PER_LINE = 2  # NULs a line of text may hold and still be read (Text._nul_in_lines)


class Text:
    """Chunks of one input (as :func:`chunks` yields them) -> the text in them, with NUL runs (and
    a few NULs inside lines of text) dropped, binary stretches (TEXT_BLOCK bytes at a time) skipped
    and a gzip member that follows text inflated; what was left out is counted for :meth:`notes`.

    ``error`` is set, and nothing more is read, when the input is binary from its start (after
    any NULs): as :func:`binary_reason` says of a whole input. A chunk without control bytes (a
    plain log: all of them) passes through after two byte searches in C.
    """

    def __init__(self) -> None:
        self.error: str | None = None
        self.nul = 0  # NUL bytes dropped
        self.binary = 0  # bytes of binary data skipped
        self.binary_runs = 0
        self.members = 0  # gzip members inflated after text (one being inflated included)
        self.member_error: str | None = None
        self._started = False  # a text block was seen (or the start was judged text)
        self._z: Any = None  # the gzip member being inflated
        self._open_line = False  # the text handed out last did not end a line
        self._in_binary = False

    def parts(self, chunk: bytes) -> list[bytes]:
        if self.error is not None or not chunk:
            return []
        out: list[bytes] = []
        if self._z is not None:
            chunk = self._inflate(chunk, out) or b""
        if chunk:
            # memchr-fast: binary data holds NULs (random bytes: one in 256), a gzip member starts with \x1f
            if self._started and b"\x00" not in chunk and b"\x1f" not in chunk:
                self._text(chunk, out)
            else:
                self._mixed(chunk, out)
        return out

    def _text(self, block: bytes, out: list[bytes]) -> None:
        if self._in_binary and self._open_line:
            out.append(b"\n")  # the line cut by the binary part ends there
            self._open_line = False
        self._in_binary = False
        out.append(block)
        self._open_line = not block.endswith((b"\n", b"\r"))

    def _mixed(self, data: bytes, out: list[bytes]) -> None:
        while data and self.error is None:
            g = data.find(_GZIP_MEMBER)
            end = len(data) if g < 0 else g
            for b in range(0, end, TEXT_BLOCK):
                block = data[b:min(b + TEXT_BLOCK, end)]
                if b"\x00" in block:  # runs at a line's start; a few inside each line of text (_nul_in_lines)
                    before = len(block)
                    if not self._open_line and not self._in_binary:
                        block = block.lstrip(b"\x00")
                    block = _NUL_RUN.sub(b"", block)
                    if b"\x00" in block:
                        block = self._nul_in_lines(block)
                    self.nul += before - len(block)
                if not block:
                    continue
                why = self._binary_block(block) if self._started else binary_reason(block)
                if why:
                    head, tail = _text_edges(block)
                    if not self._started and not head:
                        self.error = binary_message(why)
                        return
                    if head:
                        self._started = True
                        self._text(head, out)
                    self._skip(len(block) - len(head) - len(tail))
                    if tail:
                        self._text(tail, out)
                    continue
                self._started = True
                self._text(block, out)
            if g < 0:
                return
            import zlib

            self._z = zlib.decompressobj(wbits=31)
            rest = self._inflate(data[g:], out, fresh=True)
            if rest is None:  # not a gzip member after all: its magic is binary, the search goes on
                self._skip(len(_GZIP_MEMBER))
                rest = data[g + len(_GZIP_MEMBER):]
            else:
                self.members += 1
                self._started = True
            data = rest

    def _nul_in_lines(self, block: bytes) -> bytes:
        """``block`` without its NULs when they are a few in each line of text (a writer that puts C
        strings whole, their NUL included, puts one on every line): the text is read around them.
        Else ``block`` as it is: NULs in long runs inside a line, or among other control bytes, are
        binary data (an executable is mostly NULs, and has few lines)."""
        clean = block.replace(b"\x00", b"")
        if len(block) - len(clean) > _NUL_PER_LINE * (block.count(b"\n") + 1):
            return block
        why = self._binary_block(clean) if self._started else binary_reason(clean)
        return block if why else clean

    def _skip(self, n: int) -> None:
        if not self._in_binary:
            self.binary_runs += 1
        self._in_binary = True
        self.binary += n

    @staticmethod
    def _binary_block(block: bytes) -> str | None:
        ctrl = len(block) - len(block.translate(None, _CTRL))
        return f"{ctrl} control bytes" if ctrl > max(2, len(block) // 50) else None

    def _inflate(self, data: bytes, out: list[bytes], fresh: bool = False) -> bytes | None:
        """Feed the member being inflated; its text goes to ``out``. Returns what follows the
        member's end (b"" while it goes on), None when the data is not gzip (zlib refused it)."""
        import zlib

        z = self._z
        inflated = False  # (zlib's objects do not say how much they gave: counted here)
        try:
            while data:
                piece = z.decompress(data, CHUNK)
                if piece:
                    inflated = True
                    self._text(piece, out)
                if z.eof:
                    self._z = None
                    return z.unused_data
                data = z.unconsumed_tail
        except zlib.error as e:
            self._z = None
            if fresh and not inflated:
                return None
            self.member_error = f"a gzip member inside the text is corrupt ({e})"
            self._skip(len(data))
        return b""

    def notes(self, name: str) -> list[str]:
        """What was left out of ``name``, one sentence each (empty: nothing)."""
        out: list[str] = []
        if self.error is not None:
            return out
        if self.nul:
            out.append(f"{name}: {self.nul} NUL bytes were skipped (a log truncated in place, as logrotate's "
                       "copytruncate leaves it, starts with a run of them; a program that writes C strings whole "
                       "ends each line with one)")
        if self.binary:
            places = "one place" if self.binary_runs == 1 else f"{self.binary_runs} places"
            out.append(f"{name}: {self.binary} bytes of binary data in {places} were skipped; "
                       "the text around them was diagnosed")
        if self.members:
            what = "a gzip member" if self.members == 1 else f"{self.members} gzip members"
            out.append(f"{name}: {what} after text {'was' if self.members == 1 else 'were'} decompressed and diagnosed")
        if self.member_error:
            out.append(f"{name}: {self.member_error}; it was skipped")
        if self._z is not None:
            out.append(f"{name}: a gzip member after text is cut short (no end of stream); what it held up to the cut was diagnosed")
        return out


def _text_edges(block: bytes) -> tuple[bytes, bytes]:
    """The whole lines of text before the first control byte of a binary ``block`` and after its
    last one (b"" each when there are none), so that text and binary data meet at a line end."""
    first = len(block) - len(block.lstrip(bytes(set(range(256)) - set(_CTRL))))
    head = block[:block.rfind(b"\n", 0, first) + 1]
    last = len(block.rstrip(bytes(set(range(256)) - set(_CTRL))))
    nl = block.find(b"\n", last)
    tail = block[nl + 1:] if nl >= 0 else b""
    if head and binary_reason(head):
        head = b""
    if tail and binary_reason(tail):
        tail = b""
    return head, tail
