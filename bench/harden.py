"""The hostile inputs of issue 10, rebuilt and run: how long each takes and how much memory.

    python bench/harden.py [--json] [--only NAME[,NAME...]]

Each case is the input the issue reproduced a defect with (a tar header with a negative size,
a pax record of length 0, 40,000- and 100,000-level paths, a FIFO in a --root tree, 320,000
empty gzip members, 100,000 tiny devices, a bundle near the 512 MiB cap, `yes` installed as
`ibstat`, an `ibstat` whose setsid grandchild keeps its stdout), made in a temporary folder and
given to a fresh `rdmadoctor` process. For each: the wall time, the child's peak RSS (VmHWM,
written by the child as it exits), its exit status and the first line it printed on stderr,
next to what the issue measured before the fix. The regression tests (tests/unit/host/test_bundle_reader.py,
test_harden_*.py) assert the behaviour; this script gives the figures, on this machine, now.

Exit status 0 when every case ended on its own within its bound (no case is killed by the
script's own 300 s limit), else 1.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

MiB = 1 << 20
LIMIT_S = 300

# The child writes its own VmHWM as it exits (ru_maxrss of a forked child would count the
# parent's pages until exec).
HWM = """
import atexit, runpy, sys
def hwm(path=sys.argv.pop(1)):
    with open("/proc/self/status") as f, open(path, "w") as out:
        out.write(next(line for line in f if line.startswith("VmHWM:")).split()[1])
atexit.register(hwm)
sys.argv[0] = "rdmadoctor"
runpy.run_module("rdmadoctor", run_name="__main__")
"""


# ---- tar by hand (the cases are headers no library writes) ---------------------------------------


def header(name: bytes, size: int = 0, flag: bytes = b"0", link: bytes = b"", size_field: bytes | None = None) -> bytes:
    h = bytearray(512)
    h[0:100] = name[:100].ljust(100, b"\0")
    h[100:108] = b"0000644\x00"
    h[108:124] = b"0000000\x000000000\x00"
    h[124:136] = size_field if size_field is not None else b"%011o\x00" % size
    h[136:148] = b"00000000000\x00"
    h[156:157] = flag
    h[157:257] = link.ljust(100, b"\0")
    h[257:265] = b"ustar\x0000"
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\x00 " % sum(h)
    return bytes(h)


def member(name: bytes, data: bytes = b"", flag: bytes = b"0", link: bytes = b"") -> bytes:
    return header(name, len(data), flag, link) + data + b"\0" * (-len(data) % 512)


def pax_record(key: bytes, value: bytes) -> bytes:
    body = b" " + key + b"=" + value + b"\n"
    n = len(body) + 1
    while len(b"%d" % n) + len(body) != n:
        n += 1
    return b"%d" % n + body


END = b"\0" * 1024
IB = b"sys/devices/pci0000:00/0000:01:00.0/infiniband/mlx5_0"
BASE = [
    member(IB + b"/node_type", b"1: CA\n"),
    member(IB + b"/ports/1/state", b"4: ACTIVE\n"),
    member(IB + b"/ports/1/link_layer", b"InfiniBand\n"),
    member(b"sys/class/infiniband/mlx5_0", flag=b"2", link=b"../../devices/pci0000:00/0000:01:00.0/infiniband/mlx5_0"),
]


def write_tar(path: Path, parts, compress: bool = True) -> Path:
    with (gzip.open(path, "wb", compresslevel=1) if compress else open(path, "wb")) as f:
        for p in parts:
            f.write(p)
        f.write(END)
    return path


def small_root(root: Path) -> Path:
    ib = root / IB.decode()
    for f, v in {"node_type": "1: CA", "ports/1/state": "4: ACTIVE", "ports/1/phys_state": "5: LinkUp",
                 "ports/1/rate": "400 Gb/sec (4X NDR)", "ports/1/link_layer": "InfiniBand"}.items():
        (ib / f).parent.mkdir(parents=True, exist_ok=True)
        (ib / f).write_text(v + "\n")
    (root / "sys/class/infiniband").mkdir(parents=True)
    os.symlink("../../devices/pci0000:00/0000:01:00.0/infiniband/mlx5_0", root / "sys/class/infiniband/mlx5_0")
    (root / "proc").mkdir()
    (root / "proc/modules").write_text("mlx5_ib 483328 0 - Live 0x0\n")
    return root


def tool(bindir: Path, name: str, script: str) -> None:
    bindir.mkdir(exist_ok=True)
    p = bindir / name
    p.write_text("#!/bin/sh\n" + textwrap.dedent(script))
    p.chmod(0o755)


# ---- the cases: (name, what the issue measured before, build(tmp) -> (args, env extra)) ------------


def negative_size(tmp: Path):
    p = tmp / "neg.tar"
    p.write_bytes(header(b"sys/x", size_field=b"-0000001000") + member(b"sys/y", b"data") + END)
    return ["check", "--bundle", str(p), "--json"], {}


def pax_zero(tmp: Path):
    p = tmp / "pax0.tar"
    p.write_bytes(member(b"PaxHeader/x", b"0 path=x\n", b"x") + member(b"sys/a", b"1") + END)
    return ["check", "--bundle", str(p), "--json"], {}


def deep(levels: int):
    def build(tmp: Path):
        path = b"sys/" + b"/x" * levels
        p = write_tar(tmp / f"deep{levels}.tar.gz", [member(b"PaxHeader/x", pax_record(b"path", path), b"x"),
                                                      member(b"placeholder", b"a"), *BASE])
        return ["check", "--bundle", str(p), "--json"], {}
    return build


def fifo_root(tmp: Path):
    root = small_root(tmp / "fifo-root")
    (root / "proc/modules").unlink()
    os.mkfifo(root / "proc/modules")
    return ["check", "--root", str(root), "--json"], {}


def fifo_collect(tmp: Path):
    args, _ = fifo_root(tmp)
    return ["collect", "--root", args[2], "-o", str(tmp / "fifo.tar.gz")], {}


def gzip_members(tmp: Path):
    p = tmp / "members.tar.gz"
    empty = gzip.compress(b"", compresslevel=1)
    with open(p, "wb") as f:
        f.write(empty * 320_000)
        f.write(gzip.compress(b"".join(BASE) + END, compresslevel=1))
    return ["check", "--bundle", str(p), "--json"], {}


def devices(tmp: Path):
    def parts():
        yield from BASE
        for i in range(100_000):
            d = b"sys/class/infiniband/d%06d" % i
            yield member(d + b"/node_type", b"1: CA\n")
            yield member(d + b"/ports/1/state", b"1: DOWN\n")
    return ["check", "--bundle", str(write_tar(tmp / "devices.tar.gz", parts())), "--json"], {}


def near_cap(tmp: Path):
    size = 500 * MiB
    line = b"".join(b"%08d NCCL INFO filler line\n" % i for i in range(4096))

    def parts():
        yield from BASE
        yield header(b"var/junk/blob.bin", size)
        left = size
        while left:
            n = min(left, 4 * MiB)
            yield (line * (n // len(line) + 1))[:n]
            left -= n
    return ["check", "--bundle", str(write_tar(tmp / "near-cap.tar.gz", parts())), "--json"], {}


def yes_ibstat(tmp: Path):
    root = small_root(tmp / "yes-root")
    tool(tmp / "bin-yes", "ibstat", "exec yes\n")
    return (["collect", "--root", str(root), "-o", str(tmp / "yes.tar.gz")],
            {"PATH": f"{tmp / 'bin-yes'}{os.pathsep}{os.environ['PATH']}"})


def setsid_ibstat(tmp: Path):
    root = small_root(tmp / "setsid-root")
    tool(tmp / "bin-setsid", "ibstat", """\
        echo "CA 'mlx5_0'"
        setsid sh -c 'exec sleep 1000' &
        exit 0
        """)
    return (["collect", "--root", str(root), "-o", str(tmp / "setsid.tar.gz")],
            {"PATH": f"{tmp / 'bin-setsid'}{os.pathsep}{os.environ['PATH']}"})


CASES = [
    ("negative-size", "memory grew ~100 MB/s, forever", negative_size),
    ("pax-record-0", "100% CPU, forever", pax_zero),
    ("deep-40000", "1.6 GB peak", deep(40_000)),
    ("deep-100000", "9.6 GB peak", deep(100_000)),
    ("fifo-check", "hung", fifo_root),
    ("fifo-collect", "hung", fifo_collect),
    ("gzip-320000-members", "28.5 s", gzip_members),
    ("devices-100000", "936 MB, 11.5 s", devices),
    ("bundle-near-cap", "about 1 GB peak", near_cap),
    ("collect-yes-as-ibstat", "6-12 GB peak, 17-27 s", yes_ibstat),
    ("collect-setsid-grandchild", "waited forever", setsid_ibstat),
]


def run_case(name: str, build, tmp: Path) -> dict:
    args, extra = build(tmp)
    hwm = tmp / f"{name}.hwm"
    env = {**os.environ, **extra, "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-c", HWM, str(hwm), *args], capture_output=True, env=env, timeout=LIMIT_S)
        code, err = proc.returncode, proc.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        code, err = None, f"killed by the bench after {LIMIT_S} s"
    wall = time.monotonic() - start
    peak = int(hwm.read_text()) * 1024 if hwm.exists() else None
    first = next((line.strip() for line in err.splitlines() if line.strip()), "")
    return {"case": name, "wall_s": round(wall, 2), "peak_mib": None if peak is None else round(peak / MiB, 1),
            "exit": code, "stderr": first[:160]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--only", default="", help="comma-separated case names (default: all): " + ", ".join(c[0] for c in CASES))
    args = ap.parse_args()
    only = {n for n in args.only.split(",") if n}
    unknown = only - {c[0] for c in CASES}
    if unknown:
        ap.error(f"no case named {', '.join(sorted(unknown))}")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name, before, build in CASES:
            if only and name not in only:
                continue
            case_dir = Path(d) / name
            case_dir.mkdir()
            row = run_case(name, build, case_dir)
            row["before"] = before
            rows.append(row)
            if not args.json:
                peak = "-" if row["peak_mib"] is None else f"{row['peak_mib']:.0f} MiB"
                print(f"{name:27} {row['wall_s']:>7.2f} s {peak:>9}  exit {row['exit']}  (before: {before})", flush=True)
                if row["stderr"]:
                    print(f"{'':27} {row['stderr']}", flush=True)
    ok = all(r["exit"] is not None for r in rows)
    if args.json:
        print(json.dumps({"load": os.getloadavg()[0], "rows": rows, "ok": ok}, indent=2))
    else:
        print(f"load average {os.getloadavg()[0]:.2f}; every case ended on its own: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
