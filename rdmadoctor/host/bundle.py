"""A bundle in a tar (plain, .gz, .bz2, .xz): indexed in one pass, never unpacked on disk, never
held whole in memory.

Bundles come attached to tickets, so every byte here is untrusted. Each loop consumes its input
and counts its steps against a budget its input size allows (``max_steps``: exceeding it is a
bug here, :class:`ScanBudgetError`, never a hang); member names are confined to the bundle (no
``..``, at most MAX_PATH bytes and MAX_DEPTH components). Anything malformed is a
:class:`HostError` that says where.

Memory follows what the checks read, not the size of the archive. The index is one sorted list
of names with each member's kind, size and place (no object per directory: a listing is a range
of that list). The data of small members is kept (KEEP_MEMBER bytes each, KEEP_TOTAL in all: a
collected bundle is a few MiB, all of it kept); the rest is read when asked for, from the archive
itself when it is a plain tar, else from an unnamed spill file the same pass copied it to (a
.tar.gz cannot be read at an offset without decompressing everything before it).
"""

from __future__ import annotations

from bisect import bisect_left

from rdmadoctor.host.tree import HostError, _Tree

MAX_BUNDLE = 512 * 1024 * 1024  # unpacked; a collected bundle is a few MiB
MAX_PATH = 4096  # PATH_MAX: a longer member name is not from a file system
MAX_DEPTH = 64  # /sys/devices/<pci bridges...>/infiniband/mlx5_0/ports/1/gids/0 is ~20
KEEP_MEMBER = 1024 * 1024  # a sysfs attribute, a config file, a recorded tool output: kept in memory
KEEP_TOTAL = 32 * 1024 * 1024  # kept data in all; past it members are read on demand like big ones
MAX_META = 1024 * 1024  # a pax header or GNU long name: a bigger one is not from tar; its member is dropped
_GZ_CHUNK = 1 << 16
_PIECE = 1 << 20  # compressed input read, and output taken from a decompressor, per call
# Names of a bundle's own top level: a single top folder other than these is a wrapper
# (`tar czf x.tar.gz bundle/`) that is looked through.
_ROOT_NAMES = frozenset(("sys", "proc", "etc", "dev", "cmd", "var", "usr", "lib", "logs", "runtime.json", "bundle.json"))


class ScanBudgetError(RuntimeError):
    """A reader loop took more steps than its input allows: a bug in this module, not bad input."""


def _step(steps: int, budget: int, what: str) -> int:
    steps += 1
    if steps > budget:
        raise ScanBudgetError(f"{what}: more than {budget} steps; the reader failed to advance")
    return steps


def _too_big() -> HostError:
    return HostError(f"larger than {MAX_BUNDLE >> 20} MiB unpacked; not a rdmadoctor bundle")


# ---- decompression, in pieces ------------------------------------------------------------------
def gunzip_pieces(read, n: int, max_steps: int | None = None):  # read(k) -> bytes; yields bytes
    """The decompressed pieces of every member of a gzip stream of ``n`` bytes that ``read(k)``
    gives in order; at most MAX_BUNDLE + 1 bytes in all (zlib alone: gzip costs an import).

    Input goes to zlib in pieces that start small and double, so the rest of the stream is never
    copied once per member: a file of a million empty members is read in linear time. A member
    (18 bytes at least) takes one step to start and one per piece fed, a run of zero padding one
    per 64 KiB, a window of input one: fewer steps than input bytes, the budget. Each call takes
    at most _PIECE bytes out of zlib: a piece of a bomb never becomes gigabytes at once.
    """
    import zlib

    budget = n + 2 if max_steps is None else max_steps
    total = steps = pos = base = 0
    view = memoryview(b"")

    def window() -> bool:
        nonlocal view, pos, base, steps
        if pos < len(view):
            return True
        data = read(_PIECE)
        if not data:
            return False
        steps = _step(steps, budget, "gzip")
        base += len(view)
        view, pos = memoryview(data), 0
        return True

    while window():
        steps = _step(steps, budget, "gzip")
        if view[pos] == 0:  # members may be followed by zero padding
            seg = bytes(view[pos : pos + _GZ_CHUNK])
            pos += len(seg) - len(seg.lstrip(b"\0"))
            continue
        d = zlib.decompressobj(31)
        chunk = 64  # an empty member is 20 bytes; a real one soon reaches _GZ_CHUNK
        while not d.eof:
            steps = _step(steps, budget, "gzip")
            if not window():
                raise HostError("the gzip stream ends before its last member does (a truncated download?)")
            piece = view[pos : pos + chunk]
            data = piece
            while data:
                # Output stops at the cap; the caller refuses anything longer than MAX_BUNDLE.
                try:
                    out = d.decompress(data, min(_PIECE, MAX_BUNDLE + 1 - total))
                except zlib.error as e:
                    raise HostError(f"bad gzip data near byte {base + pos}: {e}") from None
                total += len(out)
                if out:
                    yield out
                if total > MAX_BUNDLE:
                    return
                data = d.unconsumed_tail
                if data:
                    steps = _step(steps, budget, "gzip")
            pos += len(piece) - len(d.unused_data)
            chunk = min(chunk * 2, _GZ_CHUNK)


def gunzip(raw: bytes, max_steps: int | None = None) -> bytes:
    """Every member of a gzip stream held in memory, at most MAX_BUNDLE + 1 bytes (see gunzip_pieces)."""
    import io

    return b"".join(gunzip_pieces(io.BytesIO(raw).read, len(raw), max_steps))


def _pieces(f, head: bytes, size: int):
    """Decompressed pieces of the archive in ``f`` (its first bytes ``head``), or None for a plain tar."""
    if head[:2] == b"\x1f\x8b":
        return gunzip_pieces(f.read, size)
    if head[:3] == b"BZh" or head[:6] == b"\xfd7zXZ\x00":
        if head[:3] == b"BZh":
            import bz2

            z = bz2.BZ2File(f)
        else:
            import lzma

            z = lzma.LZMAFile(f)
        # Each read takes at most _PIECE bytes out of the decompressor (a bomb stays in pieces);
        # every call but the last returns data, so the loop ends within MAX_BUNDLE / _PIECE + 2.
        return iter(lambda: z.read(_PIECE), b"")
    return None


class _Stream:
    """The decompressed archive, read forward: exact reads, and skips that copy to a ``sink`` or,
    in a plain file, seek. Counts what it takes against MAX_BUNDLE."""

    def __init__(self, pieces, seek=None, size: int = 0):
        self._it = iter(pieces)
        self._seek = seek  # a plain file: skipped data is never read
        self._size = size
        self._buf = b""
        self._at = 0
        self.pos = 0  # offset in the decompressed archive of the next byte
        self._taken = 0

    def _next(self) -> bool:
        for piece in self._it:
            if piece:
                self._taken += len(piece)
                if self._taken > MAX_BUNDLE:
                    raise _too_big()
                self._buf, self._at = piece, 0
                return True
        self._buf, self._at = b"", 0
        return False

    def read(self, n: int) -> bytes:
        """``n`` bytes, fewer at the end of the archive."""
        buf, at = self._buf, self._at
        if at + n <= len(buf):
            self._at = at + n
            self.pos += n
            return buf[at : at + n]
        parts = [buf[at:]]
        got = len(buf) - at
        self._at = len(buf)
        while got < n and self._next():
            take = min(n - got, len(self._buf))
            parts.append(self._buf[:take])
            self._at = take
            got += take
        self.pos += got
        return b"".join(parts)

    def skip(self, n: int, sink=None) -> int:  # sink(memoryview)
        """Pass over ``n`` bytes (to ``sink`` if given); how many there were."""
        left = n
        while left:
            avail = len(self._buf) - self._at
            if avail == 0:
                if sink is None and self._seek is not None:
                    target = min(self.pos + left, self._size)
                    self._seek(target)
                    left -= target - self.pos
                    self.pos = target
                    break
                if not self._next():
                    break
                continue
            take = min(left, avail)
            if sink is not None:
                sink(memoryview(self._buf)[self._at : self._at + take])
            self._at += take
            self.pos += take
            left -= take
        return n - left


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


def _why_dropped(name: str, whose: str = "its name") -> str:
    """Why :func:`_path` gave None for ``name`` (a member left out of the index)."""
    if len(name) > MAX_PATH:
        return f"{whose} is longer than {MAX_PATH} bytes (PATH_MAX)"
    parts = [p for p in name.split("/") if p and p != "."]
    if ".." in parts:
        return f"{whose} has a '..' component, which would climb out of the bundle (GNU tar refuses it too)"
    return f"{whose} is deeper than {MAX_DEPTH} levels"


def _scan(stream: _Stream, add, on_data, budget: int, size_known: int | None = None, dropped=None) -> None:
    """Index a tar (ustar, GNU, pax, v7) read from ``stream``: ``add(path, kind, place, size, link)``
    for each member a bundle can use; ``on_data(size, padded)`` takes a regular file's data and its
    padding off the stream and returns its place (None: the archive ends inside it). ``path`` is absolute and normalised, a hard link's target too; members
    whose name leaves the bundle or is too long or deep are left out, each told to
    ``dropped(name, why)`` when given.

    tarfile builds a TarInfo per member and checks every field: 80 ms for a 2000-member bundle,
    most of a `check` run; it also has had its own loops on crafted headers. This reads only what
    a bundle needs. Every header takes 512 bytes off the stream, so at most size // 512 + 1 steps.
    """
    steps = 0
    long_name = long_link = None

    def past_end(off: int, size: int) -> HostError:
        return _bad(off, f"member of {size} bytes runs past the end of the archive (a truncated download?)")

    def skip(off: int, size: int, padded: int) -> None:
        if padded and stream.skip(size) < size:
            raise past_end(off, size)
        if padded > size:
            stream.skip(padded - size)

    while True:
        steps = _step(steps, budget, "tar")
        off = stream.pos
        buf, at = stream._buf, stream._at
        if at + 512 <= len(buf):  # stream.read(512) without the call, for the common case
            hdr = buf[at : at + 512]
            stream._at = at + 512
            stream.pos = off + 512
        else:
            hdr = stream.read(512)
        if len(hdr) < 512 and off == 0:
            raise HostError("not a tar: shorter than one 512-byte header")
        if len(hdr) < 512 or (hdr[0] == 0 and hdr.count(0) == 512):
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
        if size_known is not None and size > size_known - off - 512:
            raise past_end(off, size)  # said before anything is read past it
        padded = (size + 511) // 512 * 512
        flag = hdr[156:157]
        if flag in (b"x", b"L", b"K"):
            if size > MAX_META:  # its member's name is unknown: drop that member
                skip(off, size, padded)
                long_name = _TOO_LONG if flag != b"K" else long_name
                long_link = _TOO_LONG if flag == b"K" else long_link
                continue
            body = stream.read(size)
            if len(body) < size:
                raise past_end(off, size)
            stream.skip(padded - size)
            if flag == b"x":
                rec = _pax(body, off)
                if b"path" in rec:
                    long_name = _decode(rec[b"path"])
                if b"linkpath" in rec:
                    long_link = _decode(rec[b"linkpath"])
            elif size > MAX_PATH + 1:  # GNU long name: the name, a NUL
                long_name, long_link = (_TOO_LONG, long_link) if flag == b"L" else (long_name, _TOO_LONG)
            else:
                text = _decode(body.split(b"\0", 1)[0])
                long_name, long_link = (text, long_link) if flag == b"L" else (long_name, text)
            continue
        if flag == b"g":
            skip(off, size, padded)  # pax global header: nothing a bundle needs
            continue
        name = long_name
        if name is None:
            name = hdr[0:100].split(b"\0", 1)[0]
            if hdr[345] and magic == b"ustar\x00":  # POSIX prefix; GNU keeps atime there
                name = hdr[345:500].split(b"\0", 1)[0] + b"/" + name
            name = _decode(name)
        link = long_link if long_link is not None else _decode(hdr[157:257].split(b"\0", 1)[0])
        long_name = long_link = None
        kind = _TAR_KINDS.get(flag)
        path = None
        if kind is not None:  # fifos and the like: nothing a check reads
            if kind == "file" and name.endswith("/"):
                kind = "dir"  # v7 writes a directory as a file whose name ends in "/"
            path = _path(name)
            if path == "/":
                path = None  # the archive's own top ("./"): nothing left out
            elif path is None:
                if dropped is not None:
                    dropped(name, _why_dropped(name))
            elif len(link) > MAX_PATH:
                path = None
                if dropped is not None:
                    dropped(name, f"it links to a name longer than {MAX_PATH} bytes")
            elif kind == "hard":
                target = _path(link)
                if target is None:
                    path = None
                    if dropped is not None:
                        dropped(name, f"it is a hard link to a name outside the bundle ({_why_dropped(link, 'that name')})")
                link = target
        # Device nodes recorded by collect (3, 4) exist and have no content; only regular files'
        # data is taken off the stream for the index, everything else is passed over.
        if path is None or kind != "file" or flag in (b"3", b"4") or size == 0:
            skip(off, size, padded)
            if path is not None:
                add(path, kind, 0, 0, link)
            continue
        place = on_data(size, padded)
        if place is None:
            raise past_end(off, size)
        add(path, kind, place, size, link)


def scan_tar(raw: bytes, max_steps: int | None = None) -> list[tuple[str, str, int, int, str]]:
    """Index a tar held in memory: (path, kind, data offset, size, link target), in archive order."""
    n = len(raw)
    stream = _Stream((raw,))
    out: list[tuple[str, str, int, int, str]] = []

    def on_data(size: int, padded: int) -> int | None:
        at = stream.pos
        if stream.skip(size) < size:
            return None
        stream.skip(padded - size)
        return at

    _scan(stream, lambda *entry: out.append(entry), on_data, n // 512 + 1 if max_steps is None else max_steps, n)
    return out


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


class _Spill:
    """Where the data of members too big to keep goes during the one pass over a compressed
    archive: an unnamed temporary file (gone with the process), or memory when none can be made."""

    def __init__(self) -> None:
        self._f = None
        self._mem: bytearray | None = None
        self.size = 0

    def write(self, data: memoryview) -> None:
        if self._f is None and self._mem is None:
            import tempfile

            try:
                self._f = tempfile.TemporaryFile(prefix="rdmadoctor-bundle-")
            except OSError:  # a read-only /tmp: kept in memory instead (at most MAX_BUNDLE)
                self._mem = bytearray()
        if self._f is not None:
            try:
                self._f.write(data)
            except OSError:  # the temp dir is full: what was spilled comes back to memory
                self._f.seek(0)
                self._mem = bytearray(self._f.read(self.size))
                self._f.close()
                self._f = None
        if self._mem is not None:
            self._mem += data
        self.size += len(data)

    def done(self) -> None:
        if self._f is not None:
            self._f.flush()

    def close(self) -> None:
        f, self._f = self._f, None
        self._mem = None
        if f is not None:
            f.close()

    def pread(self, off: int, n: int) -> bytes:
        if self._mem is not None:
            return bytes(self._mem[off : off + n])
        return _pread(self._f.fileno(), off, n) if self._f is not None else b""


def _pread(fd: int, off: int, n: int) -> bytes:
    import os

    parts = []
    while n > 0:
        got = os.pread(fd, min(n, 1 << 24), off)
        if not got:
            break
        parts.append(got)
        off += len(got)
        n -= len(got)
    return b"".join(parts)


class _Far:
    """A plain tar's members read where they are: the file, or the bytes it was given as."""

    def __init__(self, fd: int | None = None, raw: bytes | None = None):
        self._fd, self._raw = fd, raw

    def pread(self, off: int, n: int) -> bytes:
        if self._raw is not None:
            return self._raw[off : off + n]
        return _pread(self._fd, off, n)


_KIND_CODE = {"file": 0, "dir": 1, "link": 2, "hard": 3}
_KIND_NAME = ("file", "dir", "link", "hard")


class _TarTree(_Tree):
    """A tar bundle (plain, .gz, .bz2, .xz), indexed in memory, never unpacked on disk."""

    def __init__(self, path: str):
        import os

        try:
            f = open(path, "rb")  # kept open for a plain tar, whose members are read from it
        except OSError as e:
            raise HostError(f"cannot read bundle {path}: {e.strerror or e}") from e
        try:
            size = os.fstat(f.fileno()).st_size
            head = f.read(6)
            f.seek(0)
            plain = self._index(f, head, size, path)
        except OSError as e:
            f.close()
            raise HostError(f"cannot read bundle {path}: {e.strerror or e}") from e
        except BaseException:
            f.close()
            raise
        if plain:
            self._file = f  # closed with the tree (close(), or when it is collected)
            self._far = _Far(fd=f.fileno())
        else:
            f.close()

    def close(self) -> None:
        f, self._file = getattr(self, "_file", None), None
        if f is not None:
            f.close()
        spill = getattr(self, "_spill", None)
        if spill is not None:
            spill.close()

    def __del__(self) -> None:
        self.close()

    @classmethod
    def from_bytes(cls, raw: bytes, label: str = "bundle") -> _TarTree:
        import io

        self = cls.__new__(cls)
        if self._index(io.BytesIO(raw), raw[:6], len(raw), label):
            self._far = _Far(raw=raw)
        return self

    def _index(self, f, head: bytes, size: int, label: str) -> bool:
        """Read the archive in ``f`` once; True when it is a plain tar (members read from it later)."""
        self._file = None
        self._heap = bytearray()
        self._spill = _Spill()
        self._far = self._spill
        try:
            if size > MAX_BUNDLE:
                raise HostError(f"larger than {MAX_BUNDLE >> 20} MiB; not a rdmadoctor bundle")
            pieces = _pieces(f, head, size)
            plain = pieces is None
            if plain:
                stream = _Stream(iter(lambda: f.read(_PIECE), b""), seek=f.seek, size=size)
            else:
                stream = _Stream(pieces)
            self._build(stream, plain, size if plain else None)
        except HostError as e:
            raise HostError(f"cannot read bundle {label}: {e}") from e
        except (ScanBudgetError, MemoryError):
            raise
        except Exception as e:  # zlib, bz2, lzma errors: a corrupt archive
            raise HostError(f"cannot read bundle {label}: {type(e).__name__}: {e}") from e
        self._spill.done()
        return plain

    def _build(self, stream: _Stream, plain: bool, size: int | None) -> None:
        from array import array

        heap, spill = self._heap, self._spill
        paths: list[str] = []
        kinds = bytearray()
        places = array("q")
        sizes = array("q")
        links: dict[int, str] = {}
        tops: set[str] = set()

        def add(path: str, kind: str, place: int, size: int, link: str) -> None:
            if len(tops) < 2:
                tops.add(path.split("/", 2)[1])
            if kind in ("link", "hard"):
                links[len(paths)] = link
            paths.append(path)
            kinds.append(_KIND_CODE[kind])
            places.append(place)
            sizes.append(size)

        def on_data(n: int, padded: int) -> int | None:
            # >= 0: an offset in the kept heap; < 0: -1 - the offset where it is read on demand.
            if n <= KEEP_MEMBER and len(heap) + n <= KEEP_TOTAL:
                at = len(heap)
                data = stream.read(padded)  # with its padding: one call
                if len(data) < n:
                    return None
                heap.extend(memoryview(data)[:n] if padded > n else data)
                return at
            if plain:
                at = -1 - stream.pos
                got = stream.skip(n)
            else:
                at = -1 - spill.size
                got = stream.skip(n, spill.write)
            if got < n:
                return None
            stream.skip(padded - n)
            return at

        left_out: dict[str, list] = {}  # why -> [count, the first name]

        def dropped(name: str, why: str) -> None:
            if name == _TOO_LONG:  # a pax or GNU long name past MAX_META or MAX_PATH, not kept
                name = "(a name too long to keep)"
            seen = left_out.setdefault(why, [0, name])
            seen[0] += 1

        budget = (size if size is not None else MAX_BUNDLE) // 512 + 2
        _scan(stream, add, on_data, budget, size, dropped)
        self.notes = [
            f"{n} member{'s' if n > 1 else ''} of the archive left out, the first named "
            f"{first[:120]!r}{'...' if len(first) > 120 else ''}: {why}"
            for why, (n, first) in left_out.items()
        ]

        prefix = ""
        if len(tops) == 1:
            top = next(iter(tops))
            if top not in _ROOT_NAMES:
                prefix = "/" + top
        # Sorted by name, the last of a name winning (tar semantics): a listing is then a range.
        order = sorted(range(len(paths)), key=paths.__getitem__)
        keep = [i for j, i in enumerate(order) if j + 1 == len(order) or paths[order[j + 1]] != paths[i]]
        del order
        plen = len(prefix)
        if prefix:
            under = prefix + "/"
            kept = []
            for i in keep:
                if not paths[i].startswith(under):
                    continue
                link = links.get(i)
                if kinds[i] == _KIND_CODE["hard"]:
                    if not link.startswith(under):
                        continue
                    links[i] = link[plen:]
                kept.append(i)
            keep = kept
        self._paths = [paths[i][plen:] for i in keep]
        self._kinds = bytes(kinds[i] for i in keep)
        self._places = array("q", (places[i] for i in keep))
        self._sizes = array("q", (sizes[i] for i in keep))
        self._links = {j: links[i] for j, i in enumerate(keep) if i in links}

    # ---- the index --------------------------------------------------------------------------
    def _find(self, path: str) -> int:
        paths = self._paths
        i = bisect_left(paths, path)
        return i if i < len(paths) and paths[i] == path else -1

    def _is_implied_dir(self, path: str) -> bool:
        if path == "/":
            return True
        paths = self._paths
        under = path + "/"
        i = bisect_left(paths, under)
        return i < len(paths) and paths[i].startswith(under)

    def _file_of(self, path: str) -> int:
        i = self._find(path)
        for _ in range(8):  # a hard link names its target's data
            if i < 0 or self._kinds[i] != 3:
                break
            i = self._find(self._links[i])
        if i < 0 or self._kinds[i] != 0:
            raise FileNotFoundError(path)
        return i

    def _data(self, i: int, offset: int, n: int) -> bytes:
        length = self._sizes[i]
        offset = min(max(offset, 0), length)
        n = max(0, min(n, length - offset))
        place = self._places[i]
        if place >= 0:
            return bytes(self._heap[place + offset : place + offset + n])
        return self._far.pread(-1 - place + offset, n)

    def entries(self):  # (path, kind, size, link) of every member, sorted by path
        for i, p in enumerate(self._paths):
            yield p, _KIND_NAME[self._kinds[i]], self._sizes[i], self._links.get(i, "")

    def kept_bytes(self) -> int:
        """Member data held in memory (the rest is read when asked for)."""
        return len(self._heap)

    # ---- the tree -----------------------------------------------------------------------------
    def kind(self, path: str) -> str | None:
        i = self._find(path)
        if i < 0:
            return "dir" if self._is_implied_dir(path) else None
        k = self._kinds[i]
        return "file" if k == 3 else _KIND_NAME[k]

    def readlink(self, path: str) -> str:
        i = self._find(path)
        if i < 0 or self._kinds[i] != 2:
            raise OSError(f"not a symlink: {path}")
        return self._links[i]

    def read(self, path: str, limit: int) -> bytes:
        return self._data(self._file_of(path), 0, limit)

    def read_at(self, path: str, offset: int, size: int) -> bytes:
        return self._data(self._file_of(path), offset, size)

    def listdir(self, path: str) -> list[str]:
        paths = self._paths
        under = "/" if path == "/" else path + "/"
        cut = len(under)
        names: set[str] = set()
        i = bisect_left(paths, under)
        n = len(paths)
        while i < n:
            p = paths[i]
            if not p.startswith(under):
                break
            slash = p.find("/", cut)
            if slash < 0:
                names.add(p[cut:])
                i += 1
            else:
                name = p[cut:slash]
                names.add(name)
                # Skip the rest of that child's subtree: the names under "<child>/" sort together,
                # before "<child>0" ("/" is 0x2f, "0" 0x30).
                i = bisect_left(paths, p[:slash] + "0", i + 1)
        if not names:
            if self.kind(path) == "dir":
                return []
            raise NotADirectoryError(path)
        return sorted(names)
