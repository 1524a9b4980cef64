"""The exchange: members meet at rank 0 over TCP, bounded and versioned.

Wire format: a frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON (an object
with ``"v": 1`` and a ``"type"``). A frame over the cap (64 KiB towards rank 0, 16 MiB from it:
the verdict lists every member) is refused before it is read; every read has a deadline.

1. rank 0 -> member: ``challenge`` {nonce}
2. member -> rank 0: ``join`` {rank, size, nonce, proof = HMAC-SHA256(token, rank 0's nonce),
   member {host, verdict, problems, facts, digest}, bw {port, rails}}; rank 0 compares the proof in
   constant time (hmac.compare_digest) and answers ``refused`` {reason} to another job's member,
   another gang size, a rank out of range or another version.
3. rank 0 -> member, only with --bandwidth: ``bw_round`` instructions, each answered ``bw_done``.
4. rank 0 -> member: ``verdict`` {gang, mac = HMAC-SHA256(token, member's nonce + gang JSON)}: a
   member takes a verdict only from a rank 0 that knows the token.

The token is never sent. Without one (no --gang-token, no job id in the environment) the proof is
made with the empty key: members of another job are then told apart only by the gang size.
socket, threading and hmac are imported here only: this module loads only with --gang.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import struct
import threading
import time

from rdmadoctor.core.words import count

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

VERSION = 1
MAX_TO_MASTER = 64 * 1024
MAX_FROM_MASTER = 16 * 1024 * 1024
HANDSHAKE_S = 10.0  # a connection that has not joined by then is dropped
MAX_HANDSHAKES = 256  # connections rank 0 reads at once; more are closed unread


class ProtocolError(Exception):
    """What a peer sent is not a gang message (or it went away mid-message)."""


class Refused(Exception):
    """Rank 0 refused this member; ``reason`` says why."""


def _mac(token: str, *parts: bytes) -> str:
    return hmac.new(token.encode(), b"\0".join(parts), hashlib.sha256).hexdigest()


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def send(sock: socket.socket, obj: dict[str, Any], cap: int) -> None:
    body = json.dumps(dict(obj, v=VERSION), separators=(",", ":")).encode()
    if len(body) > cap:
        raise ProtocolError(f"a {obj.get('type')} message of {len(body)} bytes is over the cap of {cap}")
    sock.sendall(struct.pack(">I", len(body)) + body)


def _read(sock: socket.socket, n: int, deadline: float) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no complete message before the deadline")
        sock.settimeout(left)
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ProtocolError("the peer closed the connection" + (" mid-message" if buf else ""))
        buf += chunk
    return bytes(buf)


def recv(sock: socket.socket, deadline: float, cap: int) -> dict[str, Any]:
    """One frame; ProtocolError for one that is too big, not JSON, or of another version."""
    (n,) = struct.unpack(">I", _read(sock, 4, deadline))
    if n > cap:
        raise ProtocolError(f"a message of {n} bytes announced, over the cap of {cap}: not a gang peer?")
    try:
        obj = json.loads(_read(sock, n, deadline))
    except ValueError as e:
        raise ProtocolError(f"not JSON: {e}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ProtocolError("not a gang message (no type)")
    if obj.get("v") != VERSION:
        raise ProtocolError(f"gang protocol version {obj.get('v')!r}; this rdmadoctor speaks {VERSION}")
    return obj


def listen(port: int) -> socket.socket:
    """Rank 0's listening socket on every address of the pod (IPv6 and IPv4 where both exist)."""
    if socket.has_dualstack_ipv6():
        try:
            return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=1024)
        except OSError:
            pass
    return socket.create_server(("", port), backlog=1024)


def _peer(addr: Any) -> str:
    host = addr[0] if isinstance(addr, tuple) else str(addr)
    return host[7:] if host.startswith("::ffff:") else host


class Joined:
    """A member that joined: its connection, what it sent, where it came from."""

    def __init__(self, sock: socket.socket, msg: dict[str, Any], addr: str, local: str):
        self.sock = sock
        self.rank = int(msg["rank"])
        self.nonce = str(msg.get("nonce") or "")
        self.member = dict(msg.get("member") or {}, rank=self.rank, address=addr)
        self.bw = msg.get("bw") or {}
        self.addr = addr
        self.local = local  # rank 0's own address on this connection


def gather(
    server: socket.socket,
    size: int,
    token: str,
    deadline: float,
    *,
    log: Callable[[str], None] = lambda _m: None,
) -> tuple[dict[int, Joined], list[str]]:
    """Rank 0: accept members until ranks 1..size-1 have joined or ``deadline``.

    Returns the members by rank and what was refused (one line each, for the log and the report).
    Each connection is read by a thread of its own with HANDSHAKE_S to join; at most
    MAX_HANDSHAKES at once.
    """
    joined: dict[int, Joined] = {}
    refused: list[str] = []
    lock = threading.Lock()
    slots = threading.BoundedSemaphore(MAX_HANDSHAKES)
    complete = threading.Event()
    if size <= 1:
        complete.set()

    def refuse(sock: socket.socket, addr: str, reason: str) -> None:
        with lock:
            if len(refused) < 100:
                refused.append(f"{addr}: {reason}")
        log(f"refused {addr}: {reason}")
        try:
            send(sock, {"type": "refused", "reason": reason}, MAX_FROM_MASTER)
        except (OSError, ProtocolError):
            pass
        sock.close()

    def handshake(sock: socket.socket, addr: str) -> None:
        try:
            nonce = os.urandom(16).hex()
            end = min(time.monotonic() + HANDSHAKE_S, deadline)
            send(sock, {"type": "challenge", "nonce": nonce}, MAX_FROM_MASTER)
            msg = recv(sock, end, MAX_TO_MASTER)
            if msg["type"] != "join":
                raise ProtocolError(f"expected a join, got {msg['type']!r}")
            proof = msg.get("proof")
            if not isinstance(proof, str) or not hmac.compare_digest(proof, _mac(token, nonce.encode())):
                return refuse(sock, addr, "another job's token (a stale pod, or another job on the same master "
                                          "address): --gang-token / the job id differ")
            rank, their = msg.get("rank"), msg.get("size")
            if their != size:
                return refuse(sock, addr, f"gang size {their!r}, rank 0 expects {size}")
            if not isinstance(rank, int) or isinstance(rank, bool) or not 1 <= rank < size:
                return refuse(sock, addr, f"rank {rank!r} is not a member rank (1 to {size - 1})")
            local = _peer(sock.getsockname())
            member = Joined(sock, msg, addr, local)
            with lock:
                old = joined.get(rank)
                joined[rank] = member  # a pod that restarted replaces its earlier connection
                if len(joined) == size - 1:
                    complete.set()
            if old is not None:
                log(f"rank {rank} joined again from {addr}; the earlier connection from {old.addr} is dropped")
                try:
                    send(old.sock, {"type": "refused", "reason": f"rank {rank} joined again from {addr}"},
                         MAX_FROM_MASTER)
                except (OSError, ProtocolError):
                    pass
                old.sock.close()
        except (OSError, TimeoutError, ProtocolError, ValueError, KeyError, TypeError) as e:
            log(f"dropped a connection from {addr}: {e}")
            sock.close()
        finally:
            slots.release()

    server.settimeout(0.2)
    while not complete.is_set() and time.monotonic() < deadline:
        try:
            sock, addr = server.accept()
        except socket.timeout:
            continue
        except OSError as e:
            log(f"accept failed: {e}")
            time.sleep(0.2)
            continue
        if not slots.acquire(blocking=False):
            sock.close()
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handshake, args=(sock, _peer(addr)), daemon=True, name="rdmadoctor-gang").start()
    with lock:
        return dict(joined), list(refused)


def answer(members: dict[int, Joined], token: str, gang: dict[str, Any]) -> None:
    """Rank 0: send every member the gang's verdict, MAC'd with the token and that member's nonce."""
    body = canonical(gang)
    deadline = time.monotonic() + 30.0 + len(members) * 0.5  # a member that does not read costs the others little
    for m in members.values():
        try:
            m.sock.settimeout(max(min(10.0, deadline - time.monotonic()), 0.05))
            send(m.sock, {"type": "verdict", "gang": gang, "mac": _mac(token, m.nonce.encode(), body)},
                 MAX_FROM_MASTER)
        except (OSError, ProtocolError):
            pass  # that member says GANG_PROTOCOL / unreachable by itself
        finally:
            m.sock.close()


def connect(
    host: str,
    port: int,
    deadline: float,
    *,
    resolve: Callable[[str, int, float], list[tuple]] | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> socket.socket:
    """A member: connect to rank 0's gang port, retrying with backoff until ``deadline``.

    ``resolve(host, port, limit)`` returns getaddrinfo's tuples (preflight passes its DNS lookup
    that a SIGTERM can interrupt). Raises TimeoutError with the last error.
    """
    import random

    if resolve is None:
        def resolve(h: str, p: int, _limit: float) -> list[tuple]:
            return socket.getaddrinfo(h, p, type=socket.SOCK_STREAM)

    delay, attempt, last, start = 0.2, 0, "", time.monotonic()
    while True:
        attempt += 1
        try:
            for family, kind, proto, _, sockaddr in resolve(host, port, max(deadline - time.monotonic(), 0.05)):
                s = socket.socket(family, kind, proto)
                try:
                    s.settimeout(max(min(3.0, deadline - time.monotonic()), 0.05))
                    s.connect(sockaddr)
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    return s
                except OSError as e:
                    s.close()
                    last = f"connect {sockaddr[0]} port {port}: {e.strerror or e}"
        except (OSError, TimeoutError) as e:
            last = f"DNS: {getattr(e, 'strerror', None) or e}"
        now = time.monotonic()
        if now >= deadline:
            raise TimeoutError(f"{count(attempt, 'attempt')} in {now - start:.0f} s; last error: {last}")
        if attempt == 1:
            log(f"rank 0 not reachable yet ({last}); retrying with backoff")
        time.sleep(min(delay * random.uniform(0.8, 1.2), max(deadline - now, 0)))
        delay = min(delay * 2, 3.0)


def join(
    sock: socket.socket,
    rank: int,
    size: int,
    token: str,
    member: dict[str, Any],
    bw: dict[str, Any],
    deadline: float,
    *,
    on_message: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """A member: the handshake, then wait for the verdict until ``deadline``; returns the gang.

    ``on_message`` answers rank 0's other messages (``bw_round``); its return value is sent back.
    Raises Refused, ProtocolError, TimeoutError or OSError.
    """
    try:
        # Rank 0 accepts as soon as it listens, and sends its challenge once its own checks are done.
        hello = recv(sock, deadline, MAX_FROM_MASTER)
        if hello["type"] == "refused":
            raise Refused(str(hello.get("reason")))
        if hello["type"] != "challenge" or not isinstance(hello.get("nonce"), str):
            raise ProtocolError(f"expected rank 0's challenge, got {hello['type']!r}: is something else on the gang port?")
        nonce = os.urandom(16).hex()
        send(sock, {"type": "join", "rank": rank, "size": size, "nonce": nonce,
                    "proof": _mac(token, hello["nonce"].encode()), "member": member, "bw": bw}, MAX_TO_MASTER)
        while True:
            msg = recv(sock, deadline, MAX_FROM_MASTER)
            if msg["type"] == "refused":
                raise Refused(str(msg.get("reason")))
            if msg["type"] == "verdict":
                gang = msg.get("gang")
                mac = msg.get("mac")
                if not isinstance(gang, dict) or not isinstance(mac, str) or not hmac.compare_digest(
                        mac, _mac(token, nonce.encode(), canonical(gang))):
                    raise ProtocolError("a verdict not signed with this job's token")
                return gang
            reply = on_message(msg) if on_message is not None else None
            if reply is not None:
                send(sock, reply, MAX_TO_MASTER)
    finally:
        sock.close()
