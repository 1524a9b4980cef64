"""A live hang, named while it happens: the job's silence or PyTorch's watchdog, NCCL's RAS asked,
this node's facts read again, all said on stderr and kept for the report.

:class:`HangWatch` is off the job's hot path: the copy loop only calls :meth:`HangWatch.saw` with
each batch it already holds (a clock read and an append, by reference); a thread of its own wakes
every :data:`TICK_S` to read those batches for PyTorch's watchdog and NCCL's failover lines and to
compare the clock, and only when the job has been silent for
``hang_after_s`` (an expectation, default 300 s, below PyTorch's 10-minute watchdog) does it ask
RAS (:mod:`rdmadoctor.supervise.ras`, at most once per max(hang_after_s, REPEAT_MIN_S) while the
hang lasts) and read the node's ports and counters (:func:`read_ports`, sysfs through the Host).
bench/ras_overhead.py measures the job's throughput with it on and off.

NCCL's IB port failover lines (2.29.7+) are said the moment they pass, with what the job runs on
since then (the devices of the merged NIC NCCL's `NET/IB : Using` line named).
"""

from __future__ import annotations

import re
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

TICK_S = 1.0
REPEAT_MIN_S = 5.0
PORT_POLL_S = 5.0  # the ports' states are read this often on the watcher's thread: when one left ACTIVE
PENDING_BYTES = 8 << 20  # output waiting for the watcher's thread to read it
PORT_COUNTERS = ("link_downed", "link_error_recovery", "symbol_error", "port_rcv_errors", "port_xmit_discards",
                 "local_link_integrity_errors", "excessive_buffer_overrun_errors")
MAX_PORTS = 64
# PyTorch's ProcessGroupNCCL watchdog (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp); kb pytorch rows
# read the same lines for `diagnose`.
WATCHDOG = (b"Watchdog caught collective operation timeout", b"failure detected by watchdog")
_FAILOVER = re.compile(r"NET/IB: (?:\w{1,80}: )?Device (?P<dev>\d{1,3}) marked as failed\.(?: Initiating recovery\? (?P<rec>Yes|No))?"
                       r" \((?P<side>send|recv) comm=")
_RECOVERED = re.compile(r"NET/IB: \w{1,80}: Device (?P<dev>\d{1,3}) has been recovered")
_FATAL = re.compile(r"Detected (?P<failed>\d{1,3}) failed devices out of (?P<total>\d{1,3}) devices")
_USING = re.compile(r"NET/IB : Using (?P<list>(?:\[\d{1,3}\]\S{1,400} ?){1,64})")


def read_ports(host: Any) -> dict[str, dict]:
    """'mlx5_0/1' -> {"state", "phys_state", "counters": {name: int}} from sysfs, through ``host``."""
    out: dict[str, dict] = {}
    for dev in sorted(host.listdir("/sys/class/infiniband"))[:MAX_PORTS]:
        base = f"/sys/class/infiniband/{dev}/ports"
        for port in sorted(host.listdir(base))[:8]:
            p = f"{base}/{port}"
            state = (host.read_value(f"{p}/state") or "").split(":")[-1].strip() or None
            phys = (host.read_value(f"{p}/phys_state") or "").split(":")[-1].strip() or None
            counters = {}
            for name in PORT_COUNTERS:
                v = host.read_value(f"{p}/counters/{name}")
                if v is not None and v.strip().isdigit():
                    counters[name] = int(v.strip())
            out[f"{dev}/{port}"] = {"state": state, "phys_state": phys, "counters": counters}
    return out


def port_changes(before: dict[str, dict], now: dict[str, dict], left: dict[str, str] | None = None) -> list[str]:
    """What changed on this node's ports since the job started, worst first. ``left``: port ->
    the time its state was first seen other than at the start (the watcher polls the states)."""
    down, grew = [], []
    for name, p in now.items():
        was = before.get(name) or {}
        if p.get("state") != "ACTIVE":
            since = f" ({was.get('state')} when the job started)" if was.get("state") and was.get("state") != p.get("state") else ""
            at = f" since {left[name]}" if left and name in left and since else ""
            phys = f" ({p['phys_state']})" if p.get("phys_state") else ""
            down.append(f"{name} is {p.get('state') or 'unreadable'}{phys}{at}{since}")
        for c, v in (p.get("counters") or {}).items():
            old = (was.get("counters") or {}).get(c)
            if old is not None and v > old:
                grew.append(f"{name} {c} +{v - old}")
    return down + grew


class HangWatch:
    """Watches the job's output for silence and PyTorch's watchdog; asks RAS; reads the node."""

    def __init__(self, hang_after_s: float, say: Callable[[str], None], *, env: dict[str, str],
                 host_factory: Callable[[], Any] | None = None, gate_findings: list[dict] | None = None,
                 ask: Callable[..., dict] | None = None):
        self.hang_after = float(hang_after_s)
        self.say = say
        self.env = env
        self.host_factory = host_factory
        self.gate_findings = gate_findings or []
        self._ask = ask
        self.last = time.monotonic()
        self.watchdog: str | None = None  # the watchdog line that said the job hangs
        self.hangs: list[dict] = []  # what the report carries
        self.failover: list[dict] = []
        self.state: dict[str, Any] = {"hang": 0, "blamed": None, "since": None}  # what --metrics-port serves
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._nics: list[list[str]] = []  # the merged NICs NCCL named
        self._ports_at_start: dict[str, dict] | None = None
        self._left: dict[str, str] = {}  # port -> when its state was first seen changed
        from collections import deque

        self._pending: deque[bytes] = deque()  # batches the copy loop handed over (append/popleft: thread-safe)
        self._pending_bytes = 0
        self.unread_bytes = 0
        self._thread = threading.Thread(target=self._run, name="rdmadoctor-hang", daemon=True)

    # -- the copy loop's side: cheap ----------------------------------------------------------
    def saw(self, data: bytes) -> None:
        """The copy loop's call, per batch: the clock, and the batch kept by reference for the
        watcher's thread to read (no search here: a search of a batch costs about a nanosecond a
        byte, paid on the thread instead). At most PENDING_BYTES wait; beyond, the oldest go unread."""
        self.last = time.monotonic()
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes > PENDING_BYTES:
            self._shed()
        if self.state["hang"] and not self.watchdog:
            self._wake.set()  # output resumed: said on the thread

    def _shed(self) -> None:
        while self._pending_bytes > PENDING_BYTES and len(self._pending) > 1:
            try:
                old = self._pending.popleft()
            except IndexError:
                return
            self._pending_bytes -= len(old)
            self.unread_bytes += len(old)

    def _read_pending(self) -> None:
        """On the watcher's thread: PyTorch's watchdog and NCCL's failover lines in what was copied."""
        while True:
            try:
                data = self._pending.popleft()
            except IndexError:
                return
            self._pending_bytes -= len(data)
            if b"atchdog" in data and any(w in data for w in WATCHDOG):
                self._line_event(data, "watchdog")
            if b"NET/IB" in data and (b"marked as failed" in data or b"has been recovered" in data
                                      or b"failed devices out of" in data or b"NET/IB : Using [" in data):
                self._line_event(data, "net")

    def _line_event(self, data: bytes, kind: str) -> None:
        text = data[-(1 << 20):].decode("utf-8", "replace")
        with self._lock:
            if kind == "watchdog":
                if self.watchdog is None:
                    line = next((x for x in text.split("\n") if "atchdog" in x), "")
                    self.watchdog = line.strip()[:400]
                    self._wake.set()
                return
            for line in text.split("\n"):
                if "NET/IB" not in line:
                    continue
                m = _USING.search(line)
                if m and len(self._nics) < 64:
                    nics = [re.sub(r"^\[\d+\]", "", x).split(":")[0].split("+") for x in m["list"].split()]
                    if nics not in ([n] for n in self._nics):
                        self._nics = nics
                    continue
                self._failover_line(line)

    def _failover_line(self, line: str) -> None:
        now = time.strftime("%H:%M:%S")
        merged = [n for n in self._nics if len(n) > 1]
        m = _FAILOVER.search(line)
        if m:
            dev = int(m["dev"])
            nic = merged[0] if len(merged) == 1 else None
            name = f" ({nic[dev]})" if nic and dev < len(nic) else ""
            runs = (f"the NIC {'+'.join(nic)} runs on {len(nic) - 1} of its {len(nic)} devices since {now}" if nic else
                    f"the job runs on one device fewer since {now}")
            rec = {"Yes": "; NCCL will try to recover it", "No": "; it stays out until the job restarts"}.get(m["rec"] or "", "")
            self.failover.append({"event": "failed", "device": dev, "hca": name.strip(" ()") or None, "side": m["side"], "at": now})
            self.say(f"NCCL IB port failover: device {dev}{name} of a {m['side']} communicator failed: {runs}{rec} "
                     "(NCCL_IB_PORT_FAILOVER; `rdmadoctor explain NCCL_IB_PORT_FAILOVER`)")
            return
        m = _RECOVERED.search(line)
        if m:
            self.failover.append({"event": "recovered", "device": int(m["dev"]), "at": now})
            self.say(f"NCCL recovered IB device {m['dev']} at {now}: it carries traffic again")
            return
        m = _FATAL.search(line)
        if m:
            self.failover.append({"event": "fatal", "failed": int(m["failed"]), "total": int(m["total"]), "at": now})
            self.say(f"error: NCCL detected {m['failed']} failed devices out of {m['total']}: its failover handles one; the "
                     "communicator fails (NCCL_IB_FAILOVER_FATAL)")

    # -- the thread ---------------------------------------------------------------------------
    def start(self) -> HangWatch:
        if self.host_factory is not None:
            try:
                self._ports_at_start = read_ports(self.host_factory())
            except Exception:  # noqa: BLE001 - the node unreadable: said at hang time, never a traceback
                self._ports_at_start = None
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self._read_pending()  # the last batches: a failover line just before the end

    def _poll_ports(self) -> None:
        """The ports' states now: the first time one differs from the start is kept (sysfs, a few
        small reads on this thread, never the job's)."""
        if self.host_factory is None or not self._ports_at_start:
            return
        try:
            host = self.host_factory()
            for name, was in self._ports_at_start.items():
                if name in self._left:
                    continue
                dev, _, port = name.partition("/")
                state = (host.read_value(f"/sys/class/infiniband/{dev}/ports/{port}/state") or "").split(":")[-1].strip()
                if state and state != was.get("state"):
                    self._left[name] = time.strftime("%H:%M:%S")
        except Exception:  # noqa: BLE001 - read again at hang time, where a failure is said
            return

    def _run(self) -> None:
        next_ask = 0.0
        next_poll = time.monotonic() + PORT_POLL_S
        started: float | None = None
        while not self._stop.is_set():
            self._wake.wait(TICK_S)
            self._wake.clear()
            if self._stop.is_set():
                return
            self._read_pending()
            now = time.monotonic()
            if now >= next_poll:
                self._poll_ports()
                next_poll = now + PORT_POLL_S
            silent = now - self.last
            hung = self.watchdog is not None or silent >= self.hang_after
            if not hung:
                if started is not None:
                    self.say(f"the job's output resumed after {silent_for(now - started + self.hang_after)}: no longer hung")
                    self.hangs[-1]["resumed_after_s"] = round(now - started + self.hang_after, 1)
                    self.state.update(hang=0)
                    started = None
                continue
            if started is None:
                started = now
                next_ask = now
            if now >= next_ask:
                reason = (f"PyTorch's watchdog: {self.watchdog}" if self.watchdog else
                          f"no output for {silent_for(silent)} (hang_after_s={self.hang_after:g})")
                try:
                    self._act(reason, first=len(self.hangs) == 0 or "resumed_after_s" in self.hangs[-1])
                except Exception as e:  # noqa: BLE001 - the watcher must never stop the job
                    self.say(f"could not examine the hang: {type(e).__name__}: {e}")
                next_ask = time.monotonic() + max(self.hang_after, REPEAT_MIN_S)

    def _act(self, reason: str, first: bool) -> None:
        from rdmadoctor.logs.ras import blamed_nodes, judge_report
        from rdmadoctor.parsers import ncclras
        from rdmadoctor.supervise import ras

        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        findings = []
        asked: dict = {}
        try:
            host, port = ras.address(self.env)
            asked = (self._ask or ras.ask)(host, port)
            report = ncclras.parse(asked["text"])
            if report is None:
                raise ras.RasError(f"RAS at {host}:{port} answered something that is not a report: {asked['text'][:80]!r}")
            findings = judge_report(report, hang=reason, source=f"NCCL's RAS at {host}:{port}")
            asked = {k: v for k, v in asked.items() if k != "text"} | {"nccl_version": report.nccl_version}
        except ras.RasError as e:
            from rdmadoctor.core.codes.nccl import NCCL_RAS_UNAVAILABLE
            from rdmadoctor.core.model import UNKNOWN, Finding

            findings = [Finding(NCCL_RAS_UNAVAILABLE.code, UNKNOWN, "NCCL RAS", f"could not ask NCCL's RAS: {e}.",
                                NCCL_RAS_UNAVAILABLE.fix)]
            asked = {"error": str(e)}
        node = self._node()
        head = self._head(reason, findings)
        blamed = blamed_nodes([f for f in findings if f.severity in ("error", "warning")])
        entry = {"at": at, "reason": reason, "ras": asked, "findings": [f.to_json() for f in findings],
                 "node": node, "blamed_nodes": blamed}
        with self._lock:
            if first:
                self.hangs.append(entry)
            else:
                self.hangs[-1]["last"] = entry
                self.hangs[-1]["asked"] = self.hangs[-1].get("asked", 1) + 1
        self.state.update(hang=1, blamed=blamed[0] if blamed else None, since=self.state.get("since") or at)
        if first:
            self.say(head)
            for f in findings:
                self.say(f"  {f.severity.upper()} {f.code} {f.subject}: {f.message}")
            for line in node["lines"]:
                self.say(f"  this node: {line}")
        else:
            self.say(f"still hung ({reason}); RAS: " + "; ".join(f"{f.code} {f.subject}" for f in findings[:4]))

    def _head(self, reason: str, findings: list) -> str:
        from rdmadoctor.logs.ras import blamed_nodes

        blamed = blamed_nodes([f for f in findings if f.severity in ("error", "warning")])
        named = f": NCCL's RAS blames {', '.join(blamed[:4])}" if blamed else ""
        return f"the job looks hung ({reason}){named} (JOB_HANG)"

    def _node(self) -> dict:
        """This node's facts now: its ports and counters against the job's start, the gate's findings."""
        lines: list[str] = []
        ports: dict = {}
        if self.host_factory is not None:
            try:
                ports = read_ports(self.host_factory())
            except Exception as e:  # noqa: BLE001 - the hang report still names the rest
                lines.append(f"could not read its ports: {type(e).__name__}: {e}")
        if ports:
            changed = port_changes(self._ports_at_start or {}, ports, self._left)
            lines += changed or [f"{len(ports)} ports, all ACTIVE, no error counter grew since the job started"
                                 if all(p.get("state") == "ACTIVE" for p in ports.values()) else
                                 f"{len(ports)} ports, as they were when the job started"]
        elif self.host_factory is not None and not lines:
            lines.append("no RDMA port in /sys/class/infiniband")
        for f in self.gate_findings[:6]:
            lines.append(f"the gate found {f.get('severity', '').upper()} {f.get('code')} {f.get('subject')}")
        return {"lines": lines, "ports": ports}

    # -- what the job's end carries -----------------------------------------------------------
    def findings(self) -> list[dict]:
        """JOB_HANG (with the last RAS findings folded under it) for the final report."""
        from rdmadoctor.core.codes.nccl import JOB_HANG
        from rdmadoctor.core.model import ERROR, WARNING, Finding

        out = []
        for h in self.hangs:
            last = h.get("last") or h
            resumed = h.get("resumed_after_s")
            msg = (f"the job hung ({h['reason']}) at {h['at']}" + (f" and resumed after {resumed} s" if resumed else "")
                   + (f"; NCCL's RAS blamed {', '.join(last['blamed_nodes'][:4])}" if last.get("blamed_nodes") else ""))
            out.append(Finding(JOB_HANG.code, WARNING if resumed else ERROR, "job", msg + ".", JOB_HANG.fix,
                               data={"blamed_nodes": last.get("blamed_nodes"), "node": last.get("node", {}).get("lines")}).to_json())
            for f in last["findings"]:
                out.append({**f, "cause": f.get("cause") or JOB_HANG.code})
        return out


def silent_for(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60} min {s % 60} s" if s >= 120 else f"{s} s"
