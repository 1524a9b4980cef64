"""/metrics and /healthz of `rdmadoctor agent`: a bounded HTTP server in daemon threads.

Anyone on the pod network can reach this port, so nothing a client does may cost more than a
socket and a few kilobytes, or stop the liveness probe from being answered (with a
thread per connection and no timeout, 500 held connections made every /healthz fail and the
kubelet restarted the agent in a loop). So:

- One thread owns every connection: a ``selectors`` loop reads requests and writes answers
  without blocking. An idle connection costs a file descriptor, not a thread.
- Every connection has a deadline (``timeout``): the request must arrive, and the answer be
  taken, within it; an idle keep-alive connection is closed at the same deadline.
- At most ``max_connections`` are open; at the cap a new connection closes the one that has
  waited longest without sending a complete request, so a probe always gets in.
- /healthz (and /livez, /readyz, /) are answered by the loop itself. /metrics is rendered by
  ``workers`` threads with at most ``queue`` scrapes waiting for them; a scrape beyond that, or
  one that waits past its deadline, gets 503 with ``Retry-After``.
- A request head is at most MAX_HEAD bytes; a request with a body is refused (431/400/413).
- What one connection queues is bounded (1,000 connections pipelining thousands of
  requests each and never reading made every /healthz fail): the kernel's send buffer is
  SEND_BUFFER, at most PIPELINE_TURN of its requests are answered before every other connection
  has had its turn (nothing more is read from it meanwhile), and a connection that has more than
  MAX_PIPELINE requests answered back to back, or whose answer cannot be sent while it has sent
  more requests, does not read what it asks for: it is closed.
- The listen backlog is LISTEN_BACKLOG (the kernel caps it at net.core.somaxconn).
- Errors are one line each in the agent's log format (``--log-format``), at most one line a
  minute per kind with a count, never a traceback: a peer that misbehaves cannot fill the log.

/metrics is prometheus-client's own exposition (:func:`exposition`): the text format or
OpenMetrics as the Accept header asks, gzip when Accept-Encoding allows, ``name[]`` filters.
What it serves is :mod:`rdmadoctor.output.metrics`; this module only answers HTTP.
"""

from __future__ import annotations

import collections
import errno
import queue
import selectors
import socket
import threading
import time
from typing import Any, Callable
from urllib.parse import parse_qs

LISTEN_BACKLOG = 1024
MAX_HEAD = 16 * 1024  # request line and headers; Prometheus sends about 300 bytes
TIMEOUT = 10.0  # seconds a connection may take to send its request and take the answer
MAX_CONNECTIONS = 1024
SEND_BUFFER = 64 * 1024  # SO_SNDBUF of a connection (the kernel doubles it): a /metrics answer is sent in a few turns
PIPELINE_TURN = 16  # requests of one connection answered before the others' turn
MAX_PIPELINE = 1000  # requests answered back to back (its buffer never empty): more is a flood, not a client
WORKERS = 2  # threads rendering /metrics at once (a render takes milliseconds)
QUEUE = 8  # scrapes waiting for a worker before the next gets 503
LOG_EVERY = 60.0  # seconds between two log lines of the same kind
_SWEEP_EVERY = 0.25

_TEXT = "text/plain; charset=utf-8"
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 413: "Content Too Large",
            431: "Request Header Fields Too Large", 500: "Internal Server Error", 503: "Service Unavailable",
            505: "HTTP Version Not Supported"}
_HEALTH_PATHS = ("/healthz", "/livez", "/readyz")


def default_max_connections() -> int:
    """MAX_CONNECTIONS, or fewer when the open-files limit leaves less room (a few are kept for
    the agent itself: its log, the report file, the API client)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return MAX_CONNECTIONS
    if soft == getattr(resource, "RLIM_INFINITY", -1) or soft <= 0:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft - 64))


def exposition(registry: Any, accept: str, accept_encoding: str, query: str) -> tuple[bytes, list[tuple[str, str]]]:
    """The body and headers of a /metrics answer, the way prometheus-client's own servers make
    them: the format the Accept header asks for (OpenMetrics or the text format), gzip when the
    client accepts it, only the families ``name[]`` names when given."""
    import gzip

    from prometheus_client.exposition import choose_encoder, gzip_accepted

    encoder, content_type = choose_encoder(accept)
    names = parse_qs(query).get("name[]")
    if names:
        registry = registry.restricted_registry(names)
    body = encoder(registry)
    headers = [("Content-Type", content_type), ("Vary", "Accept, Accept-Encoding")]
    if gzip_accepted(accept_encoding):
        body = gzip.compress(body, compresslevel=6)
        headers.append(("Content-Encoding", "gzip"))
    return body, headers


class _Conn:
    __slots__ = ("sock", "fd", "inbuf", "out", "state", "deadline", "close_after", "job", "pipelined", "flooded")

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock = sock
        self.fd = sock.fileno()
        self.inbuf = bytearray()
        self.out = b""
        # read -> (busy ->) write -> read (keep-alive) or closed; "more": pipelined requests wait
        # for the connection's next turn (not read from meanwhile).
        self.state = "read"
        self.deadline = deadline
        self.close_after = False
        self.job: _Job | None = None
        self.pipelined = 0  # requests answered since its buffer was last empty
        self.flooded = False  # it has pipelined past PIPELINE_TURN: the first to close at the cap


class _Job:
    __slots__ = ("conn", "head", "accept", "accept_encoding", "query", "cancelled", "result")

    def __init__(self, conn: _Conn, head: bool, accept: str, accept_encoding: str, query: str):
        self.conn = conn
        self.head = head
        self.accept = accept
        self.accept_encoding = accept_encoding
        self.query = query
        self.cancelled = False
        self.result: tuple[int, list[tuple[str, str]], bytes] | None = None


class _Throttle:
    """At most one log line per kind every LOG_EVERY seconds; the lines between are counted."""

    def __init__(self, log: Any):
        self.log = log
        self.last: dict[str, float] = {}
        self.held: dict[str, int] = collections.Counter()
        self.lock = threading.Lock()

    def __call__(self, level: str, kind: str, msg: str, **fields: Any) -> None:
        if self.log is None:
            return
        now = time.monotonic()
        with self.lock:
            self.held[kind] += 1
            if now - self.last.get(kind, -LOG_EVERY) < LOG_EVERY:
                return
            self.last[kind] = now
            count, self.held[kind] = self.held[kind], 0
        if count > 1:
            fields["times"] = count
        try:
            getattr(self.log, level)(msg, **fields)
        except Exception:  # noqa: BLE001 - the log must never take the server down
            pass


class MetricsServer:
    """/metrics and /healthz: one loop thread for every connection, ``workers`` render threads.

    ``health()`` returns (ok, reason); /healthz answers 200 "ok" or 503 with the reason.
    ``log`` (rdmadoctor.agent.log.Log, optional) gets what went wrong, one line each.
    """

    def __init__(
        self,
        address: str,
        port: int,
        registry: Any,
        health: Callable[[], tuple[bool, str]],
        log: Any = None,
        *,
        timeout: float = TIMEOUT,
        max_connections: int | None = None,
        workers: int = WORKERS,
        queue_size: int = QUEUE,
    ):
        self.registry = registry
        self.health = health
        self.timeout = timeout
        self.max_connections = max_connections or default_max_connections()
        self.queue_size = queue_size
        self._note = _Throttle(log)
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        lsock = socket.socket(family, socket.SOCK_STREAM)
        try:
            lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            lsock.bind((address, port))
            lsock.listen(LISTEN_BACKLOG)
            lsock.setblocking(False)
        except BaseException:
            lsock.close()
            raise
        self._lsock = lsock
        self.address, self.port = lsock.getsockname()[:2]
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._conns: collections.OrderedDict[int, _Conn] = collections.OrderedDict()  # oldest activity first
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._done: collections.deque[_Job] = collections.deque()
        self._turns: collections.deque[_Conn] = collections.deque()  # connections in state "more"
        self._pending = 0  # scrapes queued or rendering
        self._accept_paused_until = 0.0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="metrics", daemon=True)
        self._workers = [threading.Thread(target=self._work, name=f"metrics-render-{i}", daemon=True) for i in range(max(1, workers))]
        # What the tests read: connections closed at the cap, scrapes refused with 503.
        self.evicted = 0
        self.refused = 0
        self.unread = 0  # connections closed for asking without reading the answers

    # -- life ---------------------------------------------------------------------------------
    def start(self) -> "MetricsServer":
        self._sel.register(self._lsock, selectors.EVENT_READ, "listen")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        for w in self._workers:
            w.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._wake()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        for _ in self._workers:
            self._jobs.put(None)
        for c in list(self._conns.values()):
            self._close(c)
        for s in (self._lsock, self._wake_r, self._wake_w):
            try:
                s.close()
            except OSError:
                pass
        try:
            self._sel.close()
        except (OSError, ValueError):
            pass

    @property
    def connections(self) -> int:
        return len(self._conns)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass  # a wake-up is already pending, or the server is closing

    # -- the loop -------------------------------------------------------------------------------
    def _loop(self) -> None:
        next_sweep = 0.0
        while not self._stopping.is_set():
            try:
                events = self._sel.select(timeout=0 if self._turns else _SWEEP_EVERY)
            except (OSError, ValueError) as e:
                self._note("error", "select", "metrics server: waiting for connections failed", error=_why(e))
                time.sleep(_SWEEP_EVERY)
                continue
            for key, mask in events:
                try:
                    if key.data == "listen":
                        self._accept()
                    elif key.data == "wake":
                        self._drain_wake()
                    elif mask & selectors.EVENT_READ:
                        self._on_read(key.data)
                    elif mask & selectors.EVENT_WRITE:
                        self._flush(key.data)
                        self._drain(key.data)
                except Exception as e:  # noqa: BLE001 - one connection's trouble is never the server's
                    self._note("error", "internal", "metrics server: a connection failed", error=_why(e))
                    if isinstance(key.data, _Conn):
                        self._close(key.data)
            self._finish_jobs()
            self._next_turns()
            now = time.monotonic()
            if now >= next_sweep:
                next_sweep = now + _SWEEP_EVERY
                self._sweep(now)

    def _accept(self) -> None:
        for _ in range(256):  # then let the others have a turn
            try:
                sock, _peer = self._lsock.accept()
            except BlockingIOError:
                return
            except InterruptedError:
                continue
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # Out of descriptors or memory: make room, or stop accepting for a moment
                    # (the listening socket stays readable; looping on it would spin).
                    if not self._evict_one():
                        self._pause_accept()
                    self._note("warning", "accept", "metrics server: cannot accept a connection", error=_why(e),
                               connections=len(self._conns))
                    return
                if e.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM):
                    continue  # the peer left before we took it
                self._note("error", "accept", "metrics server: cannot accept a connection", error=_why(e))
                self._pause_accept()
                return
            if len(self._conns) >= self.max_connections and not self._evict_one():
                sock.close()  # every connection is busy with a request: the newcomer waits its turn elsewhere
                continue
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
            except OSError:
                pass
            c = _Conn(sock, time.monotonic() + self.timeout)
            self._conns[c.fd] = c
            self._sel.register(sock, selectors.EVENT_READ, c)

    def _pause_accept(self) -> None:
        if self._accept_paused_until == 0.0:
            try:
                self._sel.unregister(self._lsock)
            except (KeyError, ValueError):
                pass
        self._accept_paused_until = time.monotonic() + 0.1

    def _evict_one(self) -> bool:
        """Close, oldest first, a connection whose pipelined requests wait (a flood), else the one
        that has waited longest without a complete request, else any but one whose scrape a
        worker is rendering. A connection just accepted is the youngest: a probe gets in."""
        conns = self._conns.values()
        victim = next((c for c in conns if c.flooded and c.state != "busy"), None)  # has pipelined
        if victim is None:
            victim = next((c for c in conns if c.state == "read" and not c.inbuf), None)
        if victim is None:
            victim = next((c for c in conns if c.state != "busy"), None)
        if victim is None:
            return False
        self._close(victim)
        self.evicted += 1
        self._note("warning", "evict", f"metrics server: {self.max_connections} connections open, the most it keeps; "
                   "closed the one idle longest", connections=self.max_connections)
        return True

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _sweep(self, now: float) -> None:
        if self._accept_paused_until and now >= self._accept_paused_until:
            self._accept_paused_until = 0.0
            try:
                self._sel.register(self._lsock, selectors.EVENT_READ, "listen")
            except (KeyError, ValueError):
                pass
        for c in [c for c in self._conns.values() if c.deadline <= now]:
            if c.state == "busy" and c.job is not None:
                # Waited for a worker past its deadline: the scrape is told, the job is dropped.
                c.job.cancelled = True
                c.job = None
                self.refused += 1
                self._note("warning", "slow", "metrics server: a scrape waited too long for its metrics; answered 503",
                           timeout=f"{self.timeout:g}s")
                self._respond(c, 503, [("Content-Type", _TEXT), ("Retry-After", "1")],
                              b"metrics: busy, try again\n", close=True, head=False)
            else:
                self._close(c)  # idle, a slow request, or an answer not taken

    # -- one connection -------------------------------------------------------------------------
    def _touch(self, c: _Conn) -> None:
        self._conns.move_to_end(c.fd)

    def _close(self, c: _Conn) -> None:
        if self._conns.pop(c.fd, None) is None:
            return
        if c.job is not None:
            c.job.cancelled = True
            c.job = None
        try:
            self._sel.unregister(c.sock)
        except (KeyError, ValueError, OSError):
            pass
        try:
            c.sock.close()
        except OSError:
            pass

    def _on_read(self, c: _Conn) -> None:
        try:
            data = c.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(c)
            return
        if not data:
            self._close(c)
            return
        c.inbuf += data
        self._touch(c)
        self._drain(c)

    def _drain(self, c: _Conn) -> None:
        """Answer the requests in the connection's buffer while it is free to take one (a loop,
        not recursion: a client may pipeline thousands of small requests in one packet), at most
        PIPELINE_TURN before the other connections' turn."""
        answered = 0
        while c.state == "read" and c.inbuf and self._conns.get(c.fd) is c:
            if answered >= PIPELINE_TURN:
                c.flooded = True
                c.state = "more"  # the rest at its next turn; nothing more is read from it meanwhile
                try:
                    self._sel.unregister(c.sock)
                except (KeyError, ValueError):
                    pass
                self._turns.append(c)
                return
            if not self._parse(c):
                return
            answered += 1
            if not c.inbuf:
                c.pipelined = 0
                continue
            c.pipelined += 1
            if c.pipelined > MAX_PIPELINE and self._conns.get(c.fd) is c:
                self._unread(c, f"more than {MAX_PIPELINE} requests sent without waiting for an answer")
                return

    def _next_turns(self) -> None:
        """One more turn for each connection whose pipelined requests wait."""
        for _ in range(len(self._turns)):
            c = self._turns.popleft()
            if self._conns.get(c.fd) is not c or c.state != "more":
                continue
            c.state = "read"
            self._sel.register(c.sock, selectors.EVENT_READ, c)
            self._drain(c)

    def _unread(self, c: _Conn, why: str) -> None:
        """Close a connection that asks and does not read what it asked for."""
        self.unread += 1
        self._note("warning", "unread", "metrics server: closed a connection that does not read its answers", why=why)
        self._close(c)

    def _parse(self, c: _Conn) -> bool:
        """Take one request from the buffer and answer it or hand it on; False: incomplete."""
        end = c.inbuf.find(b"\r\n\r\n")
        sep = 4
        if end < 0:
            end, sep = c.inbuf.find(b"\n\n"), 2
        if end < 0:
            if len(c.inbuf) > MAX_HEAD:
                self._error(c, 431, "request head too large")
            return False
        if end > MAX_HEAD:
            self._error(c, 431, "request head too large")
            return True
        head = bytes(c.inbuf[:end]).decode("latin-1")
        del c.inbuf[: end + sep]
        self._answer(c, head)
        return True

    def _answer(self, c: _Conn, head: str) -> None:
        lines = head.replace("\r\n", "\n").split("\n")
        while lines and not lines[0]:  # a stray CRLF between keep-alive requests (RFC 9112 2.2)
            lines.pop(0)
        parts = lines[0].split() if lines else []
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            self._error(c, 400, "not an HTTP request")
            return
        method, target, version = parts
        if version not in ("HTTP/1.0", "HTTP/1.1"):
            self._error(c, 505, "HTTP/1.0 and HTTP/1.1 only")
            return
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                self._error(c, 400, "a malformed header line")
                return
            headers[name.lower()] = value.strip()
        if "transfer-encoding" in headers or headers.get("content-length", "0").strip() not in ("", "0"):
            self._error(c, 413, "a request body: this server takes none")
            return
        conn_opts = {t.strip().lower() for t in headers.get("connection", "").split(",")}
        c.close_after = "close" in conn_opts if version == "HTTP/1.1" else "keep-alive" not in conn_opts
        is_head = method == "HEAD"
        if method not in ("GET", "HEAD"):
            self._respond(c, 405, [("Content-Type", _TEXT), ("Allow", "GET, HEAD")], b"GET or HEAD only\n", close=True, head=False)
            return
        path, _, query = target.partition("?")
        if path == "/metrics":
            self._scrape(c, is_head, headers.get("accept", ""), headers.get("accept-encoding", ""), query)
        elif path in _HEALTH_PATHS:
            try:
                ok, reason = self.health()
            except Exception as e:  # noqa: BLE001 - a probe is answered whatever happens
                ok, reason = False, f"health check failed: {type(e).__name__}: {e}"
            self._respond(c, 200 if ok else 503, [("Content-Type", _TEXT)], (reason + "\n").encode(), head=is_head)
        elif path == "/":
            self._respond(c, 200, [("Content-Type", _TEXT)], b"rdmadoctor agent: /metrics /healthz\n", head=is_head)
        else:
            self._respond(c, 404, [("Content-Type", _TEXT)], b"not found: try /metrics or /healthz\n", head=is_head)

    def _error(self, c: _Conn, code: int, why: str) -> None:
        self._respond(c, code, [("Content-Type", _TEXT)], f"{why}\n".encode(), close=True, head=False)

    def _scrape(self, c: _Conn, head: bool, accept: str, accept_encoding: str, query: str) -> None:
        if self._pending >= len(self._workers) + self.queue_size:
            self.refused += 1
            self._note("warning", "busy", "metrics server: too many scrapes at once; answered 503",
                       rendering=len(self._workers), waiting=self.queue_size)
            self._respond(c, 503, [("Content-Type", _TEXT), ("Retry-After", "1")], b"metrics: busy, try again\n", head=head)
            return
        job = _Job(c, head, accept, accept_encoding, query)
        c.job = job
        c.state = "busy"
        try:
            self._sel.unregister(c.sock)  # nothing more is read until this one is answered
        except (KeyError, ValueError):
            pass
        self._pending += 1
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if not job.cancelled:
                try:
                    body, headers = exposition(self.registry, job.accept, job.accept_encoding, job.query)
                    job.result = (200, headers, body)
                except Exception as e:  # noqa: BLE001 - a scrape must not kill the server
                    self._note("error", "render", "metrics server: rendering /metrics failed", error=_why(e))
                    job.result = (500, [("Content-Type", _TEXT)], f"metrics failed: {_why(e)}\n".encode())
            self._done.append(job)
            self._wake()

    def _finish_jobs(self) -> None:
        while self._done:
            job = self._done.popleft()
            self._pending -= 1
            c = job.conn
            if job.cancelled or job.result is None or self._conns.get(c.fd) is not c:
                continue
            c.job = None
            code, headers, body = job.result
            self._respond(c, code, headers, body, head=job.head)
            self._drain(c)

    def _respond(self, c: _Conn, code: int, headers: list[tuple[str, str]], body: bytes, *, close: bool = False, head: bool) -> None:
        close = close or c.close_after
        lines = [f"HTTP/1.1 {code} {_REASONS.get(code, 'Error')}"]
        lines += [f"{k}: {v}" for k, v in headers]
        lines.append(f"Content-Length: {len(body)}")
        lines.append("Connection: close" if close else "Connection: keep-alive")
        c.out = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else body)
        c.close_after = close
        c.state = "write"
        c.deadline = time.monotonic() + self.timeout
        self._touch(c)
        try:
            self._sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        self._flush(c, registered=False)

    def _flush(self, c: _Conn, registered: bool = True) -> None:
        try:
            while c.out:
                sent = c.sock.send(c.out)
                c.out = c.out[sent:]
        except (BlockingIOError, InterruptedError):
            if c.inbuf and (b"\n\n" in c.inbuf or b"\r\n\r\n" in c.inbuf):
                # The answers it asked for fill the buffers and it asks more: it does not read.
                self._unread(c, "its answers are not taken while it sends more requests")
                return
            if not registered:
                self._sel.register(c.sock, selectors.EVENT_WRITE, c)
            return
        except OSError:
            self._close(c)
            return
        if c.close_after:
            try:
                c.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            self._close(c)
            return
        # Keep-alive: wait for the next request, under a fresh deadline.
        if registered:
            self._sel.modify(c.sock, selectors.EVENT_READ, c)
        else:
            self._sel.register(c.sock, selectors.EVENT_READ, c)
        c.state = "read"
        c.deadline = time.monotonic() + self.timeout


def _why(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{type(e).__name__}: {e.strerror}"
    return f"{type(e).__name__}: {e}"
