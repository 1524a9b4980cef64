"""NCCL's RAS: the report parser (recorded public reports, and reports built from NCCL's format
strings), the client against a stand-in RAS socket on loopback (tests/ras_standin.py: no NCCL runs
here), `rdmadoctor run` naming a live hang, and `diagnose` reading pasted reports. Nothing waits
on the clock: each wait polls for a condition with a generous deadline."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT, run_cli
from ras_standin import RasStandin, hang_job, healthy_job, json_report, text_report

from rdmadoctor.logs.ras import judge_report
from rdmadoctor.parsers import ncclras
from rdmadoctor.supervise import ras
from rdmadoctor.supervise.hang import port_changes

FIX = ROOT / "tests" / "fixtures" / "ncclras"
PY = sys.executable


def codes(findings) -> list[tuple[str, str]]:
    return [(f.code, f.subject) for f in findings]


# --- the parser and the judge ------------------------------------------------------------------------


def test_recorded_mismatch_names_the_ranks_behind_not_the_outliers_ahead():
    """nccl#1911: NCCL lists ranks 12 and 13 (ahead at 641); the 30 at 640 are the stragglers."""
    rep = ncclras.parse((FIX / "nccl-1911-mismatch.txt").read_text())
    assert rep.format == "text" and rep.nccl_version == "2.26.2" and (rep.nodes, rep.processes) == (4, 32)
    (op, groups), = rep.comms[0].op_counts
    assert op == "AllGather" and [(g.value, g.count, len(g.ranks)) for g in groups] == [(640, 30, 0), (641, 2, 2)]
    (f,) = judge_report(rep)
    assert f.code == "NCCL_RAS_STRAGGLER" and f.severity == "warning"
    assert "30 ranks are behind at AllGather operation 640" in f.message
    assert "are ahead and only waiting" in f.message and "10.137.190.124" in f.message


def test_recorded_healthy_report_beside_a_watchdog_is_never_healthy():
    """nccl#1730: RAS shows every communicator OK while PyTorch's watchdog timed out."""
    rep = ncclras.parse((FIX / "nccl-1730-healthy-beside-watchdog.txt").read_text())
    assert rep.healthy and rep.nodes == 32
    (alone,) = judge_report(rep)
    assert alone.code == "NCCL_RAS_QUIET" and alone.severity == "info" and "sees nothing wrong" in alone.message
    (beside,) = judge_report(rep, hang="PyTorch's watchdog: timeout")
    assert "sees nothing wrong" in beside.message and "yet the job hangs" in beside.message
    assert "healthy" not in beside.message.replace("looks healthy to it", "")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_one_dead_rank_and_two_stragglers_in_text_and_json(fmt):
    job = hang_job()
    rep = ncclras.parse(text_report(job) if fmt == "text" else json_report(job))
    assert rep.format == fmt
    found = judge_report(rep, hang="no output")
    assert [f.code for f in found] == ["NCCL_RAS_PROCESS_DEAD", "NCCL_RAS_STRAGGLER"]
    dead, behind = found
    assert dead.subject == "rank 5 on 10.0.0.2" and dead.data["ranks"][0] == {"rank": 5, "gpu": "1", "pid": 2005, "node": "10.0.0.2"}
    assert [r["rank"] for r in behind.data["ranks"]] == [2, 6] and behind.data["behind_at"] == 120
    assert behind.severity == "error"  # beside a hang
    assert behind.data["nodes"] == ["10.0.0.1", "10.0.0.2"]


def test_async_errors_per_rank_and_old_formats():
    job = hang_job()
    job.dead, job.async_errors = set(), {3: 2, 4: 6}
    found = judge_report(ncclras.parse(text_report(job)))
    errs = [f for f in found if f.code == "NCCL_RAS_RANK_ERROR"]
    assert errs[0].data["error"] == "System error" and errs[0].cause is None
    assert errs[1].data["error"] == "Remote process error" and errs[1].cause == "NCCL_RAS_RANK_ERROR"
    # 2.24-2.25: one count for all collectives, missing ranks as a list.
    old = ("NCCL version 2.24.3 compiled with CUDA 12.4\n\nErrors\n======\n\n#0-0 (00000000000000ab) INCOMPLETE\n"
           "  Missing communicator data from 2 ranks\n  The missing ranks: 3,7\n\nWarnings\n========\n\n"
           "#0-0 (00000000000000ab) MISMATCH\n  Communicator ranks have different collective operation counts\n"
           "  6 ranks have launched up to operation 10\n  Rank 1 has launched up to operation 9 -- GPU 1 managed by process "
           "77 on node 10.9.9.9\n")
    rep = ncclras.parse(old)
    assert [r.rank for r in rep.comms[0].missing_ranks] == [3, 7]
    assert [f.code for f in judge_report(rep)] == ["NCCL_RAS_RANK_MISSING", "NCCL_RAS_STRAGGLER"]


def test_parser_is_bounded_on_hostile_input():
    assert ncclras.parse("") is None and ncclras.parse("{not json") is None
    long = "NCCL version 2.28.9 compiled with CUDA 12.9\n" + "  Rank 1 -- " + "x" * (1 << 20) + "\n" + "=" * 100000
    rep = ncclras.parse(long)
    assert rep is not None and not rep.complete
    assert judge_report(rep)[0].code == "NCCL_RAS_UNAVAILABLE"


def test_port_changes_name_the_port_that_went_down():
    before = {"mlx5_1/1": {"state": "ACTIVE", "phys_state": "LinkUp", "counters": {"link_downed": 0}}}
    now = {"mlx5_1/1": {"state": "DOWN", "phys_state": "Polling", "counters": {"link_downed": 2}}}
    assert port_changes(before, now) == ["mlx5_1/1 is DOWN (Polling) (ACTIVE when the job started)", "mlx5_1/1 link_downed +2"]
    assert port_changes(before, now, {"mlx5_1/1": "10:41:07"})[0] == "mlx5_1/1 is DOWN (Polling) since 10:41:07 (ACTIVE when the job started)"


# --- the client --------------------------------------------------------------------------------------


@pytest.fixture
def standin():
    servers = []

    def make(job, **kw):
        s = RasStandin(job, **kw).start()
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()


def test_client_asks_json_and_falls_back_to_text_on_old_nccl(standin):
    s = standin(hang_job())
    got = ras.ask("127.0.0.1", s.port)
    assert got["format"] == "json" and json.loads(got["text"])["nccl_version"] == "2.28.9"
    assert s.commands[:4] == ["CLIENT PROTOCOL 2", "TIMEOUT 5", "SET FORMAT json", "STATUS"]
    old = standin(hang_job(), json=False)
    got = ras.ask("127.0.0.1", old.port)
    assert got["format"] == "text" and got["text"].startswith("NCCL version 2.28.9")
    assert old.commands[-1] == "VERBOSE STATUS"  # more outliers named in the text report


def test_client_deadlines_and_refusals(standin):
    quiet = standin(hang_job(), silent=True)
    with pytest.raises(ras.RasError, match="did not answer in time"):
        ras.ask("127.0.0.1", quiet.port, deadline_s=1.0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(ras.RasError, match="nothing answers"):
            ras.ask("127.0.0.1", port)
    assert ras.address({}) == ("localhost", 28028)
    assert ras.address({"NCCL_RAS_ADDR": "[::1]:29000"}) == ("::1", 29000)
    with pytest.raises(ras.RasError):
        ras.address({"NCCL_RAS_ADDR": "host:99999"})


# --- rdmadoctor run ----------------------------------------------------------------------------------

CHILD = """\
import os, sys, time
go = sys.argv[2]
print("NCCL version 2.28.9+cuda12.9", flush=True)
print("node1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0+mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>", flush=True)
for line in sys.argv[3:]:
    print(line, flush=True)
deadline = time.monotonic() + 120
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.05)
print("resumed", flush=True)
"""


def run_until_asked(tmp_path: Path, server: RasStandin, root: str, hang_after: str, *lines: str, extra: tuple = (),
                    during=None) -> tuple[str, dict]:
    script = tmp_path / "job.py"
    script.write_text(CHILD)
    go = tmp_path / "go"
    report = tmp_path / "run.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env.update(NCCL_RAS_ADDR=f"127.0.0.1:{server.port}", RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD="1")
    args = [PY, "-m", "rdmadoctor", "run", "--no-gate", "--set", f"hang_after_s={hang_after}", "--report-file", str(report), *extra]
    if root != "-":
        args += ["--root", root]
    p = subprocess.Popen([*args, "--", PY, str(script), root, str(go), *lines], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not server.queries:
            assert time.monotonic() < deadline and p.poll() is None, "RAS was never asked"
            time.sleep(0.05)
        if during is not None:
            during(p)
        go.write_text("go")  # the watcher finishes what it says before rdmadoctor exits (HangWatch.stop joins it)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    return getattr(p, "early", b"").decode() + err.decode(), json.loads(report.read_text())


def test_run_names_the_dead_rank_and_the_stragglers_with_this_nodes_ports(tmp_path, standin):
    root = tmp_path / "root"
    shutil.copytree(ROOT / "tests" / "fixtures" / "healthy-ib", root, symlinks=True)
    hold = threading.Event()
    server = standin(hang_job(), hold=hold)
    scraped = []

    def scrape(p):
        got = b""
        while b"/metrics" not in got:  # said once the ports are read, before CMD starts
            got += p.stderr.read1(4096)
        # RAS is being asked: the port goes down now, before the answer and the node's second reading.
        (root / "sys/class/infiniband/mlx5_1/ports/1/state").write_text("1: DOWN\n")
        hold.set()
        port = int(got.split(b"metrics on :")[1].split(b"/")[0])
        deadline = time.monotonic() + 60
        while not any(x.startswith("rdmadoctor_job_hang{") and x.endswith(" 1.0") for x in scraped):
            assert time.monotonic() < deadline, scraped
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                scraped[:] = r.read().decode().splitlines()
        p.early = got

    err, report = run_until_asked(tmp_path, server, str(root), "1", extra=("--metrics-port", "0", "--json"), during=scrape)
    assert 'rdmadoctor_job_hang{blamed_node="10.0.0.2"} 1.0' in scraped and "rdmadoctor_job_hangs_total 1.0" in scraped
    assert server.queries[0] == "json"
    assert "rdmadoctor: the job looks hung (no output for" in err and "NCCL's RAS blames 10.0.0.2, 10.0.0.1" in err
    assert "ERROR NCCL_RAS_PROCESS_DEAD rank 5 on 10.0.0.2" in err
    assert "ERROR NCCL_RAS_STRAGGLER 2 ranks on 10.0.0.1, 10.0.0.2" in err
    assert "this node: mlx5_1/1 is DOWN" in err and "(ACTIVE when the job started)" in err
    (hang,) = report["hangs"]
    assert hang["ras"]["format"] == "json" and hang["blamed_nodes"][0] == "10.0.0.2"
    assert [f["code"] for f in report["findings"][:3]] == ["JOB_HANG", "NCCL_RAS_PROCESS_DEAD", "NCCL_RAS_STRAGGLER"]
    assert report["findings"][1]["cause"] == "JOB_HANG"
    # --json: the same document, hangs and findings included, is the last line of stderr (issue 29).
    assert json.loads(err.rstrip("\n").rsplit("\n", 1)[-1]) == report


def test_run_says_a_quiet_ras_beside_a_watchdog_is_not_health(tmp_path, standin):
    server = standin(healthy_job(), json=False)
    watchdog = ("[rank3]:[E603 17:48:01.005271823 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation "
                "timeout: WorkNCCL(SeqNum=24, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600068 "
                "milliseconds before timing out.")
    err, report = run_until_asked(tmp_path, server, "-", "3600", watchdog)  # only the watchdog can say it hangs
    assert server.queries == ["text"]
    assert "the job looks hung (PyTorch's watchdog:" in err
    assert "NCCL_RAS_QUIET NCCL RAS: NCCL's RAS at 127.0.0.1" in err and "sees nothing wrong" in err and "yet the job hangs" in err
    assert "this node:" in err  # with what the node shows
    assert report["hangs"][0]["findings"][0]["code"] == "NCCL_RAS_QUIET"


def test_run_says_the_port_failover_as_it_happens(tmp_path, standin):
    server = standin(healthy_job())
    line = ("node1:1:1 [0] transport/net_ib/p2p_resiliency.cc:376 NCCL WARN NET/IB: Device 1 marked as failed. "
            "Initiating recovery? Yes (send comm=0x7f00, outstandingRecovery=0)")
    err, report = run_until_asked(tmp_path, server, "-", "1", line)
    assert "NCCL IB port failover: device 1 (mlx5_1) of a send communicator failed: the NIC mlx5_0+mlx5_1 runs on 1 of its 2 devices" in err
    assert report["failover"][0]["hca"] == "mlx5_1"
    assert any(f["code"] == "NCCL_IB_PORT_FAILOVER" for f in report["findings"])


def test_run_refuses_a_bad_hang_after_before_anything_runs():
    code, out, err = run_cli(["run", "--no-gate", "--set", "hang_after_s=-3", "--", "true"])
    assert code == 2 and "hang_after_s" in err and out == ""


# --- diagnose ----------------------------------------------------------------------------------------


def test_diagnose_reads_pasted_reports_and_failover_lines(tmp_path):
    code, out, err = run_cli(["diagnose", "--json", str(FIX / "nccl-1730-healthy-beside-watchdog.txt")])
    doc = json.loads(out)
    found = {f["code"]: f for c in doc["checks"] for f in c["findings"]}
    assert "NCCL_TIMEOUT" in found and "yet the job hangs" in found["NCCL_RAS_QUIET"]["message"]
    paste = tmp_path / "ticket.txt"
    paste.write_text("here is ncclras -f json:\n" + json_report(hang_job()) + "\n")
    code, out, err = run_cli(["diagnose", str(paste)])
    assert code == 1 and "NCCL_RAS_PROCESS_DEAD rank 5 on 10.0.0.2" in out and "NCCL_RAS_STRAGGLER" in out
    log = tmp_path / "job.log"
    log.write_text("gpu-3:812:901 [2] NCCL WARN NET/IB: Fatal error. Detected 2 failed devices out of 4 devices on the send "
                   "communicator (comm=0x7f3a2c001230). No support for more than a single failed device.\n")
    code, out, err = run_cli(["diagnose", str(log)])
    assert code == 1 and "NCCL_IB_FAILOVER_FATAL" in out


def test_a_prompted_paste_of_both_formats_is_one_set_of_findings(tmp_path):
    paste = tmp_path / "ticket.txt"
    paste.write_text("user@login:~$ ncclras\n" + text_report(hang_job()) + "user@login:~$ ncclras -f json\n" + json_report(hang_job()))
    code, out, err = run_cli(["diagnose", str(paste)])
    assert code == 1 and out.count("NCCL_RAS_PROCESS_DEAD rank 5 on 10.0.0.2") == 1 and out.count("NCCL_RAS_STRAGGLER") == 1


def test_the_watch_asks_ras_at_a_bounded_rate_while_the_hang_lasts(monkeypatch):
    """Silence from the start: the first question at once, then at most one per REPEAT_MIN_S (an
    upper bound on the count: a loaded machine only asks less)."""
    from rdmadoctor.supervise import hang

    monkeypatch.setattr(hang, "TICK_S", 0.02)
    monkeypatch.setattr(hang, "REPEAT_MIN_S", 0.3)
    asked: list[float] = []
    said: list[str] = []

    def ask(host, port):
        asked.append(time.monotonic())
        return {"format": "text", "text": text_report(healthy_job())}

    w = hang.HangWatch(0.05, said.append, env={}, ask=ask).start()
    start = time.monotonic()
    try:
        deadline = start + 60
        while len(asked) < 3:
            assert time.monotonic() < deadline, said
            time.sleep(0.02)
    finally:
        w.stop()
    elapsed = time.monotonic() - start
    assert len(asked) <= elapsed / 0.3 + 1
    assert said[0].startswith("the job looks hung (no output for") and any(x.startswith("still hung") for x in said)
    assert len(w.hangs) == 1 and w.hangs[0]["asked"] == len(asked) and w.state["hang"] == 1


def test_the_watch_notes_when_a_port_left_active(tmp_path, monkeypatch):
    from rdmadoctor.host import open_host
    from rdmadoctor.supervise import hang

    monkeypatch.setattr(hang, "TICK_S", 0.02)
    monkeypatch.setattr(hang, "PORT_POLL_S", 0.05)
    root = tmp_path / "root"
    shutil.copytree(ROOT / "tests" / "fixtures" / "healthy-ib", root, symlinks=True)
    w = hang.HangWatch(3600, lambda line: None, env={}, host_factory=lambda: open_host(root=str(root))).start()
    try:
        (root / "sys/class/infiniband/mlx5_0/ports/1/state").write_text("1: DOWN\n")
        deadline = time.monotonic() + 60
        while "mlx5_0/1" not in w._left:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        w.stop()
    (line,) = w._node()["lines"]
    assert line.startswith(f"mlx5_0/1 is DOWN (LinkUp) since {w._left['mlx5_0/1']} (ACTIVE when the job started)")
