"""Inputs as byte chunks: files (plain or gzip), stdin, with one clear error each.

A log is never read whole: chunks of ``CHUNK`` bytes go to the Diagnoser, so a gigabyte from 64
ranks costs the same memory as a kilobyte.
"""

from __future__ import annotations

import os
import stat

CHUNK = 1 << 20
_GZIP = b"\x1f\x8b"


class SourceError(Exception):
    """This input cannot be read at all (missing, a directory, not a file we can open)."""


def open_source(path: str, stdin=None):  # noqa: ANN001, ANN201 - a binary file object
    """A binary stream for ``path`` ("-": stdin), gunzipped when it starts with the gzip magic."""
    if path == "-":
        import sys

        raw = stdin if stdin is not None else sys.stdin.buffer
    else:
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
            raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
        except OSError as e:
            raise SourceError(f"{path}: cannot open it ({e.strerror or e})") from None
    head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    if head == _GZIP:
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="rb")
    return raw


def chunks(stream, size: int = CHUNK):  # noqa: ANN001, ANN201 - yields bytes
    """Chunks of ``stream`` until EOF. A truncated or corrupt gzip raises :class:`TruncatedInput`
    after the data that could be read was yielded."""
    import zlib

    while True:
        try:
            data = stream.read(size)
        except (EOFError, zlib.error, OSError) as e:
            raise TruncatedInput(_why(e)) from None
        if not data:
            return
        yield data


class TruncatedInput(Exception):
    """The input ended early (a cut gzip stream, a read error) after some data was read."""


def _why(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    if isinstance(e, EOFError):
        return f"the gzip stream is cut short ({text}); the part before the cut was diagnosed"
    return f"reading stopped: {text}; the part before was diagnosed"
