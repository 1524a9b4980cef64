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
) -> dict[str, Any]:
    """A member (rank 1 and up): connect to rank 0, join, answer bandwidth rounds, get the verdict."""
    endpoint = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    base = {"role": "member", "rank": rank, "size": size, "master": endpoint}
    start = time.monotonic()
    try:
        sock = P.connect(host, port, start + timeout, resolve=resolve, log=log)
    except TimeoutError as e:
        return _failed(C.GANG_UNREACHABLE, "error", endpoint,
                       f"rank 0's gang port {endpoint} never accepted a connection within {timeout:g} s ({e}); "
                       "expected rank 0 to run `rdmadoctor preflight --gang` (or `run --gang`) there.", base)
    ep = None
    try:
        ep = B.Endpoint(sock.getsockname()[0])
        log(f"joined the gang at {endpoint} as rank {rank} of {size}; waiting for the verdict")

        def on_message(msg: dict[str, Any]) -> dict[str, Any] | None:
            if msg["type"] != "bw_round":
                return None
            if msg.get("tool") == "ib_write_bw":
                pairs = B.ib_round(rank, msg, rails)
            else:
                pairs = B.tcp_round(ep, rank, msg)
            return {"type": "bw_done", "round": msg.get("round"), "pairs": pairs}

        gang = P.join(sock, rank, size, token, member, {"port": ep.port, "rails": rails},
                      time.monotonic() + timeout + VERDICT_GRACE_S, on_message=on_message)
    except P.Refused as e:
        return _failed(C.GANG_REFUSED, "error", endpoint, f"rank 0 at {endpoint} refused this member: {e}.", base)
    except (P.ProtocolError, ValueError, KeyError, TypeError) as e:
        return _failed(C.GANG_PROTOCOL, "unknown", endpoint, f"the exchange with {endpoint} failed: {e}.", base)
    except (OSError, TimeoutError) as e:
        return _failed(C.GANG_PROTOCOL, "unknown", endpoint,
                       f"no verdict from rank 0 at {endpoint}: {e or type(e).__name__} (rank 0 stopped, or its "
                       "deadline passed).", base)
    finally:
        if ep is not None:
            ep.close()
    return dict(base, **gang)


def _bandwidth_rounds(joined: dict[int, P.Joined], own_rails: list[str], tool: str, seconds: float,
                      log: Callable[[str], None]) -> list[dict[str, Any]]:
    import threading

    ranks = [0] + sorted(joined)
    local = next(iter(joined.values())).local
    ep0 = B.Endpoint(local)
    where = {0: (local, ep0.port, own_rails)}
    for r, m in joined.items():
        where[r] = (m.addr, int(m.bw.get("port") or 0), [str(x) for x in m.bw.get("rails") or []][:64])
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
                    P.send(m.sock, instr[r], P.MAX_FROM_MASTER)
                except (OSError, P.ProtocolError) as e:
                    pairs.append({"round": idx, "sender": r, "receiver": instr[r]["send_to"]["rank"], "rail": None,
                                  "gbps": None, "error": f"rank {r} unreachable: {e}"})
            deadline = time.monotonic() + seconds + 60.0
            for r, m in joined.items():
                try:
                    reply = P.recv(m.sock, deadline, P.MAX_TO_MASTER)
                    got = reply.get("pairs") if reply.get("type") == "bw_done" else None
                    for p in (got or [])[:256]:
                        # Only a pair this member was part of, with a finite rate.
                        if isinstance(p, dict) and r in (p.get("sender"), p.get("receiver")) and \
                                isinstance(p.get("sender"), int) and isinstance(p.get("receiver"), int):
                            g: Any = p.get("gbps")  # a number when ok (mypy does not narrow through ok)
                            ok = isinstance(g, (int, float)) and not isinstance(g, bool) and math.isfinite(g) and g >= 0
                            pairs.append({"round": idx, "sender": p["sender"], "receiver": p["receiver"],
                                          "rail": p["rail"][:64] if isinstance(p.get("rail"), str) else None,
                                          "gbps": float(g) if ok else None,
                                          "error": str(p.get("error"))[:500] if p.get("error") else None})
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
) -> dict[str, Any]:
    """Rank 0: listen (``server``: an already bound socket, else :func:`protocol.listen`), gather
    until all have joined or ``timeout``, judge, measure with ``bandwidth``, answer everyone."""
    base = {"role": "rank0", "rank": 0, "size": size, "master": f"this pod, port {port}"}
    server = server if server is not None else P.listen(port)
    try:
        log(f"rank 0 of {size}: waiting up to {timeout:g} s for {count(size - 1, 'member')} on port {port}")
        joined, refused = P.gather(server, size, token, time.monotonic() + timeout, log=log)
    finally:
        server.close()
    members = [dict(member, rank=0)] + [m.member for m in joined.values()]
    for m in members:
        # What a member sent is data from the network: plain values only, each kept short.
        facts = m.get("facts")
        facts = facts if isinstance(facts, dict) else {}
        m["facts"] = {str(k)[:64]: (v[:200] if isinstance(v, str) else v) for k, v in list(facts.items())[:64]
                      if v is None or isinstance(v, (str, int, float, bool))}
        m["verdict"] = m.get("verdict") if m.get("verdict") in (C.GO, C.NO_GO, C.UNKNOWN_VERDICT) else C.UNKNOWN_VERDICT
        m["digest"] = str(m.get("digest") or "")[:64] or None
        m["problems"] = [str(c) for c in (m.get("problems") or [])][:50]
        m["host"] = str(m.get("host") or m.get("address") or "?")[:253]
    hosts = {m["rank"]: m["host"] for m in members}
    slow: list[dict[str, Any]] = []
    unmeasured: list[dict[str, Any]] = []
    bw_json = None
    if bandwidth and joined and len(joined) == size - 1:
        rdma = sum(1 for m in members if m["facts"].get("transport") == "rdma")
        tool = "ib_write_bw" if rdma * 2 > len(members) else "tcp"
        pairs = _bandwidth_rounds(joined, rails, tool, seconds, log)
        rounds = len(B.schedule(sorted(hosts)))
        slow, unmeasured, median = B.judge(pairs, rounds, hosts, share)
        bw_json = {"tool": tool, "rounds": rounds, "seconds": seconds, "share": share,
                   "median_gbps": None if median is None else round(median, 3),
                   "pairs": [{k: p.get(k) for k in ("round", "sender", "receiver", "rail", "gbps", "error")}
                             for p in pairs]}
    elif bandwidth:
        log("bandwidth not measured: not every member arrived")
    gang = C.judge(members, size, slow=slow, unmeasured=unmeasured, strict=strict)
    gang["bandwidth"] = bw_json
    gang["refused"] = refused
    answer = dict(gang)
    P.answer(joined, token, answer)
    return dict(base, **gang)
