"""A stand-in for NCCL's RAS socket on loopback, written from the protocol (NVIDIA/nccl src/ras/
client_support.cc rasClientEventLoop) and the report formats (rasClientRunInit, rasClientRunComms,
rasDumpCommsToJSON in the same file). No NCCL runs on this machine: this is what the tests ask.

A :class:`Job` describes ranks (rank, node, pid, GPU, operation count) and which processes are dead;
:func:`text_report` and :func:`json_report` write what NCCL would print for it (the text with the
outlier rule of rasCountIsOutlier: groups of one always, of at most 10 and a quarter of the
communicator otherwise). :class:`RasStandin` serves it: ``json=False`` answers ``SET FORMAT`` as
NCCL < 2.28.7 does (``ERROR: Unknown command``), ``silent=True`` accepts and never answers, ``hold`` (an Event) answers STATUS only once it is set.
"""

from __future__ import annotations

import json as _json
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class Rank:
    rank: int
    node: str
    pid: int
    gpu: int
    ops: int = 100  # AllReduce operations launched


@dataclass
class Job:
    ranks: list[Rank]
    dead: set[int] = field(default_factory=set)  # ranks whose process RAS considers dead
    version: str = "2.28.9"
    comm_hash: str = "9a1b2c3d4e5f6071"
    async_errors: dict[int, int] = field(default_factory=dict)  # rank -> ncclResult_t


def hang_job() -> Job:
    """8 ranks on 2 nodes; rank 5's process is dead; ranks 2 and 6 are behind at operation 120."""
    ranks = [Rank(r, "10.0.0.1" if r < 4 else "10.0.0.2", 1000 + r if r < 4 else 2000 + r, r % 4, 121) for r in range(8)]
    ranks[2].ops = ranks[6].ops = 120
    return Job(ranks, dead={5})


def healthy_job() -> Job:
    return Job([Rank(r, "10.0.0.1" if r < 4 else "10.0.0.2", 1000 + r, r % 4, 300) for r in range(8)])


def _outlier(count: int, total: int) -> bool:
    return count == 1 or (count <= 10 and count <= total * 0.25)


def _rank_line(r: Rank) -> str:
    return f"  Rank {r.rank} -- GPU {r.gpu} managed by process {r.pid} on node {r.node}\n"


def text_report(job: Job) -> str:
    live = [r for r in job.ranks if r.rank not in job.dead]
    dead = [r for r in job.ranks if r.rank in job.dead]
    nodes = sorted({r.node for r in job.ranks})
    per = len(job.ranks) // len(nodes)
    out = [f"NCCL version {job.version} compiled with CUDA 12.9\n", "CUDA runtime version 12090, driver version 12090\n\n",
           "Job summary\n===========\n\n",
           "  Nodes  Processes         GPUs  Processes     GPUs\n(total)   per node  per process    (total)  (total)\n",
           f"{len(nodes):7d}  {per:9d}  {1:11d}  {len(job.ranks):9d}  {len(job.ranks):7d}\n",
           "\nCommunicators... (0.012s)\n=============\n\n"]
    counts: dict[int, list[Rank]] = {}
    for r in live:
        counts.setdefault(r.ops, []).append(r)
    errors = [x for x, on in (("INCOMPLETE", bool(dead)), ("ERROR", bool(job.async_errors)), ("MISMATCH", len(counts) > 1)) if on]
    out.append("Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
               "    #  in group  per comm  per node  per comm  in group\n")
    out.append(f"{0:5d}  {1:8d}  {len(nodes):8d}  {per:>8}  {len(job.ranks):8d}  {len(live):8d}  {'RUNNING':>8}  "
               f"{','.join(errors) or 'OK':>6}\n")
    out.append("\nErrors\n======\n\n")
    if dead:
        n = len(dead)
        out.append(f"DEAD\n  {n} job process{'es are' if n > 1 else ' is'} considered dead (unreachable via the RAS network)\n")
        out += [f"  Process {r.pid} on node {r.node} managing GPU {r.gpu}\n" for r in dead]
        out.append("\n")
        out.append(f"#0-0 ({job.comm_hash}) INCOMPLETE\n  Missing communicator data from {n} rank{'s' if n > 1 else ''}\n")
        out += [_rank_line(r) for r in dead]
        out.append("\n")
    if job.async_errors:
        out.append(f"#0-0 ({job.comm_hash}) ERROR\n")
        n = len(job.async_errors)
        out.append(f"  Asynchronous error{'s' if n > 1 else ''} on {n} rank{'s' if n > 1 else ''}\n")
        names = {6: "Remote process error", 2: "System error", 3: "Internal error"}
        for rank, err in job.async_errors.items():
            r = job.ranks[rank]
            out.append(f"  Rank {rank} reported {names.get(err, 'Unexpected error')} -- GPU {r.gpu} managed by process "
                       f"{r.pid} on node {r.node}\n")
        out.append("\n")
    out.append("Warnings\n========\n\n")
    if len(counts) > 1:
        out.append(f"#0-0 ({job.comm_hash}) MISMATCH\n  Communicator ranks have different AllReduce operation counts\n")
        for ops, rs in sorted(counts.items(), key=lambda kv: (-len(kv[1]), -kv[0])):
            if len(rs) > 1:
                out.append(f"  {len(rs)} ranks have launched up to operation {ops}\n")
            if _outlier(len(rs), len(job.ranks)):
                for r in rs:
                    out.append(_rank_line(r) if len(rs) > 1 else
                               f"  Rank {r.rank} has launched up to operation {ops} -- GPU {r.gpu} managed by process "
                               f"{r.pid} on node {r.node}\n")
        out.append("\n")

    return "".join(out)


def json_report(job: Job) -> str:
    live = [r for r in job.ranks if r.rank not in job.dead]
    dead = [r for r in job.ranks if r.rank in job.dead]
    ops = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
    comm = {
        "hash": f"0x{job.comm_hash}", "secondary_hash": "0x1:0x2", "size": len(job.ranks), "ranks_count": len(live),
        "missing_ranks_count": len(dead),
        "ranks": [{"rank": r.rank, "host": r.node, "pid": r.pid, "cuda_dev": r.gpu, "nvml_dev": r.gpu,
                   "status": {"init_state": 0, "async_error": job.async_errors.get(r.rank, 0), "finalize_called": False,
                              "destroy_flag": False, "abort_flag": False},
                   "collective_counts": {op: (r.ops if op == "AllReduce" else 0) for op in ops}} for r in live],
        "missing_ranks": [{"rank": r.rank, "host": r.node, "pid": r.pid, "cuda_dev": r.gpu, "nvml_dev": r.gpu,
                           "status": {"unresponsive": True, "considered_dead": True}} for r in dead],
    }
    doc = {"nccl_version": job.version, "cuda_runtime_version": 12090, "cuda_driver_version": 12090,
           "timestamp": "2026-11-28 20:41:07", "communicators_count": 1, "communicators": [comm],
           "ras": {"collection_time_sec": 0.012, "timeouts_count": 0}}
    return _json.dumps(doc, indent=2) + "\n"


class RasStandin:
    """A RAS socket on 127.0.0.1 (an ephemeral port): start(), .port, .queries, stop()."""

    def __init__(self, job: Job, *, json: bool = True, silent: bool = False, hold: threading.Event | None = None):
        self.job, self.json, self.silent, self.hold = job, json, silent, hold
        self.queries: list[str] = []  # the format of each STATUS answered
        self.commands: list[str] = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> RasStandin:
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        try:
            self.sock.close()
        except OSError:
            pass
        with self._lock:
            for c in self._conns:
                try:
                    c.close()
                except OSError:
                    pass
        for t in self._threads:
            t.join(timeout=10)

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            with self._lock:
                self._conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        fmt = "text"
        buf = b""
        conn.settimeout(0.2)
        try:
            while not self._stop.is_set():
                try:
                    data = conn.recv(4096)
                except socket.timeout:
                    continue
                except OSError:  # closed by stop()
                    return
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, _, buf = buf.partition(b"\n")
                    cmd = line.decode().strip()
                    self.commands.append(cmd)
                    if self.silent:
                        continue
                    low = cmd.lower()
                    if low.startswith("client protocol"):
                        conn.sendall(b"SERVER PROTOCOL 2\n")
                    elif low.startswith("timeout "):
                        conn.sendall(b"OK\n")
                    elif low.startswith("set format ") and self.json:
                        fmt = low.split()[-1]
                        conn.sendall(b"OK\n")
                    elif low in ("status", "verbose status"):
                        self.queries.append(fmt)
                        if self.hold is not None:  # the test lets the answer go once it has set the scene
                            self.hold.wait(120)
                        text = json_report(self.job) if fmt == "json" else text_report(self.job)
                        conn.sendall(text.encode())
                        return  # NCCL closes the connection after the report
                    else:
                        conn.sendall(f"ERROR: Unknown command {cmd}\n".encode())
        finally:
            conn.close()
