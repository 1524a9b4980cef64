"""Inputs as byte chunks: files (plain or gzip), stdin, with one clear error each.

A log is never read whole: chunks of at most ``CHUNK`` bytes go to the Diagnoser, so a gigabyte
from 64 ranks costs the same memory as a kilobyte. Gzip is decompressed here with zlib, member
by member (``cat a.gz b.gz`` is a valid gzip file), each step's output bounded, so a small
archive that inflates to gigabytes is streamed like any big log, and a cut archive gives what
was before the cut, then an error.
"""

from __future__ import annotations

import os
import stat

CHUNK = 1 << 20
_GZIP = b"\x1f\x8b"


class SourceError(Exception):
    """This input cannot be read at all (missing, a directory, not a file we can open)."""


class TruncatedInput(Exception):
    """The input ended early (a cut gzip stream, corrupt data, a read error) after some data was read."""


def open_source(path: str, stdin=None):  # noqa: ANN001, ANN201 - a binary file object
    """A binary stream for ``path`` ("-": stdin)."""
    if path == "-":
        import sys

        return stdin if stdin is not None else sys.stdin.buffer
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
        return open(path, "rb")  # noqa: SIM115 - closed by the caller
    except OSError as e:
        raise SourceError(f"{path}: cannot open it ({e.strerror or e})") from None


def chunks(stream, size: int = CHUNK):  # noqa: ANN001, ANN201 - yields bytes
    """The content of ``stream`` in chunks of at most ``size`` bytes, gunzipped when it is gzip.

    Raises :class:`TruncatedInput` after yielding what could be read when the data stops early.
    """
    try:
        first = stream.read(size)
    except (OSError, EOFError, ValueError) as e:
        raise TruncatedInput(f"reading stopped: {e}") from None
    if first[:2] == _GZIP:
        yield from _gunzip(stream, first, size)
        return
    data = first
    while data:
        yield data
        try:
            data = stream.read(size)
        except (OSError, EOFError, ValueError) as e:
            raise TruncatedInput(f"reading stopped: {e}; the part before was diagnosed") from None


def _gunzip(stream, first: bytes, size: int):  # noqa: ANN001, ANN202
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
                raise TruncatedInput(f"the gzip data is corrupt ({e}); the part before was diagnosed") from None
            if out:
                yield out
            if d.eof:
                inp = d.unused_data
                in_member = False
            else:
                inp = d.unconsumed_tail
        try:
            inp = stream.read(size)
        except OSError as e:
            raise TruncatedInput(f"reading stopped: {e}; the part before was diagnosed") from None
        if not inp:
            if in_member:
                # Output zlib still holds for a member whose end never came.
                try:
                    rest = d.flush()
                except zlib.error:
                    rest = b""
                if rest:
                    yield rest
                raise TruncatedInput("the gzip stream is cut short (no end of stream); the part before the cut was diagnosed")
            return
