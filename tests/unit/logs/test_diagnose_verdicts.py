"""A verdict is earned (issue 15, diagnose; issue 16 items 4): "no known problem" only when
something was read, a killed job is never a pass, an error line no row knows is still an error,
a one-host job's network lines are information, a pod and its host are one host, and a setting
joins the failure it explains.

The logs here are written from NCCL's and PyTorch's source strings (cited beside each) and from
what a two-rank torchrun job on one GPU prints (NCCL 2.28.9, the PyTorch 2.9 wheel).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import jsonschema
import pytest

from rdmadoctor.logs import diagnose_bytes

HERE = os.path.dirname(os.path.abspath(__file__))


def rd(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD="1")
    return subprocess.run([sys.executable, "-m", "rdmadoctor", *args], input=stdin, capture_output=True, env=env,
                          timeout=120)


def report(text: str) -> dict:
    out = rd("diagnose", "--json", stdin=text.encode())
    rep = json.loads(out.stdout)
    with open(os.path.join(HERE, "..", "..", "..", "rdmadoctor", "output", "schema.json"), encoding="utf-8") as f:
        jsonschema.validate(rep, json.load(f))
    assert rep["exit_code"] == out.returncode
    return rep


def findings(rep: dict) -> list[dict]:
    return [f for c in rep["checks"] for f in c["findings"] if f["code"] != "LOGS_READ"]


def codes(d) -> list[tuple[str, str, str | None]]:
    return [(f.code, f.severity, f.cause) for f in d.findings]


# -- nothing to judge ----------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["hello\n", "epoch 1 loss 2.3\nepoch 2 loss 2.1\n", "\n\n  \n"])
def test_input_with_nothing_recognisable_is_nothing_to_judge_not_a_pass(text: str) -> None:
    out = rd("diagnose", stdin=text.encode())
    assert out.returncode == 2, out.stdout
    rep = report(text)
    assert rep["status"] == "unknown"
    (f,) = findings(rep)
    assert f["code"] == "LOGS_NOTHING_TO_JUDGE" and f["severity"] == "unknown"
    assert "NCCL_DEBUG=INFO" in f["remedy"] and "rank" in f["remedy"]


def test_an_nccl_line_is_something_to_judge() -> None:
    rep = report("gpu-a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\ngpu-a:1:1 [0] NCCL INFO Using network IB\n")
    assert rep["exit_code"] == 0 and findings(rep) == []


# -- killed, timed out -----------------------------------------------------------------------------

# torch/distributed/elastic/agent/server/api.py and multiprocessing/api.py, as torchrun prints them
# when `timeout 600 torchrun ...` sends SIGTERM to a job whose two workers hung before NCCL printed.
KILLED = """\
W1126 10:00:00.000000 140 torch/distributed/run.py:793] *****************************************
W1126 10:10:00.000000 140 torch/distributed/elastic/agent/server/api.py:704] Received 15 death signal, shutting down workers
W1126 10:10:00.000000 140 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 141 closing signal SIGTERM
Traceback (most recent call last):
  File "/usr/local/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "/usr/local/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py", line 84, in _terminate_process_handler
    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)
torch.distributed.elastic.multiprocessing.api.SignalException: Process 140 got signal: 15
"""
NCCL_START = "gpu-a:141:141 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n"
NCCL_DONE = "gpu-a:141:150 [0] NCCL INFO ncclCommInitRankConfig comm 0x5 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 60 commId 0x1 - Init COMPLETE\n"


@pytest.mark.parametrize("before,stage,words", [
    ("", "before_nccl", "rendezvous"),
    (NCCL_START, "init", "Init COMPLETE"),
    (NCCL_START + NCCL_DONE, "collective", "collective"),
])
def test_a_killed_job_leads_with_the_signal_and_how_far_nccl_got(before: str, stage: str, words: str) -> None:
    rep = report(before + KILLED)
    assert rep["exit_code"] == 1 and rep["status"] == "fail"
    first = findings(rep)[0]
    assert first["code"] == "JOB_KILLED" and first["subject"] == "signal 15 (SIGTERM)" and not first.get("cause")
    n = before.count("\n")
    assert f"line {n + 2} of" in first["message"], first["message"]
    assert first["data"]["nccl_stage"] == stage and words in first["message"]
    assert first["remedy"].startswith("Next: ")
    assert first["data"]["count"] == 2  # the agent's warning and its SignalException: one finding
    assert [f["code"] for f in findings(rep)] == ["JOB_KILLED"]  # torchrun's own traceback is the kill, not more


def test_a_kill_after_an_error_follows_from_the_error() -> None:
    text = NCCL_START + ("gpu-a:141:150 [0] init.cc:1022 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on "
                         "CUDA device 60\n") + KILLED
    d = diagnose_bytes(text.encode())
    assert codes(d)[:2] == [("NCCL_DUPLICATE_GPU", "error", None), ("JOB_KILLED", "error", "NCCL_DUPLICATE_GPU")]


def test_a_worker_killed_by_sigkill_in_torchruns_summary() -> None:
    d = diagnose_bytes(b"torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
                       b"============================================================\n"
                       b"  exitcode  : -9 (pid: 2411)\n  traceback : Signal 9 (SIGKILL) received by PID 2411\n")
    assert [(f.code, f.subject) for f in d.findings] == [("JOB_KILLED", "signal 9 (SIGKILL)")]


@pytest.mark.parametrize("script,subject,stage", [
    ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", "signal 15 (SIGTERM)", "before_nccl"),
    ("import sys; print('gpu-a:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0', flush=True); sys.exit(124)",
     "signal 15 (SIGTERM)", "init"),
    ("import sys; sys.exit(137)", "signal 9 (SIGKILL)", "before_nccl"),
])
def test_run_knows_the_exit_status(tmp_path, script: str, subject: str, stage: str) -> None:
    path = tmp_path / "run.json"
    out = rd("run", "--no-gate", "--report-file", str(path), "--", sys.executable, "-c", script)
    assert out.returncode in (124, 137, 143)
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:  # written before exit; polled for slow disks
        time.sleep(0.1)
    rep = json.loads(path.read_text())
    (f,) = [f for f in rep["findings"] if f["code"] == "JOB_KILLED"]
    assert f["subject"] == subject and f["data"]["nccl_stage"] == stage
    err = out.stderr.decode()
    assert "JOB_KILLED" in err and "no known error" not in err


def test_a_clean_exit_of_run_adds_nothing(tmp_path) -> None:
    path = tmp_path / "run.json"
    out = rd("run", "--no-gate", "--report-file", str(path), "--", sys.executable, "-c", "print('done')")
    assert out.returncode == 0
    assert json.loads(path.read_text())["findings"] == []


# -- unknown error lines ----------------------------------------------------------------------------

# Two ranks on one GPU: NCCL init.cc `Duplicate GPU detected : rank %d and rank %d both on CUDA device
# %lx` -> ncclInvalidUsage, then PyTorch's DistBackendError with NCCL's last error quoted.
def dup_gpu(warn: str = "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 60", nodes: str = "") -> str:
    return f"""\
h100:1001:1001 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
h100:1001:1050 [0] NCCL INFO NET/IB : No device found.
h100:1001:1050 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>
h100:1001:1050 [0] NCCL INFO Using network Socket
{nodes}h100:1001:1050 [0] NCCL INFO ncclCommInitRankConfig comm 0x55d0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 60 commId 0x1 - Init START
h100:1002:1051 [0] NCCL INFO ncclCommInitRankConfig comm 0x55e0 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 60 commId 0x1 - Init START

h100:1002:1051 [0] init.cc:1022 NCCL WARN {warn}
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/t.py", line 9, in <module>
[rank1]:     dist.all_reduce(x)
[rank1]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9
[rank1]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
[rank1]: Last error:
[rank1]: {warn}
"""


def test_duplicate_gpu_is_the_root_cause_not_the_missing_hca() -> None:
    rep = report(dup_gpu())
    fs = findings(rep)
    assert fs[0]["code"] == "NCCL_DUPLICATE_GPU" and not fs[0].get("cause")
    assert fs[0]["data"]["count"] == 2  # the WARN and the line PyTorch quotes after "Last error:"
    usage = next(f for f in fs if f["code"] == "NCCL_CALL_FAILED")
    assert usage["cause"] == "NCCL_DUPLICATE_GPU"
    assert "NCCL_IB_NO_DEVICE" not in {f["code"] for f in fs}
    assert "NCCL_SOCKET_FALLBACK" not in {f["code"] for f in fs}


def test_invalid_rank_has_a_code_of_its_own() -> None:
    d = diagnose_bytes(b"node-1:40:40 [0] init.cc:1612 NCCL WARN Invalid rank requested : 8/8\n")
    assert [(f.code, f.subject) for f in d.findings] == [("NCCL_INVALID_RANK", "rank 8")]


def test_an_unknown_warn_is_a_finding_and_explains_the_error_after_it_not_a_benign_line() -> None:
    # Two hosts (nNodes 2): NET/IB : No device found stays a warning here, and still is not the cause.
    text = dup_gpu("Something went wrong : code 60",
                   nodes="h100:1001:1050 [0] NCCL INFO comm 0x55d0 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0\n")
    d = diagnose_bytes(text.encode(), name="job.log")
    unknown = [f for f in d.findings if f.code == "LOG_ERROR_UNKNOWN" and f.subject == "NCCL WARN"]
    assert len(unknown) == 1
    u = unknown[0]
    assert u.severity == "error" and u.cause is None and '"Something went wrong : code 60"' in u.message
    ev = u.data["evidence"][0]
    assert (ev["file"], ev["line"]) == ("job.log", 9) and u.data["count"] == 2
    usage = next(f for f in d.findings if f.code == "NCCL_CALL_FAILED")
    assert usage.cause == "LOG_ERROR_UNKNOWN"
    nodev = next(f for f in d.findings if f.code == "NCCL_IB_NO_DEVICE")
    assert nodev.severity == "warning"
    problems = [f for f in d.findings if f.severity in ("error", "warning") and not f.cause]
    # Root-cause order: the benign warning came first in the log, the unknown WARN explains the failure.
    assert all(f.code in ("NCCL_IB_NO_DEVICE", "LOG_ERROR_UNKNOWN", "NCCL_SOCKET_FALLBACK") for f in problems)
    # PyTorch's words for the result (`ncclInvalidUsage: This usually reflects ...`) are the same
    # finding as the `NCCL error in: ..., invalid usage` line, not an unknown error of their own.
    assert not any(f.subject == "ncclInvalidUsage" for f in d.findings)
    assert any("ncclInvalidUsage: This usually" in e["text"] for e in usage.data["evidence"])


def test_the_last_line_of_a_traceback_is_an_error_of_its_own() -> None:
    d = diagnose_bytes(b"[rank0]: Traceback (most recent call last):\n"
                       b'[rank0]:   File "train.py", line 40, in <module>\n'
                       b"[rank0]:     loss.backward()\n"
                       b"[rank1]: step 10 loss 2.0\n"
                       b"[rank0]:     ^^^^^^^^^^^^^^^\n"
                       b"[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n", name="j.log")
    (f,) = d.findings
    assert (f.code, f.subject, f.severity) == ("LOG_ERROR_UNKNOWN", "RuntimeError", "error")
    assert f.data["evidence"][0]["line"] == 6 and "illegal memory access" in f.message


def test_an_empty_last_error_quotes_nothing() -> None:
    d = diagnose_bytes(b"ncclSystemError: System call (e.g. socket, malloc) or external library call failed.\n"
                       b"Last error:\n\nException raised from checkForNCCLErrorsInternal at ProcessGroupNCCL.cpp:2501\n")
    assert [f.subject for f in d.findings] == ["ncclSystemError"]


def test_an_unknown_warn_right_before_a_known_nccl_error_folds_under_it() -> None:
    d = diagnose_bytes(b"g148:1:2 [0] misc/shmutils.cc:93 NCCL WARN Call to open failed: No such file or directory\n"
                       b"g148:1:2 [0] misc/shmutils.cc:129 NCCL WARN Error while attaching to shared memory segment "
                       b"/dev/shm/nccl-glnlGK (size 14156128), error: No such file or directory (2)\n")
    assert [(f.code, f.cause) for f in d.findings] == [("LOG_ERROR_UNKNOWN", "NCCL_SHM_FAILED"), ("NCCL_SHM_FAILED", None)]


@pytest.mark.parametrize("name,text", [
    ("_EXC_LINE", "A" * 200_000),
    ("_EXC_LINE", "a." * 100_000 + "!"),
    ("_NCCL_RESULT", "ncclInternal" * 20_000),
    ("_NORMAL", "0x1" * 100_000),
    ("_SETTING", "NCCL_NET set to " * 20_000),
])
def test_the_error_line_patterns_are_linear(name: str, text: str) -> None:
    # The lines a traceback or "Last error:" make the scanner read are any line at all: each
    # pattern is anchored or bounded (prefix.split, which every line goes through, is not ours).
    from rdmadoctor.logs import scan

    rx = getattr(scan, name)
    t = time.process_time()
    for _ in range(3):
        rx.match(text) if name == "_EXC_LINE" else (rx.sub("N", text) if name == "_NORMAL" else rx.search(text))
    assert time.process_time() - t < 5  # quadratic on these would take minutes


# -- one host -------------------------------------------------------------------------------------

SMOKE = """\
h200:77:77 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
h200:77:90 [0] NCCL INFO NET/IB : No device found.
h200:77:90 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.4<0>
h200:77:90 [0] NCCL INFO Using network Socket
h200:77:90 [0] NCCL INFO comm 0x5 rank 0 nRanks {ranks} nNodes {nodes} localRanks {local} localRank 0 MNNVL 0
h200:77:90 [0] NCCL INFO ncclCommInitRankConfig comm 0x5 rank 0 nranks {ranks} cudaDev 0 nvmlDev 0 busId 60 commId 0x1 - Init COMPLETE
"""


@pytest.mark.parametrize("ranks,nodes,local", [(1, 1, 1), (8, 1, 8)])
def test_a_one_host_job_on_sockets_is_information(ranks: int, nodes: int, local: int) -> None:
    rep = report(SMOKE.format(ranks=ranks, nodes=nodes, local=local))
    assert rep["exit_code"] == 0, findings(rep)
    assert [f["code"] for f in findings(rep)] == ["NCCL_SINGLE_HOST"]
    assert findings(rep)[0]["severity"] == "info"
    assert rep["nccl"]["nodes"] == 1 and rep["nccl"]["socket_hosts"] == []
    text = rd("diagnose", "--verbose", stdin=SMOKE.format(ranks=ranks, nodes=nodes, local=local).encode()).stdout.decode()
    assert "runs on one host" in text and "WARNING" not in text


def test_two_hosts_on_sockets_is_still_a_fallback() -> None:
    rep = report(SMOKE.format(ranks=16, nodes=2, local=8))
    assert rep["exit_code"] == 1
    assert {"NCCL_SOCKET_FALLBACK", "NCCL_IB_NO_DEVICE"} <= {f["code"] for f in findings(rep)}


# -- kubectl logs --prefix ---------------------------------------------------------------------------


@pytest.mark.parametrize("stamp", ["", "2025-06-01T10:00:00.123456789Z "])
def test_a_pod_and_the_host_nccls_prefix_names_are_one_host(stamp: str) -> None:
    pre = "[pod/llama-worker-0/trainer] " + stamp
    lines = [
        "[rank0]: starting, NCCL communicator next",
        "gke-a3-node-7:100:100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
        "gke-a3-node-7:100:100 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>",
        "gke-a3-node-7:100:100 [0] NCCL INFO Using network Socket",
        "gke-a3-node-7:100:200 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0",
        "[rank0]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
        "[rank0]: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
    ]
    d = diagnose_bytes("".join(pre + x + "\n" for x in lines).encode())
    assert d.nccl["hosts"] == ["gke-a3-node-7"]
    for f in d.findings:
        assert f.data.get("hosts", ["gke-a3-node-7"]) == ["gke-a3-node-7"], f
    text = rd("diagnose", stdin="".join(pre + x + "\n" for x in lines).encode()).stdout.decode()
    assert "1 host" in text and "2 hosts" not in text


# -- settings that explain a failure (issue 16 item 4) ---------------------------------------------


@pytest.mark.parametrize("setting,failure,code,name,value", [
    ("NCCL_SOCKET_IFNAME set by environment to eth2", "NCCL INFO Bootstrap : no socket interface found",
     "NCCL_NO_SOCKET_INTERFACE", "NCCL_SOCKET_IFNAME", "eth2"),
    ("NCCL_IB_HCA set to mlx5_0", "NCCL INFO NET/IB : No device found.", "NCCL_IB_NO_DEVICE", "NCCL_IB_HCA", "mlx5_0"),
    ("NCCL_NET set by environment to IB", "plugin/net.cc:349 NCCL WARN Failed to initialize any NET plugin",
     "NCCL_NET_INIT_FAILED", "NCCL_NET", "IB"),
])
def test_a_setting_joins_the_failure_it_explains(setting: str, failure: str, code: str, name: str, value: str) -> None:
    text = (f"node-1:40:40 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
            f"node-1:40:40 [0] NCCL INFO {setting}\n"
            f"node-1:40:40 [0] NCCL INFO comm 0x5 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n"
            f"node-1:40:40 [0] {failure}\n")
    d = diagnose_bytes(text.encode(), name="job.log")
    f = next(f for f in d.findings if f.code == code)
    assert f.data["setting"] == {"name": name, "value": value, "file": "job.log", "line": 2}
    assert [e["line"] for e in f.data["evidence"]][:2] == [2, 4]  # both lines as evidence
    assert f.message.startswith(f"{name} is set to {value} (line 2 of job.log)")
    assert name in f.remedy


def test_a_setting_after_the_failure_explains_nothing() -> None:
    d = diagnose_bytes(b"node-1:40:40 [0] NCCL INFO Bootstrap : no socket interface found\n"
                       b"node-1:40:40 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth2\n")
    (f,) = [f for f in d.findings if f.code == "NCCL_NO_SOCKET_INTERFACE"]
    assert "setting" not in f.data and not f.message.startswith("NCCL_SOCKET_IFNAME")


# -- the dense log: lines summed per block once saturated (issue 16 item 5) -------------------------


def _write_dense(path: str, mib: int) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_diagnose", os.path.join(HERE, "..", "..", "..", "bench", "diagnose.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    mod.write_dense(path, mib)


@pytest.mark.parametrize("wrap", ["", "[pod/llama-worker-{h}/trainer] "])
def test_a_dense_log_says_the_same_read_line_by_line_or_summed_in_bulk(tmp_path, monkeypatch, wrap: str) -> None:
    from rdmadoctor.logs import scan

    path = str(tmp_path / "dense.log")
    _write_dense(path, 2)
    data = open(path, "rb").read()
    if wrap:  # kubectl --prefix before NCCL's own prefix: the slow path of every bulk step
        data = b"".join((wrap.format(h=line[9:12].decode(errors="replace")).encode() if line.startswith(b"gpu-node-") else b"")
                        + line for line in data.splitlines(keepends=True))

    def run() -> tuple:
        d = scan.Diagnoser()
        for i in range(0, len(data), 1 << 16):
            d.feed(data[i:i + (1 << 16)], source="dense.log")
        out = d.finish()
        return [(f.code, f.severity, f.subject, f.cause) for f in out.findings], out.nccl, d._saturated

    bulk, nccl, saturated = run()
    assert saturated  # the bulk path ran
    monkeypatch.setattr(scan, "SATURATE_AFTER", 10**9)
    one_by_one, nccl_lines, none = run()
    assert not none
    assert bulk == one_by_one and nccl == nccl_lines
    assert nccl["socket_hosts"] == ["gpu-node-007"] and nccl["nodes"] == 8 and nccl["ranks"] == 64
    assert {c for c, *_ in bulk} >= {"NCCL_SOCKET_FALLBACK", "NCCL_IB_NO_DEVICE", "NCCL_IB_COMPLETION_ERROR"}


def test_the_scan_reads_nccl_info_in_small_letters_without_losing_an_anchor() -> None:
    from rdmadoctor.logs import scan

    t = scan.tables()
    assert t.quiet is not None  # no anchor overlaps "] NCCL INFO " at a letter it changes
    assert not scan._survives(b"L WARN", b"NCCL INFO ", b"nccl infO ")  # "...L WARNCCL INFO": the N would go
    assert scan._survives(b"O comm ", b"] NCCL INFO ", b"] nccl infO ")  # the O is kept for "INFO comm "
    d = diagnose_bytes(b"gpu-a:1:1 [0] NCCL INFO comm 0x5 rank 0 nRanks 1 nNodes 1 localRanks 1 localRank 0 MNNVL 0\n"
                       b"gpu-a:1:1 [0] NCCL INFO NET/IB : No device found.\n")
    assert d.nccl["nodes"] == 1 and [f.code for f in d.findings] == ["NCCL_SINGLE_HOST"]
