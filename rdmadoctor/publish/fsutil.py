"""Atomic file replacement, shared by the NFD feature file, the agent's report file and `collect -o`."""

from __future__ import annotations

import os
import tempfile
import threading
from contextlib import contextmanager

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import BinaryIO, Iterator

# Held for the whole of each write. A process about to exit takes it (hold_writes): a write in
# progress on another thread (the agent's cycle, abandoned at SIGTERM) finishes first, and a
# later one blocks before it creates its temp file, so no .tmp file is left behind. Reentrant:
# the exiting thread may still write (closing a publisher) while it holds it.
_WRITES = threading.RLock()


class NotRegularFile(FileExistsError):
    """The path to replace is there and is not a regular file (a symlink, a device, a FIFO)."""


def write_atomic(path: str | os.PathLike, data: bytes, mode: int = 0o644, *, regular_only: bool = False) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old content or the new, never a mix.

    The temp file is a dot-file (NFD ignores those) in the same directory, since os.replace is
    atomic only within one filesystem; it is fsynced before the rename, so a crash cannot leave
    an empty file under the final name, and the directory after it, so the rename survives a
    power cut. ``mode``: mkstemp makes 0600, and NFD, a sidecar or `kubectl cp` must read it.
    ``regular_only``: as for :func:`replacing` (a report file given on the command line: a
    device node, a FIFO or a symlink there is never replaced; :func:`target_problem` says so
    at start).
    """
    with _WRITES:
        _write(os.fspath(path), data, mode, regular_only)


def target_problem(path: str) -> str | None:
    """Why ``path``, given on the command line as a file to replace whole (a --report-file),
    cannot be one: "an empty name", "a directory", "a character device" (``/dev/null``: the
    rename would delete the system's), "a FIFO", "a symlink" (its target is not ours to
    replace), ...; None when it is a regular file or does not exist yet."""
    if not path:
        return "an empty name"
    if path.endswith("/") or os.path.basename(path) in (".", ".."):
        return "a directory" if os.path.isdir(path) else "a directory name (it ends in /)"
    return not_regular(path)


def hold_writes(timeout: float = 5.0) -> bool:
    """For a process about to exit: wait (at most ``timeout`` s) for a write in progress, then
    keep every other thread's write from starting until :func:`release_writes`. False when the
    write did not finish in time (a hung disk): nothing is held, the caller exits anyway."""
    return _WRITES.acquire(timeout=timeout)


def release_writes() -> None:
    _WRITES.release()


def _write(path: str, data: bytes, mode: int, regular_only: bool = False) -> None:
    with replacing(path, mode, regular_only=regular_only) as f:
        fd = f.fileno()  # nothing buffered in f: straight to the file
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]


@contextmanager
def replacing(path: str | os.PathLike, mode: int = 0o644, *, regular_only: bool = False) -> Iterator[BinaryIO]:
    """A file to write that replaces ``path`` whole when the block ends without an error.

    The temp file is made by mkstemp in the same directory: an unpredictable name created with
    O_CREAT|O_EXCL, so a link planted at a guessable name (``<out>.tmp<PID>``) is never opened,
    let alone followed and truncated. On an error it is removed and ``path`` is left as it was.
    ``regular_only``: refuse (:class:`NotRegularFile`, nothing replaced) when ``path`` has become
    something other than a regular file by the time the new one is ready (a device node, a
    FIFO, a symlink: replacing one of those is never what was asked for).
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    name = os.path.basename(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with open(fd, "wb") as f:  # owns fd from here
            os.fchmod(fd, mode)
            yield f
            f.flush()
            os.fsync(fd)
        if regular_only:
            why = not_regular(path)
            if why:
                raise NotRegularFile(f"{path} is {why}, not a regular file")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _sync_dir(directory)


def not_regular(path: str | os.PathLike) -> str | None:
    """What ``path`` is when it exists and is not a regular file ("a symlink", "a FIFO", ...);
    None when it is a regular file or absent."""
    import stat

    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError:
        return None  # unreachable or not a directory on the way: creating the file will say why
    if stat.S_ISREG(mode):
        return None
    from rdmadoctor.core.files import kind

    return kind(mode)


def _sync_dir(directory: str) -> None:
    """fsync the directory, so that a rename survives a power cut."""
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
