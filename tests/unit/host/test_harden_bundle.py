"""Issue 10, item 5: memory follows what the checks use, not the size of the archive.

The tar index holds names and places, not every member's data: small members are kept, the rest
is read on demand (from the archive itself when it is not compressed, else from an unnamed spill
file); a directory the checks iterate gives at most host.MAX_LIST entries. Memory is the peak
RSS (``ru_maxrss``) of a child running ``check --bundle``, compared with the same child on a
small bundle; work is counted (entries listed, findings made), never timed.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from rdmadoctor.host import HostError, open_host

MiB = 1024 * 1024


def _header(name: str, size: int, flag: bytes = b"0", link: str = "") -> bytes:
    h = bytearray(512)
    h[0:100] = name.encode().ljust(100, b"\0")
    h[100:108] = b"0000644\x00"
    h[108:124] = b"0000000\x000000000\x00"
    h[124:136] = b"%011o\x00" % size
    h[136:148] = b"00000000000\x00"
    h[156:157] = flag
    h[157:257] = link.encode().ljust(100, b"\0")
    h[257:265] = b"ustar\x0000"
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\x00 " % sum(h)
    return bytes(h)


def _member(name: str, data: bytes = b"", flag: bytes = b"0", link: str = "") -> bytes:
    return _header(name, len(data), flag, link) + data + b"\0" * (-len(data) % 512)


def _write(path: Path, *parts, compress: bool) -> Path:
    with (gzip.open(path, "wb", compresslevel=1) if compress else open(path, "wb")) as f:
        for p in itertools.chain(*parts):
            f.write(p)
        f.write(b"\0" * 1024)
    return path


def _base() -> list[bytes]:
    ib = "sys/devices/pci0000:00/0000:01:00.0/infiniband/mlx5_0"
    return [
        _member(f"{ib}/node_type", b"1: CA\n"),
        _member(f"{ib}/ports/1/state", b"4: ACTIVE\n"),
        _member(f"{ib}/ports/1/link_layer", b"InfiniBand\n"),
        _member("sys/class/infiniband/mlx5_0", flag=b"2", link="../../devices/pci0000:00/0000:01:00.0/infiniband/mlx5_0"),
    ]


def _big(size: int, piece: int = 4 * MiB):
    """One member of ``size`` bytes, written in pieces (the test itself never holds it)."""
    yield _header("var/junk/blob.bin", size)
    line = b"".join(b"%08d NCCL INFO filler line\n" % i for i in range(4096))
    left = size
    while left:
        n = min(left, piece)
        yield (line * (n // len(line) + 1))[:n]
        left -= n
    yield b"\0" * (-size % 512)


def _devices(n: int):
    for i in range(n):
        d = f"sys/class/infiniband/d{i:06d}"
        yield _member(f"{d}/node_type", b"1: CA\n")
        yield _member(f"{d}/ports/1/state", b"1: DOWN\n")


# The child writes its own VmHWM as it exits: ru_maxrss from wait4 would count the pages of the
# (large) test process the child was forked from, which exec only then dropped.
_HWM = """
import atexit, runpy, sys
def hwm(path=sys.argv.pop(1)):
    with open("/proc/self/status") as f, open(path, "w") as out:
        out.write(next(line for line in f if line.startswith("VmHWM:")).split()[1])
atexit.register(hwm)
sys.argv[0] = "rdmadoctor"
runpy.run_module("rdmadoctor", run_name="__main__")
"""


def _check(bundle: Path) -> tuple[int, dict]:
    """Peak RSS (bytes, VmHWM) of a child running `check --bundle --json`, and its report."""
    hwm = bundle.with_suffix(".hwm")
    proc = subprocess.run([sys.executable, "-c", _HWM, str(hwm), "check", "--bundle", str(bundle), "--json"], capture_output=True)
    assert proc.stderr == b"", proc.stderr.decode("utf-8", "replace")
    return int(hwm.read_text()) * 1024, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def small_peak(tmp_path_factory) -> int:
    path = _write(tmp_path_factory.mktemp("small") / "small.tar.gz", _base(), compress=True)
    return _check(path)[0]


@pytest.mark.parametrize("compress", [True, False], ids=["tar.gz", "tar"])
def test_a_big_member_is_not_held_in_memory(tmp_path: Path, small_peak: int, compress: bool) -> None:
    # 256 MiB of one member no check reads: the old reader held the archive whole (twice, while
    # joining its pieces), 500+ MiB above the small bundle's peak.
    size = 256 * MiB
    path = _write(tmp_path / ("big.tar.gz" if compress else "big.tar"), _base(), _big(size), compress=compress)
    peak, rep = _check(path)
    assert rep["inventory"]["rdma_devices"] is not None and rep["host"]["kind"] == "bundle"
    assert peak - small_peak < 48 * MiB, (peak - small_peak) // MiB


def test_a_member_read_on_demand_reads_whole_and_in_pieces(tmp_path: Path) -> None:
    from rdmadoctor.host import bundle as B

    blob = b"".join(_big(3 * MiB + 5))[512 : 512 + 3 * MiB + 5]
    many = [_member(f"var/many/f{i:04d}", bytes([i % 251]) * (B.KEEP_MEMBER - 7)) for i in range(B.KEEP_TOTAL // B.KEEP_MEMBER + 3)]
    parts = [*_base(), _member("logs/rank0.log", blob), *many, _member("sys/late", b"after the heap is full\n"),
             _member("sys/hard", flag=b"1", link="logs/rank0.log")]
    for compress in (True, False):
        path = _write(tmp_path / f"b{int(compress)}.tar{'.gz' if compress else ''}", parts, compress=compress)
        host = open_host(bundle=str(path))
        assert host.read_bytes("/logs/rank0.log", 8 * MiB) == blob
        assert host.read_bytes("/sys/hard", 100) == blob[:100]
        assert host.read_value("/sys/late") == "after the heap is full"
        assert host.read_bytes(f"/var/many/f{len(many) - 1:04d}") == bytes([(len(many) - 1) % 251]) * (B.KEEP_MEMBER - 7)
        with host.open_log("/logs/rank0.log") as f:
            got = b"".join(iter(lambda: f.read(100_003), b""))
        assert got == blob
        tree = host._tree
        assert tree.kept_bytes() <= B.KEEP_TOTAL  # what stays in memory, whatever the archive holds
        assert tree.read_at("/logs/rank0.log", 3 * MiB, 100) == blob[3 * MiB :]


def test_a_directory_of_many_devices_is_read_up_to_the_cap(tmp_path: Path) -> None:
    from rdmadoctor.host import MAX_LIST

    n = MAX_LIST + 5000
    path = _write(tmp_path / "devs.tar.gz", _devices(n), compress=True)
    host = open_host(bundle=str(path))
    names = host.listdir("/sys/class/infiniband")
    assert len(names) == MAX_LIST and names == sorted(names) and names[0] == "d000000"
    assert host.cut_listings == {"/sys/class/infiniband": n}
    assert any("/sys/class/infiniband" in note and f"first {MAX_LIST} of {n}" in note for note in host.notes)
    # glob filters the whole directory first: a match past the cap is still found.
    assert host.glob(f"/sys/class/infiniband/d{n - 1:06d}") == [f"/sys/class/infiniband/d{n - 1:06d}"]


def test_memory_does_not_grow_with_devices_past_the_cap(tmp_path: Path) -> None:
    # The checks make a finding per device: 100,000 tiny devices took 936 MB. Past the listing
    # cap more devices cost their index entries (names and places), nothing more.
    from rdmadoctor.host import MAX_LIST

    at_cap = _write(tmp_path / "cap.tar.gz", _devices(MAX_LIST), compress=True)
    past = _write(tmp_path / "past.tar.gz", _devices(4 * MAX_LIST), compress=True)
    peak_cap, rep_cap = _check(at_cap)
    peak_past, rep_past = _check(past)

    def ports(rep: dict) -> int:
        return sum(len(c["findings"]) for c in rep["checks"] if c["id"] == "ib.ports")

    assert ports(rep_past) == ports(rep_cap) <= MAX_LIST + 1  # the same devices were judged
    # ...and the report says that the rest were not (the verdict was made without them).
    assert rep_cap["host"]["notes"] == []
    assert [n for n in rep_past["host"]["notes"] if "/sys/class/infiniband" in n and f"first {MAX_LIST} of {4 * MAX_LIST}" in n]
    assert peak_past - peak_cap < 40 * MiB, (peak_past - peak_cap) // MiB


def test_an_archive_that_unpacks_past_the_cap_is_refused_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rdmadoctor.host import bundle as B

    monkeypatch.setattr(B, "MAX_BUNDLE", 8 * MiB)
    path = _write(tmp_path / "big.tar.gz", _base(), _big(16 * MiB), compress=True)
    with pytest.raises(HostError, match="larger than 8 MiB unpacked"):
        open_host(bundle=str(path))


def test_tarfile_bundles_still_read_alike(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in (("sys/a", b"1\n"), ("logs/x.log", b"y" * (2 * MiB))):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    p = tmp_path / "t.tar.gz"
    p.write_bytes(buf.getvalue())
    host = open_host(bundle=str(p))
    assert host.read_value("/sys/a") == "1" and host.read_bytes("/logs/x.log", 4 * MiB) == b"y" * (2 * MiB)
    assert host.logs() == ["/logs/x.log"]


def test_a_bundle_of_logs_alone_keeps_its_logs_folder(tmp_path: Path) -> None:
    # logs/ is a bundle's own top folder (collect --log): a tar of it alone is not a wrapper to
    # look through (its log was read as /rank0.log, and logs.diagnose found nothing).
    path = _write(tmp_path / "logs.tar.gz", [_member("logs/rank0.log", b"NCCL WARN x\n")], compress=True)
    host = open_host(bundle=str(path))
    assert host.logs() == ["/logs/rank0.log"] and host.read_bytes("/rank0.log") is None
    host._tree.close()
    host._tree.close()  # twice is fine
