"""What every tree of files (directory, tar bundle, memory) shares, and the error of a host
that cannot be used: the lowest module of rdmadoctor.host, so the trees need not import its
``__init__`` (and the package has no import cycle)."""

from __future__ import annotations


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

    def read_at(self, path: str, offset: int, size: int) -> bytes:
        """``size`` bytes of a regular file from ``offset`` (fewer at its end): a job log of gigabytes
        is read in pieces, never whole. Trees that can seek do better than this fallback."""
        return self.read(path, offset + size)[offset:]

    def listdir(self, path: str) -> list[str]:
        raise NotImplementedError
