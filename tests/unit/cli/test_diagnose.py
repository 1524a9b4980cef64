"""`rdmadoctor diagnose` end to end, as a person runs it: real processes, files, pipes, exit codes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import jsonschema
import pytest
from conftest import run_cli

HERE = os.path.dirname(os.path.abspath(__file__))

FAILED_JOB = "\n".join([
    "gpu-a:10:10 [0] NCCL INFO NCCL version 2.18.5+cuda12.2",
    "gpu-a:10:10 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>",
    "gpu-a:10:10 [0] NCCL INFO Using network IB",
    "gpu-a:10:10 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
    "gpu-a:10:99 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<41000> with error 12, opcode 0, len 0, vendor err 129",
    "gpu-a:10:99 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<41000> with error 5, opcode 0, len 0, vendor err 249",
    "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.",
]) + "\n"

SOCKET_JOB = "\n".join([
    "gpu-a:10:10 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
    "gpu-a:10:10 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
    "gpu-a:10:10 [0] NCCL INFO Using network Socket",
    "gpu-a:10:10 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
]) + "\n"


def rd(*args: str, stdin: bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD="1")
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "rdmadoctor", *args], input=stdin, capture_output=True, env=e)


def schema() -> dict:
    with open(os.path.join(HERE, "..", "..", "..", "rdmadoctor", "output", "schema.json"), encoding="utf-8") as f:
        return json.load(f)


def findings(rep: dict) -> list[dict]:
    """The findings about the job (LOGS_READ, the info line about the files read, left out)."""
    return [f for c in rep["checks"] for f in c["findings"] if f["code"] != "LOGS_READ"]


def test_a_failed_job_from_a_file_root_cause_first(tmp_path) -> None:
    log = tmp_path / "job.log"
    log.write_text(FAILED_JOB)
    out = rd("diagnose", str(log), "--json")
    assert out.returncode == 1, out.stderr
    rep = json.loads(out.stdout)
    jsonschema.validate(rep, schema())
    fs = findings(rep)
    assert [(f["code"], f["subject"].split(",")[0]) for f in fs][:3] == [
        ("NCCL_IB_COMPLETION_ERROR", "status 12 IBV_WC_RETRY_EXC_ERR"),
        ("NCCL_IB_COMPLETION_ERROR", "status 5 IBV_WC_WR_FLUSH_ERR"),
        ("NCCL_TIMEOUT", "rank 0"),
    ]
    assert fs[2]["cause"] == "NCCL_IB_COMPLETION_ERROR"  # the watchdog fired because of the failed transfer
    assert fs[1]["cause"] == "NCCL_IB_COMPLETION_ERROR" and fs[0].get("cause") is None
    assert fs[0]["data"]["evidence"][0] == {
        "file": str(log), "line": 5, "host": "gpu-a", "rank": None, "time": None,
        "text": FAILED_JOB.splitlines()[4],
    }
    assert rep["nccl"]["version"] == "2.18.5" and rep["nccl"]["network"] == "IB" and rep["nccl"]["gdr"] is True
    assert rep["host"]["kind"] == "logs"
    assert [c["id"] for c in rep["checks"]] == ["logs.diagnose"]


def test_text_output_folds_the_flushed_completion_under_the_retry_error(tmp_path) -> None:
    log = tmp_path / "job.log"
    log.write_text(FAILED_JOB)
    out = rd("diagnose", str(log))
    text = out.stdout.decode()
    assert out.returncode == 1
    assert "NCCL 2.18.5 uses NET/IB on mlx5_0, mlx5_1 (InfiniBand) with GPUDirect RDMA" in text
    i12, i5 = text.index("status 12 IBV_WC_RETRY_EXC_ERR"), text.index("status 5 IBV_WC_WR_FLUSH_ERR")
    assert i12 < i5 and "follows from NCCL_IB_COMPLETION_ERROR: NCCL_IB_COMPLETION_ERROR status 5" in text
    assert f"seen at {log}:5 (host gpu-a):" in text


def test_stdin_gzip_crlf_and_colour_read_the_same() -> None:
    plain = json.loads(rd("diagnose", "--json", stdin=FAILED_JOB.encode()).stdout)
    mangled = "\r\n".join("\x1b[33m" + ln + "\x1b[0m" for ln in FAILED_JOB.splitlines()) + "\r\n"
    other = json.loads(rd("diagnose", "-", "--json", stdin=gzip.compress(mangled.encode())).stdout)
    key = lambda rep: [(f["code"], f["subject"], f.get("cause")) for f in findings(rep)]  # noqa: E731
    assert key(plain) == key(other) and plain["nccl"] == other["nccl"]


def test_socket_fallback_is_loud(tmp_path) -> None:
    out = rd("diagnose", "--json", stdin=SOCKET_JOB.encode())
    rep = json.loads(out.stdout)
    assert out.returncode == 1
    assert [f["code"] for f in findings(rep)] == ["NCCL_SOCKET_FALLBACK"]
    assert rep["nccl"]["network"] == "Socket" and rep["nccl"]["socket_ifaces"] == ["eth0"] and rep["nccl"]["gdr"] is False
    text = rd("diagnose", stdin=SOCKET_JOB.encode()).stdout.decode()
    assert "WARNING: NCCL 2.21.5 uses NET/Socket over eth0" in text


def test_a_clean_log_exits_0() -> None:
    out = rd("diagnose", "--json", stdin=b"gpu-a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\ngpu-a:1:1 [0] NCCL INFO Using network IB\n")
    assert out.returncode == 0, out.stderr
    assert findings(json.loads(out.stdout)) == []


@pytest.mark.parametrize("make,needle", [
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: None, "no such file"),
    (lambda p: p.write_bytes(b""), "every input was empty"),
    (lambda p: p.write_bytes(b"\x7fELF" + b"\x00" * 9000), "binary data"),
    (lambda p: p.write_bytes(gzip.compress(b"x" * 100000)[:12]), "cut short"),
])
def test_nothing_readable_exits_2_with_the_reason(tmp_path, make, needle) -> None:
    p = tmp_path / "in.log"
    make(p)
    out = rd("diagnose", str(p))
    err = out.stderr.decode()
    assert out.returncode == 2 and needle in err and "Traceback" not in err
    assert out.stdout == b""


def test_one_bad_file_among_good_ones_is_a_warning_not_the_end(tmp_path) -> None:
    good = tmp_path / "good.log"
    good.write_text(FAILED_JOB)
    out = rd("diagnose", str(good), str(tmp_path / "missing.log"), "--json")
    assert out.returncode == 1
    assert "missing.log: no such file" in out.stderr.decode()
    rep = json.loads(out.stdout)
    assert {s["name"]: s["error"] for s in rep["inventory"]["logs"]["sources"]}[str(tmp_path / "missing.log")]


def test_no_log_on_a_terminal_is_a_usage_error() -> None:
    from rdmadoctor.cli.diagnose import run_diagnose

    class Tty:
        def isatty(self) -> bool:
            return True

    old = sys.stdin
    sys.stdin = Tty()  # type: ignore[assignment]
    try:
        assert run_diagnose(files=[]) == 2
    finally:
        sys.stdin = old


def test_with_a_node_the_checks_run_too_and_the_report_has_both(tmp_path) -> None:
    log = tmp_path / "job.log"
    log.write_text(SOCKET_JOB)
    out = rd("diagnose", str(log), "--example", "hgx-h100-ib", "--json")
    rep = json.loads(out.stdout)
    ids = [c["id"] for c in rep["checks"]]
    assert "ib.ports" in ids and "logs.diagnose" in ids
    assert rep["host"]["kind"] == "bundle" and rep["nccl"]["network"] == "Socket"
    fb = [f for f in findings(rep) if f["code"] == "NCCL_SOCKET_FALLBACK"]
    assert fb and "ACTIVE" in fb[0]["message"]  # joined with the node: it has ACTIVE ports


def test_list_patterns_and_explain_know_every_code() -> None:
    # In-process (conftest.run_cli runs the console entry point, fast path and typer alike): one
    # process per code took 6 s, 17 s under load.
    code, out, err = run_cli(["list-patterns", "--json"])
    assert code == 0, err
    rows = json.loads(out)["patterns"]
    assert len(rows) >= 40 and {r["source"] for r in rows} >= {"nccl", "verbs", "ibtools", "pytorch", "kernel", "ucx",
                                                         "nvshmem", "ofi", "nccltests"}
    for c in sorted({r["code"] for r in rows}) + ["NCCL_SOCKET_FALLBACK", "NCCL_GDR_DISABLED", "NCCL_IB_COMPLETION_ERROR",
                                                  "NCCL_SHM_FAILED", "NCCL_QP_CQ_CREATE_FAILED", "NCCL_REG_MR_FAILED",
                                                  "NCCL_TIMEOUT"]:
        ex_code, ex_out, ex_err = run_cli(["explain", c])
        assert ex_code == 0 and c in ex_out, (c, ex_err)


def test_a_100_mb_line_is_read_in_bounded_memory_and_the_next_line_counts(tmp_path) -> None:
    log = tmp_path / "flood.log"
    with open(log, "wb") as f:
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            f.write(chunk)
        f.write(b"\n" + FAILED_JOB.splitlines()[4].encode() + b"\n")
    code = (
        "import json, resource, sys\n"
        "from rdmadoctor.cli.diagnose import run_diagnose\n"
        "import rdmadoctor.checks.logs, rdmadoctor.logs.scan\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"rc = run_diagnose(files=[{str(log)!r}], as_json=True)\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "sys.stderr.write(json.dumps([rc, before, after]))\n"
    )
    # A clean environment: no PYTHON* setting (a tracemalloc or debug allocator) from the caller.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env)
    rc, before, after = json.loads(out.stderr.decode().splitlines()[-1])
    rep = json.loads(out.stdout)
    assert rc == 1 and [(f["code"], f["data"]["evidence"][0]["line"]) for f in findings(rep)] == [("NCCL_IB_COMPLETION_ERROR", 2)]
    # Reading it adds a few MiB at most (a line's first 64 KiB and a chunk in flight), never the line.
    assert after - before < 32 * 1024, (before, after)


def test_a_progress_line_shows_on_a_terminal_for_a_big_input(tmp_path, monkeypatch) -> None:
    import io

    from rdmadoctor.cli import diagnose as cli

    big = tmp_path / "big.log"
    big.write_bytes(b"filler line of a training loop\n" * ((cli.PROGRESS_MIN_BYTES // 31) + 10))

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    tick = cli._progress([str(big)])
    assert tick is not None
    for _ in range(3):
        tick(big.stat().st_size // 3)
    tick(big.stat().st_size)
    text = err.getvalue()
    assert "\rrdmadoctor: reading" in text and text.endswith("(100%)\n")
    small = tmp_path / "small.log"
    small.write_text("x\n")
    assert cli._progress([str(small)]) is None  # small inputs: no progress line
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert cli._progress([str(big)]) is None  # not a terminal: no progress line
