"""Writing a host tree to disk and reading it back: a directory with relative symlinks, or a
deterministic ``.tar.gz`` (same tree, same bytes)."""

from __future__ import annotations

import gzip
import io
import os
import posixpath
import shutil
import tarfile
from typing import Any

from rdmadoctor.host import Link

MTIME = 1700000000  # 2023-11-14: fixed, so a regenerated bundle has the same bytes


def write_dir(tree: dict[str, Any], dest: str) -> None:
    """Write ``tree`` under ``dest`` (replaced if it exists), with relative symlinks."""
    if os.path.lexists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    for path, value in sorted(tree.items()):
        full = os.path.join(dest, path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if isinstance(value, Link):
            os.symlink(value.target, full)
        else:
            with open(full, "wb") as f:
                f.write(value)


def tar_bytes(tree: dict[str, Any]) -> bytes:
    """A ``.tar.gz`` of ``tree``: sorted members, fixed owner and mtime, gzip mtime 0."""
    dirs: set[str] = set()
    for path in tree:
        d = posixpath.dirname(path)
        while d not in ("/", ""):
            dirs.add(d)
            d = posixpath.dirname(d)
    entries = sorted([(d, None) for d in dirs] + list(tree.items()), key=lambda e: e[0])
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for path, value in entries:
            info = tarfile.TarInfo(path.lstrip("/"))
            info.mtime = MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if value is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tf.addfile(info)
            elif isinstance(value, Link):
                info.type, info.mode, info.linkname = tarfile.SYMTYPE, 0o777, value.target
                tf.addfile(info)
            else:
                info.mode, info.size = 0o644, len(value)
                tf.addfile(info, io.BytesIO(value))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def write_tar(tree: dict[str, Any], dest: str) -> None:
    data = tar_bytes(tree)
    with open(dest, "wb") as f:
        f.write(data)


def read_dir(root: str) -> dict[str, Any]:
    """A directory written by :func:`write_dir`, back as a tree (for comparing)."""
    out: dict[str, Any] = {}
    for base, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(base, name)
            rel = "/" + os.path.relpath(full, root).replace(os.sep, "/")
            if os.path.islink(full):
                out[rel] = Link(os.readlink(full))
            elif os.path.isfile(full):
                with open(full, "rb") as f:
                    out[rel] = f.read()
    return dict(sorted(out.items()))


def read_tar(path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tarfile.open(path, "r:*") as tf:
        for m in tf.getmembers():
            p = "/" + m.name.lstrip("./")
            if m.issym():
                out[p] = Link(m.linkname)
            elif m.isfile():
                f = tf.extractfile(m)
                out[p] = f.read() if f else b""
    return dict(sorted(out.items()))
