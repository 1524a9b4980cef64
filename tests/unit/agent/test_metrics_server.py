"""The agent's /metrics server is bounded (issue 21, item 4) and speaks prometheus-client's
exposition (issue 19, item 3): on loopback, with real sockets.

- 1,000 idle connections held against the real `rdmadoctor agent` running under a 3 GB
  address-space cap (a pod's memory and pids limits): every /healthz probe and a scrape are
  answered (a thread per connection failed near 230 and every probe with them);
- past the connection cap the connection idle longest is closed, so a probe always gets in;
- idle and slow connections are closed at their deadline; a request head is bounded; a body,
  another method, a broken request line are refused;
- scrapes beyond the workers and their queue get 503 while /healthz still answers;
- OpenMetrics by the Accept header, gzip, the process_* series, name[] filters;
- what goes wrong is one line in the agent's log format (json too), never a traceback.

Every wait polls with a generous deadline and asserts what happened, never how long it took.
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

from rdmadoctor.agent.log import Log
from rdmadoctor.agent.server import MAX_HEAD, MetricsServer
from rdmadoctor.output.metrics import AgentMetrics

ROOT = Path(__file__).resolve().parents[3]
HELD = 1000


def _raise_nofile(want: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {want}: cannot hold {HELD} connections")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def _until(what: str, fn, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except OSError as e:
            last = e
        else:
            if last:
                return last
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout:.0f}s (last: {last!r})")


def get(port: int, path: str, headers: dict | None = None, method: str = "GET", timeout: float = 30.0) -> tuple[int, dict, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def raw(port: int, data: bytes, timeout: float = 30.0) -> bytes:
    """Send bytes, read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def closed_by_server(s: socket.socket, timeout: float = 60.0) -> bool:
    """True once the server has closed the connection (EOF or reset), polled up to timeout."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


class LogLines:
    def __init__(self) -> None:
        self.buf = __import__("io").StringIO()
        self.log = Log("json", self.buf)

    def lines(self) -> list[dict]:
        return [json.loads(x) for x in self.buf.getvalue().splitlines()]


@pytest.fixture
def serve():
    servers: list[MetricsServer] = []

    def start(registry=None, health=lambda: (True, "ok"), log=None, **kw) -> MetricsServer:
        reg = registry if registry is not None else AgentMetrics("9.9.9").registry(process=True)
        s = MetricsServer("127.0.0.1", 0, reg, health, log, **kw).start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


# ---- the real agent, address space capped, 1,000 connections held --------------------------------
def _cap_address_space() -> None:
    cap = 3 << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def test_agent_answers_healthz_with_1000_idle_connections_under_an_address_space_cap(tmp_path):
    _raise_nofile(HELD + 256)  # the agent inherits it
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("NODE_NAME", None)
    err = tmp_path / "agent.stderr"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rdmadoctor", "agent", "--example", "broken-pod", "--publish", "stdout",
         "--metrics-address", "127.0.0.1", "--metrics-port", str(port), "--interval", "5", "--log-format", "json"],
        stdout=subprocess.DEVNULL, stderr=open(err, "w"), env=env, cwd=ROOT, preexec_fn=_cap_address_space,
    )
    held: list[socket.socket] = []
    try:
        def healthy() -> bool:
            assert proc.poll() is None, err.read_text()
            return get(port, "/healthz", timeout=5)[0] == 200

        _until("the agent healthy", healthy)
        # Half say nothing, half start a request and stop (a slow client); none reads an answer.
        for i in range(HELD):
            c = socket.create_connection(("127.0.0.1", port), timeout=30)
            if i % 2:
                c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            held.append(c)
        answers = [get(port, "/healthz") for _ in range(20)]
        assert [a[:1] + (a[2],) for a in answers] == [(200, b"ok\n")] * 20
        code, headers, body = get(port, "/metrics")
        assert code == 200 and b"rdmadoctor_finding{" in body and b"process_resident_memory_bytes" in body
        # Probes at once, too.
        results: list = []
        threads = [threading.Thread(target=lambda: results.append(get(port, "/healthz")[0])) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert results == [200] * 10
        assert proc.poll() is None
    finally:
        for c in held:
            c.close()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    log = err.read_text()
    assert "Traceback" not in log
    assert all(json.loads(line) for line in log.splitlines()), log  # every line JSON (--log-format json)


# ---- the cap, the deadlines ---------------------------------------------------------------------
def test_past_the_connection_cap_the_longest_idle_is_closed_and_probes_get_in(serve):
    logs = LogLines()
    s = serve(log=logs.log, max_connections=16)
    held = [socket.create_connection(("127.0.0.1", s.port), timeout=30) for _ in range(100)]
    try:
        for _ in range(10):
            assert get(s.port, "/healthz")[0] == 200
        assert s.connections <= 16 and s.evicted >= 84
        # The oldest were closed, the newest are still open.
        assert closed_by_server(held[0])
        held[-1].sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        held[-1].settimeout(30)
        assert held[-1].recv(100).startswith(b"HTTP/1.1 200 OK")
    finally:
        for c in held:
            c.close()
    # One warning for the whole flood (at most one a minute), in the log's format.
    warned = [x for x in logs.lines() if "the most it keeps" in x["msg"]]
    assert len(warned) == 1 and warned[0]["level"] == "warn" and warned[0]["connections"] == 16


def test_idle_and_slow_connections_are_closed_at_their_deadline(serve):
    s = serve(timeout=0.5)
    idle = socket.create_connection(("127.0.0.1", s.port))
    slow = socket.create_connection(("127.0.0.1", s.port))
    try:
        slow.sendall(b"GET /metrics HTTP/1.1\r\n")
        assert closed_by_server(idle) and closed_by_server(slow)
        _until("no connection left", lambda: s.connections == 0)
        # A keep-alive connection is answered, then closed when it stays idle.
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        c.request("GET", "/healthz")
        r = c.getresponse()
        assert (r.status, r.getheader("Connection"), r.read()) == (200, "keep-alive", b"ok\n")
        assert closed_by_server(c.sock)
        c.close()
    finally:
        idle.close()
        slow.close()


def test_bad_requests_are_refused_and_not_logged(serve):
    logs = LogLines()
    s = serve(log=logs.log)
    assert raw(s.port, b"GET / HTTP/1.1\r\nX: " + b"a" * (MAX_HEAD + 10)).startswith(b"HTTP/1.1 431 ")
    assert raw(s.port, b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc").startswith(b"HTTP/1.1 413 ")
    assert raw(s.port, b"DELETE /metrics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405 ")
    assert raw(s.port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n").startswith(b"HTTP/1.1 400 ")  # TLS to a plain port
    assert raw(s.port, b"GET / HTTP/2.0\r\n\r\n").startswith(b"HTTP/1.1 505 ")
    assert get(s.port, "/nope")[0] == 404
    # Pipelined requests are answered in order, each once; Connection: close ends it.
    out = raw(s.port, b"GET /healthz HTTP/1.1\r\n\r\n" * 500 + b"HEAD /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert out.count(b"HTTP/1.1 200 OK") == 501 and out.endswith(b"Connection: close\r\n\r\n")
    assert logs.lines() == []
    assert get(s.port, "/healthz")[0] == 200


# ---- scrapes beyond the workers ---------------------------------------------------------------------
class Stuck:
    """A collector that blocks until released: a scrape that takes long."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.entered = threading.Semaphore(0)

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        self.entered.release()
        self.go.wait(120)
        yield GaugeMetricFamily("stuck_metric", "a slow one", value=1)


def test_scrapes_beyond_the_workers_and_queue_get_503_and_healthz_still_answers(serve):
    from prometheus_client import CollectorRegistry

    stuck = Stuck()
    reg = CollectorRegistry(auto_describe=False)
    reg.register(stuck)
    logs = LogLines()
    s = serve(registry=reg, log=logs.log, workers=1, queue_size=1)
    results: dict[int, int] = {}

    def scrape(i: int) -> None:
        results[i] = get(s.port, "/metrics")[0]

    first = threading.Thread(target=scrape, args=(0,))
    first.start()
    assert stuck.entered.acquire(timeout=60)  # the worker is busy with it
    second = threading.Thread(target=scrape, args=(1,))
    second.start()
    _until("the second scrape queued", lambda: s._pending == 2)
    code, headers, body = get(s.port, "/metrics")
    assert (code, headers["retry-after"], body) == (503, "1", b"metrics: busy, try again\n")
    assert get(s.port, "/healthz")[0] == 200
    stuck.go.set()
    first.join(60)
    second.join(60)
    assert results == {0: 200, 1: 200}
    assert [x["msg"] for x in logs.lines()] == ["metrics server: too many scrapes at once; answered 503"]


def test_a_scrape_waiting_past_its_deadline_gets_503(serve):
    from prometheus_client import CollectorRegistry

    stuck = Stuck()
    reg = CollectorRegistry(auto_describe=False)
    reg.register(stuck)
    s = serve(registry=reg, workers=1, queue_size=4, timeout=0.5)
    try:
        code, _, body = get(s.port, "/metrics")
        assert (code, body) == (503, b"metrics: busy, try again\n")
        assert get(s.port, "/healthz")[0] == 200
    finally:
        stuck.go.set()


def test_a_failing_render_is_a_500_and_one_log_line_without_traceback(serve):
    from prometheus_client import CollectorRegistry

    class Broken:
        def collect(self):
            raise KeyError("labels")

    reg = CollectorRegistry(auto_describe=False)
    reg.register(Broken())
    logs = LogLines()
    s = serve(registry=reg, log=logs.log)
    for _ in range(3):
        code, _, body = get(s.port, "/metrics")
        assert code == 500 and body == b"metrics failed: KeyError: 'labels'\n"
    lines = logs.lines()
    assert len(lines) == 1 and lines[0]["level"] == "error" and lines[0]["error"] == "KeyError: 'labels'"
    assert "Traceback" not in logs.buf.getvalue()


def test_errors_are_text_lines_with_log_format_text(serve):
    import io

    buf = io.StringIO()
    s = serve(log=Log("text", buf), max_connections=8)
    held = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(20)]
    try:
        assert get(s.port, "/healthz")[0] == 200
    finally:
        for c in held:
            c.close()
    (line,) = buf.getvalue().splitlines()
    assert " WARN  metrics server: 8 connections open" in line and "connections=8" in line


# ---- prometheus-client's exposition -----------------------------------------------------------------
def test_metrics_negotiates_openmetrics_gzip_and_serves_process_series(serve):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
    from prometheus_client.parser import text_string_to_metric_families

    m = AgentMetrics("9.9.9", targets=("nfd",))
    s = serve(registry=m.registry(process=True))

    code, headers, body = get(s.port, "/metrics")
    assert code == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    names = {f.name for f in text_string_to_metric_families(body.decode())}
    assert {"rdmadoctor_build_info", "rdmadoctor_node_updates", "process_resident_memory_bytes", "process_open_fds"} <= names

    # What Prometheus sends (scrape_protocols' default order): OpenMetrics first.
    accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    code, headers, body = get(s.port, "/metrics", {"Accept": accept, "Accept-Encoding": "gzip"})
    assert code == 200 and headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
    assert headers["content-encoding"] == "gzip" and "Accept-Encoding" in headers["vary"]
    text = gzip.decompress(body).decode()
    assert text.endswith("# EOF\n")
    fams = {f.name: f for f in om_families(text)}
    assert fams["rdmadoctor_node_updates"].type == "counter"
    assert [x.value for x in fams["rdmadoctor_build_info"].samples] == [1.0]

    code, headers, body = get(s.port, "/metrics?name[]=rdmadoctor_build_info")
    assert code == 200 and {f.name for f in text_string_to_metric_families(body.decode())} == {"rdmadoctor_build_info"}

    code, headers, body = get(s.port, "/metrics", method="HEAD")
    assert code == 200 and body == b"" and int(headers["content-length"]) > 0


def test_health_answers_503_with_the_reason(serve):
    s = serve(health=lambda: (False, "starting: no cycle has finished yet"))
    assert get(s.port, "/healthz")[::2] == (503, b"starting: no cycle has finished yet\n")
    assert get(s.port, "/readyz")[0] == 503


# ---- the series ---------------------------------------------------------------------------------------
def _scrape(m: AgentMetrics) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    text = prometheus_client.generate_latest(m.registry()).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_a_follow_on_finding_is_a_series_of_its_own_labelled_with_its_cause():
    """A node without RDMA devices: MOD_MISSING follows from IB_NO_DEVICES (folded by the one
    rule, output.text.folding); its series carries cause="IB_NO_DEVICES", the root cause an empty
    cause, so the alerts (cause="") fire once. Without the report nothing is folded."""
    from rdmadoctor.runner import Options, diagnose

    diag = diagnose(Options(bundle=str(ROOT / "tests" / "fixtures" / "no-devices"), scope="node"))
    m = AgentMetrics("1")
    m.update(diag.results, report=diag.report)
    s = _scrape(m)
    found = {dict(k[1])["code"]: dict(k[1])["cause"] for k in s if k[0] == "rdmadoctor_finding"}
    assert found["IB_NO_DEVICES"] == "" and found["MOD_MISSING"] == "IB_NO_DEVICES"
    assert m.snapshot.findings.get(("IB_NO_DEVICES", "error")) == 1 and ("MOD_MISSING", "error") not in m.snapshot.findings
    m.update(diag.results)
    assert {dict(k[1])["cause"] for k in _scrape(m) if k[0] == "rdmadoctor_finding"} == {""}


def test_port_rate_is_in_bytes_per_second():
    m = AgentMetrics("1")
    report = {"inventory": {"rdma_devices": [{"name": "mlx5_0", "ports": [
        {"port": 1, "state": "ACTIVE", "link_layer": "InfiniBand", "rate_gbps": 400.0},
        {"port": 2, "state": "DOWN", "link_layer": "InfiniBand", "rate_gbps": 2.5},
        {"port": 3, "state": "DOWN", "link_layer": "InfiniBand", "rate_gbps": True},
    ]}]}}
    m.update([], report=report)
    s = _scrape(m)
    rates = {dict(k[1])["port"]: v for k, v in s.items() if k[0] == "rdmadoctor_port_rate_bytes_per_second"}
    # node_exporter's node_infiniband_rate_bytes_per_second for "400 Gb/sec (4X NDR)": 5e10.
    assert rates == {"1": 50e9, "2": 312.5e6}
    assert not [k for k in s if "gbps" in k[0]]


# ---- clients that pipeline and never read (issue 33, item 7) ----------------------------------------
def test_healthz_is_answered_while_connections_pipeline_requests_and_never_read(serve):
    """200 loopback connections (the audit used 1,000) each send pipelined requests as fast as
    the server takes them and never read an answer, reopened as the server closes them (under the
    server's cap, as the audit's 1,000 were under the default 1,024). Every /healthz probe
    meanwhile is answered and the non-readers are closed."""
    logs = LogLines()
    s = serve(log=logs.log, max_connections=256)
    burst = b"GET /healthz HTTP/1.1\r\n\r\n" * 2000
    stop = threading.Event()
    opened = [0]

    def flood() -> None:
        socks: list[socket.socket] = []
        try:
            while not stop.is_set():
                while len(socks) < 200 and not stop.is_set():
                    try:
                        c = socket.create_connection(("127.0.0.1", s.port), timeout=5)
                    except OSError:
                        break
                    c.setblocking(False)
                    socks.append(c)
                    opened[0] += 1
                for c in list(socks):
                    try:
                        c.send(burst)
                    except (BlockingIOError, InterruptedError):
                        pass
                    except OSError:  # closed by the server: open another
                        socks.remove(c)
                        c.close()
                time.sleep(0.01)
        finally:
            for c in socks:
                c.close()

    t = threading.Thread(target=flood, daemon=True)
    t.start()
    try:
        _until("the server closes connections that do not read", lambda: s.unread >= 50, timeout=120)
        answered = [get(s.port, "/healthz", timeout=60)[0] for _ in range(10)]
        assert answered == [200] * 10
        assert s.connections <= 256
    finally:
        stop.set()
        t.join(60)
    assert opened[0] > 200 and s.unread >= 50, (opened[0], s.unread, s.evicted)
    _until("the flood's connections are gone", lambda: s.connections == 0 or get(s.port, "/healthz")[0] == 200)
    warned = [x for x in logs.lines() if "does not read" in x["msg"]]
    assert 1 <= len(warned) <= 2 and "Traceback" not in logs.buf.getvalue()
