"""Job logs for a bundle (``collect --log FILE``): read bounded, kept under ``logs/``.

A log is read decompressed (gzip, bzip2, xz) in pieces; a long one keeps its head and its tail,
whole lines each, around a marker line that says how much was left out.
"""

from __future__ import annotations

import io
import os
import posixpath
import stat
from dataclasses import dataclass
from typing import Any

# Job logs (`collect --log FILE`): of a longer log the first LOG_HEAD bytes (NCCL's version, its
# choice of network and the first errors are printed at init) and the last LOG_TAIL (where the
# job died) are kept, whole lines each, with a marker line where the middle was left out. All
# logs together keep at most MAX_LOG_BYTES, so a bundle stays far below what a reader accepts
# (host.bundle.MAX_BUNDLE).
LOG_HEAD = 4 * 1024 * 1024
LOG_TAIL = 28 * 1024 * 1024
MAX_LOG_BYTES = 128 * 1024 * 1024


class CollectError(Exception):
    """An input of ``collect`` cannot be used (a --log file that is missing, a directory ...)."""



@dataclass
class Log:
    name: str  # its member in the bundle: "logs/rank0.log"
    source: str  # the path given ("-": stdin)
    data: bytes
    bytes_read: int  # decompressed
    cut: int = 0  # bytes left out of the middle
    error: str | None = None  # reading stopped early (a gzip file cut short)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "bytes_read": self.bytes_read, "bytes_kept": len(self.data),
                "cut_bytes": self.cut, "error": self.error}


def _log_name(path: str, gz: bool, taken: set[str]) -> str:
    import re

    base = "stdin.log" if path == "-" else posixpath.basename(path.rstrip("/")) or "log"
    if gz:
        base = re.sub(r"\.(?:gz|gzip|bz2|xz)$", "", base) or "log"
    base = re.sub(r"[^A-Za-z0-9._+-]", "_", base)
    if base.startswith("."):
        base = "log" + base
    name, n = base, 1
    while name in taken:  # rank0.log from two folders: rank0-2.log
        n += 1
        stem, dot, ext = base.rpartition(".")
        name = f"{stem}-{n}.{ext}" if dot and stem else f"{base}-{n}"
    taken.add(name)
    return name


def read_log(path: str, taken: set[str], stdin: Any = None) -> Log:
    """A job log for the bundle: whole when it is short, else its first LOG_HEAD and last LOG_TAIL
    bytes (whole lines) around a marker line. gzip, bzip2 and xz input is stored unpacked. Raises CollectError
    (and reads no further) for an input that is not text: binary data, zstd."""
    from collections import deque

    from rdmadoctor.logs import reader

    try:
        stream = reader.open_source(path, stdin=stdin)
    except reader.SourceError as e:
        raise CollectError(str(e)) from None
    peek = getattr(stream, "peek", None)
    gz = bool(peek and reader.compression(peek(10)[:10]) in ("gzip", "bzip2", "xz"))
    # A regular file ends; stdin, a FIFO or a device (/dev/zero, `yes |`) may not: reading one
    # stops at MAX_LOG_BYTES, the logs' budget, and keeps what was read up to there.
    try:
        budget = None if stat.S_ISREG(os.fstat(stream.fileno()).st_mode) else MAX_LOG_BYTES
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        budget = MAX_LOG_BYTES
    head = bytearray()
    tail: deque[bytes] = deque()
    tail_len = total = 0
    error = None
    try:
        for chunk in reader.chunks(stream):  # decompressed stream by stream, bounded pieces
            if not total:
                why = reader.binary_reason(chunk)
                if why:  # /dev/zero, /dev/urandom, a zip: not read further, the command stops
                    raise CollectError(f"{path}: {reader.binary_message(why)}")
            total += len(chunk)
            if len(head) < LOG_HEAD:
                take = LOG_HEAD - len(head)
                head += chunk[:take]
                chunk = chunk[take:]
            if chunk:
                tail.append(chunk)
                tail_len += len(chunk)
                while tail and tail_len - len(tail[0]) >= LOG_TAIL:
                    tail_len -= len(tail.popleft())
            if budget is not None and total >= budget:
                error = (f"reading stopped after {total} bytes, collect's log budget ({MAX_LOG_BYTES // (1 << 20)} MiB): "
                         f"{'stdin' if path == '-' else path} is not a regular file and may never end; what was read up "
                         "to there is kept (its first and last bytes)")
                break
    except reader.SourceError as e:  # zstd: no reader
        raise CollectError(f"{path}: {e}") from None
    except reader.TruncatedInput as e:
        if not total:  # nothing of the log to keep: as for a file that cannot be read, the command stops
            raise CollectError(f"{path}: {e}; nothing before it could be read") from None
        error = f"{e}; the bytes before it are kept in the bundle"
    finally:
        if path != "-":
            stream.close()
    rest = b"".join(tail)
    rest = rest[-LOG_TAIL:] if len(rest) > LOG_TAIL else rest
    kept_head = bytes(head)
    if total > len(head) + len(rest):
        # The middle goes: end the head and start the tail on a line boundary.
        nl = kept_head.rfind(b"\n")
        kept_head = kept_head[: nl + 1] if nl >= 0 else kept_head
        nl = rest.find(b"\n")
        rest = rest[nl + 1 :] if 0 <= nl < len(rest) - 1 else rest
        cut = total - len(kept_head) - len(rest)
        marker = (f"[rdmadoctor collect: {cut} bytes of this log left out here; its first {len(kept_head)} and last "
                  f"{len(rest)} bytes are kept]\n").encode()
        return Log(f"logs/{_log_name(path, gz, taken)}", path, kept_head + marker + rest, total, cut, error)
    return Log(f"logs/{_log_name(path, gz, taken)}", path, kept_head + rest, total, 0, error)


def read_logs(paths: list[str] | tuple[str, ...], stdin: Any = None) -> list[Log]:
    """Every --log, in order; past MAX_LOG_BYTES in all a log is listed in the manifest, not kept."""
    out: list[Log] = []
    taken: set[str] = set()
    kept = 0
    for path in paths:
        log = read_log(path, taken, stdin=stdin)
        if kept + len(log.data) > MAX_LOG_BYTES:
            log = Log(log.name, path, b"", log.bytes_read, log.bytes_read,
                      f"not kept: the bundle's logs already hold {kept} bytes (at most {MAX_LOG_BYTES} in all)")
        kept += len(log.data)
        out.append(log)
    return out
