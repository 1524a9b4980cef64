"""The knowledge base of log messages (rdmadoctor.logs.kb): every row against its own examples, its
code, its templates, and against the other rows; a table of lines that must not match.

The examples are real lines or lines in the exact format of the source the row's ``ref`` names
(NCCL WARN/INFO formats per version, rdma-core, perftest, PyTorch, the kernel), with realistic
values; several are quoted from public reports: NVIDIA/nccl#1267 and #367 (bootstrap, libibverbs),
NVIDIA/NVSentinel's syslog-health-monitor tests (mlx5 kernel lines), leptonai/gpud (peermem),
aws/aws-ofi-nccl#584 (NET/OFI registration).
"""

from __future__ import annotations

import importlib
import re
import string

import pytest

from rdmadoctor.core.model import CONDITIONS, KIND_SEVERITIES, KINDS, Code
from rdmadoctor.logs import kb

PATTERNS = kb.patterns()
BY_ID = {p.id: p for p in PATTERNS}
COMPILED = {p.id: re.compile(p.regex) for p in PATTERNS}
ROWS = [pytest.param(p, id=p.id) for p in PATTERNS]
EXAMPLES = [pytest.param(p, ex, id=f"{p.id}#{i}") for p in PATTERNS for i, ex in enumerate(p.examples)]


def _check_codes() -> dict[str, Code]:
    """Every code the checks (and preflight) define, read from the modules that define them."""
    from rdmadoctor.engine.registry import BUILTIN
    from rdmadoctor.preflight import master_codes

    out: dict[str, Code] = {}
    for target in BUILTIN.values():
        mod = importlib.import_module(target.split(":")[0])
        for value in vars(mod).values():
            if isinstance(value, Code):
                out[value.code] = value
        for check in getattr(mod, "CHECKS", ()):
            for code in check.codes:
                out[code.code] = code
    for code in master_codes():
        out[code.code] = code
    return out


CHECK_CODES = _check_codes()
KB_CODES = {c.code: c for c in kb.codes()}
ALL_CODES = {**CHECK_CODES, **KB_CODES}


def first_row(line: str) -> str | None:
    """The row that wins a line: the needle must be in it, then the first regex that matches."""
    for p in PATTERNS:
        if p.needle in line and COMPILED[p.id].search(line):
            return p.id
    return None


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


# -- the table as a whole ----------------------------------------------------------------------------


def test_enough_rows_in_every_source():
    assert len(PATTERNS) >= 45
    for mod in kb.modules():
        name = mod.__name__.rsplit(".", 1)[1]
        assert mod.PATTERNS, f"kb.{name} has no rows"
        for p in mod.PATTERNS:
            assert p.id.startswith(name + "."), f"{p.id} lives in kb.{name}"


def test_ids_unique():
    ids = [p.id for p in PATTERNS]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


def test_new_codes_are_well_formed_and_do_not_shadow_check_codes():
    names = [c.code for c in kb.codes()]
    assert len(names) == len(set(names))
    for code in kb.codes():
        assert re.fullmatch(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+", code.code), code.code
        # A check may list the knowledge base's own Code object (logs.diagnose reports every one);
        # a different Code of the same name would be two meanings for one code.
        assert CHECK_CODES.get(code.code, code) is code, f"{code.code} is already a check's code"
        assert code.kind in KINDS
        assert code.condition is None or code.condition in CONDITIONS
        assert code.title and code.meaning and code.fix
    # The seven names alerts key on, exactly.
    for name in ("NCCL_SOCKET_FALLBACK", "NCCL_GDR_DISABLED", "NCCL_IB_COMPLETION_ERROR", "NCCL_SHM_FAILED",
                 "NCCL_QP_CQ_CREATE_FAILED", "NCCL_REG_MR_FAILED", "NCCL_TIMEOUT"):
        assert name in KB_CODES


def test_every_new_code_is_used_by_a_row():
    # NCCL_SOCKET_FALLBACK is derived by the engine from what NCCL says it uses (`Using network
    # Socket`, NET/Socket channels), never from one line: tests/unit/logs/test_scan.py covers it.
    # NCCL_SINGLE_HOST likewise (nNodes 1, or every rank on one host), and LOG_ERROR_UNKNOWN is
    # what an error line no row matches becomes (tests/unit/logs/test_scan.py covers both).
    # NCCL_PLUGIN_MISMATCH compares the hosts' net plugins, NCCL_MIXED_LINK_LAYERS the ports NCCL lists
    # (tests/unit/logs/test_paste.py). A RAS report is judged whole (rdmadoctor.logs.ras) and a hang is what `run`
    # sees (tests/unit/supervise/test_ras.py).
    used = {p.code for p in PATTERNS} | {"NCCL_SOCKET_FALLBACK", "NCCL_SINGLE_HOST", "LOG_ERROR_UNKNOWN",
                                         "NCCL_PLUGIN_MISMATCH", "NCCL_MIXED_LINK_LAYERS", "JOB_HANG",
                                         "NCCL_RAS_PROCESS_DEAD", "NCCL_RAS_RANK_MISSING", "NCCL_RAS_STRAGGLER",
                                         "NCCL_RAS_RANK_ERROR", "NCCL_RAS_QUIET", "NCCL_RAS_UNAVAILABLE"}
    assert set(KB_CODES) <= used, sorted(set(KB_CODES) - used)


# -- each row ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", ROWS)
def test_row_fields(p):
    assert p.code in ALL_CODES, f"{p.id}: unknown code {p.code}"
    code = ALL_CODES[p.code]
    assert p.severity in KIND_SEVERITIES[code.kind], f"{p.id}: {p.severity} not allowed for a {code.kind} code"
    assert p.ref.strip() and p.meaning.strip() and p.fix.strip() and p.message.strip() and p.subject.strip()
    assert p.examples, f"{p.id} has no example"
    # A needle that is on most NCCL lines would make the scanner try every regex on every line.
    assert len(p.needle) >= 5 and p.needle not in ("NCCL INFO", "NCCL WARN", "NET/IB", "NCCL", "NET/IB :")
    # Rows are searched in a line whose prefixes may still be there: no anchoring at the start, but
    # for a run that reads any prefix up to the needle's first place (`^(?:(?!NEEDLE).)*NEEDLE`, no possessive repeat for 3.10: the run
    # cannot take the needle, so backing off it fails at once; a
    # row whose tail would read to the line's end again from each repeat of its needle).
    assert not p.regex.startswith("^") or p.regex.startswith("^(?:(?!"), p.id
    groups = set(COMPILED[p.id].groupindex)
    derived = set(p.derive(dict.fromkeys(groups, "")) or ()) if p.derive else set()
    for key, _ in p.symptom_when:
        assert key in groups | derived, f"{p.id}: symptom_when names {key!r}, neither a group of its regex nor derived"
    for f in p.follows:
        assert f in BY_ID or f in ALL_CODES, f"{p.id}: follows unknown {f!r}"


@pytest.mark.parametrize("p, line", EXAMPLES)
def test_example_matches_its_row(p, line):
    assert p.needle in line, f"{p.id}: needle {p.needle!r} not in {line!r}"
    m = COMPILED[p.id].search(line)
    assert m, f"{p.id} does not match {line!r}"
    # The line wins for its own row: no earlier row takes it first.
    assert first_row(line) == p.id
    # Every name a template uses is a regex group or one the row's derive adds, for this line.
    groups = kb.groups_of(p, m)
    for template in (p.subject, p.message):
        missing = _fields(template) - set(groups)
        assert not missing, f"{p.id}: {template!r} uses {missing} that {line!r} does not give"
        out = kb.render(template, groups)
        assert out.strip() and "{" not in out and "None" not in out, out
    # What was seen, what was expected: two sentences at most, ending with a full stop.
    message = kb.render(p.message, groups)
    assert message.endswith("."), message
    assert len(re.findall(r"[.!?](?=\s+[A-Z])", message)) <= 1, message


@pytest.mark.parametrize("p, line", EXAMPLES)
def test_example_matches_with_and_without_wrappers(p, line):
    """The scanner may or may not have removed kubectl/torchrun/NCCL prefixes: both must match."""
    wrapped = f"[pod/trainer-0/main] 2024-05-01T12:00:00.123456789Z [rank3]: {line}"
    assert COMPILED[p.id].search(wrapped)
    bare = re.sub(r"^.*? NCCL (?:INFO|WARN) ", "", line)
    assert COMPILED[p.id].search(bare)


# What NCCL prints again and again in a healthy run (per channel, per peer, per communicator): the
# scanner runs a row's regex only on lines that hold its needle, so no needle may be in these.
REPEATED = (
    "node-1:91:150 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
    "node-1:91:150 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/IB/1(3)/GDRDMA/Shared",
    "node-1:91:150 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    "node-1:91:150 [0] NCCL INFO Channel 03/0 : 0[0] -> 8[0] [send] via NET/Socket/0",
    "node-1:91:150 [0] NCCL INFO Connected all rings",
    "node-1:91:150 [0] NCCL INFO Connected all trees",
    "node-1:91:150 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.",
    "node-1:91:150 [0] NCCL INFO comm 0x55d1c0a0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
    "node-1:91:150 [0] NCCL INFO Setting affinity for GPU 0 to ffff,ffffffff",
    "node-1:91:150 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>",
    "node-1:91:150 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
    "node-1:91:150 [0] NCCL INFO ncclCommInitRank comm 0x55d1c0a0 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1b000 "
    "commId 0x1234 - Init COMPLETE",
    "[2025-03-04 10:12:33] node-1:91:150 [0] NCCL INFO AllReduce: opCount 4 sendbuff 0x7f00 recvbuff 0x7f00 count 1 "
    "datatype 7 op 0 root 0 comm 0x55d1c0a0 [nranks=16] stream 0x55d1",
)


@pytest.mark.parametrize("p", ROWS)
def test_needle_is_not_on_everyday_lines(p):
    assert not [line for line in REPEATED if p.needle in line], p.needle


@pytest.mark.parametrize("p", ROWS)
def test_fix_is_short(p):
    assert len(re.findall(r"[.!?](?=\s+[A-Z])", p.fix)) <= 1, p.fix
    assert len(re.findall(r"[.!?](?=\s+[A-Z])", p.meaning)) <= 1, p.meaning
    # meaning and fix are plain text, never formatted: a template name there would be printed as is.
    assert not re.search(r"\{[a-z_]+\}", p.fix + p.meaning), p.id


@pytest.mark.parametrize("p", ROWS)
def test_derive_never_raises_on_empty_groups(p):
    if p.derive is not None:
        out = p.derive({})
        assert isinstance(out, dict)
        assert all(isinstance(v, str) for v in out.values())


@pytest.mark.parametrize("p", ROWS)
def test_regex_stays_linear_on_long_lines(p):
    """No catastrophic backtracking: a long line that contains the needle but does not match."""
    rx = COMPILED[p.id]
    for line in (p.needle + " " * 5000 + "x", (p.needle + " a(b, ") * 400, p.needle + "(" * 3000 + "'" * 3000):
        rx.search(line)  # returns (hangs here if a regex backtracks exponentially)


# -- rows against each other ---------------------------------------------------------------------------

# (example's row, other row that also matches it): overlaps that are meant, with why the order is
# right. None today: the rows are disjoint (see rdmadoctor.logs.kb, "Order").
INTENDED_OVERLAPS: set[tuple[str, str]] = {
    # An iWARP device's modify_qp failure is a modify_qp failure too; the iWARP row comes first and
    # names the real reason (NCCL's hint about the GID index does not apply).
    ("nccl.modify_qp_iwarp", "nccl.modify_qp_failed"),
}


@pytest.mark.parametrize("p, line", EXAMPLES)
def test_no_other_row_matches_an_example(p, line):
    others = [q.id for q in PATTERNS if q.id != p.id and q.needle in line and COMPILED[q.id].search(line)]
    unexpected = [o for o in others if (p.id, o) not in INTENDED_OVERLAPS]
    assert not unexpected, f"{line!r} matches {p.id} and {unexpected}"


def test_nccl_strings_inside_pytorch_exceptions_go_to_the_nccl_rows():
    line = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3")
    assert first_row(line) == "nccl.system_error"
    assert not COMPILED["pytorch.nccl_error"].search(line)
    wrapped = ("[Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught collective "
               "operation timeout: WorkNCCL(SeqNum=2415, OpType=ALLREDUCE, NumelIn=8192, NumelOut=8192, "
               "Timeout(ms)=1800000) ran for 1800058 milliseconds before timing out.")
    assert first_row(wrapped) == "pytorch.watchdog_timeout"


# -- symptoms ------------------------------------------------------------------------------------------


def _groups(row: str, line: str) -> dict[str, str]:
    p = BY_ID[row]
    m = COMPILED[row].search(line)
    assert m, line
    return kb.groups_of(p, m)


def test_flushed_completion_is_a_symptom_and_retry_exceeded_is_not():
    flushed = "NET/IB : Got completion from peer 10.42.0.2<47534> with error 5, opcode 48, len 32764, vendor err 244"
    retry = ("NET/IB: Got completion from peer 10.1.1.2<51234> with status=IBV_WC_RETRY_EXC_ERR(12) "
             "opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129  localGid ::ffff:10.1.1.1 remoteGids::ffff:10.1.1.2 hca mlx5_3")
    p = BY_ID["nccl.wc_error"]
    g5, g12 = _groups(p.id, flushed), _groups(p.id, retry)
    assert kb.is_symptom(p, g5) and not kb.is_symptom(p, g12)
    assert g12["status_name"] == "IBV_WC_RETRY_EXC_ERR" and g12["hca"] == "mlx5_3" and g12["vendor"] == "129"
    assert kb.render(p.subject, g12) == "status 12 IBV_WC_RETRY_EXC_ERR, vendor err 129 (0x81)"
    assert g5["peer"] == "10.42.0.2<47534>" and g5["hca"] == ""


@pytest.mark.parametrize("row", ["nccl.system_error", "nccl.remote_error", "nccl.socket_closed", "nccl.shm_segment",
                                 "pytorch.watchdog_stuck", "pytorch.heartbeat_timeout"])
def test_follow_on_rows_are_symptoms(row):
    assert BY_ID[row].symptom


def test_refused_connect_is_a_symptom_timeout_is_not():
    p = BY_ID["nccl.socket_connect_failed"]
    refused = "socketStartConnect: Connect to 10.0.0.3<45119> failed : Connection refused"
    timeout = "ncclOsSocketStartConnect: connect to 10.0.0.3<45119> returned Connection timed out, exceeded error retry count after 35 attempts"
    assert kb.is_symptom(p, _groups(p.id, refused))
    assert not kb.is_symptom(p, _groups(p.id, timeout))


def test_causes_are_not_symptoms():
    for row in ("nccl.shm_extend", "nccl.reg_mr_failed", "nccl.ib_disabled_env", "nccl.ib_async_fatal",
                "kernel.mlx5_health_syndrome", "verbs.no_provider"):
        assert not BY_ID[row].symptom and not BY_ID[row].symptom_when


# -- lines that must not match -------------------------------------------------------------------------

# (row, line): a line that looks like the row's message but is not it.
NEGATIVE = [
    ("nccl.ib_disabled_env", "node-1:4127:4127 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0."),
    ("nccl.ib_no_device", "node-1:4127:4127 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>"),
    # 2.30 tries the unversioned name first; only the last (.so.1) miss means there is no libibverbs.
    ("nccl.libibverbs_missing", "node-3:812:812 [0] NCCL INFO Count not open libibverbs.so"),
    ("nccl.libibverbs_missing", "node-3:812:812 [0] NCCL INFO NCCL_IBVERBS_LIB set by environment to /opt/lib/libibverbs.so.1"),
    # The 2.29 INFO line that repeats a completion error before the WARN; and a debug build's TRACE of success.
    ("nccl.wc_error", "node-1:330:401 [0] NCCL INFO NET/IB: ncclIbCompletionEventProcess: Got completion with error "
                      "(devIndex=0, wc->status=(IBV_WC_RETRY_EXC_ERR)12, wc->opcode=(IBV_WC_SEND)0, wc->wr_id=3, "
                      "wc->qp_num=4711, wc->byte_len=0)"),
    ("nccl.wc_error", "node-1:330:401 [0] NCCL TRACE Got completion from peer 10.1.1.2<51234> with status=0 opcode=1 "
                      "len=524288 wr_id=3 r=0x7f00 type=1 events={0,0}, i=0"),
    ("nccl.wc_error", "node-1:330:401 [0] NCCL TRACE NET/IB: ncclIbCompletionEventProcess: Got completion for a send "
                      "request (req=0x1, comm=0x2, id=3, devIndex=0, qp_num=4711)"),
    ("nccl.gdr_disabled_hca", "node-1:91:150 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'"),
    ("nccl.gdr_distance", "node-1:91:150 [0] NCCL INFO GPU Direct RDMA Enabled for GPU 1b000 / HCA 0 (distance 4 <= 4), read 1"),
    # Retries are INFO; only the final WARN is the failure.
    ("nccl.modify_qp_failed", "node-1:91:180 [0] NCCL INFO Call to ibv_modify_qp failed with 110 Connection timed out, on "
                              "dev mlx5_0:1, curr state INIT, next state RTR, local GID index 3, local GID ::ffff:10.1.1.1, "
                              "remote GID ::ffff:10.1.2.1, retrying 1/35 after 100 msec of sleep"),
    ("nccl.socket_connect_failed", "node-1:55:120 [1] NCCL INFO ncclOsSocketPollConnect: connect to 10.0.0.3<45119> "
                                   "returned Connection refused, retrying (1/34) after sleep for 100 msec"),
    ("nccl.socket_connect_retries", "node-1:55:120 [1] NCCL INFO socketPollConnect: connect returned Connection refused, "
                                    "retrying (1/34) after sleep for 100 msec"),
    # The default plugin being absent is normal; so are successful loads.
    ("nccl.net_plugin_load_failed", "node-1:40:40 [0] NCCL INFO NET/Plugin : Plugin load returned 2 : libnccl-net.so: "
                                    "cannot open shared object file: No such file or directory."),
    ("nccl.net_plugin_load_failed", "node-1:40:40 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared "
                                    "object file: No such file or directory No plugin found (libnccl-net.so), using "
                                    "internal implementation"),
    ("nccl.net_plugin_load_failed", "node-1:40:40 [0] NCCL INFO NET/Plugin: Loaded net plugin AWS Libfabric (v7)"),
    ("nccl.net_plugin_not_found", "node-1:40:40 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal "
                                  "net plugin."),
    ("nccl.net_plugin_not_found", "node-1:40:40 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so"),
    ("nccl.net_plugin_not_found", "node-1:40:40 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using "
                                  "internal implementation"),
    ("nccl.ib_async_event", "node-4:71:140 [5] NCCL INFO NET/IB : mlx5_5:1 speed change detected: 400000 -> 200000 Mbps"),
    ("nccl.ib_async_event", "node-4:71:140 [5] transport/net_ib.cc:95 NCCL WARN NET/IB : Got async event : port error"),
    ("nccl.ib_async_event", "node-4:71:140 [5] NCCL WARN NET/IB : mlx5_5:1 async fatal event: local catastrophic error"),
    ("nccl.ib_async_fatal", "node-4:71:140 [5] transport/net_ib.cc:95 NCCL WARN NET/IB : Got async event : port active"),
    ("nccl.shm_syscall", "node-2:301:399 [2] include/socket.h:416 NCCL WARN Call to recv failed : Connection reset by peer"),
    ("nccl.socket_io_failed", "node-1:60:60 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device"),
    ("verbs.load_driver", "libibverbs: Warning: couldn't load driver 'libmlx5-rdmav34.so': /lib/x86_64-linux-gnu/"
                          "libibverbs.so.1: version `IBVERBS_PRIVATE_34' not found"),
    ("ibtools.device_list_failed", "Failed to get IB devices list: Function not implemented"),
    ("ibtools.ibpanic", "ibpanic: [1283] main: can't init UMAD library: No such file or directory"),
    ("ibtools.perftest_port_init", " Port number 1 state is Active"),
    ("ibtools.perftest_port_down", " Port number 1 state is Active Defer"),
    ("pytorch.nccl_error", "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error (run with "
                           "NCCL_DEBUG=INFO for details), NCCL version 2.19.3"),
    ("kernel.mlx5_module_event", "mlx5_core 0000:3b:00.0: Port module event: module 0, Cable plugged"),
    ("kernel.mlx5_link_down", "mlx5_core 0000:3b:00.0 ens1f0np0: Link up"),
    ("kernel.mlx5_link_down", "r8169 0000:06:00.0 eth0: link down"),
    ("kernel.mlx5_health_syndrome", "mlx5_core 0000:41:00.0: print_health_info:462:(pid 0): ext_synd 0x8a0c"),
    ("kernel.pcie_aer_uncorrected", "pcieport 0000:00:1c.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
                                    "(Receiver ID)"),
    ("kernel.pcie_aer_corrected", "pcieport 0000:c0:01.1: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction "
                                  "Layer, (Requester ID)"),
    ("kernel.peermem_symbol", "bluerdma: Unknown symbol ib_register_device (err -22)"),
    ("kernel.rdma_module_unknown_symbol", "bluerdma: Unknown symbol ib_register_device (err -22)"),
    ("kernel.rdma_module_symbol_version", "bluerdma: disagrees about version of symbol ib_register_device"),
    ("kernel.peermem_modprobe", "modprobe: ERROR: could not insert 'nouveau': Operation not permitted"),
]


@pytest.mark.parametrize("row, line", [pytest.param(r, ln, id=f"{r}-{i}") for i, (r, ln) in enumerate(NEGATIVE)])
def test_negative(row, line):
    assert row in BY_ID
    assert not (BY_ID[row].needle in line and COMPILED[row].search(line)), f"{row} wrongly matches {line!r}"


# Lines of a healthy NCCL 2.21 run on InfiniBand (format of NCCL's INFO output): no row fires.
HEALTHY = """\
node-1:91:91 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
node-1:91:91 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)
node-1:91:91 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory : when loading libnccl-net.so
node-1:91:91 [0] NCCL INFO NET/Plugin: Using internal network plugin.
node-1:91:91 [0] NCCL INFO cudaDriverVersion 12040
NCCL version 2.21.5+cuda12.4
node-1:91:150 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.
node-1:91:150 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB eth0:10.0.0.1<0>
node-1:91:150 [0] NCCL INFO Using non-device net plugin version 0
node-1:91:150 [0] NCCL INFO Using network IB
node-1:91:150 [0] NCCL INFO DMA-BUF is available on GPU device 0
node-1:91:150 [0] NCCL INFO comm 0x55d1c0a0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0
node-1:91:150 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'
node-1:91:150 [0] NCCL INFO GPU Direct RDMA Enabled for GPU 1b000 / HCA 0 (distance 4 <= 4), read 1
node-1:91:150 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
node-1:91:150 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA
node-1:91:150 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read
node-1:91:150 [0] NCCL INFO Connected all rings
node-1:91:150 [0] NCCL INFO Connected all trees
node-1:91:150 [0] NCCL INFO 32 coll channels, 32 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer
node-1:91:150 [0] NCCL INFO comm 0x55d1c0a0 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x1234 - Init COMPLETE
node-1:91:91 [0] NCCL INFO comm 0x55d1c0a0 rank 0 nranks 16 cudaDev 0 busId 1b000 - Destroy COMPLETE
mlx5_core 0000:3b:00.0 ens1f0np0: Link up
mlx5_core 0000:3b:00.0: Port module event: module 0, Cable plugged
libibverbs: Warning: couldn't load driver 'libvmw_pvrdma-rdmav34.so': libvmw_pvrdma-rdmav34.so: cannot open shared object file: No such file or directory
"""


def test_a_healthy_run_fires_nothing_but_the_harmless_provider_warning():
    fired = {line: first_row(line) for line in HEALTHY.splitlines()}
    hits = {line: row for line, row in fired.items() if row}
    # The one row a healthy container does print: a provider for hardware it does not have (a warning
    # whose message says so).
    assert set(hits.values()) == {"verbs.load_driver"}, hits


# -- each example, through the scan ----------------------------------------------------------------


@pytest.mark.parametrize("p", ROWS)
def test_every_example_is_found_by_the_scan(p):
    """The scan looks for anchors, not for every needle (rdmadoctor.logs.scan): each example line,
    alone in a log, must still reach its row, with and without a kubectl prefix around it."""
    from rdmadoctor.logs import diagnose_bytes

    for ex in p.examples:
        for text in (ex, f"2026-11-23T10:00:00.000000001Z {ex}"):
            d = diagnose_bytes(text.encode() + b"\n")
            got = {(f.code, f.data.get("pattern")) for f in d.findings}
            assert any(code == p.code for code, _ in got), (p.id, text, got)


def test_rows_that_explain_a_socket_fallback_say_so_themselves():
    """'Explains a socket fallback' is a field of the row (no list of codes beside the scanner): the
    rows that set it are problems about the IB path, never information or a symptom."""
    from rdmadoctor.logs import scan

    rows = [p for p in PATTERNS if p.explains_fallback]
    assert len(rows) >= 20 and not hasattr(scan, "_FALLBACK_REASONS")
    for p in rows:
        assert p.severity in ("error", "warning") and not p.symptom, p.id
    assert {p.code for p in rows} >= {"NCCL_IB_DISABLED_BY_ENV", "VERBS_PROVIDER_MISSING", "IB_NO_DEVICES", "OFI_NO_PROVIDER"}
