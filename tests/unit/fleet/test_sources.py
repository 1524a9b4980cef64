"""`rdmadoctor fleet`'s sources, typed and bounded (issue 33, item 6), each node counted once and
a secured Prometheus read (issue 32, item 5).

- a malformed report, annotation or Prometheus answer is named and left out, never a traceback,
  and never exit 1 (which means drift);
- regular files only (a symlink to /dev/zero, a FIFO), stdin read a chunk at a time, every answer
  size-capped and every request under one deadline;
- every name printed in text is escaped: a newline cannot forge `fleet: no drift`;
- one report per node (the newest wins, the others set aside and named); a `diagnose --json`
  document is skipped with a note;
- `--prometheus` with a bearer token file, basic auth, a CA file and a client certificate, against
  a loopback server that demands them (a stand-in: a real Prometheus has no bearer-token check of
  its own), and against Debian's real Prometheus with TLS client-certificate auth when installed.

Every wait polls for a condition with a generous deadline; nothing asserts how long it took.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rdmadoctor.fleet import read_fleet, sources
from rdmadoctor.fleet.compare import exit_code
from tests.conftest import check_json, run_cli

RDMADOCTOR = Path(sys.executable).with_name("rdmadoctor")


@pytest.fixture(scope="module")
def report() -> dict:
    return check_json(["--example", "roce-node", "--scope", "node"])[1]


def _named(rep: dict, name: str, time: str = "2026-01-01T00:00:00Z") -> dict:
    r = copy.deepcopy(rep)
    r["fingerprint"]["identity"]["node"] = name
    r["fingerprint"]["pool"] = "roce"
    r["time"] = time
    return r


def _good(tmp_path: Path, rep: dict, n: int = 3) -> None:
    for i in range(n):
        (tmp_path / f"good{i}.json").write_text(json.dumps(_named(rep, f"node-{i}")))


# ---- typed: a malformed input is named and left out ------------------------------------------------
def _shapes(rep: dict) -> dict[str, object]:
    def fp(**change):
        r = _named(rep, "bad")
        r["fingerprint"].update(change)
        return r

    def node_field(key, value):
        r = _named(rep, "bad")
        r["fingerprint"]["node"][key] = value
        return r

    def port_field(key, value):
        r = _named(rep, "bad")
        r["fingerprint"]["ports"][0][key] = value
        return r

    def top(key, value):
        r = _named(rep, "bad")
        r[key] = value
        return r

    no_fp = _named(rep, "bad")
    del no_fp["fingerprint"]
    no_fp["inventory"] = {"rdma_devices": [1, "x"], "gpus": "many"}
    return {
        "node-a-list": fp(node=[1]),
        "node-field-a-list": node_field("kernel", [1]),
        "node-field-an-object": node_field("kernel", {"a": 1}),
        "node-field-nan": node_field("gpu_count", float("nan")),
        "node-field-huge": node_field("gpu_count", 10**40),
        "rails-a-list": node_field("rails", [1, 2]),
        "pcie-a-string": node_field("pcie", "x16"),
        "ports-an-object": fp(ports={"a": 1}),
        "ports-of-numbers": fp(ports=[1, 2]),
        "port-field-a-list": port_field("fw_ver", ["28"]),
        "identity-a-list": fp(identity=[1]),
        "identity-node-a-list": fp(identity={"node": [1]}),
        "pool-a-number": fp(pool=5),
        "fingerprint-a-string": top("fingerprint", "x"),
        "host-a-string-no-fingerprint": {**no_fp, "host": "x"},
        "inventory-garbage": no_fp,
        "compact-n-a-list": {"s": "fp1", "n": [1]},
        "compact-p-strings": {"s": "fp1", "p": {"mlx5_0/1": "x"}},
        "deep": json.loads("[" * 50 + "]" * 50),
    }


def test_every_malformed_report_shape_is_named_and_left_out_never_exit_1(tmp_path, report):
    _good(tmp_path, report)
    shapes = _shapes(report)
    for name, doc in shapes.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(doc, allow_nan=True))
    (tmp_path / "deeper.json").write_text("[" * 100000 + "]" * 100000)
    code, out, err = run_cli(["fleet", str(tmp_path)])
    assert code == 2 and err == "", (code, err)  # could not decide on those: never "drift"
    assert "pool roce: 3 nodes, 84 fields compared: every node agrees" in out, out
    for name in [*shapes, "deeper"]:
        if name in ("deep", "inventory-garbage"):
            continue  # an empty list of documents; an old report whose inventory gives no known fact
        assert f"{name}.json" in out, name
    assert "Traceback" not in out
    assert "node-a-list.json: the fingerprint has a field of the wrong type" in out
    assert "pool-a-number.json: fingerprint.pool is a number, expected a string" in out
    assert "node-field-nan.json: fingerprint field node.gpu_count is nan, not a number a node has" in out
    doc = json.loads(run_cli(["fleet", "--json", str(tmp_path)])[1])
    assert doc["outliers"] == [] and [p["nodes"] for p in doc["pools"] if p["pool"] == "roce"] == [3]


def test_an_older_partial_report_is_read_tolerantly_through_the_typed_model(report):
    """A report from before the fingerprint and the schema field, cut down to what an old agent
    wrote (a host with a label only, part of an inventory, a summary of the wrong type, a section
    this version does not know) is fingerprinted from its inventory through the typed read model
    (rdmadoctor.core.report.Report): what it has is compared, what it lacks is unknown, never an error."""
    import io

    from rdmadoctor.core.report import Report
    from rdmadoctor.engine import fingerprint as F

    full = F.flatten(report["fingerprint"])
    old = {
        "version": "0.3.0",
        "status": "healthy",
        "host": {"label": "old-node-7", "kind": "live"},
        "summary": "3 passed",  # of the wrong type: read as missing, not refused (the fleet does not read it)
        "inventory": {k: report["inventory"][k] for k in ("kernel_release", "rdma_devices") if k in report["inventory"]},
        "a_section_from_a_future_version": {"x": 1},
    }
    (entry,) = sources.from_paths(["-"], None, stdin=io.StringIO(json.dumps(old)))
    assert isinstance(entry, sources.Entry), getattr(entry, "args", entry)
    node, pool, _labels, flat, _sig, when = entry
    assert node == "old-node-7" and pool == sources.NO_POOL and when is None
    assert flat["node.kernel"] == full["node.kernel"]
    ports = {k: v for k, v in full.items() if k.startswith("port.") and not k.endswith(".gid_index")}
    assert {k: v for k, v in flat.items() if k.startswith("port.")} == ports
    # What it did not keep (GPUs; the RoCE GID table that gives gid_index) is unknown, not zero.
    assert "node.gpu_count" not in flat and not any(k.endswith(".gid_index") for k in flat)
    # The fingerprint is the typed model's: a Report and its dict give the same.
    assert F.build(Report.from_json(old)) == F.build(old)
    # An inventory that is not an object is named, not read as empty.
    (bad,) = sources.from_paths(["-"], None, stdin=io.StringIO(json.dumps({**old, "inventory": "x"})))
    assert isinstance(bad, sources.SourceError) and "inventory is a string, expected an object" in str(bad)


def test_one_bad_document_in_a_stream_leaves_the_others(report):
    import io

    docs = [_named(report, "n1"), {"schema": "rdmadoctor.report/v1", "fingerprint": {"node": [1]}}, _named(report, "n2")]
    res = read_fleet(paths=["-"], stdin=io.StringIO("\n".join(json.dumps(d) for d in docs)))
    assert res["pools"][0]["nodes"] == 2 and len(res["errors"]) == 1 and "document 2" in res["errors"][0]


def test_malformed_annotations_are_named_and_the_good_ones_read():
    good = '{"s":"fp1","n":{"kernel":"5.15"}}'
    nodes = [
        {"metadata": {"name": "ok-1", "annotations": {sources.ANNOTATION: good}}},
        {"metadata": {"name": "ok-2", "annotations": {sources.ANNOTATION: good}, "labels": {"a": 1}}},
        "not a node",
        {"metadata": "x"},
        {"metadata": {"name": ["x"], "annotations": {sources.ANNOTATION: good}}},
        {"metadata": {"name": "n1", "annotations": [1]}},  # no annotations object: not annotated
        {"metadata": {"name": "n2", "annotations": {sources.ANNOTATION: 5}}},
        {"metadata": {"name": "n3", "annotations": {sources.ANNOTATION: "{"}}},
        {"metadata": {"name": "n4", "annotations": {sources.ANNOTATION: '{"s":"fp1","n":[1]}'}}},
        {"metadata": {"name": "n5", "annotations": {sources.ANNOTATION: '{"s":"fp1","n":{"kernel":[1]}}'}}},
        {"metadata": {"name": "n6", "annotations": {sources.ANNOTATION: '{"s":"fp1","pool":7}'}}},
        {"metadata": {"name": "n7", "annotations": {sources.ANNOTATION: "[" * 100000}}},
        {"metadata": {"name": "n8", "annotations": {sources.ANNOTATION: "x" * 100000}}},
        {"metadata": {"name": "n9", "annotations": {sources.ANNOTATION: '{"s":"fp1","p":{"a":"x"}}'}}},
    ]
    got = list(sources.from_nodes(iter(nodes), None))
    entries = [e for e in got if isinstance(e, sources.Entry)]
    errors = [str(e) for e in got if isinstance(e, sources.SourceError)]
    assert [e[0] for e in entries] == ["ok-1", "ok-2"]
    assert len(errors) == 11, errors
    for n in ("n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"):
        assert any(e.startswith(f"node {n}: annotation") for e in errors), (n, errors)


def test_malformed_prometheus_series_are_named_and_left_out():
    series = [
        {"metric": {"__name__": "rdmadoctor_node_info", "node": "a", "kernel": "5.15"}},
        {"metric": {"__name__": "rdmadoctor_node_info", "node": "b", "kernel": "5.15"}},
        1, {"metric": [1]}, {"metric": {"node": 5}}, {"metric": {"__name__": "rdmadoctor_node_info", "node": ["x"]}},
    ]
    got = list(sources.from_prometheus_series(series, None))
    assert [e[0] for e in got if isinstance(e, sources.Entry)] == ["a", "b"]
    assert sum(isinstance(e, sources.SourceError) for e in got) == 4  # three named, then "1 more"
    assert [type(e).__name__ for e in sources.from_prometheus_series({"x": 1}, None)] == ["SourceError"]


# ---- bounded: regular files only, stdin a chunk at a time ---------------------------------------------
def test_a_symlink_to_a_device_and_a_fifo_are_named_not_read(tmp_path, report):
    _good(tmp_path, report)
    os.symlink("/dev/zero", tmp_path / "zero.json")
    os.mkfifo(tmp_path / "fifo.json")
    os.mkfifo(tmp_path / "fifo.tar.gz")
    # A subprocess: were the FIFO opened, it would block; the test would end at the timeout.
    p = subprocess.run([str(RDMADOCTOR), "fleet", str(tmp_path), str(tmp_path / "fifo.tar.gz")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "zero.json: a character device, not a regular file" in p.stdout
    assert "fifo.json: a FIFO, not a regular file" in p.stdout and "fifo.tar.gz: a FIFO" in p.stdout
    assert "pool roce: 3 nodes" in p.stdout


def test_stdin_of_zeros_is_refused_at_its_first_chunk():
    with open("/dev/zero", "rb") as zero:
        p = subprocess.run([str(RDMADOCTOR), "fleet", "-"], stdin=zero, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "stdin: not JSON" in p.stdout and "Traceback" not in p.stderr, (p.stdout, p.stderr)


def test_stdin_is_read_in_chunks_and_capped():
    import io

    docs = list(sources.stream_documents(io.StringIO('{"a": 1}\n' * 5 + '[{"b": 2}, {"c": 3}]'), "stdin"))
    assert docs == [{"a": 1}] * 5 + [{"b": 2}, {"c": 3}]
    with pytest.raises(sources.SourceError, match="more than"):
        list(sources.stream_documents(io.StringIO('{"a": 1}\n' * 1000), "stdin", max_total=100))
    with pytest.raises(sources.SourceError, match="a JSON document over"):
        list(sources.stream_documents(io.StringIO('{"a": "' + "x" * (3 << 20)), "stdin", max_document=1 << 20))


# ---- escaped: names cannot forge lines or move the cursor -----------------------------------------
def test_names_and_values_are_escaped_in_text(tmp_path, report):
    evil = "node-1\nfleet: no drift (9 nodes in 1 pool)\x1b[2J\x9b31m\u202eevil"
    reps = [_named(report, n) for n in ("node-0", evil, "node-2")]
    reps[1]["fingerprint"]["node"]["kernel"] = "6.1\r\nfleet: no drift\u2066"
    reps[1]["fingerprint"]["pool"] = "roce"
    for i, r in enumerate(reps):
        (tmp_path / f"r{i}.json").write_text(json.dumps(r))
    (tmp_path / "bad\x1b]0;title\x07.json").write_text("{")
    code, out, err = run_cli(["fleet", str(tmp_path)])
    assert code == 1, out
    assert [line for line in out.splitlines() if line.startswith("fleet:")] == [out.splitlines()[-1]]
    assert out.splitlines()[-1].startswith("fleet: drift")
    bad = [c for c in out if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) <= 0x9F or c in "\u202e\u2066"]
    assert bad == [], bad
    assert "\\x1b[2J" in out and "\\u202e" in out and "\\x0a" in out


# ---- one report per node (issue 32, item 5) ---------------------------------------------------------
def test_a_node_given_three_times_is_one_node_and_the_newest_report_wins(tmp_path, report):
    a = _named(report, "node-a", "2026-01-01T00:00:00Z")
    newer = _named(report, "node-a", "2026-01-02T00:00:00Z")
    newer["fingerprint"]["ports"][0]["fw_ver"] = "99.99.9999"
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "a-new.json").write_text(json.dumps(newer))
    for n in ("r1", "r2"):
        (tmp_path / f"{n}.json").write_text(json.dumps(_named(report, n)))
    a_path, r1 = str(tmp_path / "a.json"), str(tmp_path / "r1.json")
    code, out, err = run_cli(["fleet", "--json", a_path, a_path, a_path, r1])
    res = json.loads(out)
    assert res["pools"][0]["nodes"] == 2 and [s["node"] for s in res["set_aside"]] == ["node-a", "node-a"]
    # The newest of node-a's reports is the one compared, whatever the order they come in.
    for order in (["a.json", "a-new.json"], ["a-new.json", "a.json"]):
        paths = [str(tmp_path / p) for p in (*order, "r1.json", "r2.json")]
        code, out, err = run_cli(["fleet", "--json", *paths])
        res = json.loads(out)
        assert code == 1 and res["pools"][0]["nodes"] == 3
        assert {(o["node"], o["value"]) for o in res["outliers"]} == {("node-a", "99.99.9999")}
        assert res["set_aside"] == [{"node": "node-a", "input": str(tmp_path / "a.json"), "kept": str(tmp_path / "a-new.json")}]
    code, out, err = run_cli(["fleet", *paths])
    assert f"note: {tmp_path / 'a.json'}: another report of node node-a" in out and "set aside" in out


def test_a_diagnose_document_is_skipped_with_a_note(tmp_path, report):
    log = tmp_path / "job.log"
    log.write_text("NCCL WARN NET/IB : Got completion from peer 10.0.0.2<45678> with status=12 opcode=0 len=0 vendor err 129\n")
    code, out, err = run_cli(["diagnose", "--json", str(log)])
    (tmp_path / "diag.json").write_text(out)
    _good(tmp_path, report)
    code, out, err = run_cli(["fleet", str(tmp_path)])
    assert code == 0 and "pool roce: 3 nodes" in out, out
    assert "note: " in out and "diag.json: a report about logs" in out and "skipped" in out


# ---- a secured Prometheus ---------------------------------------------------------------------------
def _series(nodes: int = 3, odd: str | None = None) -> list[dict]:
    out = []
    for i in range(nodes):
        name = f"gpu-{i}"
        out.append({"metric": {"__name__": "rdmadoctor_node_info", "node": name, "pool": "hgx", "kernel": "5.15.0"}, "value": [0, "1"]})
        out.append({"metric": {"__name__": "rdmadoctor_hca_info", "node": name, "pool": "hgx", "device": "mlx5_0", "port": "1",
                               "fw_version": "28.41.1000" if name != odd else "28.39.1000"}, "value": [0, "1"]})
    return out


class FakePrometheus:
    """A loopback stand-in for Prometheus' /api/v1/query behind an authenticating proxy: it
    answers the info series only to a request with the expected Authorization header (or, over
    TLS, any request that got through the client-certificate handshake). ``mode`` makes it
    misbehave: "notjson", "error", "drip", "endless", "huge"."""

    def __init__(self, auth: str | None = None, tls: ssl.SSLContext | None = None, series: list | None = None):
        self.auth = auth
        self.mode = None
        self.series = series if series is not None else _series(odd="gpu-1")
        self.seen: list[str | None] = []
        self.stop = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                fake.seen.append(self.headers.get("Authorization"))
                if fake.auth is not None and self.headers.get("Authorization") != fake.auth:
                    body = b'{"status":"error","error":"unauthorized"}'
                    self.send_response(401)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if fake.mode == "drip":
                    self.send_response(200)
                    self.send_header("Content-Length", "1000000")
                    self.end_headers()
                    while not fake.stop.is_set():
                        try:
                            self.wfile.write(b" ")
                            self.wfile.flush()
                        except OSError:
                            return
                        fake.stop.wait(0.2)
                    return
                if fake.mode == "endless":
                    self.send_response(200)
                    self.end_headers()
                    chunk = b'{"metric":{"node":"x"}},' * 4000
                    try:
                        self.wfile.write(b'{"status":"success","data":{"result":[')
                        while not fake.stop.is_set():
                            self.wfile.write(chunk)
                    except OSError:
                        return
                    return
                body = {"notjson": b"<html>login</html>", "error": b'{"status":"error","error":"bad\\nquery"}'}.get(
                    fake.mode, json.dumps({"status": "success", "data": {"resultType": "vector", "result": fake.series}}).encode())
                self.send_response(200)
                self.send_header("Content-Length", str(len(body) if fake.mode != "huge" else 1 << 40))
                self.end_headers()
                if fake.mode != "huge":
                    self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakePrometheus":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(30)


def test_prometheus_behind_a_bearer_token(tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    with FakePrometheus(auth="Bearer s3cret-token") as prom:
        code, out, err = run_cli(["fleet", "--prometheus", prom.url])
        assert code == 2 and "refused the query (HTTP 401) without credentials" in err and "--bearer-token-file" in err
        code, out, err = run_cli(["fleet", "--prometheus", prom.url, "--bearer-token-file", str(token), "--json"])
        assert code == 1, err
        assert {o["node"] for o in json.loads(out)["outliers"]} == {"gpu-1"}
        cfg = tmp_path / "http.yml"
        cfg.write_text("# promtool --http.config.file\nauthorization:\n  type: Bearer\n  credentials_file: token   # beside this file\n")
        code, out, err = run_cli(["fleet", "--prometheus", prom.url, "--http-config", str(cfg)])
        assert code == 1 and "gpu-1" in out, err
        wrong = tmp_path / "wrong"
        wrong.write_text("nope")
        code, out, err = run_cli(["fleet", "--prometheus", prom.url, "--bearer-token-file", str(wrong)])
        assert code == 2 and "with a bearer token" in err and "nope" not in err
        assert prom.seen.count("Bearer s3cret-token") == 2


def test_prometheus_behind_basic_auth_and_refused_config_keys(tmp_path):
    import base64

    (tmp_path / "pw").write_text("hunter2\n")
    with FakePrometheus(auth="Basic " + base64.b64encode(b"reader:hunter2").decode()) as prom:
        cfg = tmp_path / "http.yml"
        cfg.write_text('basic_auth:\n  username: "reader"\n  password_file: pw\n')
        code, out, err = run_cli(["fleet", "--prometheus", prom.url, "--http-config", str(cfg)])
        assert code == 1 and "gpu-1" in out, err
        cfg.write_text("oauth2:\n  client_id: x\n")
        code, out, err = run_cli(["fleet", "--prometheus", prom.url, "--http-config", str(cfg)])
        assert code == 2 and "oauth2 is not supported" in err
        cfg.write_text("basic_auth:\n  username: reader\n  passwd: x\n")
        code, out, err = run_cli(["fleet", "--prometheus", prom.url, "--http-config", str(cfg)])
        assert code == 2 and "basic_auth.passwd is not supported" in err
    code, out, err = run_cli(["fleet", "reports/", "--bearer-token-file", str(tmp_path / "pw")])
    assert code == 2 and "credentials of --prometheus" in err


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=120)


@pytest.fixture
def pki(tmp_path) -> Path:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path / "pki"
    d.mkdir()
    # The extensions Python 3.13's strict verification (VERIFY_X509_STRICT) asks of a CA and its
    # certificates: key usage on the CA, an authority key identifier on each leaf.
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=test-ca",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    leaf = "basicConstraints=CA:FALSE\nauthorityKeyIdentifier=keyid,issuer\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
    (d / "server.ext").write_text(leaf + "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n")
    (d / "client.ext").write_text(leaf + "extendedKeyUsage=clientAuth\n")
    for name in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", f"{name}.crt",
                 "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    return d


def test_prometheus_over_tls_with_its_ca_and_a_client_certificate(tmp_path, pki):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki / "server.crt", pki / "server.key")
    ctx.load_verify_locations(pki / "ca.crt")
    ctx.verify_mode = ssl.CERT_REQUIRED  # no client certificate, no answer
    with FakePrometheus(tls=ctx) as prom:
        cfg = tmp_path / "http.yml"
        cfg.write_text(f"tls_config:\n  ca_file: {pki / 'ca.crt'}\n  cert_file: {pki / 'client.crt'}\n  key_file: {pki / 'client.key'}\n")
        code, out, err = run_cli(["fleet", "--prometheus", prom.url, "--http-config", str(cfg)])
        assert code == 1 and "gpu-1" in out, err
        cfg.write_text(f"tls_config:\n  ca_file: {pki / 'ca.crt'}\n")  # no client certificate
        code, out, err = run_cli(["fleet", "--prometheus", prom.url, "--http-config", str(cfg)])
        assert code == 2 and "Prometheus at" in err and "Traceback" not in err, err
        code, out, err = run_cli(["fleet", "--prometheus", prom.url])  # not its CA: the server is not trusted
        assert code == 2 and "CERTIFICATE_VERIFY_FAILED" in err, err


def test_prometheus_answers_that_are_not_answers_are_named(monkeypatch):
    import rdmadoctor.fleet as fleet
    import rdmadoctor.fleet.prometheus as P

    monkeypatch.setattr(fleet, "TIMEOUT", 3.0)
    monkeypatch.setattr(P, "MAX_ANSWER_BYTES", 1 << 20)
    with FakePrometheus() as prom:
        for mode, said in (("notjson", "not JSON"), ("error", "answered bad\\x0aquery"), ("huge", "more than 1 MiB"),
                           ("endless", "passed 1 MiB"), ("drip", "no complete answer within 3 s")):
            prom.mode = mode
            code, out, err = run_cli(["fleet", "--prometheus", prom.url])
            assert code == 2 and said in err and "Traceback" not in err, (mode, err)
        prom.mode = None
        prom.series = [{"metric": {"__name__": "rdmadoctor_node_info", "node": ["x"]}}, *_series()]
        code, out, err = run_cli(["fleet", "--prometheus", prom.url])
        assert code == 2 and "series #1 of the answer" in out and "pool hgx: 3 nodes" in out, (out, err)


def test_a_real_prometheus_with_tls_client_certificates(tmp_path, pki):
    """Debian's Prometheus serving its API over TLS that demands a client certificate
    (--web.config.file): `fleet --prometheus` reads it with --http-config's tls_config. The
    server has no series of ours: the answer is "no rdmadoctor_node_info series"."""
    from system.test_monitoring import _free_port, _stop, _tool, _until

    prometheus = _tool("prometheus")
    port = _free_port()
    (tmp_path / "web.yml").write_text(
        f"tls_server_config:\n  cert_file: {pki / 'server.crt'}\n  key_file: {pki / 'server.key'}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {pki / 'ca.crt'}\n")
    (tmp_path / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\n")
    cfg = tmp_path / "http.yml"
    cfg.write_text(f"tls_config:\n  ca_file: {pki / 'ca.crt'}\n  cert_file: {pki / 'client.crt'}\n  key_file: {pki / 'client.key'}\n")
    proc = subprocess.Popen(
        [prometheus, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", f"--web.config.file={tmp_path / 'web.yml'}"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "wb"),
    )
    try:
        url = f"https://127.0.0.1:{port}"

        def ready():
            if proc.poll() is not None:
                raise AssertionError("prometheus exited: " + (tmp_path / "prometheus.log").read_text()[-2000:])
            code, out, err = run_cli(["fleet", "--prometheus", url, "--http-config", str(cfg)])
            return (code, out) if "no rdmadoctor_node_info series" in out else None

        code, out = _until("Prometheus answers over TLS", ready, timeout=120)
        assert code == 2
        code, out, err = run_cli(["fleet", "--prometheus", url])  # neither its CA nor a client certificate
        assert code == 2 and "Prometheus at" in err and "Traceback" not in err
    finally:
        _stop(proc)


def test_exit_code_is_1_only_for_drift():
    assert exit_code({"outliers": [], "errors": ["x"], "pools": [{"undecided": [], "compared": True}]}) == 2
