"""The exchange: members meet at rank 0 over TCP, bounded and versioned.

Wire format: a frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON (an object
with ``"v": 2`` and a ``"type"``). A frame over the cap (64 KiB towards rank 0, 16 MiB from it:
the verdict lists every member) is refused before it is read; every read has a deadline; a frame
nested deeper than MAX_DEPTH, or holding NaN or Infinity, is refused (:func:`decode`).

1. rank 0 -> member: ``challenge`` {nonce}
2. member -> rank 0: ``join`` {rank, size, nonce, member {host, verdict, problems, facts, digest},
   bw {port, rails} or null (null: started without --bandwidth), proof}; ``proof`` is
   HMAC-SHA256(token, rank 0's nonce + the join itself), compared in constant time. Then every
   field is checked against the protocol's schema (:func:`join_problem`); another job's member,
   another gang size, a rank out of range or taken by a live member, a field of the wrong type:
   ``refused`` {reason}, and the gang goes on.
3. rank 0 -> member, only with --bandwidth: ``bw_round`` instructions, each answered ``bw_done``.
4. rank 0 -> member: ``verdict`` {gang}.

Every message rank 0 sends after the challenge carries ``mac`` = HMAC-SHA256(token, the member's
nonce + the message): a member acts on nothing (a bandwidth round, a verdict) that a rank 0
without the token could have written. A ``refused`` is signed when rank 0 can (the member proved
the token); one for another job's token cannot be, and the member says so. Either way it makes
the member do nothing but stop.

Rank 0 reads every connection in one ``selectors`` loop (:func:`gather`), the way the agent's
metrics server does: an idle or hostile connection costs a file descriptor, never a thread; at
most MAX_PENDING connections wait to join, each for HANDSHAKE_S, and at the cap a new one closes
the one that has waited longest, so a member always gets in (and members join again, with
backoff, when their connection is closed before the verdict).

The token is never sent. Without one (no --gang-token, no job id in the environment) the proof is
made with the empty key: members of another job are then told apart only by the gang size.
socket, selectors and hmac are imported here only: this module loads only with --gang.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import re
import selectors
import socket
import struct
import time

from rdmadoctor.core.words import count

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, TypeGuard

# 2: the join's proof covers the join, rank 0's messages are signed, bw may be null.
VERSION = 2
MAX_TO_MASTER = 64 * 1024
MAX_FROM_MASTER = 16 * 1024 * 1024
MAX_DEPTH = 32  # the deepest message is the verdict, 6 levels
HANDSHAKE_S = 10.0  # a connection that has not joined by then is closed
MAX_PENDING = 256  # connections waiting to join at once; at the cap the oldest is closed
LOGGED_DROPS = 20  # connections dropped or refused, one log line each; then only counted

GO, NO_GO, UNKNOWN_VERDICT = "go", "no-go", "unknown"  # compare's words (not imported: no cycle)
CODE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")  # a plugin's code is not checked by the core
FACT_KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
RAIL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
HEX_RE = re.compile(r"[0-9a-f]{16,128}")


class ProtocolError(Exception):
    """What a peer sent is not a gang message (or it went away mid-message)."""


class Dropped(ProtocolError):
    """The connection closed or broke before the verdict: a member joins again while it has time."""


class Refused(Exception):
    """Rank 0 refused this member; ``reason`` says why."""


def _mac(token: str, *parts: bytes) -> str:
    return hmac.new(token.encode(), b"\0".join(parts), hashlib.sha256).hexdigest()


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def printable(text: Any, limit: int = 500) -> str:
    """A value from the network as one line of text: control characters (a newline, an escape
    sequence, a bidi override) written as escapes, never obeyed; at most ``limit`` characters."""
    s = str(text)[:limit]
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else (f"\\x{ord(c):02x}" if ord(c) <= 0xFF else f"\\u{ord(c):04x}")
                   for c in s)


def _shown(value: Any) -> str:
    """A peer's value in a refusal: its repr, short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def frame(obj: dict[str, Any], cap: int) -> bytes:
    try:
        body = json.dumps(dict(obj, v=VERSION), separators=(",", ":"), allow_nan=False).encode()
    except ValueError as e:  # NaN or Infinity: not JSON, and no peer could read it
        raise ProtocolError(f"a {obj.get('type')} message that is not JSON: {e}") from None
    if len(body) > cap:
        raise ProtocolError(f"a {obj.get('type')} message of {len(body)} bytes is over the cap of {cap}")
    return struct.pack(">I", len(body)) + body


def send(sock: socket.socket, obj: dict[str, Any], cap: int) -> None:
    sock.sendall(frame(obj, cap))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _depth(obj: Any) -> int:
    """How deep ``obj`` nests (without recursion), up to MAX_DEPTH + 1."""
    stack, worst = [(obj, 1)], 0
    while stack:
        o, d = stack.pop()
        if isinstance(o, dict):
            kids: Any = o.values()
        elif isinstance(o, list):
            kids = o
        else:
            continue
        worst = max(worst, d)
        if worst > MAX_DEPTH:
            return worst
        stack.extend((k, d + 1) for k in kids)
    return worst


def decode(body: bytes) -> dict[str, Any]:
    """One frame's body as a gang message: JSON with no NaN or Infinity, nested at most
    MAX_DEPTH deep, an object with a type, of this version. ProtocolError otherwise."""
    try:
        obj = json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:  # deeper than the interpreter's limit: the C decoder stops cleanly
        raise ProtocolError(f"a message nested deeper than {MAX_DEPTH} levels: not a gang peer?") from None
    except ValueError as e:  # not UTF-8, not JSON, NaN, an integer of over 4300 digits
        raise ProtocolError(f"not JSON: {printable(e, 200)}") from None
    if _depth(obj) > MAX_DEPTH:
        raise ProtocolError(f"a message nested deeper than {MAX_DEPTH} levels: not a gang peer?")
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ProtocolError("not a gang message (no type)")
    if obj.get("v") != VERSION:
        raise ProtocolError(f"gang protocol version {_shown(obj.get('v'))}; this rdmadoctor speaks {VERSION} "
                            "(use the same rdmadoctor version on every member)")
    return obj


def _read(sock: socket.socket, n: int, deadline: float) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no complete message before the deadline")
        sock.settimeout(left)
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise Dropped("the peer closed the connection" + (" mid-message" if buf else ""))
        buf += chunk
    return bytes(buf)


def recv(sock: socket.socket, deadline: float, cap: int) -> dict[str, Any]:
    """One frame; ProtocolError for one that is too big, not JSON, too deep, or of another version;
    Dropped when the peer closed the connection (ConnectionError, an OSError, when it broke)."""
    (n,) = struct.unpack(">I", _read(sock, 4, deadline))
    if n > cap:
        raise ProtocolError(f"a message of {n} bytes announced, over the cap of {cap}: not a gang peer?")
    return decode(_read(sock, n, deadline))


def sign(token: str, nonce: str, msg: dict[str, Any]) -> dict[str, Any]:
    """``msg`` with its ``mac``: HMAC-SHA256(token, the member's nonce + the message as sent)."""
    return dict(msg, mac=_mac(token, b"rank0", nonce.encode(), canonical(dict(msg, v=VERSION))))


def signed(token: str, nonce: str, msg: dict[str, Any]) -> bool:
    """Whether ``msg`` (as received, with ``v``) carries the mac of a rank 0 that knows the token."""
    mac = msg.get("mac")
    if not isinstance(mac, str):
        return False
    body = {k: v for k, v in msg.items() if k != "mac"}
    try:
        want = _mac(token, b"rank0", nonce.encode(), canonical(body))
    except ValueError:
        return False
    return hmac.compare_digest(mac, want)


def proof(token: str, challenge: str, join: dict[str, Any]) -> str:
    """The join's proof: HMAC-SHA256(token, rank 0's nonce + the join as sent, without its proof)."""
    body = {k: v for k, v in join.items() if k != "proof"}
    return _mac(token, b"join", challenge.encode(), canonical(dict(body, v=VERSION)))


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _fact_problem(key: Any, value: Any) -> str | None:
    if not isinstance(key, str) or not FACT_KEY_RE.fullmatch(key):
        return f"member.facts has the key {_shown(key)}, expected a name of letters, digits and _"
    if value is None or isinstance(value, bool) or _is_int(value):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"member.facts.{key} is {value!r}, expected a finite number"
    if isinstance(value, str):
        if len(value) > 4096:  # rank 0 keeps 200 of them
            return f"member.facts.{key} is a string of {len(value)} characters, expected at most 4096"
        return None
    return f"member.facts.{key} is {_kind(value)}, expected a string, number, boolean or null"


def join_problem(msg: dict[str, Any], size: int) -> str | None:
    """Why a join (its proof already checked) does not fit the protocol's schema, naming the field;
    None when every field does. Rank 0 refuses the member and the gang goes on."""
    their, rank = msg.get("size"), msg.get("rank")
    if not _is_int(their) or their != size:
        return f"gang size {_shown(their)}, rank 0 expects {size}"
    if not _is_int(rank) or not 1 <= rank < size:
        return f"rank {_shown(rank)} is not a member rank (1 to {size - 1})"
    nonce = msg.get("nonce")
    if not isinstance(nonce, str) or not HEX_RE.fullmatch(nonce):
        return f"nonce {_shown(nonce)} is not 16 to 128 hex digits"
    member = msg.get("member")
    if not isinstance(member, dict):
        return f"member is {_kind(member)}, expected an object"
    host = member.get("host")
    if not isinstance(host, str) or not 1 <= len(host) <= 253:
        return f"member.host is {_kind(host) if not isinstance(host, str) else f'{len(host)} characters'}, " \
               "expected a node name of 1 to 253 characters"
    if member.get("verdict") not in (GO, NO_GO, UNKNOWN_VERDICT):
        return f"member.verdict is {_shown(member.get('verdict'))}, expected one of go, no-go, unknown"
    problems = member.get("problems")
    if not isinstance(problems, list):
        return f"member.problems is {_kind(problems)}, expected a list of codes"
    if len(problems) > 500:
        return f"member.problems lists {len(problems)} codes, expected at most 500"
    for code in problems:
        if not isinstance(code, str) or not CODE_RE.fullmatch(code):
            return f"member.problems holds {_shown(code)}, expected codes like IB_PORT_DOWN"
    facts = member.get("facts")
    if not isinstance(facts, dict):
        return f"member.facts is {_kind(facts)}, expected an object"
    if len(facts) > 64:
        return f"member.facts has {len(facts)} entries, expected at most 64"
    for key, value in facts.items():
        why = _fact_problem(key, value)
        if why:
            return why
    digest = member.get("digest")
    if digest is not None and (not isinstance(digest, str) or not re.fullmatch(r"[0-9A-Za-z]{1,64}", digest)):
        return f"member.digest is {_shown(digest)}, expected up to 64 letters and digits, or null"
    bw = msg.get("bw")
    if bw is None:
        return None
    if not isinstance(bw, dict):
        return f"bw is {_kind(bw)}, expected an object or null"
    port = bw.get("port")
    if not _is_int(port) or not 1 <= port <= 65535:
        return f"bw.port is {_shown(port)}, expected a port number (1-65535)"
    rails = bw.get("rails")
    if not isinstance(rails, list) or len(rails) > 64:
        return f"bw.rails is {_kind(rails)}, expected a list of at most 64 device names"
    for r in rails:
        if not isinstance(r, str) or not RAIL_RE.fullmatch(r):
            return f"bw.rails holds {_shown(r)}, expected device names like mlx5_0"
    return None


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
    """A member that joined: its connection, what it sent (checked by :func:`join_problem`), where
    it came from."""

    def __init__(self, sock: socket.socket, msg: dict[str, Any], addr: str, local: str):
        self.sock = sock
        self.rank = int(msg["rank"])
        self.nonce = str(msg["nonce"])
        m = msg["member"]
        self.member = {"host": m["host"], "verdict": m["verdict"], "problems": list(m["problems"]),
                       "facts": dict(m["facts"]), "digest": m.get("digest"), "rank": self.rank, "address": addr}
        self.bw: dict[str, Any] | None = msg.get("bw")  # None: the member was started without --bandwidth
        self.addr = addr
        self.local = local  # rank 0's own address on this connection


def _keepalive(sock: socket.socket) -> None:
    """A member whose node vanished (no FIN, no RST) is found dead within about 15 s."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in (("TCP_KEEPIDLE", 5), ("TCP_KEEPINTVL", 3), ("TCP_KEEPCNT", 3)):
            if hasattr(socket, name):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
    except OSError:
        pass


def gone(sock: socket.socket) -> str | None:
    """Why this member's connection is dead (it closed, or broke), or None while it lives.

    A member sends nothing between its join and rank 0's next message, so a readable socket is
    one the peer closed: a killed pod's kernel closes it (FIN or RST) at once; a vanished node is
    found by TCP keepalive."""
    try:
        old = sock.gettimeout()
    except OSError:
        return "its connection is closed"
    try:
        sock.settimeout(0)
        data = sock.recv(1, socket.MSG_PEEK)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError as e:
        return f"its connection broke ({e.strerror or e})"
    finally:
        try:
            sock.settimeout(old)
        except OSError:
            pass
    return None if data else "closed its connection"


def prune(joined: dict[int, Joined], log: Callable[[str], None] = lambda _m: None) -> dict[int, str]:
    """The liveness check before the verdict: drop (and close) every member whose connection is
    dead; returns why, by rank. A member killed after joining is not counted as GO."""
    left = {}
    for rank, m in sorted(joined.items()):
        why = gone(m.sock)
        if why:
            del joined[rank]
            m.sock.close()
            left[rank] = f"rank {rank} joined from {m.addr}, then {why} before the verdict"
            log(left[rank])
    return left


class _Pending:
    """A connection that has not joined yet: what is still to send, what came so far."""

    def __init__(self, sock: socket.socket, addr: str, deadline: float):
        self.sock = sock
        self.addr = addr
        self.nonce = os.urandom(16).hex()
        self.out = frame({"type": "challenge", "nonce": self.nonce}, MAX_FROM_MASTER)
        self.buf = bytearray()
        self.deadline = deadline


class _Gather:
    """Rank 0's one loop over the listening socket, the connections that have not joined yet, and
    the members that have (watched until the verdict: one that closes is dropped)."""

    def __init__(self, server: socket.socket, size: int, token: str, log: Callable[[str], None],
                 max_pending: int, handshake_s: float):
        self.server = server
        self.size = size
        self.token = token
        self.log = log
        self.max_pending = max(1, max_pending)
        self.handshake_s = handshake_s
        self.sel = selectors.DefaultSelector()
        self.pending: dict[socket.socket, _Pending] = {}  # oldest first
        self.joined: dict[int, Joined] = {}
        self.refused: list[str] = []
        self.dropped = 0  # connections dropped or refused, logged or not
        self.paused_until = 0.0

    # -- the loop --

    def run(self, deadline: float) -> None:
        self.server.setblocking(False)
        self.sel.register(self.server, selectors.EVENT_READ, "listen")
        try:
            while len(self.joined) < self.size - 1:
                now = time.monotonic()
                if now >= deadline:
                    break
                if self.paused_until and now >= self.paused_until:
                    self.paused_until = 0.0
                    self.sel.register(self.server, selectors.EVENT_READ, "listen")
                wait = min(0.25, deadline - now)
                for key, mask in self.sel.select(max(wait, 0.0)):
                    if key.data == "listen":
                        self._accept(deadline)
                    elif isinstance(key.data, _Pending):
                        if mask & selectors.EVENT_WRITE and key.data.sock in self.pending:
                            self._flush(key.data)
                        if mask & selectors.EVENT_READ and key.data.sock in self.pending:
                            self._read(key.data)
                    elif isinstance(key.data, Joined) and self.joined.get(key.data.rank) is key.data:
                        self._watch(key.data)
                now = time.monotonic()
                for p in [p for p in self.pending.values() if p.deadline <= now]:
                    self._drop(p, f"did not join within {self.handshake_s:g} s")
        finally:
            for p in list(self.pending.values()):
                self._close(p)
            for m in self.joined.values():
                try:
                    self.sel.unregister(m.sock)
                except (KeyError, ValueError):
                    pass
                m.sock.setblocking(True)
            self.sel.close()
            if self.dropped > LOGGED_DROPS:
                self.log(f"{count(self.dropped, 'connection')} dropped or refused in all "
                         f"(the first {LOGGED_DROPS} are logged)")

    def _note(self, line: str) -> None:
        self.dropped += 1
        if self.dropped <= LOGGED_DROPS:
            self.log(line)
        if self.dropped == LOGGED_DROPS:
            self.log("further dropped or refused connections are counted, not logged")

    def _accept(self, deadline: float) -> None:
        for _ in range(64):  # a burst at a time; the loop comes back for more
            try:
                sock, addr = self.server.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # out of file descriptors: stop accepting for a moment
                self._note(f"accept failed: {e.strerror or e}; pausing for 0.2 s")
                self.sel.unregister(self.server)
                self.paused_until = time.monotonic() + 0.2
                return
            if len(self.pending) >= self.max_pending:
                # The one that has waited longest goes: an idle connection cannot keep a member out.
                oldest = next(iter(self.pending.values()))
                self._drop(oldest, f"closed at the cap of {self.max_pending} connections waiting to join "
                                   "(it waited longest)")
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                sock.close()
                continue
            p = _Pending(sock, _peer(addr), min(time.monotonic() + self.handshake_s, deadline))
            self.pending[sock] = p
            self.sel.register(sock, selectors.EVENT_READ, p)
            self._flush(p)

    def _flush(self, p: _Pending) -> None:
        try:
            n = p.sock.send(p.out) if p.out else 0
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as e:
            return self._drop(p, f"sending the challenge failed: {e.strerror or e}")
        p.out = p.out[n:]
        self.sel.modify(p.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if p.out else 0), p)

    def _read(self, p: _Pending) -> None:
        try:
            chunk = p.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            return self._drop(p, f"the connection broke: {e.strerror or e}")
        if not chunk:
            return self._drop(p, "closed the connection before joining")
        p.buf += chunk
        if len(p.buf) < 4:
            return
        (n,) = struct.unpack(">I", bytes(p.buf[:4]))
        if n > MAX_TO_MASTER:
            return self._refuse(p, f"a message of {n} bytes announced, over the cap of {MAX_TO_MASTER}: not a gang peer?")
        if len(p.buf) < 4 + n:
            return
        try:
            msg = decode(bytes(p.buf[4:4 + n]))
        except ProtocolError as e:
            return self._refuse(p, str(e))
        self._join(p, msg)

    def _join(self, p: _Pending, msg: dict[str, Any]) -> None:
        if msg["type"] != "join":
            return self._refuse(p, f"expected a join, got {_shown(msg['type'])}")
        given = msg.get("proof")
        try:
            want = proof(self.token, p.nonce, msg)
        except (ValueError, TypeError):
            want = ""
        if not isinstance(given, str) or not want or not hmac.compare_digest(given, want):
            return self._refuse(p, "another job's token (a stale pod, or another job on the same master address): "
                                   "--gang-token / the job id differ")
        # From here the member knows the token: a refusal is signed for it, when its nonce allows.
        nonce = msg.get("nonce") if isinstance(msg.get("nonce"), str) and HEX_RE.fullmatch(msg["nonce"]) else None
        why = join_problem(msg, self.size)
        if why:
            rank = msg.get("rank")
            who = f"rank {rank}" if _is_int(rank) else "a member"
            return self._refuse(p, f"{who}: {why}", nonce)
        rank = msg["rank"]
        old = self.joined.get(rank)
        if old is not None:
            dead = gone(old.sock)
            if dead is None:
                return self._refuse(p, f"rank {rank} is already a member, joined from {old.addr} and still connected: "
                                       "a second pod claims its rank (a stale pod of an earlier run, or two pods "
                                       "given the same rank)", nonce)
            self.log(f"rank {rank} joined again from {p.addr}; its earlier connection from {old.addr} {dead}")
            self.sel.unregister(old.sock)
            old.sock.close()
        try:
            local = _peer(p.sock.getsockname())
        except OSError as e:
            return self._drop(p, f"rank {rank}: {e.strerror or e}")
        del self.pending[p.sock]
        p.sock.setblocking(True)
        _keepalive(p.sock)
        m = Joined(p.sock, msg, p.addr, local)
        self.joined[rank] = m
        self.sel.modify(p.sock, selectors.EVENT_READ, m)
        n, of = len(self.joined), self.size - 1
        if n <= 16 or n == of or n % 64 == 0:  # a gang of thousands: not a line each
            self.log(f"rank {rank} joined from {p.addr} ({n} of {of})")

    def _watch(self, m: Joined) -> None:
        """A member's connection became readable before rank 0 asked anything: it closed (or sent
        what it was not asked for)."""
        why = gone(m.sock) or "sent a message before rank 0 asked for one"
        del self.joined[m.rank]
        self.sel.unregister(m.sock)
        m.sock.close()
        line = f"rank {m.rank} joined from {m.addr}, then {why}; it must join again"
        self._note(line)
        self._remember(line)

    def _remember(self, line: str) -> None:
        if len(self.refused) < 100:
            self.refused.append(line)

    def _close(self, p: _Pending) -> None:
        self.pending.pop(p.sock, None)
        try:
            self.sel.unregister(p.sock)
        except (KeyError, ValueError):
            pass
        p.sock.close()

    def _drop(self, p: _Pending, why: str) -> None:
        self._note(f"dropped a connection from {p.addr}: {why}")
        self._close(p)

    def _refuse(self, p: _Pending, reason: str, nonce: str | None = None) -> None:
        self._remember(f"{p.addr}: {reason}")
        self._note(f"refused {p.addr}: {reason}")
        msg = {"type": "refused", "reason": reason}
        try:  # best effort, never waited for: the refusal is short and the socket's buffer empty
            p.sock.send(frame(sign(self.token, nonce, msg) if nonce else msg, MAX_FROM_MASTER))
        except (OSError, ProtocolError):
            pass
        self._close(p)


def gather(
    server: socket.socket,
    size: int,
    token: str,
    deadline: float,
    *,
    log: Callable[[str], None] = lambda _m: None,
    max_pending: int | None = None,
    handshake_s: float | None = None,
) -> tuple[dict[int, Joined], list[str]]:
    """Rank 0: accept members until ranks 1..size-1 have joined or ``deadline``.

    Returns the members by rank (their sockets blocking again) and what was refused (one line each,
    for the log and the report). One thread, one selectors loop: at most ``max_pending``
    (MAX_PENDING) connections wait to join, each for ``handshake_s`` (HANDSHAKE_S).
    """
    g = _Gather(server, size, token, log, MAX_PENDING if max_pending is None else max_pending,
                HANDSHAKE_S if handshake_s is None else handshake_s)
    if size > 1:
        g.run(deadline)
    return g.joined, g.refused


def instruct(m: Joined, token: str, msg: dict[str, Any]) -> None:
    """Rank 0: send a member an instruction (a bandwidth round), signed for it."""
    send(m.sock, sign(token, m.nonce, msg), MAX_FROM_MASTER)


def answer(members: dict[int, Joined], token: str, gang: dict[str, Any]) -> None:
    """Rank 0: send every member the gang's verdict, signed with the token and that member's nonce."""
    deadline = time.monotonic() + 30.0 + len(members) * 0.5  # a member that does not read costs the others little
    for m in members.values():
        try:
            m.sock.settimeout(max(min(10.0, deadline - time.monotonic()), 0.05))
            send(m.sock, sign(token, m.nonce, {"type": "verdict", "gang": gang}), MAX_FROM_MASTER)
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
    bw: dict[str, Any] | None,
    deadline: float,
    *,
    on_message: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """A member: the handshake, then wait for the verdict until ``deadline``; returns the gang.

    ``bw``: None when this member was started without --bandwidth. ``on_message`` answers rank 0's
    other messages (``bw_round``), each only once its signature is checked; its return value is
    sent back, and it raises ProtocolError to refuse one. Raises Refused, ProtocolError (Dropped
    when the connection closed before the verdict), TimeoutError or OSError.
    """
    try:
        # Rank 0 accepts as soon as it listens, and sends its challenge once its own checks are done.
        hello = recv(sock, deadline, MAX_FROM_MASTER)
        if hello["type"] == "refused":
            raise Refused(printable(hello.get("reason")))
        challenge = hello.get("nonce")
        if hello["type"] != "challenge" or not isinstance(challenge, str) or not HEX_RE.fullmatch(challenge):
            raise ProtocolError(f"expected rank 0's challenge, got {_shown(hello['type'])}: is something else on "
                                "the gang port?")
        nonce = os.urandom(16).hex()
        body = {"type": "join", "rank": rank, "size": size, "nonce": nonce, "member": member, "bw": bw}
        send(sock, dict(body, proof=proof(token, challenge, body)), MAX_TO_MASTER)
        while True:
            msg = recv(sock, deadline, MAX_FROM_MASTER)
            if msg["type"] == "refused":
                # Rank 0 cannot sign a refusal for another job's token; a signed one is its word.
                note = "" if signed(token, nonce, msg) else (
                    " (not signed with this job's token: another job's rank 0, or something else on the gang port)")
                raise Refused(printable(msg.get("reason")) + note)
            if not signed(token, nonce, msg):
                raise ProtocolError(f"rank 0 sent a {printable(msg['type'], 40)!r} message not signed with this job's "
                                    "token; nothing was done with it (another job's rank 0, or something else "
                                    "answering on the gang port)")
            if msg["type"] == "verdict":
                gang = msg.get("gang")
                if not isinstance(gang, dict):
                    raise ProtocolError("a verdict without a gang")
                return gang
            reply = on_message(msg) if on_message is not None else None
            if reply is None:
                raise ProtocolError(f"rank 0 sent a {printable(msg['type'], 40)!r} message this member does not know")
            send(sock, reply, MAX_TO_MASTER)
    finally:
        sock.close()
