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

    def listdir(self, path: str) -> list[str]:
        raise NotImplementedError
