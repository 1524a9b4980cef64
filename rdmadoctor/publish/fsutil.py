"""Atomic file replacement, shared by the NFD feature file and the agent's report file."""

from __future__ import annotations

import os
import tempfile
import threading

# Held for the whole of each write. A process about to exit takes it (hold_writes): a write in
# progress on another thread (the agent's cycle, abandoned at SIGTERM) finishes first, and a
# later one blocks before it creates its temp file, so no .tmp file is left behind. Reentrant:
# the exiting thread may still write (closing a publisher) while it holds it.
_WRITES = threading.RLock()


def write_atomic(path: str | os.PathLike, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old content or the new, never a mix.

    The temp file is a dot-file (NFD ignores those) in the same directory, since os.replace is
    atomic only within one filesystem; it is fsynced before the rename, so a crash cannot leave
    an empty file under the final name, and the directory after it, so the rename survives a
    power cut. ``mode``: mkstemp makes 0600, and NFD, a sidecar or `kubectl cp` must read it.
    """
    with _WRITES:
        _write(os.fspath(path), data, mode)


def hold_writes(timeout: float = 5.0) -> bool:
    """For a process about to exit: wait (at most ``timeout`` s) for a write in progress, then
    keep every other thread's write from starting until :func:`release_writes`. False when the
    write did not finish in time (a hung disk): nothing is held, the caller exits anyway."""
    return _WRITES.acquire(timeout=timeout)


def release_writes() -> None:
    _WRITES.release()


def _write(path: str, data: bytes, mode: int) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    name = os.path.basename(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:  # some filesystems refuse fsync on a directory; the rename is done anyway
        pass
    finally:
        os.close(dfd)
