"""Trees of files a Host reads through: the interface, and a directory (the live root, --root, an
unpacked bundle). Paths given to a tree are normalised, absolute and already resolved by Host.
"""

from __future__ import annotations

import os

MAX_READ = 4 * 1024 * 1024  # no sysfs or proc file we read is near this; a bigger one is not ours


class HostError(Exception):
    """The host (root, bundle) cannot be used at all; a usage error, exit code 2."""


class _Tree:
    """Primitive access to one tree of files. Paths are normalised, absolute, unresolved."""

    def kind(self, path: str) -> str | None:  # "file" | "dir" | "link" | None
        raise NotImplementedError

    def readlink(self, path: str) -> str:
        raise NotImplementedError

    def read(self, path: str, limit: int) -> bytes:
        raise NotImplementedError

    def listdir(self, path: str) -> list[str]:
        raise NotImplementedError


# O_NONBLOCK: opening a FIFO planted in a bundle (proc/modules) for reading waits for a writer
# that never comes; O_NOCTTY: a tty node must not become our terminal; O_NOFOLLOW: Host resolved
# every link inside the tree, so a link here was swapped in after that and would lead outside.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW


class _DirTree(_Tree):
    def __init__(self, root: str):
        self.root = root.rstrip("/") or "/"

    def _p(self, path: str) -> str:
        return self.root + path if self.root != "/" else path

    def kind(self, path: str) -> str | None:
        import stat

        try:
            m = os.lstat(self._p(path)).st_mode
        except (OSError, ValueError):
            return None
        if stat.S_ISLNK(m):
            return "link"
        if stat.S_ISDIR(m):
            return "dir"
        return "file"

    def readlink(self, path: str) -> str:
        return os.readlink(self._p(path))

    def read(self, path: str, limit: int) -> bytes:
        """Content of a regular file only: a FIFO, socket or device node reads as unreadable."""
        import stat

        fd = os.open(self._p(path), _OPEN_FLAGS)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"not a regular file: {path}")
            f = open(fd, "rb")  # noqa: SIM115 - owns fd from here; O_NONBLOCK does nothing to regular files
        except BaseException:
            os.close(fd)
            raise
        with f:
            return f.read(limit)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(self._p(path))
