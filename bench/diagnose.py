"""What `rdmadoctor diagnose` costs on a big log: speed against a bare Python loop, and memory.

    python bench/diagnose.py [--mib 1024] [--ranks 64] [--keep PATH]
    python bench/diagnose.py --dense [--mib 400]
    python bench/diagnose.py --log ../shared/realworld/gpu-h200/dense_all.log.gz [--mib 400]

Writes a log of about --mib MiB in a temp folder (or PATH): 64 ranks, each printing NCCL's init
lines (version, NET/IB devices, channels with GDRDMA) interleaved with what a training loop
prints (step, loss, throughput), a few NCCL WARN lines near the end (a retry-exceeded work
completion, then flushed ones, then the watchdog).

``--dense`` writes the worst case instead: a job that builds communicator after communicator (or
runs with NCCL_DEBUG_SUBSYS=ALL), 64 ranks on 8 hosts, about 90% of its lines NCCL INFO channel
and `Connected` lines, one host (gpu-node-007) without an HCA, on sockets; the same WARN lines end
it.

``--log PATH`` times a real log instead: PATH (plain or gzip) written again and again, whole, up to
--mib MiB (400 by default), as a job that prints the same thing run after run does
(``dense_all.log.gz``: NCCL_DEBUG_SUBSYS=ALL from an H200 machine, 10 MB a copy).

Then, in one run:

- ``bare_s``: a bare Python loop over the same file line by line (``for line in f: pass`` in
  text mode with errors="replace", what "reading it in Python" costs), in a child process;
- ``bare_binary_s``: the same loop over bytes (``open(path, "rb")``), the floor for any Python
  line loop;
- ``diagnose_s``: ``rdmadoctor.logs.diagnose_paths`` over the file, in a child process;
- ``ratio``: diagnose_s / bare_s, and ``ratio_binary``: diagnose_s / bare_binary_s (issue 16
  asks for the dense log in at most 3 times the binary loop); each is the best of --repeat
  alternated runs (default 3), the usual way to time on a machine whose load changes;
- ``ratio_binary_cpu``: the same ratio in CPU time (time.process_time, best of the runs): on a
  shared machine the wall-clock ratio moves with other processes' load, the CPU one much less;
- ``diagnose_rss_mib``: the diagnosing child's peak RSS (ru_maxrss);
- ``verdict``: the codes found, to show the work was done (not a skipped file).

Prints one JSON line on stdout. Each measurement runs in a fresh child so one cannot warm the
other's page cache unfairly: the file is read once before both to put it in the cache.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

_BARE = """
import resource, sys, time
t = time.perf_counter()
n = 0
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for line in f:
        n += 1
import json
print(json.dumps([time.perf_counter() - t, n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]))
"""

_BARE_BINARY = """
import resource, sys, time
t, c = time.perf_counter(), time.process_time()
n = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        n += 1
import json
print(json.dumps([time.perf_counter() - t, n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.process_time() - c]))
"""

_DIAG = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from rdmadoctor.logs import diagnose_paths
t, c = time.perf_counter(), time.process_time()
d = diagnose_paths([sys.argv[1]])
took, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps([took, [f.code for f in d.findings], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, d.nccl, cpu]))
"""


def write_log(path: str, mib: int, ranks: int) -> int:
    rnd = random.Random(7)
    hosts = [f"gpu-node-{i // 8:03d}" for i in range(ranks)]
    target = mib * 1024 * 1024
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        def out(s: str) -> None:
            nonlocal written
            f.write(s)
            written += len(s)

        for r in range(ranks):
            h, pid = hosts[r], 1000 + r
            p = f"{h}:{pid}:{pid} [{r % 8}] NCCL INFO "
            out(f"{p}NCCL version 2.21.5+cuda12.4\n")
            out(f"{p}NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB eth0:10.0.{r}.1<0>\n")
            out(f"{p}Using network IB\n")
            out(f"{p}comm 0x5555 rank {r} nRanks {ranks} nNodes {ranks // 8} localRanks 8 localRank {r % 8} MNNVL 0\n")
            for c in range(16):
                out(f"{p}Channel {c:02d}/0 : {r}[{r % 8}] -> {(r + 8) % ranks}[{r % 8}] [send] via NET/IB/{c % 4}/GDRDMA\n")
            out(f"{p}16 coll channels, 16 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer\n")
            out(f"{p}comm 0x5555 rank {r} nranks {ranks} cudaDev {r % 8} nvmlDev {r % 8} busId 1b000 commId 0x1 - Init COMPLETE\n")
        step = 0
        while written < target - 4096:
            step += 1
            for r in range(ranks):
                loss = 2.5 / (1 + step * 0.001) + rnd.random() * 0.01
                out(f"[default{r % 8}]:[rank{r}]: step {step} | loss {loss:.4f} | lr 3.0e-04 | "
                    f"tokens/s {180000 + rnd.randint(-500, 500)} | grad_norm {rnd.random():.3f}\n")
                if rnd.random() < 0.002:
                    h, pid = hosts[r], 1000 + r
                    out(f"{h}:{pid}:{pid + 7} [{r % 8}] NCCL INFO [Service thread] Connection closed by localRank {r % 8}\n")
        h = hosts[5]
        out(f"{h}:1005:1099 [5] transport/net_ib.cc:1703 NCCL WARN NET/IB : Got completion from peer 10.0.1.1<55555> "
            "with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.0.5.1 remoteGids::ffff:10.0.1.1 hca mlx5_0\n")
        for _ in range(3):
            out(f"{h}:1005:1099 [5] transport/net_ib.cc:1703 NCCL WARN NET/IB : Got completion from peer 10.0.1.1<55555> "
                "with status=5 opcode=0 len=0 vendor err 249 (Send) localGid ::ffff:10.0.5.1 remoteGids::ffff:10.0.1.1 hca mlx5_0\n")
        out("[rank5]:[E1123 10:00:00.000000 1005 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=99, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 "
            "milliseconds before timing out.\n")
    return written


def write_dense(path: str, mib: int, ranks: int = 64, per_host: int = 8) -> int:
    """NCCL INFO from many communicators: ring listings, channel lines, `Connected` lines (NCCL
    2.21 wording), one host on sockets; about 90% channel and `Connected` lines."""
    hosts = [f"gpu-node-{i // per_host:03d}" for i in range(ranks)]
    socket_host = hosts[-1]
    target = mib * 1024 * 1024
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        def out(s: str) -> None:
            nonlocal written
            f.write(s)
            written += len(s)

        for r in range(ranks):
            h, pid = hosts[r], 1000 + r
            p = f"{h}:{pid}:{pid} [{r % per_host}] NCCL INFO "
            out(f"{p}NCCL version 2.21.5+cuda12.4\n")
            if h == socket_host:
                out(f"{p}NET/IB : No device found.\n{p}NET/Socket : Using [0]eth0:10.0.{r}.1<0>\n{p}Using network Socket\n")
            else:
                out(f"{p}NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB eth0:10.0.{r}.1<0>\n")
                out(f"{p}Using network IB\n")
        comm = 0
        ring = " ".join(f"{i:4d}" for i in range(ranks))
        while written < target - 65536:
            comm += 1
            for r in range(ranks):
                h, pid, local = hosts[r], 1000 + r, r % per_host
                net = "Socket" if h == socket_host else "IB"
                p = f"{h}:{pid}:{pid + comm % 97} [{local}] NCCL INFO "
                out(f"{p}comm 0x{comm:08x} rank {r} nRanks {ranks} nNodes {ranks // per_host} localRanks {per_host} "
                    f"localRank {local} MNNVL 0\n")
                for c in range(8):
                    out(f"{p}Channel {c:02d}/24 : {ring}\n")
                out(f"{p}Trees [0] {(r + 1) % ranks}/-1/-1->{r}->{(r - 1) % ranks} [1] {(r + 1) % ranks}/-1/-1->{r}->{(r - 1) % ranks}\n")
                for c in range(24):
                    nxt = (r + 1) % ranks
                    if nxt // per_host == r // per_host:
                        out(f"{p}Channel {c:02d}/0 : {r}[{local}] -> {nxt}[{nxt % per_host}] via P2P/CUMEM/read\n")
                    else:
                        gdr = "" if net == "Socket" else "/GDRDMA"
                        out(f"{p}Channel {c:02d}/0 : {r}[{local}] -> {nxt}[{nxt % per_host}] [send] via NET/{net}/{c % 4}{gdr}\n")
                        out(f"{p}Channel {c:02d}/0 : {(r - 1) % ranks}[{(r - 1) % per_host}] -> {r}[{local}] [receive] via NET/{net}/{c % 4}{gdr}\n")
                out(f"{p}Connected all rings, use ring PXN 0 GDR {0 if net == 'Socket' else 1}\n")
                for c in range(8):
                    out(f"{p}Channel {c:02d}/0 : {r}[{local}] -> {(r + 8) % ranks}[{local}] [send] via NET/{net}/{c % 4}\n")
                out(f"{p}Connected all trees\n")
                out(f"{p}Connected to proxy localRank {local} -> connection 0x7f{comm:06x}\n")
                out(f"{p}threadThresholds 8/8/64 | 512/8/64 | 512 | 512\n")
                out(f"{p}24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer\n")
                out(f"{p}comm 0x{comm:08x} rank {r} nranks {ranks} cudaDev {local} nvmlDev {local} busId 1b000 "
                    f"commId 0x{comm:x} - Init COMPLETE\n")
                out(f"[default{local}]:[rank{r}]: step {comm} | loss 2.31 | lr 3.0e-04 | tokens/s 181234\n")
        h = hosts[5]
        out(f"{h}:1005:1099 [5] transport/net_ib.cc:1703 NCCL WARN NET/IB : Got completion from peer 10.0.1.1<55555> "
            "with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.0.5.1 remoteGids::ffff:10.0.1.1 hca mlx5_0\n")
        out("[rank5]:[E1123 10:00:00.000000 1005 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=99, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 "
            "milliseconds before timing out.\n")
    return written


def write_repeated(path: str, mib: int, source: str) -> int:
    """``source`` (plain or gzip) written whole again and again, up to about ``mib`` MiB."""
    import gzip

    with open(source, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if not data.endswith(b"\n"):
        data += b"\n"
    copies = max(1, round(mib * 1024 * 1024 / len(data)))
    with open(path, "wb") as f:
        for _ in range(copies):
            f.write(data)
    return copies * len(data)


def _child(code: str, *args: str) -> list:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--keep", help="write the log here and keep it")
    ap.add_argument("--repeat", type=int, default=3, help="alternate the runs this many times; the best of each counts")
    ap.add_argument("--dense", action="store_true", help="the dense NCCL log (many communicators, one host on sockets)")
    ap.add_argument("--log", metavar="PATH", help="a real log (plain or gzip) repeated up to --mib instead (400 by default)")
    a = ap.parse_args()
    if (a.dense or a.log) and a.mib == 1024 and "--mib" not in sys.argv:
        a.mib = 400
    folder = None
    path = a.keep
    if path is None:
        folder = tempfile.mkdtemp(prefix="rdmadoctor-bench-")
        path = os.path.join(folder, "job.log")
    try:
        if a.log:
            size = write_repeated(path, a.mib, a.log)
        else:
            size = write_dense(path, a.mib, a.ranks) if a.dense else write_log(path, a.mib, a.ranks)
        with open(path, "rb") as f:  # into the page cache, for both children alike
            while f.read(1 << 24):
                pass
        bare, binary, diag = [], [], []
        for _ in range(max(1, a.repeat)):  # alternated, so a burst of load elsewhere hits all alike
            bare.append(_child(_BARE, path))
            binary.append(_child(_BARE_BINARY, path))
            diag.append(_child(_DIAG, path, os.path.dirname(HERE)))
        bare_s, lines, bare_rss = min(bare, key=lambda r: r[0])
        binary_s = min(binary, key=lambda r: r[0])[0]
        diag_s, codes, diag_rss, nccl, _ = min(diag, key=lambda r: r[0])
        binary_cpu, diag_cpu = min(r[3] for r in binary), min(r[4] for r in diag)
        result = {
            "log": os.path.basename(a.log) if a.log else "dense" if a.dense else "training",
            "mib": round(size / 1048576, 1),
            "lines": int(lines),
            "ranks": a.ranks,
            "bare_s": round(float(bare_s), 2),
            "diagnose_s": round(float(diag_s), 2),
            "bare_binary_s": round(float(binary_s), 2),
            "ratio": round(float(diag_s) / float(bare_s), 2),
            "ratio_binary": round(float(diag_s) / float(binary_s), 2),
            "ratio_binary_cpu": round(float(diag_cpu) / float(binary_cpu), 2),
            "bare_rss_mib": round(int(bare_rss) / 1024, 1),
            "diagnose_rss_mib": round(int(diag_rss) / 1024, 1),
            "verdict": codes,
            "nccl": nccl,
        }
        print(json.dumps(result))
    finally:
        if folder is not None:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
