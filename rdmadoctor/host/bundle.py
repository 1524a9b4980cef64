"""A bundle in a tar (plain, .gz, .bz2, .xz): decompressed into memory and indexed, never unpacked.

Bundles come attached to tickets, so every byte here is untrusted. Each loop consumes its input
and counts its steps against a budget its input size allows (``max_steps``: exceeding it is a
bug here, :class:`ScanBudgetError`, never a hang); member names are confined to the bundle (no
``..``, at most MAX_PATH bytes and MAX_DEPTH components); the directory index may not grow
much beyond the data. Anything malformed is a :class:`HostError` that says where.
"""

from __future__ import annotations

from rdmadoctor.host.tree import HostError, _Tree

MAX_BUNDLE = 512 * 1024 * 1024  # unpacked; a collected bundle is a few MiB
MAX_PATH = 4096  # PATH_MAX: a longer member name is not from a file system
MAX_DEPTH = 64  # /sys/devices/<pci bridges...>/infiniband/mlx5_0/ports/1/gids/0 is ~20
_GZ_CHUNK = 1 << 16
# Names of a bundle's own top level: a single top folder other than these is a wrapper
# (`tar czf x.tar.gz bundle/`) that is looked through.
_ROOT_NAMES = frozenset(("sys", "proc", "etc", "dev", "cmd", "var", "usr", "lib", "runtime.json", "bundle.json"))


class ScanBudgetError(RuntimeError):
    """A reader loop took more steps than its input allows: a bug in this module, not bad input."""


def _step(steps: int, budget: int, what: str) -> int:
    steps += 1
    if steps > budget:
        raise ScanBudgetError(f"{what}: more than {budget} steps; the reader failed to advance")
    return steps


def gunzip(raw: bytes, max_steps: int | None = None) -> bytes:
    """Every member of a gzip stream, at most MAX_BUNDLE + 1 bytes (zlib alone: gzip costs an import).

    Input goes to zlib in chunks that start small and double, so the rest of the stream is never
    copied once per member: a file of a million empty members is read in linear time. A member
    (18 bytes at least) takes one step to start and one per piece fed, a run of zero padding one
    per 64 KiB: fewer steps than input bytes, the budget.
    """
    import zlib

    n = len(raw)
    budget = n + 2 if max_steps is None else max_steps
    view = memoryview(raw)
    out: list[bytes] = []
    total = steps = pos = 0
    while pos < n:
        steps = _step(steps, budget, "gzip")
        if raw[pos] == 0:  # members may be followed by zero padding
            seg = raw[pos : pos + _GZ_CHUNK]
            pos += len(seg) - len(seg.lstrip(b"\0"))
            continue
        d = zlib.decompressobj(31)
        chunk = 64  # an empty member is 20 bytes; a real one soon reaches _GZ_CHUNK
        while not d.eof:
            steps = _step(steps, budget, "gzip")
            if pos >= n:
                raise HostError("the gzip stream ends before its last member does (a truncated download?)")
            piece = view[pos : pos + chunk]
            # Output stops at the cap; the caller refuses anything longer than MAX_BUNDLE.
            try:
                data = d.decompress(piece, MAX_BUNDLE + 1 - total)
            except zlib.error as e:
                raise HostError(f"bad gzip data near byte {pos}: {e}") from None
            out.append(data)
            total += len(data)
            if total > MAX_BUNDLE:
                return b"".join(out)
            pos += len(piece) - len(d.unused_data)  # no unconsumed_tail: the cap was not reached
            chunk = min(chunk * 2, _GZ_CHUNK)
    return b"".join(out)


def _read_capped(f, cap: int = MAX_BUNDLE + 1) -> bytes:
    """At most ``cap`` bytes of ``f``. In pieces: read(cap) allocates all of cap up front."""
    out: list[bytes] = []
    total = 0
    while total < cap:
        piece = f.read(min(1 << 20, cap - total))
        if not piece:
            break
        out.append(piece)
        total += len(piece)
    return b"".join(out)


def _bad(off: int, why: str) -> HostError:
    return HostError(f"bad tar header at byte {off}: {why}")


def _number(field: bytes, off: int, what: str) -> int:
    """A tar numeric field: octal digits padded with NUL or space, or GNU base-256. Never negative."""
    if field[0] & 0x80:
        if field[0] != 0x80:  # 0xff starts a negative base-256 number
            raise _bad(off, f"{what} is a negative base-256 number")
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    if text.strip(b"01234567"):  # int(x, 8) would also take "-1", "+1", "1_0"
        raise _bad(off, f"{what} {text!r} is not an octal number")
    return int(text, 8)


def _checksum_ok(hdr: bytes, off: int) -> bool:
    # The checksum field counts as eight spaces (0x20 * 8 = 256).
    return _number(hdr[148:156], off, "checksum") == sum(hdr) - sum(hdr[148:156]) + 256


def _pax(body: bytes, off: int) -> dict[bytes, bytes]:
    """Records of a pax header: ``"<length> <key>=<value>\\n"``, the length counting itself."""
    rec: dict[bytes, bytes] = {}
    pos, end = 0, len(body)
    steps, budget = 0, end // 5 + 1  # every record is at least "5 k=\n"
    while pos < end and body[pos] != 0:  # NUL padding after the last record ends them
        steps = _step(steps, budget, "pax header")
        sp = body.find(b" ", pos, pos + 12)
        digits = body[pos:sp] if sp > pos else b""
        if not digits.isdigit():  # ASCII digits only: no sign, no space
            raise _bad(off, f"pax record at {pos} has no length (starts {body[pos : pos + 12]!r})")
        length = int(digits)
        if length < len(digits) + 4:
            raise _bad(off, f"pax record at {pos} has length {length}, shorter than the record itself")
        if pos + length > end:
            raise _bad(off, f"pax record at {pos} has length {length}, longer than the {end}-byte header")
        if body[pos + length - 1] != 0x0A:
            raise _bad(off, f"pax record at {pos} does not end where its length {length} says")
        key, eq, value = body[sp + 1 : pos + length - 1].partition(b"=")
        if not eq or not key:
            raise _bad(off, f"pax record at {pos} is not key=value")
        rec[key] = value
        pos += length
    return rec


def _path(name: str) -> str | None:
    """A member name as an absolute path inside the bundle; None if it climbs out or is absurd.

    "./.nccl.conf" is "/.nccl.conf" (a dot file, not "nccl.conf"); "/etc/x" and "./etc/x" are
    "/etc/x"; a name with a ".." component is dropped, as GNU tar refuses to extract it.
    """
    if len(name) > MAX_PATH:
        return None
    # tar and collect write clean names: skip the split for them
    if not name.startswith((".", "/")) and "//" not in name and "/." not in name and not name.endswith("/"):
        if name.count("/") < MAX_DEPTH:
            return "/" + name
    parts = [p for p in name.split("/") if p and p != "."]
    if ".." in parts or len(parts) > MAX_DEPTH:
        return None
    return "/" + "/".join(parts)


_TAR_KINDS = {b"0": "file", b"\0": "file", b"7": "file", b"1": "hard", b"2": "link", b"3": "file", b"4": "file", b"5": "dir"}
_TOO_LONG = "/" * (MAX_PATH + 1)  # a GNU L/K name past MAX_PATH: fails the length test, so its member is dropped


def scan_tar(raw: bytes, max_steps: int | None = None) -> list[tuple[str, str, int, int, str]]:
    """Index a tar (ustar, GNU, pax, v7): (path, kind, data offset, size, link target).

    tarfile builds a TarInfo per member and checks every field: 80 ms for a 2000-member bundle,
    most of a `check` run; it also has had its own loops on crafted headers. This reads only what
    a bundle needs. Every header moves on by at least 512 bytes, so at most len(raw) // 512 + 1
    steps. ``path`` is absolute and normalised, a hard link's target too; members whose name
    leaves the bundle or is too long or deep are left out.
    """
    n = len(raw)
    if n < 512:
        raise HostError("not a tar: shorter than one 512-byte header")
    budget = n // 512 + 1 if max_steps is None else max_steps
    steps = off = 0
    out = []
    long_name = long_link = None
    while off + 512 <= n:
        steps = _step(steps, budget, "tar")
        hdr = raw[off : off + 512]
        if hdr[0] == 0 and hdr.count(0) == 512:
            break
        magic = hdr[257:263]
        if magic != b"ustar\x00" and magic != b"ustar ":
            # v7 tar has no magic; without one, only a right checksum says this is a header.
            if not _checksum_ok(hdr, off):
                raise _bad(off, "neither a ustar header nor a v7 one with a right checksum")
        size_field = hdr[124:136]
        if size_field[11] in (0, 32) and size_field[:11].isdigit():  # 11 digits, NUL or space: tar's way
            try:
                size = int(size_field[:11], 8)
            except ValueError:
                raise _bad(off, f"size {size_field[:11]!r} is not an octal number") from None
        else:
            size = _number(size_field, off, "size")
        flag = hdr[156:157]
        data = off + 512
        if size > n - data:
            raise _bad(off, f"member of {size} bytes runs past the end of the archive (a truncated download?)")
        off = data + (size + 511) // 512 * 512
        if flag in (b"x", b"L", b"K"):
            if flag == b"x":
                rec = _pax(raw[data : data + size], data - 512)
                if b"path" in rec:
                    long_name = _decode(rec[b"path"])
                if b"linkpath" in rec:
                    long_link = _decode(rec[b"linkpath"])
            elif size > MAX_PATH + 1:  # GNU long name: the name, a NUL
                long_name, long_link = (_TOO_LONG, long_link) if flag == b"L" else (long_name, _TOO_LONG)
            else:
                text = _decode(raw[data : data + size].split(b"\0", 1)[0])
                long_name, long_link = (text, long_link) if flag == b"L" else (long_name, text)
            continue
        if flag == b"g":
            continue  # pax global header: nothing a bundle needs
        name = long_name
        if name is None:
            name = hdr[0:100].split(b"\0", 1)[0]
            if hdr[345] and magic == b"ustar\x00":  # POSIX prefix; GNU keeps atime there
                name = hdr[345:500].split(b"\0", 1)[0] + b"/" + name
            name = _decode(name)
        link = long_link if long_link is not None else _decode(hdr[157:257].split(b"\0", 1)[0])
        long_name = long_link = None
        kind = _TAR_KINDS.get(flag)
        if kind is None:
            continue  # fifos and the like: nothing a check reads
        if kind == "file" and name.endswith("/"):
            kind = "dir"  # v7 writes a directory as a file whose name ends in "/"
        if kind != "file":
            size = 0
        elif flag in (b"3", b"4"):
            size = 0  # device nodes recorded by collect: they exist, they have no content
        path = _path(name)
        if path is None or path == "/" or len(link) > MAX_PATH:
            continue
        if kind == "hard":
            link = _path(link)
            if link is None:
                continue
        out.append((path, kind, data, size, link))
    return out


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


class _TarTree(_Tree):
    """A tar bundle (plain, .gz, .bz2, .xz), unpacked in memory, never on disk."""

    def __init__(self, path: str):
        # Decompress once into memory: reading members of a .tar.gz one by one seeks backwards in
        # the gzip stream, which restarts decompression each time (0.4 s for a 40 KB bundle).
        try:
            with open(path, "rb") as f:
                raw = _read_capped(f)
        except OSError as e:
            raise HostError(f"cannot read bundle {path}: {e.strerror or e}") from e
        self._index(raw, path)

    @classmethod
    def from_bytes(cls, raw: bytes, label: str = "bundle") -> _TarTree:
        self = cls.__new__(cls)
        self._index(raw, label)
        return self

    def _index(self, raw: bytes, label: str) -> None:
        try:
            if len(raw) > MAX_BUNDLE:
                raise HostError(f"larger than {MAX_BUNDLE >> 20} MiB; not a rdmadoctor bundle")
            if raw[:2] == b"\x1f\x8b":
                raw = gunzip(raw)
            elif raw[:3] == b"BZh":
                import bz2
                import io

                raw = _read_capped(bz2.BZ2File(io.BytesIO(raw)))
            elif raw[:6] == b"\xfd7zXZ\x00":
                import io
                import lzma

                raw = _read_capped(lzma.LZMAFile(io.BytesIO(raw)))
            if len(raw) > MAX_BUNDLE:
                raise HostError(f"larger than {MAX_BUNDLE >> 20} MiB unpacked; not a rdmadoctor bundle")
            entries = scan_tar(raw)
        except HostError as e:
            raise HostError(f"cannot read bundle {label}: {e}") from e
        except (ScanBudgetError, MemoryError):
            raise
        except Exception as e:  # noqa: BLE001 - zlib, bz2, lzma errors: a corrupt archive
            raise HostError(f"cannot read bundle {label}: {type(e).__name__}: {e}") from e
        self._raw = raw
        self._members: dict[str, tuple[str, int, int, str]] = {}
        self._children: dict[str, set[str]] = {"/": set()}
        tops = {p.split("/", 2)[1] for p, *_ in entries}
        prefix = ""
        if len(tops) == 1:
            top = next(iter(tops))
            if top not in _ROOT_NAMES:
                prefix = "/" + top
        members, children = self._members, self._children
        plen = len(prefix)
        # Every directory a member implies costs a set and a key: charge them against the data,
        # so members with deep, distinct paths cannot turn a small archive into gigabytes.
        allowance = 4 * len(raw) + (1 << 20)
        for p, kind, off, size, link in entries:
            if prefix:
                if not p.startswith(prefix + "/"):
                    continue
                p = p[plen:]
                if kind == "hard":
                    if not link.startswith(prefix + "/"):
                        continue
                    link = link[plen:]
            members[p] = (kind, off, size, link)
            child = p
            while child != "/":
                parent, _, base = child.rpartition("/")
                parent = parent or "/"
                kids = children.get(parent)
                if kids is not None:
                    kids.add(base)
                    break
                allowance -= 256 + len(parent)
                if allowance < 0:
                    raise HostError(f"cannot read bundle {label}: its directories take far more room than its data; not a rdmadoctor bundle")
                children[parent] = {base}
                child = parent

    def kind(self, path: str) -> str | None:
        m = self._members.get(path)
        if m is None:
            return "dir" if path in self._children else None
        return m[0] if m[0] != "hard" else "file"

    def readlink(self, path: str) -> str:
        m = self._members.get(path)
        if m is None or m[0] != "link":
            raise OSError(f"not a symlink: {path}")
        return m[3]

    def read(self, path: str, limit: int) -> bytes:
        m = self._members.get(path)
        for _ in range(8):  # a hard link names its target's data
            if m is None or m[0] != "hard":
                break
            m = self._members.get(m[3])
        if m is None or m[0] != "file":
            raise FileNotFoundError(path)
        _, off, size, _ = m
        return self._raw[off : off + min(size, limit)]

    def read_at(self, path: str, offset: int, size: int) -> bytes:
        m = self._members.get(path)
        for _ in range(8):
            if m is None or m[0] != "hard":
                break
            m = self._members.get(m[3])
        if m is None or m[0] != "file":
            raise FileNotFoundError(path)
        _, off, length, _ = m
        start = off + min(max(offset, 0), length)
        return self._raw[start : off + min(length, max(offset, 0) + size)]

    def listdir(self, path: str) -> list[str]:
        if path not in self._children:
            if self.kind(path) == "dir":
                return []
            raise NotADirectoryError(path)
        return sorted(self._children[path])
