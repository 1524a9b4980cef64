"""A client of NCCL's RAS socket, written from its protocol (NVIDIA/nccl, never copied here).

The protocol (``src/ras/client.cc`` is NCCL's own client, ``src/ras/client_support.cc``
``rasClientEventLoop`` the server side; unchanged since 2.24, ``NCCL_RAS_CLIENT_PROTOCOL`` 2 in
``src/ras/ras_internal.h``): TCP, by default ``localhost:28028`` (``NCCL_RAS_ADDR`` moves it,
"host:port"); lines of text ending in ``\\n``:

- ``CLIENT PROTOCOL 2`` -> ``SERVER PROTOCOL 2`` (another number: NCCL's own client warns and goes on);
- ``TIMEOUT <s>`` -> ``OK`` (how long NCCL waits for the other processes; 5 s by default,
  RAS_COLLECTIVE_LEG_TIMEOUT_SEC);
- ``SET FORMAT json`` -> ``OK`` from 2.28.7 on; before, ``ERROR: Unknown command ...`` and the
  connection stays usable: the text report is asked for instead;
- ``STATUS`` (or ``VERBOSE STATUS``: more outliers named) -> the report, then NCCL closes the
  connection. Monitor mode (``MONITOR``, 2.29) is not used: one short connection per question.

Every step has a deadline and every read a bound (:data:`MAX_REPORT`): a process that accepts and
never answers, or answers for ever, costs at most ``deadline`` seconds of the watcher's thread and
never the job's.
"""

from __future__ import annotations

import socket
import time

DEFAULT_ADDR = "localhost:28028"
PROTOCOL = 2
NCCL_TIMEOUT_S = 5  # what NCCL waits for its peers (RAS_COLLECTIVE_LEG_TIMEOUT_SEC)
CONNECT_S = 1.0  # NCCL's client starts with 1 s (TIMEOUT_INCREMENT) to drop dead processes quickly
MAX_LINE = 1024  # a handshake answer (NCCL's client reads them into 1 KiB)
MAX_REPORT = 16 << 20


class RasError(Exception):
    """RAS could not be asked; the message says what happened, for a person."""


def address(env: dict[str, str]) -> tuple[str, int]:
    """(host, port) from NCCL_RAS_ADDR ("host:port", "[v6]:port"), else NCCL's default."""
    text = (env.get("NCCL_RAS_ADDR") or DEFAULT_ADDR).strip()
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "localhost"
    try:
        n = int(port)
    except ValueError:
        raise RasError(f"NCCL_RAS_ADDR={text!r} is not host:port") from None
    if not 0 < n < 65536:
        raise RasError(f"NCCL_RAS_ADDR={text!r}: port {n} is out of range")
    return host, n


class _Conn:
    def __init__(self, sock: socket.socket, deadline: float, where: str):
        self.sock, self.deadline, self.where, self.buf = sock, deadline, where, b""

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RasError(f"RAS at {self.where} did not answer in time")
        return left

    def send(self, line: str) -> None:
        self.sock.settimeout(self._left())
        try:
            self.sock.sendall(line.encode() + b"\n")
        except socket.timeout:
            raise RasError(f"RAS at {self.where} did not take the request in time") from None
        except OSError as e:
            raise RasError(f"RAS at {self.where} closed the connection ({e.strerror or e})") from None

    def _recv(self, n: int) -> bytes:
        self.sock.settimeout(self._left())
        try:
            return self.sock.recv(n)
        except socket.timeout:
            raise RasError(f"RAS at {self.where} did not answer in time") from None
        except OSError as e:
            raise RasError(f"reading from RAS at {self.where}: {e.strerror or e}") from None

    def line(self) -> str:
        while b"\n" not in self.buf:
            if len(self.buf) > MAX_LINE:
                raise RasError(f"RAS at {self.where} answered a line longer than {MAX_LINE} bytes: not NCCL's RAS?")
            data = self._recv(MAX_LINE)
            if not data:
                raise RasError(f"RAS at {self.where} closed the connection" + (f" after {self.buf[:80]!r}" if self.buf else ""))
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode("utf-8", "replace").strip()

    def rest(self, limit: int) -> tuple[bytes, bool]:
        """Everything up to EOF (at most ``limit`` bytes); (data, cut)."""
        chunks, n = [self.buf], len(self.buf)
        self.buf = b""
        while n <= limit:
            data = self._recv(1 << 16)
            if not data:
                return b"".join(chunks), False
            chunks.append(data)
            n += len(data)
        return b"".join(chunks)[:limit], True


def ask(host: str = "localhost", port: int = 28028, *, json: bool = True, nccl_timeout: int = NCCL_TIMEOUT_S,
        deadline_s: float | None = None, limit: int = MAX_REPORT) -> dict:
    """One report from RAS: {"format": "json"|"text", "text": str, "cut": bool, "seconds": float,
    "protocol": str}. Raises RasError (connection refused, a deadline passed, not RAS)."""
    start = time.monotonic()
    # NCCL's own client allows its timeout plus the collective's extra 5 s plus its 1 s increment.
    deadline = start + (deadline_s if deadline_s is not None else nccl_timeout + NCCL_TIMEOUT_S + 2 * CONNECT_S)
    where = f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise RasError(f"cannot resolve {host}: {e.strerror or e}") from None
    sock, why = None, "no address"
    for family, kind, proto, _, addr in infos:
        s = socket.socket(family, kind, proto)
        s.settimeout(min(CONNECT_S, max(0.01, deadline - time.monotonic())))
        try:
            s.connect(addr)
            sock = s
            break
        except socket.timeout:
            why = "no answer to the connection"
        except OSError as e:
            why = e.strerror or str(e)
        s.close()
    if sock is None:
        raise RasError(f"nothing answers at {where} ({why})")
    try:
        c = _Conn(sock, deadline, where)
        c.send(f"CLIENT PROTOCOL {PROTOCOL}")
        hello = c.line()
        if not hello.upper().startswith("SERVER PROTOCOL "):
            raise RasError(f"{where} is not NCCL's RAS: it answered {hello[:80]!r} to the handshake")
        c.send(f"TIMEOUT {int(nccl_timeout)}")
        ok = c.line()
        if ok.upper() != "OK":
            raise RasError(f"RAS at {where} refused TIMEOUT {nccl_timeout}: {ok[:120]!r}")
        fmt = "text"
        if json:
            c.send("SET FORMAT json")
            fmt = "json" if c.line().upper() == "OK" else "text"  # ERROR: Unknown command: NCCL < 2.28.7
        # VERBOSE names more outliers in the text report (rasCountIsOutlier); the JSON names all.
        c.send("STATUS" if fmt == "json" else "VERBOSE STATUS")
        data, cut = c.rest(limit)
    finally:
        try:
            sock.close()
        except OSError:
            pass
    return {"format": fmt, "text": data.decode("utf-8", "replace"), "cut": cut,
            "seconds": round(time.monotonic() - start, 3), "protocol": hello[len("SERVER PROTOCOL "):].strip()[:16]}
