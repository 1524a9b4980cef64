"""An in-memory tree, for tests and generated examples: ``mem_host({"/sys/x": b"1", "/l": Link("x")})``."""

from __future__ import annotations

import posixpath

from rdmadoctor.core.record import field, record
from rdmadoctor.host.tree import _Tree

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from rdmadoctor.host import Host


@record(frozen=False)
class MemTree(_Tree):
    """An in-memory tree for tests and generated examples: path -> bytes, or ``Link(target)``."""

    files: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._children: dict[str, set[str]] = {"/": set()}
        norm = {}
        for p, v in self.files.items():
            p = posixpath.normpath("/" + p.lstrip("/"))
            norm[p] = v
            child = p
            while child != "/":
                parent = posixpath.dirname(child)
                self._children.setdefault(parent, set()).add(posixpath.basename(child))
                child = parent
        self.files = norm

    def kind(self, path: str) -> str | None:
        v = self.files.get(path, None)
        if v is None:
            return "dir" if path in self._children else None
        if isinstance(v, Link):
            return "link"
        return "file"

    def readlink(self, path: str) -> str:
        v = self.files.get(path)
        if not isinstance(v, Link):
            raise OSError(path)
        return v.target

    def read(self, path: str, limit: int) -> bytes:
        v = self.files.get(path)
        if v is None or isinstance(v, Link):
            raise FileNotFoundError(path)
        if isinstance(v, str):
            v = v.encode()
        if isinstance(v, BaseException):
            raise v
        return v[:limit]

    def listdir(self, path: str) -> list[str]:
        if path not in self._children:
            raise NotADirectoryError(path)
        return sorted(self._children[path])


@record
class Link:
    target: str


def mem_host(files: dict[str, Any], label: str = "memory") -> Host:
    from rdmadoctor.host import Host

    return Host(MemTree(files), label=label, kind="bundle", live_process=False, root=None)
