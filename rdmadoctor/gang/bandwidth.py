"""``--bandwidth``: a short active test between the members, judged against the gang's median.

Pairs run as a ring (member i sends to i+1), then a shifted ring (i to i+2): a member with a slow
link is slow in both rounds, with two different peers; each neighbour is slow with it in one round
only and fast with its other peer, so the member is named and not its neighbour. A member whose
best send (or receive) is under ``gang_slow_share`` (default 0.7) of the gang's median is slow:
never a line rate, so a CPU-bound or virtual link is compared with its peers.

- socket pools: a built-in TCP stream over the route to rank 0 (the interface NCCL's bootstrap
  uses), for ``seconds`` from a fixed 256 KiB buffer, measured by the receiver (first byte to end
  of stream, so what sat in the sender's buffers is counted when it arrives);
- RDMA pools: perftest's ``ib_write_bw`` per rail, rail-matched (mlx5_i to mlx5_i), the receiver
  as server, ``--report_gbits -D seconds``; the client's average is the pair's rate.

Traffic is bounded by time (``seconds`` a round, each stream also stops at MAX_BYTES) and memory by
one buffer per stream.
"""

from __future__ import annotations

import hmac
import os
import socket
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from rdmadoctor.core.expect import Expect

# `--set gang_slow_share=0.5`: checked like any expectation (preflight takes it out of --set).
SLOW_SHARE = Expect(0.7, "number", above=0.0, max=1.0, nullable=False,
                    doc="share of the gang's median bandwidth under which a member is slow (--bandwidth)")
ROUND_SECONDS = 1.0
MAX_BYTES = 64 << 30
CHUNK = 256 * 1024
PERFTEST_PORT = 18515  # ib_write_bw's default; rail i uses PERFTEST_PORT + 1 + i
KEY_LEN = 16


def schedule(ranks: list[int]) -> list[list[tuple[int, int]]]:
    """The rounds: [(sender, receiver), ...] for the ring, then the ring shifted by two."""
    n = len(ranks)
    rounds = []
    for shift in (1, 2):
        if n < 2 or (shift == 2 and n < 3):
            continue
        rounds.append([(ranks[i], ranks[(i + shift) % n]) for i in range(n)])
    return rounds


class Endpoint:
    """A member's listening socket for the TCP stream test, open from join to the verdict."""

    def __init__(self, bind: str = "") -> None:
        family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind((bind, 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def _receive(ep: Endpoint, key: bytes, deadline: float, box: dict[str, Any]) -> None:
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the sender never connected")
            ep.sock.settimeout(left)
            conn, _ = ep.sock.accept()
            conn.settimeout(max(min(5.0, deadline - time.monotonic()), 0.05))  # a stray peer that sends nothing
            got = b""
            while len(got) < KEY_LEN:
                chunk = conn.recv(KEY_LEN - len(got))
                if not chunk:
                    break
                got += chunk
            if not hmac.compare_digest(got, key):  # not this round's sender: a stray connection
                conn.close()
                continue
            break
        total, first, last = 0, None, None
        with conn:
            while True:
                conn.settimeout(max(deadline - time.monotonic(), 0.05))
                n = conn.recv_into(view)
                if not n:
                    break
                now = time.monotonic()
                if first is None:
                    first = now
                total += n
                last = now
        secs = (last - first) if first is not None and last is not None else 0.0
        box["bytes"] = total
        box["seconds"] = secs
        box["gbps"] = total * 8 / secs / 1e9 if secs > 0 else None
        if box["gbps"] is None:
            box["error"] = "no data received"
    except (OSError, TimeoutError) as e:
        box["error"] = f"receiving: {e}"


def _send(addr: str, port: int, key: bytes, seconds: float) -> str | None:
    payload = bytes(CHUNK)
    try:
        with socket.create_connection((addr, port), timeout=5.0) as s:
            s.settimeout(max(seconds, 1.0) + 10.0)
            s.sendall(key)
            end = time.monotonic() + seconds
            sent = 0
            while time.monotonic() < end and sent < MAX_BYTES:
                s.sendall(payload)
                sent += len(payload)
            s.shutdown(socket.SHUT_WR)
    except OSError as e:
        return f"sending to {addr} port {port}: {e.strerror or e}"
    return None


def tcp_round(ep: Endpoint, me: int, instr: dict[str, Any], *, until: float | None = None) -> list[dict[str, Any]]:
    """One round of the TCP stream test for this member: send to one peer while receiving from
    another; returns the pair this member received (the receiver measures). ``until``: the
    member's own deadline, which no round outlasts."""
    seconds = float(instr.get("seconds") or ROUND_SECONDS)
    deadline = time.monotonic() + seconds + 15.0
    if until is not None:
        deadline = min(deadline, until)
        seconds = max(min(seconds, until - time.monotonic() - 1.0), 0.0)
    box: dict[str, Any] = {}
    recv_from = instr.get("recv_from")
    thread = None
    if recv_from is not None:
        thread = threading.Thread(target=_receive, args=(ep, bytes.fromhex(recv_from["key"]), deadline, box),
                                  daemon=True, name="rdmadoctor-bw")
        thread.start()
    send_to = instr.get("send_to")
    send_error = None
    if send_to is not None:
        send_error = _send(send_to["addr"], int(send_to["port"]), bytes.fromhex(send_to["key"]), seconds)
    out = []
    if thread is not None and recv_from is not None:  # the thread runs only with a peer to receive from
        thread.join(max(deadline - time.monotonic(), 0.05))
        out.append({"sender": recv_from["rank"], "receiver": me, "rail": None, "gbps": box.get("gbps"),
                    "error": box.get("error") or ("timed out" if thread.is_alive() else None)})
    if send_error and send_to is not None:
        out.append({"sender": me, "receiver": send_to["rank"], "rail": None, "gbps": None, "error": send_error})
    return out


def parse_ib_write_bw(text: str) -> float | None:
    """The average bandwidth in Gb/s from ib_write_bw's report: the first line under ``#bytes
    #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]`` (``--run_infinitely`` prints
    many). Without --report_gbits the unit is MB/sec, perftest's 2^20 bytes. None: no result line."""
    header = None
    for line in text.splitlines()[-400:]:
        words = line.split()
        if words[:2] == ["#bytes", "#iterations"]:
            header = line
            continue
        if header is not None and len(words) >= 4 and words[0].isdigit():
            try:
                value = float(words[3])
            except ValueError:
                return None
            if "Gb/sec" in header:
                return value
            if "MB/sec" in header:
                return value * 1048576 * 8 / 1e9
            return None
    return None


def ib_command(device: str, port: int, seconds: float, server: str | None = None, ib_port: int = 1) -> list[str]:
    """ib_write_bw's arguments, the same for the recorded-output tests and a real fabric."""
    argv = ["ib_write_bw", "-d", device, "-i", str(ib_port), "-p", str(port), "--report_gbits", "-F",
            "-D", f"{max(int(seconds), 1)}"]
    if server is not None:
        argv.append(server)
    return argv


def ib_round(me: int, instr: dict[str, Any], rails: list[str], tool: str = "ib_write_bw") -> list[dict[str, Any]]:
    """One round with ib_write_bw: a server per rail for the peer that sends to this member, then a
    client per rail-matched device to the peer this member sends to. The sender reports."""
    import shutil
    import subprocess

    seconds = float(instr.get("seconds") or ROUND_SECONDS)
    if shutil.which(tool) is None:
        send_to = instr.get("send_to")
        return [] if send_to is None else [
            {"sender": me, "receiver": send_to["rank"], "rail": None, "gbps": None,
             "error": f"{tool} is not installed on rank {me} (perftest: `apt-get install perftest`, "
                      "`dnf install perftest`; the rdmadoctor image has it)"}]
    servers = []
    recv_from = instr.get("recv_from")
    if recv_from is not None:
        for i, dev in enumerate(r for r in rails if r in recv_from.get("rails", [])):
            argv = ib_command(dev, PERFTEST_PORT + 1 + i, seconds)
            argv[0] = tool
            try:
                servers.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            except OSError:
                pass
    out = []
    send_to = instr.get("send_to")
    if send_to is not None:
        time.sleep(1.0)  # the peer's servers start at the same moment
        shared = [r for r in rails if r in send_to.get("rails", [])]
        procs = []
        for i, dev in enumerate(shared):
            argv = ib_command(dev, PERFTEST_PORT + 1 + i, seconds, send_to["addr"])
            argv[0] = tool
            try:
                procs.append((dev, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
            except OSError as e:
                out.append({"sender": me, "receiver": send_to["rank"], "rail": dev, "gbps": None,
                            "error": f"{tool}: {e.strerror or e}"})
        for dev, p in procs:
            try:
                text, _ = p.communicate(timeout=seconds + 30)
            except subprocess.TimeoutExpired:
                p.kill()
                text, _ = p.communicate()
            gbps = parse_ib_write_bw(text.decode("utf-8", "replace")[-65536:])
            out.append({"sender": me, "receiver": send_to["rank"], "rail": dev, "gbps": gbps,
                        "error": None if gbps is not None else f"{tool} -d {dev} exited {p.returncode} without a result"})
        if not shared:
            out.append({"sender": me, "receiver": send_to["rank"], "rail": None, "gbps": None,
                        "error": "no rail-matched RDMA device between the two members"})
    for p in servers:
        try:
            p.wait(timeout=seconds + 30)
        except subprocess.TimeoutExpired:
            p.kill()
    return out


def _median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def judge(pairs: list[dict[str, Any]], rounds: int, hosts: dict[int, str], share: float) -> tuple[list, list, float | None]:
    """(slow members, unmeasured pairs, median) from the measured pairs.

    Each member sends once and receives once a round, to and from other peers in each round. Its
    best send and its best receive are compared with the gang's median of the same: a member whose
    sends (or receives) were all under ``share`` of the median is slow. Its neighbours each had one
    transfer with it and one with a healthy peer, so their best is not slow: the member is named and
    not its neighbour. Best-of-two also keeps a busy CPU's noise on a healthy member from naming it.
    """
    measured = [p for p in pairs if p.get("gbps") is not None]
    unmeasured = [{"pair": f"rank {p['sender']} -> rank {p['receiver']}" + (f" ({p['rail']})" if p.get("rail") else ""),
                   "error": p.get("error") or "not measured"} for p in pairs if p.get("gbps") is None]
    if not measured:
        return [], unmeasured, None
    slow: dict[int, dict[str, Any]] = {}
    medians = []
    for direction, side in (("send", "sender"), ("receive", "receiver")):
        best: dict[int, dict[str, Any]] = {}
        for p in measured:
            r = p[side]
            if r not in best or p["gbps"] > best[r]["gbps"]:
                best[r] = p
        median = _median([p["gbps"] for p in best.values()])
        medians.append(median)
        for r, p in best.items():
            if p["gbps"] < share * median and r not in slow:
                slow[r] = {"rank": r, "host": hosts.get(r), "gbps": round(p["gbps"], 3),
                           "median_gbps": round(median, 3), "share": share, "rail": p.get("rail"),
                           "direction": direction}
    return [slow[r] for r in sorted(slow)], unmeasured, max(medians)


def new_key() -> str:
    return os.urandom(KEY_LEN).hex()
