"""One member's part in the gang: rank 0 gathers, compares, (measures) and answers; the others
join and wait for the verdict. Returns the ``gang`` section every member prints alike."""

from __future__ import annotations

import math
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

from rdmadoctor.core.words import count
from rdmadoctor.gang import bandwidth as B
from rdmadoctor.gang import compare as C
from rdmadoctor.gang import protocol as P

# How long a member waits for the verdict after joining, beyond --gang-timeout: rank 0 decides
# at its own deadline at the latest, and may have started later than this member.
VERDICT_GRACE_S = 30.0


def _failed(code: Any, severity: str, subject: str, message: str, base: dict[str, Any]) -> dict[str, Any]:
    verdict = C.NO_GO if severity == "error" else C.UNKNOWN_VERDICT
    return dict(base, verdict=verdict, members=[], mismatches=[], slow=[], missing=[], bandwidth=None,
                problems=[{"check": "gang", "code": code.code, "severity": severity, "subject": subject,
                           "message": message, "remedy": code.fix, "pod_fix": None}])


def _ip(text: Any) -> bool:
    import ipaddress

    if not isinstance(text, str):
        return False
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    return not (ip.is_unspecified or ip.is_multicast or (ip.version == 4 and text == "255.255.255.255"))


def _key(v: Any) -> bool:
    return isinstance(v, str) and len(v) == 2 * B.KEY_LEN and all(c in "0123456789abcdef" for c in v)


def _rank(v: Any, size: int, me: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < size and v != me


class Policy:
    """What this member agreed to run for rank 0, from its own settings: a bandwidth round only
    with --bandwidth, with peers of the gang, at most ``seconds`` a round, at most ``rounds``."""

    def __init__(self, *, rank: int, size: int, master: str, bandwidth: bool, seconds: float, rails: list[str]):
        self.rank = rank
        self.size = size
        self.master = master  # rank 0's address as this member reached it
        self.bandwidth = bandwidth
        self.seconds = seconds
        self.rails = rails
        self.next_round = 0

    def check(self, msg: dict[str, Any]) -> str | None:
        """Why this member refuses a bandwidth round (the message is signed already), or None."""
        if not self.bandwidth:
            return "this member was started without --bandwidth: it runs no bandwidth test"
        idx = msg.get("round")
        rounds = len(B.schedule(list(range(self.size))))
        if idx != self.next_round or not isinstance(idx, int) or idx >= rounds:
            return f"round {P.printable(idx, 20)!r} out of order (expected round {self.next_round} of {rounds})"
        tool = msg.get("tool")
        if tool not in ("tcp", "ib_write_bw"):
            return f"tool {P.printable(tool, 40)!r} is not tcp or ib_write_bw"
        secs = msg.get("seconds")
        if not isinstance(secs, (int, float)) or isinstance(secs, bool) or not math.isfinite(secs) or secs <= 0:
            return f"seconds {P.printable(secs, 20)!r} is not a positive number"
        if secs > self.seconds:
            return (f"rank 0 asks for {secs:g} s a round; this member's own settings allow at most "
                    f"{self.seconds:g} s")
        send_to, recv_from = msg.get("send_to"), msg.get("recv_from")
        if send_to is None and recv_from is None:
            return "a round with no peer"
        if send_to is not None:
            if not isinstance(send_to, dict) or not _rank(send_to.get("rank"), self.size, self.rank):
                return f"send_to names no other member of this gang of {self.size}"
            addr = send_to.get("addr")
            if not _ip(addr):
                return f"send_to's address {P.printable(addr, 60)!r} is not a member's IP address"
            if send_to["rank"] == 0 and addr != self.master:
                return f"send_to rank 0 at {P.printable(addr, 60)}, but rank 0 is {self.master}"
            port = send_to.get("port")
            if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
                return f"send_to's port {P.printable(port, 20)!r} is not a port number"
            if not _key(send_to.get("key")):
                return "send_to's key is not a round key"
            if not isinstance(send_to.get("rails"), list):
                return "send_to's rails are not a list"
        if recv_from is not None:
            if not isinstance(recv_from, dict) or not _rank(recv_from.get("rank"), self.size, self.rank):
                return f"recv_from names no other member of this gang of {self.size}"
            if not _key(recv_from.get("key")):
                return "recv_from's key is not a round key"
            if not isinstance(recv_from.get("rails"), list):
                return "recv_from's rails are not a list"
        return None


def run_member(
    *,
    rank: int,
    size: int,
    host: str,
    port: int,
    token: str,
    member: dict[str, Any],
    rails: list[str],
    timeout: float,
    log: Callable[[str], None] = lambda _m: None,
    resolve: Callable[[str, int, float], list[tuple]] | None = None,
    bandwidth: bool = False,
    seconds: float = B.ROUND_SECONDS,
) -> dict[str, Any]:
    """A member (rank 1 and up): connect to rank 0, join, answer bandwidth rounds, get the verdict.

    ``bandwidth``: whether this member runs bandwidth rounds at all (--bandwidth), each at most
    ``seconds``. A connection closed before the verdict (rank 0 at its cap of waiting connections,
    a restart) is joined again, with backoff, until ``timeout``.
    """
    import random

    endpoint = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    base = {"role": "member", "rank": rank, "size": size, "master": endpoint}
    start = time.monotonic()
    join_by, verdict_by = start + timeout, start + timeout + VERDICT_GRACE_S
    delay, attempt = 0.2, 0
    while True:
        attempt += 1
        try:
            sock = P.connect(host, port, join_by, resolve=resolve, log=log)
        except TimeoutError as e:
            return _failed(C.GANG_UNREACHABLE, "error", endpoint,
                           f"rank 0's gang port {endpoint} never accepted a connection within {timeout:g} s ({e}); "
                           "expected rank 0 to run `rdmadoctor preflight --gang` (or `run --gang`) there.", base)
        ep = None
        try:
            master = P._peer(sock.getpeername())
            policy = Policy(rank=rank, size=size, master=master, bandwidth=bandwidth, seconds=seconds, rails=rails)
            if bandwidth:
                ep = B.Endpoint(sock.getsockname()[0])
            log(f"joined the gang at {endpoint} as rank {rank} of {size}; waiting for the verdict")

            def on_message(msg: dict[str, Any], policy: Policy = policy, ep: B.Endpoint | None = ep) -> dict[str, Any] | None:
                if msg["type"] != "bw_round":
                    return None
                why = policy.check(msg)
                if why or ep is None:
                    raise P.ProtocolError(f"refused rank 0's bandwidth round, nothing run: {why}")
                policy.next_round += 1
                until = min(verdict_by, time.monotonic() + policy.seconds + 15.0)
                if msg["tool"] == "ib_write_bw":
                    pairs = B.ib_round(rank, msg, rails)
                else:
                    pairs = B.tcp_round(ep, rank, msg, until=until)
                return {"type": "bw_done", "round": msg["round"], "pairs": pairs}

            bw = {"port": ep.port, "rails": rails} if ep is not None else None
            gang = P.join(sock, rank, size, token, member, bw, verdict_by, on_message=on_message)
        except P.Refused as e:
            return _failed(C.GANG_REFUSED, "error", endpoint, f"rank 0 at {endpoint} refused this member: {e}.", base)
        except (P.Dropped, ConnectionError) as e:
            now = time.monotonic()
            if now < join_by:
                if attempt == 1 or attempt % 10 == 0:
                    log(f"the connection to rank 0 closed before the verdict ({e}); joining again")
                time.sleep(min(delay * random.uniform(0.8, 1.2), max(join_by - now, 0)))
                delay = min(delay * 2, 3.0)
                continue
            return _failed(C.GANG_PROTOCOL, "unknown", endpoint,
                           f"no verdict from rank 0 at {endpoint}: {e} ({count(attempt, 'attempt')}; rank 0 stopped, "
                           "or its deadline passed).", base)
        except (P.ProtocolError, ValueError, KeyError, TypeError) as e:
            return _failed(C.GANG_PROTOCOL, "unknown", endpoint,
                           f"the exchange with {endpoint} failed: {P.printable(e)}.", base)
        except (OSError, TimeoutError) as e:
            return _failed(C.GANG_PROTOCOL, "unknown", endpoint,
                           f"no verdict from rank 0 at {endpoint}: {e or type(e).__name__} (rank 0 stopped, or its "
                           "deadline passed).", base)
        finally:
            if ep is not None:
                ep.close()
        return dict(base, **gang)


def _bandwidth_rounds(joined: dict[int, P.Joined], own_rails: list[str], tool: str, seconds: float,
                      log: Callable[[str], None], token: str = "") -> list[dict[str, Any]]:
    import threading

    ranks = [0] + sorted(joined)
    local = next(iter(joined.values())).local
    ep0 = B.Endpoint(local)
    where = {0: (local, ep0.port, own_rails)}
    for r, m in joined.items():
        bw = m.bw or {}
        where[r] = (m.addr, int(bw.get("port") or 0), [str(x) for x in bw.get("rails") or []][:64])
    pairs: list[dict[str, Any]] = []
    try:
        for idx, ring in enumerate(B.schedule(ranks)):
            log(f"bandwidth round {idx + 1}: {tool}, {seconds:g} s")
            instr: dict[int, dict[str, Any]] = {r: {"type": "bw_round", "round": idx, "tool": tool, "seconds": seconds}
                                                for r in ranks}
            for sender, receiver in ring:
                key = B.new_key()
                addr, port, rails = where[receiver]
                instr[sender]["send_to"] = {"rank": receiver, "addr": addr, "port": port, "key": key, "rails": rails}
                instr[receiver]["recv_from"] = {"rank": sender, "key": key, "rails": where[sender][2]}
            box: dict[str, Any] = {}

            def own(i: dict[str, Any] = instr[0]) -> None:
                box["pairs"] = B.ib_round(0, i, own_rails) if tool == "ib_write_bw" else B.tcp_round(ep0, 0, i)

            t = threading.Thread(target=own, daemon=True, name="rdmadoctor-bw0")
            t.start()
            for r, m in joined.items():
                try:
                    P.instruct(m, token, instr[r])
                except (OSError, P.ProtocolError) as e:
                    pairs.append({"round": idx, "sender": r, "receiver": instr[r]["send_to"]["rank"], "rail": None,
                                  "gbps": None, "error": f"rank {r} unreachable: {e}"})
            deadline = time.monotonic() + seconds + 60.0
            for r, m in joined.items():
                try:
                    reply = P.recv(m.sock, deadline, P.MAX_TO_MASTER)
                    got = reply.get("pairs") if reply.get("type") == "bw_done" else None
                    for p in (got if isinstance(got, list) else [])[:256]:
                        # Only a pair of two members this member was part of, with a finite rate.
                        if isinstance(p, dict) and r in (p.get("sender"), p.get("receiver")) and \
                                p.get("sender") in where and p.get("receiver") in where and \
                                not isinstance(p.get("sender"), bool) and not isinstance(p.get("receiver"), bool):
                            g: Any = p.get("gbps")  # a number when ok (mypy does not narrow through ok)
                            ok = isinstance(g, (int, float)) and not isinstance(g, bool) and math.isfinite(g) and g >= 0
                            pairs.append({"round": idx, "sender": p["sender"], "receiver": p["receiver"],
                                          "rail": p["rail"] if isinstance(p.get("rail"), str) and P.RAIL_RE.fullmatch(p["rail"]) else None,
                                          "gbps": float(g) if ok else None,
                                          "error": P.printable(p.get("error")) if p.get("error") else None})
                except (OSError, TimeoutError, P.ProtocolError) as e:
                    pairs.append({"round": idx, "sender": instr[r]["recv_from"]["rank"], "receiver": r, "rail": None,
                                  "gbps": None, "error": f"rank {r} did not report: {e}"})
            t.join(max(deadline - time.monotonic(), 0.05))
            for p in box.get("pairs") or []:
                pairs.append(dict(p, round=idx))
    finally:
        ep0.close()
    return pairs


def run_rank0(
    *,
    size: int,
    port: int,
    token: str,
    member: dict[str, Any],
    rails: list[str],
    timeout: float,
    bandwidth: bool = False,
    share: float = 0.7,
    seconds: float = B.ROUND_SECONDS,
    strict: bool = False,
    log: Callable[[str], None] = lambda _m: None,
    server: Any = None,
    engine: str = C.ANY_ENGINE,
) -> dict[str, Any]:
    """Rank 0: listen (``server``: an already bound socket, else :func:`protocol.listen`), gather
    until all have joined or ``timeout``, judge, measure with ``bandwidth``, answer everyone.
    ``engine``: what runs the job (:func:`membership.engine_of`), for the words of the remedies."""
    base = {"role": "rank0", "rank": 0, "size": size, "master": f"this pod, port {port}"}
    server = server if server is not None else P.listen(port)
    try:
        log(f"rank 0 of {size}: waiting up to {timeout:g} s for {count(size - 1, 'member')} on port {port}")
        joined, refused = P.gather(server, size, token, time.monotonic() + timeout, log=log)
    finally:
        server.close()
    slow: list[dict[str, Any]] = []
    unmeasured: list[dict[str, Any]] = []
    bw_json = None
    if bandwidth and joined and len(joined) == size - 1:
        without = sorted(r for r, m in joined.items() if m.bw is None)
        if without:
            log(f"bandwidth not measured: rank {', '.join(map(str, without))} started without --bandwidth")
            unmeasured = [{"pair": f"rank {r}", "error": "that member was started without --bandwidth (give every "
                                                        "member --bandwidth, or none)"} for r in without]
    # The liveness check before any verdict or round: a member killed after joining is not a member.
    left = P.prune(joined, log)
    members = [dict(member, rank=0)] + [m.member for m in joined.values()]
    for m in members:
        # What a member sent was checked against the schema (protocol.join_problem); rank 0's own
        # member is made the same way: plain values only, each kept short, numbers finite.
        facts = m.get("facts")
        facts = facts if isinstance(facts, dict) else {}
        m["facts"] = {str(k)[:64]: (v[:200] if isinstance(v, str) else
                                    None if isinstance(v, float) and not math.isfinite(v) else v)
                      for k, v in list(facts.items())[:64] if v is None or isinstance(v, (str, int, float, bool))}
        m["verdict"] = m.get("verdict") if m.get("verdict") in (C.GO, C.NO_GO, C.UNKNOWN_VERDICT) else C.UNKNOWN_VERDICT
        m["digest"] = str(m.get("digest") or "")[:64] or None
        m["problems"] = [str(c) for c in (m.get("problems") or [])][:50]
        m["host"] = str(m.get("host") or m.get("address") or "?")[:253]
    hosts = {m["rank"]: m["host"] for m in members}
    if bandwidth and not unmeasured and joined and len(joined) == size - 1:
        rdma = sum(1 for m in members if m["facts"].get("transport") == "rdma")
        tool = "ib_write_bw" if rdma * 2 > len(members) else "tcp"
        pairs = _bandwidth_rounds(joined, rails, tool, seconds, log, token)
        rounds = len(B.schedule(sorted(hosts)))
        slow, unmeasured, median = B.judge(pairs, rounds, hosts, share)
        bw_json = {"tool": tool, "rounds": rounds, "seconds": seconds, "share": share,
                   "median_gbps": None if median is None else round(median, 3),
                   "pairs": [{k: p.get(k) for k in ("round", "sender", "receiver", "rail", "gbps", "error")}
                             for p in pairs]}
        # The rounds took seconds: a member may have died meanwhile.
        later = P.prune(joined, log)
        if later:
            left.update(later)
            members = [m for m in members if m["rank"] not in later]
    elif bandwidth and not unmeasured:
        log("bandwidth not measured: not every member arrived")
    gang = C.judge(members, size, slow=slow, unmeasured=unmeasured, strict=strict, left=left, engine=engine)
    gang["bandwidth"] = bw_json
    gang["refused"] = (refused + list(left.values()))[:100]
    P.answer(joined, token, dict(gang))
    return dict(base, **gang)
