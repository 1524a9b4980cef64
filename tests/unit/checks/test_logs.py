"""logs.diagnose: a job's logs judged with the node. The fallback to sockets names the reason
the node checks found; pasted tool outputs are judged by the node checks themselves; a log's
failures follow from the node's findings that explain them."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES

from rdmadoctor.checks import logs as logs_check
from rdmadoctor.core.model import ERROR, WARNING
from rdmadoctor.engine import registry
from rdmadoctor.logs import kb, scan
from rdmadoctor.logs.kb import Pattern
from rdmadoctor.runner import Options, diagnose

# NCCL 2.18 on a pod whose uverbs devices are missing: NET/IB finds nothing, NCCL takes sockets.
# (Lines in NCCL's formats, src/transport/net_ib.cc, net_socket.cc, init.cc.)
FALLBACK_LOG = """\
job-0:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
job-0:1234:1234 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation
job-0:1234:1234 [0] NCCL INFO NET/IB : No device found.
job-0:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
job-0:1234:1234 [0] NCCL INFO Using network Socket
NCCL version 2.18.5+cuda12.2
job-0:1234:1234 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
"""
IB_LOG = """\
job-0:1234:1234 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>
job-0:1234:1234 [0] NCCL INFO Using network IB
NCCL version 2.21.5+cuda12.4
job-0:1234:1234 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
"""

# Rows the seed knowledge base does not have yet, tried before its own (NCCL's strings:
# src/misc/ibvwrap.cc "Call to ibv_reg_mr failed with error %s", src/misc/shmutils.cc).
ROWS = (
    Pattern(
        id="nccl.t_reg_mr", code="NCCL_REG_MR_FAILED", severity=ERROR, needle="Call to ibv_reg_mr",
        regex=r"Call to (?P<call>ibv_reg_mr\w*) failed(?: with error (?P<err>.*))?", subject="{call}",
        message="{call} failed: {err}", meaning="m", fix="IPC_LOCK", ref="NVIDIA/nccl src/misc/ibvwrap.cc",
    ),
    Pattern(
        id="nccl.t_shm", code="NCCL_SHM_FAILED", severity=ERROR, needle="shared memory segment",
        regex=r"Error while (?P<what>creating|extending|attaching to) shared memory segment (?P<seg>\S+)",
        subject="{seg}", message="NCCL failed {what} {seg}", meaning="m", fix="a bigger /dev/shm",
        ref="NVIDIA/nccl src/misc/shmutils.cc",
    ),
)
REG_MR = "job-0:1234:1290 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory\n"
SHM = ("job-0:1234:1290 [0] include/shm.h:28 NCCL WARN Error while creating shared memory segment "
       "/dev/shm/nccl-8fa6Yz (size 9637888)\n")


@pytest.fixture
def rows(monkeypatch):
    monkeypatch.setattr(scan, "_TABLES", scan._Tables(ROWS + kb.patterns()))


def _node(tmp_path: Path, fixture: str = "healthy-ib", env: dict | None = None) -> Path:
    root = tmp_path / fixture
    shutil.copytree(FIXTURES / fixture, root, symlinks=True)
    if env is not None:
        rt = json.loads((root / "runtime.json").read_text())
        rt["env"] = env
        (root / "runtime.json").write_text(json.dumps(rt))
    return root


def _log(tmp_path: Path, text: str, name: str = "rank0.log") -> str:
    p = tmp_path / name
    p.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    return str(p)


def _run(**kw):
    d = diagnose(Options(**kw))
    return d, {r.id: r for r in d.results}


def _only(results, code):
    found = [f for f in results["logs.diagnose"].findings if f.code == code]
    assert len(found) == 1, [f.code for f in results["logs.diagnose"].findings]
    return found[0]


# ---- declared and placed ----------------------------------------------------------------------


def test_registered_like_the_others_and_declares_every_code_it_can_emit():
    checks, errors = registry.load_checks(autoload=False)
    assert errors == []
    check = next(c for c in checks if c.id == "logs.diagnose")
    assert check.scope == "pod" and check.gate is False and "*" in check.after
    declared = {c.code for c in check.codes}
    assert {c.code for c in kb.codes()} <= declared
    assert {row.code for row in kb.patterns()} <= declared  # rows reuse the node checks' codes
    assert {"NCCL_SOCKET_FALLBACK", "IB_PORT_DOWN", "MEMLOCK_LIMITED", "SHM_TOO_SMALL", "MOD_MISSING", "LOGS_READ"} <= declared


def test_runs_after_the_node_checks_and_before_node_labels(tmp_path):
    d, results = _run(bundle=str(FIXTURES / "healthy-ib"), logs=[_log(tmp_path, FALLBACK_LOG)])
    order = [r.id for r in d.results]
    assert order[-2:] == ["logs.diagnose", "node.labels"]
    # node.labels compares the labels of the whole report, the log's verdict included.
    assert d.report["labels"]["rdmadoctor.io/ready"] == "false"
    assert results["node.labels"].facts.labels == d.report["labels"]


def test_no_logs_is_a_skip_that_says_how_to_give_some():
    d, results = _run(bundle=str(FIXTURES / "healthy-ib"))
    r = results["logs.diagnose"]
    assert r.status == "skip" and "rdmadoctor diagnose LOG" in r.reason and "collect --log FILE" in r.reason
    assert d.report["nccl"] is None


# ---- the join with the node -------------------------------------------------------------------


def _no_uverbs(root: Path) -> None:
    for p in (root / "dev" / "infiniband").glob("uverbs*"):
        p.unlink()


def _no_provider(root: Path) -> None:
    (root / "usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so").unlink()


@pytest.mark.parametrize("change,env,cause", [
    (_no_uverbs, None, "DEV_UVERBS_MISSING"),
    (None, {"NCCL_IB_DISABLE": "1"}, "NCCL_IB_DISABLED_BY_ENV"),
    (None, {"NCCL_IB_HCA": "=mlx5_9"}, "NCCL_IB_HCA_NO_MATCH"),
    (_no_provider, None, "VERBS_PROVIDER_MISSING"),
], ids=["uverbs-missing", "ib-disabled", "hca-no-match", "provider-missing"])
def test_the_fallback_names_the_reason_the_node_shows(tmp_path, change, env, cause):
    root = _node(tmp_path, env=env)
    if change is not None:
        change(root)
    d, results = _run(bundle=str(root), logs=[_log(tmp_path, FALLBACK_LOG)])
    node_finding = next(f for r in d.results if r.id != "logs.diagnose" for f in r.findings if f.code == cause)
    fb = _only(results, "NCCL_SOCKET_FALLBACK")
    assert fb.message.startswith("NCCL fell back to sockets although this node has 2 ACTIVE InfiniBand ports: ")
    assert fb.message.endswith(node_finding.message)
    assert fb.cause == cause and fb.severity == ERROR
    assert fb.data["follows"]["code"] == cause and fb.data["follows"]["subject"] == node_finding.subject
    assert fb.data["evidence"][0]["text"].endswith("Using network Socket")  # the log's own line stays
    assert fb.remedy == node_finding.remedy
    # The text report folds the fallback under the node's finding: one root cause.
    from rdmadoctor.output.text import folding

    folded = [f["code"] for fs in folding(d.report).values() for f in fs]
    assert "NCCL_SOCKET_FALLBACK" in folded


def test_ten_active_ports_and_no_reason_on_the_node_says_so(tmp_path):
    d, results = _run(example="hgx-h100-ib", logs=[_log(tmp_path, FALLBACK_LOG)])
    fb = _only(results, "NCCL_SOCKET_FALLBACK")
    assert fb.message.startswith("NCCL fell back to sockets although this node has 10 ACTIVE InfiniBand ports, "
                                 "and the checks of this node found no reason")
    # The log's own reason ("NET/IB : No device found.") stays the cause; the node adds none.
    assert "--live" in fb.message and fb.cause == "NCCL_IB_NO_DEVICE"


def test_a_node_without_devices_is_the_reason(tmp_path):
    d, results = _run(bundle=str(FIXTURES / "no-devices"), logs=[_log(tmp_path, FALLBACK_LOG)])
    fb = _only(results, "NCCL_SOCKET_FALLBACK")
    assert fb.message.startswith("NCCL fell back to sockets: this node has no ACTIVE RDMA port: no RDMA devices found")
    assert fb.cause == "IB_NO_DEVICES"


def test_without_the_node_checks_the_log_speaks_alone(tmp_path):
    _, results = _run(bundle=str(FIXTURES / "healthy-ib"), logs=[_log(tmp_path, FALLBACK_LOG)], only=["logs"])
    fb = _only(results, "NCCL_SOCKET_FALLBACK")
    assert "although this node" not in fb.message and fb.message.startswith("NCCL uses Socket")


def test_a_log_on_ib_has_no_fallback_and_fills_the_nccl_section(tmp_path):
    d, results = _run(bundle=str(FIXTURES / "healthy-ib"), logs=[_log(tmp_path, IB_LOG, "rank0.log.gz")])
    r = results["logs.diagnose"]
    assert r.status == "pass"
    (info,) = r.findings
    assert info.code == "LOGS_READ" and "NCCL 2.21.5 uses NET/IB on mlx5_0" in info.message
    assert d.report["nccl"]["version"] == "2.21.5" and d.report["nccl"]["network"] == "IB"
    assert d.report["nccl"]["gdr"] is True and "nccl" not in d.report["inventory"]


def test_a_registration_failure_follows_from_the_nodes_memlock_limit(tmp_path, rows):
    d, results = _run(bundle=str(FIXTURES / "memlock-64k"), logs=[_log(tmp_path, IB_LOG + REG_MR)])
    reg = _only(results, "NCCL_REG_MR_FAILED")
    assert reg.cause == "MEMLOCK_LIMITED" and reg.data["follows"]["check"] == "limits.memlock"
    assert reg.data["follows"]["subject"] == "memlock"


def test_a_shared_memory_failure_follows_from_a_small_dev_shm(tmp_path, rows):
    _, results = _run(bundle=str(FIXTURES / "shm-64m"), logs=[_log(tmp_path, SHM)])
    shm = _only(results, "NCCL_SHM_FAILED")
    assert shm.cause == "SHM_TOO_SMALL" and shm.data["follows"]["check"] == "shm.size"
    # On a node with room in /dev/shm the failure stands alone.
    _, results = _run(bundle=str(FIXTURES / "healthy-ib"), logs=[_log(tmp_path, SHM)])
    assert _only(results, "NCCL_SHM_FAILED").cause is None


# ---- pasted tool outputs: the node checks' judgement --------------------------------------------

PASTE = """\
Here is what I see in the pod:
$ ibstat mlx5_1
CA 'mlx5_1'
\tCA type: MT4129
\tNumber of ports: 1
\tFirmware version: 28.39.2048
\tPort 1:
\t\tState: Down
\t\tPhysical state: Polling
\t\tRate: 10
\t\tBase lid: 65535
\t\tSM lid: 0
\t\tLink layer: InfiniBand
root@pod:/# ulimit -a
core file size          (blocks, -c) 0
max locked memory       (kbytes, -l) 64
open files                      (-n) 1048576
root@pod:/# df -h /dev/shm
Filesystem      Size  Used Avail Use% Mounted on
shm              64M     0   64M   0% /dev/shm
root@pod:/# lsmod
Module                  Size  Used by
mlx5_ib               466944  0
ib_core               462848  1 mlx5_ib
root@pod:/# lsmod | grep mlx
mlx5_ib               466944  0
"""


def test_pasted_outputs_are_judged_as_the_node_checks_judge_them(tmp_path):
    log = _log(tmp_path, PASTE, "ticket.txt")
    _, results = _run(bundle=str(FIXTURES / "healthy-ib"), logs=[log], only=["logs"])
    by = {(f.code, f.subject): f for f in results["logs.diagnose"].findings}
    down = by[("IB_PORT_DOWN", "mlx5_1/1")]
    assert down.severity == ERROR and down.message.startswith("pasted `ibstat mlx5_1` output: state DOWN, phys Polling")
    assert down.data["evidence"] == [{"file": log, "line": 8, "text": "\t\tState: Down", "host": None, "rank": None, "time": None}]
    mem = by[("MEMLOCK_LIMITED", "memlock")]
    assert mem.severity == WARNING and "64 KiB" in mem.message and mem.data["evidence"][0]["line"] == 16
    assert mem.pod is not None and mem.pod.ipc_lock
    shm = by[("SHM_TOO_SMALL", "/dev/shm")]
    assert shm.data["evidence"][0]["line"] == 20 and shm.pod.shm_min_bytes
    mods = sorted(s for c, s in by if c == "MOD_MISSING")
    assert mods == ["ib_uverbs", "rdma_ucm"]  # the profile's required modules the whole lsmod lacks
    assert "cmd/" not in by[("MOD_MISSING", "ib_uverbs")].message  # the paste, not the in-memory bundle
    # Nothing is judged from the filtered `lsmod | grep mlx`, and nothing is said twice.
    assert len(by) == len(results["logs.diagnose"].findings)
    assert {c for c, _ in by} == {"IB_PORT_DOWN", "MEMLOCK_LIMITED", "SHM_TOO_SMALL", "MOD_MISSING", "LOGS_READ"}


def test_a_pasted_limit_binds_when_the_log_shows_registration_failing(tmp_path, rows):
    text = PASTE.split("root@pod:/# df")[0].split("root@pod:/# ulimit")[1]
    log = _log(tmp_path, "root@pod:/# ulimit" + text + REG_MR)
    _, results = _run(bundle=str(FIXTURES / "healthy-ib"), logs=[log], only=["logs"])
    mem = _only(results, "MEMLOCK_LIMITED")
    reg = _only(results, "NCCL_REG_MR_FAILED")
    assert reg.cause == "MEMLOCK_LIMITED" and reg.data["follows"]["check"] == "logs.diagnose"
    assert mem.severity == ERROR


def test_a_paste_is_judged_with_the_capabilities_the_node_shows(tmp_path):
    # healthy-ib's process holds CAP_IPC_LOCK: the pasted 64 KiB limit does not bind RDMA.
    text = "# ulimit -l\n64\n"
    _, results = _run(bundle=str(FIXTURES / "healthy-ib"), logs=[_log(tmp_path, text)])
    assert [f.code for f in results["logs.diagnose"].findings] == ["LOGS_READ"]
    _, results = _run(bundle=str(FIXTURES / "memlock-64k"), logs=[_log(tmp_path, text)])
    assert _only(results, "MEMLOCK_LIMITED").severity == ERROR


# ---- where logs come from ---------------------------------------------------------------------


def test_a_bundles_logs_folder_is_diagnosed(tmp_path):
    root = _node(tmp_path)
    _no_uverbs(root)
    (root / "logs" / "job").mkdir(parents=True)
    (root / "logs" / "job" / "rank0.log.gz").write_bytes(gzip.compress(FALLBACK_LOG.encode()))
    d, results = _run(bundle=str(root))
    fb = _only(results, "NCCL_SOCKET_FALLBACK")
    assert fb.cause == "DEV_UVERBS_MISSING" and fb.data["evidence"][0]["file"] == "logs/job/rank0.log.gz"
    assert d.report["nccl"]["network"] == "Socket"


def test_bundle_logs_and_given_logs_make_one_diagnosis(tmp_path):
    root = _node(tmp_path)
    _no_uverbs(root)
    (root / "logs").mkdir()
    (root / "logs" / "rank0.log").write_text(IB_LOG.replace("job-0", "ib-node-01"))  # this node: on IB
    d, results = _run(bundle=str(root), logs=[_log(tmp_path, FALLBACK_LOG.replace("job-0", "job-1"), "rank1.log")])
    info = _only(results, "LOGS_READ")
    assert [s["name"] for s in info.data["sources"]] == ["logs/rank0.log", str(tmp_path / "rank1.log")]
    assert d.report["nccl"]["hosts"] == ["ib-node-01", "job-1"] and d.report["nccl"]["socket_hosts"] == ["job-1"]
    # job-1 fell back, not this node: its missing uverbs is not job-1's reason.
    fb = _only(results, "NCCL_SOCKET_FALLBACK")
    assert fb.subject == "job-1" and fb.cause == "NCCL_IB_NO_DEVICE" and "This node (ib-node-01) is not one of them" in fb.message


def test_an_unreadable_log_is_unknown_not_a_crash(tmp_path):
    missing = str(tmp_path / "nope.log")
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(gzip.compress(FALLBACK_LOG.encode() * 50)[:300])
    _, results = _run(bundle=str(FIXTURES / "healthy-ib"), logs=[missing, str(cut)], only=["logs"])
    r = results["logs.diagnose"]
    unreadable = {f.subject: f for f in r.findings if f.code == "LOG_UNREADABLE"}
    assert set(unreadable) == {missing, str(cut)} and all(f.severity == "unknown" for f in unreadable.values())
    assert "no such file" in unreadable[missing].message
    assert r.status in ("unknown", "fail")


def test_a_broken_member_of_a_bundle_is_unknown(tmp_path):
    root = _node(tmp_path)
    (root / "logs").mkdir()
    (root / "logs" / "bad.log.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    _, results = _run(bundle=str(root), only=["logs"])
    (f,) = [f for f in results["logs.diagnose"].findings if f.code == "LOG_UNREADABLE"]
    assert f.subject == "logs/bad.log.gz"


def test_the_skip_reason_has_no_nested_parentheses():
    assert "(" not in logs_check.NO_LOGS
