"""The bundle reader on hostile input (issue 7, wrong answer 3).

Bundles come attached to tickets, so ``check --bundle`` reads whatever someone sends. Each case
here once hung, blew memory, misnamed a file or read outside the bundle. Boundedness is asserted
by counting, never by the clock: the readers' own step budgets (``max_steps``), lines executed
(``line_budget``), bytes handed to zlib. The fuzz at the end asserts, for thousands of generated
archives, that the reader returns an index or raises HostError, within those budgets.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import stat
import sys
import tarfile
import threading
import tracemalloc
import zlib
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rdmadoctor.host as host_mod
from rdmadoctor.host import HostError, Link, mem_host, open_host

# ---- building archives byte by byte -----------------------------------------------------

POSIX, GNU = b"ustar\x0000", b"ustar  \x00"


def header(name: bytes = b"x", size: int = 0, flag: bytes = b"0", *, link: bytes = b"", magic: bytes = POSIX,
           size_field: bytes | None = None, prefix: bytes = b"", checksum: bool = True) -> bytes:
    h = bytearray(512)
    h[0:100] = name[:100].ljust(100, b"\0")
    h[100:108] = b"0000644\x00"
    h[108:124] = b"0000000\x000000000\x00"
    h[124:136] = (size_field if size_field is not None else b"%011o\x00" % size)[:12].ljust(12, b"\0")
    h[136:148] = b"00000000000\x00"
    h[156:157] = flag[:1] or b"\0"
    h[157:257] = link[:100].ljust(100, b"\0")
    h[257:265] = magic[:8].ljust(8, b"\0")
    h[345:500] = prefix[:155].ljust(155, b"\0")
    h[148:156] = b" " * 8
    if checksum:
        h[148:156] = b"%06o\x00 " % sum(h)
    return bytes(h)


def block(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 512)


def member(name: bytes, data: bytes = b"", flag: bytes = b"0", **kw) -> bytes:
    return header(name, len(data), flag, **kw) + block(data)


def pax_record(key: bytes, value: bytes) -> bytes:
    body = b" " + key + b"=" + value + b"\n"
    n = len(body) + 1
    while len(b"%d" % n) + len(body) != n:
        n += 1
    return b"%d" % n + body


def pax(*records: bytes, flag: bytes = b"x") -> bytes:
    body = b"".join(records)
    return member(b"PaxHeader/x", body, flag)


def tar(*members: bytes) -> bytes:
    return b"".join(members) + b"\0" * 1024


def bundle_mod():
    import rdmadoctor.host.bundle as mod  # here, not at the top: the regressions also run on the old reader

    return mod


def from_bytes(raw: bytes):
    return host_mod.Host(bundle_mod()._TarTree.from_bytes(raw, "fuzz"), label="fuzz", kind="bundle", live_process=False, root=None)


def open_bytes(tmp_path, raw: bytes, name: str = "b.tar"):
    p = tmp_path / name
    p.write_bytes(raw)
    return open_host(bundle=str(p))


# ---- counting instead of timing ---------------------------------------------------------


class Runaway(BaseException):
    """Raised inside the reader when it runs past its line budget (BaseException: no `except
    Exception` in the reader may turn it into an ordinary error)."""


@contextmanager
def line_budget(limit: int):
    """Fail if the Python code run inside executes more than ``limit`` lines: a loop that does
    not advance is caught by counting, whatever the machine's load."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
            if count > limit:
                raise Runaway(f"more than {limit} lines executed: the reader does not advance")
        return local

    old = sys.gettrace()
    sys.settrace(lambda frame, event, arg: local)
    try:
        yield
    finally:
        sys.settrace(old)


# ---- regressions, each a case that failed before ---------------------------------------


def test_pax_record_of_length_zero_is_an_error_not_a_hang(tmp_path):
    raw = tar(pax(b"0 path=x\n"), member(b"sys/a", b"1"))
    with line_budget(100_000), pytest.raises(HostError, match="pax record"):
        open_bytes(tmp_path, raw)


@pytest.mark.parametrize(
    "body, why",
    [
        (b"-5 path=x\n", "no length"),  # int() takes a sign; the scanner walked backwards
        (b"99 path=x\n", "longer than"),
        (b"abc path=x\n", "no length"),  # was handed to tarfile, which ignored the record
        (b"3 path=x\n", "shorter than"),
        (b"9 path=xx\n", "does not end"),
        (b"11 pathxyz\n", "key=value"),
    ],
)
def test_pax_records_with_bad_lengths_are_errors(tmp_path, body, why):
    raw = tar(pax(body), member(b"sys/a", b"1"))
    with line_budget(100_000), pytest.raises(HostError, match=why):
        open_bytes(tmp_path, raw)


@pytest.mark.parametrize(
    "size_field",
    [
        b"-0000001000",  # int("-0000001000", 8) == -512: the next header was this one, forever
        b"-0000000001",
        b"+0000001000",
        b"0000_001000",
        b"\xff" * 11 + b"\x00",  # GNU base-256, negative: tarfile gave size -256, read ran past the member
        b"\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00",
    ],
)
def test_negative_or_malformed_size_is_an_error(tmp_path, size_field):
    raw = tar(header(b"sys/x", size_field=size_field), member(b"sys/y", b"data"))
    with line_budget(100_000), pytest.raises(HostError, match="size"):
        open_bytes(tmp_path, raw)


def test_positive_base256_size_reads(tmp_path):
    # GNU tar writes sizes past 8 GiB in base-256; a small one must read the same.
    raw = tar(header(b"sys/x", size_field=b"\x80" + (5).to_bytes(11, "big")) + block(b"hello"), member(b"sys/y", b"y"))
    host = open_bytes(tmp_path, raw)
    assert host.read_bytes("/sys/x") == b"hello" and host.read_bytes("/sys/y") == b"y"


def test_member_running_past_the_end_is_an_error(tmp_path):
    raw = member(b"sys/a", b"1") + header(b"sys/b", 4096) + b"short"
    with pytest.raises(HostError, match="truncated"):
        open_bytes(tmp_path, raw + b"\0" * 600)


def test_dot_files_keep_their_dot(tmp_path):
    raw = tar(
        member(b"./.nccl.conf", b"NCCL_IB_HCA=mlx5_0\n"),
        member(b"./home/u/.nccl.conf", b"NCCL_DEBUG=INFO\n"),
        member(b"./etc/nccl.conf", b"NCCL_SOCKET_IFNAME=eth0\n"),
        member(b"./sys/", flag=b"5"),
    )
    host = open_bytes(tmp_path, raw)
    assert host.read_text("/.nccl.conf") == "NCCL_IB_HCA=mlx5_0\n"  # was "/nccl.conf"
    assert host.read_text("/home/u/.nccl.conf") == "NCCL_DEBUG=INFO\n"
    assert host.read_text("/etc/nccl.conf") == "NCCL_SOCKET_IFNAME=eth0\n"
    assert host.read_bytes("/nccl.conf") is None
    assert host.listdir("/") == [".nccl.conf", "etc", "home", "sys"]


def test_names_and_links_never_lead_outside_the_bundle(tmp_path):
    before = sorted(os.listdir(tmp_path))
    raw = tar(
        member(b"../../etc/passwd", b"planted\n"),  # was read as the bundle's /etc/passwd
        member(b"sys/../../x", b"planted\n"),
        member(b"sys/abs", flag=b"2", link=b"/etc/passwd"),
        member(b"sys/up", flag=b"2", link=b"../../../../../../etc/passwd"),
        member(b"sys/hard", flag=b"1", link=b"../../../etc/passwd"),
        member(b"sys/ok", b"1\n"),
    )
    host = open_bytes(tmp_path, raw)
    for p in ("/etc/passwd", "/x", "/sys/abs", "/sys/up", "/sys/hard"):
        assert host.read_bytes(p) is None, p  # neither the planted member nor this machine's file
    assert host.realpath("/sys/up") is None and host.read_value("/sys/ok") == "1"
    assert sorted(os.listdir(tmp_path)) == sorted(before + ["b.tar"])  # nothing unpacked
    # The report says what was left out and why, once per reason, with the first name (escaped).
    assert host.notes == [
        "2 members of the archive left out, the first named '../../etc/passwd': its name has a '..' component, "
        "which would climb out of the bundle (GNU tar refuses it too)",
        "1 member of the archive left out, the first named 'sys/hard': it is a hard link to a name outside the "
        "bundle (that name has a '..' component, which would climb out of the bundle (GNU tar refuses it too))",
    ]


def test_members_too_long_or_deep_are_said_left_out(tmp_path):
    raw = tar(
        member(b"././@LongLink", b"sys/" + b"x" * 5000 + b"\0", b"L"), member(b"placeholder", b"a"),
        member(b"PaxHeader/x", pax_record(b"path", b"sys/\x1b[2J" + b"/d" * 80), b"x"), member(b"placeholder2", b"b"),
        member(b"./", flag=b"5"),  # the archive's own top: not a member left out
        member(b"sys/ok", b"1\n"),
    )
    host = open_bytes(tmp_path, raw)
    assert host.read_value("/sys/ok") == "1"
    (long_, deep_) = host.notes
    assert long_.startswith("1 member of the archive left out, the first named '(a name too long to keep)'") and "4096" in long_
    assert "'sys/\\x1b[2J/d/d" in deep_ and "deeper than 64 levels" in deep_  # the escape is shown, not obeyed
    assert open_bytes(tmp_path, tar(member(b"./", flag=b"5"), member(b"sys/ok", b"1\n"))).notes == []


def test_hard_link_inside_a_wrapping_folder_reads(tmp_path):
    # `tar czf x.tar.gz bundle-node1/`: a hard link names its target with the wrapper in front.
    raw = tar(member(b"bundle-node1/sys/a", b"data\n"), member(b"bundle-node1/sys/b", flag=b"1", link=b"bundle-node1/sys/a"))
    host = open_bytes(tmp_path, raw)
    assert host.read_text("/sys/b") == "data\n"


@pytest.mark.parametrize("how", ["pax", "gnu"])
def test_absurd_names_are_dropped_without_blowing_memory(tmp_path, how):
    deep = b"sys/" + b"/x" * 40000  # 80 KB, 40000 components: each prefix became a directory key
    shallow_deep = b"sys" + b"/x" * 2000  # under 4096 bytes, but 2000 components
    if how == "pax":
        parts = [pax(pax_record(b"path", deep)), member(b"placeholder", b"a"),
                 pax(pax_record(b"path", shallow_deep)), member(b"placeholder2", b"b")]
    else:
        parts = [member(b"././@LongLink", deep + b"\0", b"L"), member(b"placeholder", b"a"),
                 member(b"././@LongLink", shallow_deep + b"\0", b"L"), member(b"placeholder2", b"b")]
    raw = tar(*parts, member(b"sys/ok", b"1"))
    tracemalloc.start()
    try:
        host = open_bytes(tmp_path, raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * len(raw) + (4 << 20), peak  # was ~1.6 GB of directory keys
    assert not host.exists(deep.decode()) and not host.exists(shallow_deep.decode())
    assert host.read_value("/sys/ok") == "1" and host.listdir("/sys") == ["ok"]


def test_a_flood_of_deep_distinct_paths_costs_no_more_than_its_names(tmp_path):
    # 64-component paths, each under its own top: every member once added 64 directory keys for
    # 1.5 KB of archive (and a budget refused such a bundle). The index now keeps no directory
    # objects (a listing is a range of the sorted names): it costs a few times the data, not more.
    def flood(n):
        names = [("d%d/" % i + "/".join("c%d" % j for j in range(63))).encode() for i in range(n)]
        return tar(*(pax(pax_record(b"path", name)) + member(b"p", b"") for name in names))

    host = open_bytes(tmp_path, flood(20))
    assert host.is_dir("/d7/c0/c1") and host.read_bytes("/d7/" + "/".join("c%d" % j for j in range(63))) == b""
    raw = flood(4000)
    tracemalloc.start()
    try:
        host = open_bytes(tmp_path, raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * len(raw), (peak, len(raw))
    assert host.listdir("/d3999/c0") == ["c1"] and len(host.listdir("/")) == 4000


def _fifo_tree(tmp_path):
    root = tmp_path / "bundle"
    (root / "proc").mkdir(parents=True)
    (root / "sys").mkdir()
    (root / "sys/x").write_text("1\n")
    os.mkfifo(root / "proc/modules")
    return root


def _read_in_thread(fn):
    """Run fn in a thread; if it is still blocked after a long grace, unblock it and fail.

    The grace is a safety net so that a regression fails instead of hanging the suite; the
    assertion is on what the read returns, not on how long it took."""
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("v", fn()), daemon=True)
    t.start()
    t.join(120)
    return t, box


@pytest.mark.parametrize("how", ["bundle", "root"])
def test_fifo_in_a_directory_tree_reads_as_unreadable(tmp_path, how):
    root = _fifo_tree(tmp_path)
    host = open_host(bundle=str(root)) if how == "bundle" else open_host(root=str(root))
    t, box = _read_in_thread(lambda: host.read_bytes("/proc/modules"))
    if t.is_alive():  # the old reader blocked in open(): give it a writer so the thread ends
        fd = os.open(root / "proc/modules", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join()
        pytest.fail("reading a FIFO in the tree blocked waiting for a writer")
    assert box["v"] is None
    assert host.exists("/proc/modules") and host.read_value("/sys/x") == "1"


def test_directory_tree_reads_regular_files_through_nonblocking_open(tmp_path):
    root = _fifo_tree(tmp_path)
    (root / "dir").mkdir()
    host = open_host(bundle=str(root))
    assert host.read_bytes("/dir") is None and host.read_bytes("/sys/x") == b"1\n"
    assert stat.S_ISFIFO(os.stat(root / "proc/modules").st_mode)  # untouched


def test_many_empty_gzip_members_are_read_in_linear_time(tmp_path, monkeypatch):
    body = tar(member(b"sys/x", b"1\n"))
    raw = gzip.compress(body) + gzip.compress(b"") * 5000 + b"\0" * 100 + gzip.compress(b"") * 10
    fed = 0
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *a):
            self._d = real(*a)

        def decompress(self, data, *a):
            nonlocal fed
            fed += len(data)
            return self._d.decompress(data, *a)

        def __getattr__(self, name):
            return getattr(self._d, name)

    monkeypatch.setattr(zlib, "decompressobj", Counting)
    host = open_bytes(tmp_path, raw, "b.tar.gz")
    monkeypatch.undo()
    assert host.read_value("/sys/x") == "1"
    # Each member was handed the whole rest of the file: 5010 members x ~50 KB on average.
    assert fed <= 4 * len(raw) + 1024, (fed, len(raw))


def test_truncated_gzip_is_an_error(tmp_path):
    raw = gzip.compress(tar(member(b"sys/x", b"1\n" * 1000)))
    with pytest.raises(HostError, match="truncated"):
        open_bytes(tmp_path, raw[: len(raw) // 2], "b.tar.gz")


def test_symlinks_that_name_each_other_twice_stop_at_forty(monkeypatch):
    # l0 -> l1/l1, l1 -> l2/l2, ...: following both halves doubled the work per level; the old
    # depth bound (40) let 19 levels cost 2**20 lookups for one path. The kernel counts links:
    # 40 in all, then ELOOP.
    files = {f"/l{i}": Link(f"l{i + 1}/l{i + 1}") for i in range(19)}
    files["/l19"] = Link(".")
    files["/f"] = b"x"
    host = mem_host(files)
    with line_budget(200_000):
        assert host.realpath("/l0/f") is None
    # A plain chain of links well under forty still resolves.
    chain = {f"/c{i}": Link(f"c{i + 1}") for i in range(30)}
    chain["/c30"] = Link("d")
    chain["/d/f"] = b"y"
    assert mem_host(chain).read_bytes("/c0/f") == b"y"


def test_runtime_json_nested_past_the_stack_gives_unknowns():
    host = mem_host({"/runtime.json": b"[" * 200_000, "/cmd/errors.json": b"{" * 200_000})
    assert host.runtime.memlock_soft == "unknown"  # was RecursionError out of check
    assert host.cmd("ibstat").text is None


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
@pytest.mark.parametrize("compress", ["", "gz", "bz2", "xz"])
def test_archives_tar_writes_read_alike(tmp_path, fmt, compress):
    # The reader no longer falls back to tarfile: every format tarfile writes reads the same.
    long_dir = "sys/devices/" + "/".join(f"pci0000:{i:02x}" for i in range(12))  # > 100 bytes: prefix or long name
    long_target = "../" * 40 + "devices"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:" + compress, format=fmt) as tf:
        def add(name, data=None, **kw):
            ti = tarfile.TarInfo(name)
            for k, v in kw.items():
                setattr(ti, k, v)
            if data is not None:
                ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data) if data is not None else None)

        add(long_dir, type=tarfile.DIRTYPE)
        add(long_dir + "/numa_node", b"1\n")
        add("sys/class/link", type=tarfile.SYMTYPE, linkname=long_target if fmt != tarfile.USTAR_FORMAT else "../x")
        add("sys/a", b"1\n")
        add("sys/hard", type=tarfile.LNKTYPE, linkname="sys/a")
        add("./.nccl.conf", b"NCCL_DEBUG=WARN\n")
    host = open_bytes(tmp_path, buf.getvalue(), "b.tar" + ("." + compress if compress else ""))
    assert host.read_value("/" + long_dir + "/numa_node") == "1"
    assert host.read_value("/sys/hard") == "1"
    assert host.readlink("/sys/class/link") == (long_target if fmt != tarfile.USTAR_FORMAT else "../x")
    assert host.read_text("/.nccl.conf") == "NCCL_DEBUG=WARN\n"


def test_v7_headers_without_magic_read_by_checksum(tmp_path):
    raw = tar(member(b"sys/x", b"1\n", magic=b""), member(b"sys/d/", flag=b"\0", magic=b""))
    host = open_bytes(tmp_path, raw)
    assert host.read_value("/sys/x") == "1" and host.is_dir("/sys/d")
    with pytest.raises(HostError, match="checksum"):
        open_bytes(tmp_path, tar(header(b"sys/x", magic=b"", checksum=False)))


# ---- the fuzz ----------------------------------------------------------------------------

COMPONENTS = [b"sys", b"proc", b"etc", b"cmd", b"x", b".", b"..", b"", b".nccl.conf", b"mlx5_0", b"a" * 120,
              b"\xff\xfe", b"runtime.json", b"bundle-node1"]
FLAGS = [b"0"] * 4 + [b"5"] * 2 + [b"2"] * 2 + [b"1", b"x", b"x", b"L", b"K", b"g", b"\0", b"3", b"6", b"7", b"S", b"V", b"Z"]


class Drawn:
    """Choices made by hypothesis (it shrinks them to a small failing archive)."""

    def __init__(self, draw):
        self.draw = draw

    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def pick(self, seq):
        return self.draw(st.sampled_from(seq))

    def bytes(self, lo: int, hi: int) -> bytes:
        return self.draw(st.binary(min_size=lo, max_size=hi))


class Seeded:
    """The same choices from one drawn seed: a fraction of the cost per archive, for volume."""

    def __init__(self, seed: int):
        import random

        self.r = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    def bytes(self, lo: int, hi: int) -> bytes:
        return self.r.randbytes(self.r.randint(lo, hi))


def gen_name(r) -> bytes:
    how = r.int(0, 9)
    if how == 0:
        return r.bytes(0, 120)
    if how == 1:  # deep: thousands of components, past MAX_DEPTH and MAX_PATH
        return r.pick([b"sys", b"./", b"/", b"../"]) + b"/x" * r.int(0, 3000)
    return b"/".join(r.pick(COMPONENTS) for _ in range(r.int(0, 6)))


def gen_size_field(r) -> bytes | None:
    how = r.int(0, 11)
    if how <= 6:
        return None  # the true size
    if how == 7:
        return r.bytes(12, 12)
    if how == 8:
        return b"%011o\x00" % r.int(0, 8**11 - 1)
    if how == 9:
        return (r.pick([b"-", b"+", b" ", b"_"]) + b"%010o" % r.int(0, 8**10 - 1))[:11] + b"\x00"
    return r.pick([b"\x80", b"\xff"]) + r.int(0, 2**88 - 1).to_bytes(11, "big")


def gen_pax_body(r, wild: bool) -> bytes:
    out = b""
    for _ in range(r.int(0, 4)):
        rec = pax_record(r.pick([b"path", b"path", b"linkpath", b"size", b"mtime", b"", b"x=y"]), gen_name(r))
        body = rec[rec.index(b" "):]
        mode = r.int(0, 9) if wild else 0
        if mode == 1:
            rec = b"0" + body
        elif mode == 2:
            rec = b"-%d" % len(rec) + body
        elif mode == 3:
            rec = b"%d" % (len(rec) + r.int(1, 10**6)) + body
        elif mode == 4:
            rec = r.pick([b"abc", b"", b"1a", b" 5", b"0x10", b"\xd9\xa3"]) + body  # \xd9\xa3: an Arabic-Indic 3
        elif mode == 5:
            rec = b"%d" % r.int(1, 6) + body
        elif mode == 6:
            rec = b"%d" % r.int(0, 10**14) + body
        out += rec
    if wild and r.int(0, 3) == 0:
        out += r.bytes(0, 20)
    return out


def gen_member(r, wild: bool) -> bytes:
    """One member; a wild one may also have a bad size, magic, checksum or pax record."""
    flag = r.pick(FLAGS)
    if flag == b"x" or flag == b"g":
        data = gen_pax_body(r, wild)
    elif flag in (b"L", b"K"):
        data = gen_name(r) + (b"" if wild and r.int(0, 3) == 0 else b"\0")
    else:
        data = b"d" * r.int(0, 1100)  # content never matters, its length does
    return header(
        gen_name(r), len(data), flag,
        link=gen_name(r) if flag in (b"1", b"2") or r.int(0, 7) == 0 else b"",
        magic=r.pick([POSIX, POSIX, POSIX, GNU, GNU, b"", b"ustar", b"\xff" * 8] if wild else [POSIX, GNU, b""]),
        size_field=gen_size_field(r) if wild else None,
        prefix=b"" if r.int(0, 5) else r.pick([b"sys", b"..", b"./a", b"a" * 155]),
        checksum=not wild or r.int(0, 9) > 0,
    ) + block(data)


def gen_archive(r) -> bytes:
    # A third well formed (random names, kinds, links, pax records), a third with one wild
    # member, a third wild throughout; some truncated or with a flipped byte.
    n, level = r.int(1, 8), r.int(0, 2)
    wild = r.int(0, n - 1) if level == 1 else None
    raw = b"".join(gen_member(r, level == 2 or i == wild) for i in range(n))
    raw += r.pick([b"\0" * 1024, b"\0" * 1024, b"", b"\0" * 512, b"\x01" * 700])
    if r.int(0, 5) == 0:
        raw = raw[: r.int(0, len(raw))]  # truncated
    if raw and r.int(0, 5) == 0:  # a flipped byte
        i = r.int(0, len(raw) - 1)
        raw = raw[:i] + bytes([r.int(0, 255)]) + raw[i + 1 :]
    return raw


def gen_framed(r) -> bytes:
    raw = gen_archive(r)
    frame = r.pick(["plain", "gz", "gz", "gzsplit", "gzempty", "gzpad", "gztrunc", "gzjunk", "bz2", "xz"])
    if frame == "gz":
        return gzip.compress(raw, compresslevel=1)
    if frame == "gzsplit":
        cut = r.int(0, len(raw))
        return gzip.compress(raw[:cut], compresslevel=1) + gzip.compress(raw[cut:], compresslevel=1)
    if frame == "gzempty":
        return EMPTY_GZ * r.int(1, 300) + gzip.compress(raw, compresslevel=1) + EMPTY_GZ * r.int(0, 300)
    if frame == "gzpad":
        return gzip.compress(raw, compresslevel=1) + b"\0" * r.int(1, 2000) + EMPTY_GZ
    if frame == "gztrunc":
        z = gzip.compress(raw, compresslevel=1)
        return z[: r.int(0, len(z))]
    if frame == "gzjunk":
        return gzip.compress(raw, compresslevel=1) + r.bytes(1, 40)
    if frame == "bz2":
        return bz2.compress(raw)
    if frame == "xz":
        return lzma.compress(raw)
    return raw


EMPTY_GZ = gzip.compress(b"")


def _assert_bounded_read(blob: bytes) -> None:
    """Returns an index or raises HostError. scan_tar and gunzip raise ScanBudgetError (not a
    HostError) when a loop takes more steps than its input allows: len(raw) // 512 + 1 headers,
    one step per compressed byte, a fifth of a pax header's bytes in records."""
    try:
        host = from_bytes(blob)
    except HostError as e:
        assert str(e).startswith("cannot read bundle fuzz: ")
        return
    tree = host._tree
    entries = list(tree.entries())
    for p, kind, size, link in entries:
        parts = p.split("/")[1:]
        assert p.startswith("/") and ".." not in parts and "." not in parts and "" not in parts, p
        assert len(p) <= bundle_mod().MAX_PATH and len(parts) <= bundle_mod().MAX_DEPTH
        assert 0 <= size <= bundle_mod().MAX_BUNDLE and tree.kept_bytes() <= bundle_mod().KEEP_TOTAL
        if kind == "hard":
            assert link.startswith("/") and ".." not in link.split("/")
        if kind == "file":
            assert len(tree.read(p, size + 10)) == size  # its data is all there, no more
    # Reading through Host: every member, every listing, every link, each bounded.
    for p, *_ in entries[:50]:
        data = host.read_bytes(p)
        assert data is None or isinstance(data, bytes)
        host.readlink(p)
    host.listdir("/")
    host.glob("/*/*")


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _scan_within_budget(raw: bytes) -> None:
    try:
        entries = bundle_mod().scan_tar(raw, max_steps=len(raw) // 512 + 1)
    except HostError:
        return
    assert all(0 <= off <= len(raw) and size >= 0 for _, _, off, size, _ in entries)


@fuzz(200)
@given(st.data())
def test_fuzz_tar_structure_shrinkable(data):
    raw = gen_archive(Drawn(data.draw))
    _assert_bounded_read(raw)
    _scan_within_budget(raw)


@fuzz(120)
@given(st.data())
def test_fuzz_compressed_framing_shrinkable(data):
    _assert_bounded_read(gen_framed(Drawn(data.draw)))


@fuzz(2500)
@given(st.integers(0, 2**64))
def test_fuzz_tar_structure(seed):
    raw = gen_archive(Seeded(seed))
    _assert_bounded_read(raw)
    _scan_within_budget(raw)


@fuzz(1000)
@given(st.integers(0, 2**64))
def test_fuzz_compressed_framing(seed):
    _assert_bounded_read(gen_framed(Seeded(seed)))


@fuzz(400)
@given(st.binary(max_size=3000), st.sampled_from([b"", b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", header(b"sys/x", 0)]))
def test_fuzz_raw_bytes(blob, lead):
    _assert_bounded_read(lead + blob)


@fuzz(300)
@given(st.binary(max_size=600))
def test_fuzz_gunzip_steps(tail):
    # A real member then anything: the step budget (one per byte) is never exceeded.
    blob = gzip.compress(b"a" * 100) + tail
    try:
        out = bundle_mod().gunzip(blob, max_steps=len(blob) + 2)
    except (HostError, zlib.error, EOFError):
        return
    assert out.startswith(b"a" * 100)
