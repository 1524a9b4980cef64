"""What a path is, in words, and a bounded read of a regular file.

One place for what --config, a kubeconfig, --bundle and an output target (--report-file,
collect -o) say when they are handed something that is not a regular file (/dev/zero, a FIFO,
a directory), and for reading a small file without ever reading more than its cap or waiting on
a FIFO with no writer.
"""

from __future__ import annotations

import os
import stat

_KINDS = (
    (stat.S_ISLNK, "a symlink"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def kind(mode: int) -> str:
    """"a directory", "a character device", ... for an ``st_mode``; "a regular file" for one."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


class NotRegular(OSError):
    """The path is there but is not a regular file; ``kind`` says what it is."""

    def __init__(self, what: str):
        super().__init__(what)
        self.kind = what


def read_regular(path: str, cap: int) -> bytes:
    """At most ``cap`` + 1 bytes of the regular file ``path`` (more than ``cap``: it is larger).

    Opened without blocking, so a FIFO without a writer is refused, not waited on; judged by what
    it is before a byte is read. Raises what open(2) raises (FileNotFoundError,
    IsADirectoryError, PermissionError, ...), NotRegular, or an OSError from read(2).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(kind(mode))
        chunks: list[bytes] = []
        left = cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
