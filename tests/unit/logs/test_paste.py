"""What users really paste (issue 16): log lines inside what people write around them, tool outputs
without their command line, and the other stacks that use the same verbs.

Each input is either written here to stand for a class (a quoted reply, a sentence with inline code,
a line a terminal broke) or taken from a public issue, cited beside it (verbatim, or an excerpt of
the lines that matter). The diagnosis runs as `rdmadoctor diagnose FILE` runs it (the logs.diagnose
check on a logs-only host), so pasted tool outputs are judged by the node checks.
"""

from __future__ import annotations

import pytest

from rdmadoctor.host import logs_only_host
from rdmadoctor.logs import Diagnoser, diagnose_bytes, prefix
from rdmadoctor.runner import Options, diagnose


def report(text: str) -> dict:
    reader = Diagnoser()
    reader.feed(text.encode(), source="paste.txt")
    reader.end_source()
    opts = Options(only=["logs"], logs=["paste.txt"], log_diagnosis=reader)
    return diagnose(opts, host=logs_only_host("paste.txt")).report


def found(rep: dict) -> dict[str, dict]:
    """code -> its first finding (problems only)."""
    out: dict[str, dict] = {}
    for c in rep["checks"]:
        for f in c["findings"]:
            if f["severity"] in ("error", "warning"):
                out.setdefault(f["code"], f)
    return out


# ---- 1. log lines inside what people write around them ---------------------------------------------


@pytest.mark.parametrize("line, want, spans", [
    ("> host:1:2 [0] NCCL INFO Using network Socket", "host:1:2 [0] NCCL INFO Using network Socket", ()),
    (">> > NCCL WARN x", "NCCL WARN x", ()),
    (">", "", ()),
    ("   > indented quote", "indented quote", ()),
    ("`NCCL WARN Call to ibv_create_qp failed`", "NCCL WARN Call to ibv_create_qp failed", ()),
    ("the job dies with `NCCL WARN Call to ibv_create_qp failed` after a minute",
     "the job dies with NCCL WARN Call to ibv_create_qp failed after a minute", ("NCCL WARN Call to ibv_create_qp failed",)),
    ("h:1:1 [0] [init.cc](http://init.cc):123 NCCL WARN x", "h:1:1 [0] init.cc:123 NCCL WARN x", ()),
    ("h:1:1 [0] transport/[net_ib.cc](https://net_ib.cc):9 NCCL WARN x", "h:1:1 [0] transport/net_ib.cc:9 NCCL WARN x", ()),
    ("at <http://init.cc|init.cc>:123", "at init.cc:123", ()),
    ("a [real link](https://example.com) stays", "a [real link](https://example.com) stays", ()),
    # Markdown emphasis (dmlc/xgboost#5963: a bold WARN; NVIDIA/nccl#769: a line in italics).
    ("7635c25c81cd:41588:41837 [0] include/shm.h:28 **NCCL WARN Call to posix_fallocate failed : No space left on "
     "device**", "7635c25c81cd:41588:41837 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space "
     "left on device", ()),
    ("_ibvwrap.cc: NCCL WARN Call to ibv_modify_qp failed with error Connection timed out_",
     "ibvwrap.cc: NCCL WARN Call to ibv_modify_qp failed with error Connection timed out", ()),
    ("__init__", "__init__", ()),
    # Ray's log dedup (awslabs/awsome-distributed-ai#386): the network was read as "Socket [repeated 15x ...]".
    ("(RayWorker pid=1) h:1:2 [0] NCCL INFO Using network Socket [repeated 15x across cluster]",
     "(RayWorker pid=1) h:1:2 [0] NCCL INFO Using network Socket", ()),
    # Docker's json-file log (`cat /var/lib/docker/containers/*/*-json.log`): the line, its time in front.
    ('{"log":"h:1:2 [0] NCCL WARN Connect to 10.0.0.2\\u003c4242\\u003e failed\\n","stream":"stderr",'
     '"time":"2024-05-01T10:00:00.123456789Z"}',
     "2024-05-01T10:00:00.123456789Z h:1:2 [0] NCCL WARN Connect to 10.0.0.2<4242> failed", ()),
    ('{"log":"cut short', '{"log":"cut short', ()),
    # Copied from a web page's source: NCCL's <port> as entities.
    ("h:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1&lt;0&gt;", "h:1:2 [0] NCCL INFO NET/Socket : Using "
     "[0]eth0:10.0.0.1<0>", ()),
    ("x = a ** b ** c", "x = a ** b ** c", ()),
    ("NCCL_IB_HCA=mlx5_", "NCCL_IB_HCA=mlx5_", ()),
])
def test_unwrap(line: str, want: str, spans: tuple) -> None:
    assert prefix.unwrap(line) == (want, spans)


def test_a_bare_nccl_line_has_its_level() -> None:
    body, meta = prefix.split("NCCL INFO NET/Socket : Using [0]bond0:10.0.0.2<0>")
    assert body == "NET/Socket : Using [0]bond0:10.0.0.2<0>" and meta.level == "INFO"
    body, meta = prefix.split("[3] init.cc:1234 NCCL WARN Bootstrap : no socket interface found")
    assert body == "Bootstrap : no socket interface found" and meta.level == "WARN"


# https://github.com/NVIDIA/nccl/issues/1053 (the NCCL lines), quoted in a reply as GitHub quotes them.
QUOTED = """\
> I ran it again and got
>
> ```
> 4c217144f0b1:113168:113168 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.
> 4c217144f0b1:113168:113168 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>
> 4c217144f0b1:113168:113168 [0] NCCL INFO Using network Socket
> ```
"""


def test_a_quoted_reply_reads_as_the_log() -> None:
    rep = report(QUOTED)
    got = found(rep)
    assert {"NCCL_IB_DISABLED_BY_ENV", "NCCL_SOCKET_FALLBACK"} <= set(got)
    assert rep["nccl"]["network"] == "Socket" and rep["nccl"]["socket_ifaces"] == ["lo"]


def test_messages_quoted_in_a_sentence() -> None:
    got = found(report(
        "the job dies with `NCCL WARN Call to ibv_create_qp failed` after a minute, and rank 3 printed "
        "`Error while creating shared memory segment /dev/shm/nccl-7Uu6sb (size 9637888)` first\n"))
    assert got["NCCL_QP_CQ_CREATE_FAILED"]["subject"] == "ibv_create_qp"
    assert got["NCCL_SHM_FAILED"]["subject"] == "/dev/shm/nccl-7Uu6sb"


def test_a_message_quoted_twice_on_a_line_counts_once() -> None:
    d = diagnose_bytes(b"`NCCL WARN Call to ibv_create_qp failed` and again `NCCL WARN Call to ibv_create_qp failed`\n")
    (f,) = [f for f in d.findings if f.code == "NCCL_QP_CQ_CREATE_FAILED"]
    assert f.data["count"] == 1


def test_autolinked_file_names() -> None:
    got = found(report("node-1:60:60 [1] misc/[shmutils.cc](http://shmutils.cc):128 NCCL WARN Error while creating shared "
                       "memory segment /dev/shm/nccl-wKpCjM (size 9637888)\n"))
    assert got["NCCL_SHM_FAILED"]["data"]["evidence"][0]["host"] == "node-1"


def test_a_bare_socket_line_means_sockets() -> None:
    rep = report("NCCL INFO NET/Socket : Using [0]bond0:10.0.0.2<0>\n")
    assert "NCCL_SOCKET_FALLBACK" in found(rep) and rep["nccl"]["network"] == "Socket"


def test_nccl_24_bootstrap_socket_line_is_not_a_fallback() -> None:
    # NCCL <= 2.4 lists its bootstrap interface as NET/Socket although IB carries the traffic.
    rep = report("h:1:1 [0] NCCL INFO NCCL version 2.4.7+cuda10.0\nh:1:1 [0] NCCL INFO NET/Socket : Using [0]ib0:10.0.0.1<0>\n")
    assert "NCCL_SOCKET_FALLBACK" not in found(rep)


WRAPPED = """\
node1:123:456 [0] transport/net_ib.cc:1234 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<12345> with err
or 12, opcode 0, len 0, vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGid ::ffff:10.0.0.2
node1:123:456 [0] misc/shmutils.cc:128 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-ab
cd (size 9637888)
node1:123:456 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]ml
x5_3:1/IB ; OOB eth0:10.0.0.1<0>
node1:123:456 [0] enqueue.cc:100 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate
memory
"""


def test_lines_a_terminal_broke_are_glued_back() -> None:
    rep = report(WRAPPED)
    got = found(rep)
    assert got["NCCL_IB_COMPLETION_ERROR"]["subject"].startswith("status 12")
    assert got["NCCL_SHM_FAILED"]["subject"] == "/dev/shm/nccl-abcd"  # broken inside a token: no space
    assert [d["name"] for d in rep["nccl"]["net_devices"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert "Cannot allocate" in got["NCCL_REG_MR_FAILED"]["message"]
    assert got["NCCL_IB_COMPLETION_ERROR"]["data"]["evidence"][0]["line"] == 1
    assert got["NCCL_SHM_FAILED"]["data"]["evidence"][0]["line"] == 3  # the line numbers after a join stay true


def test_two_lines_that_say_two_things_stay_two() -> None:
    # https://github.com/nminoru/pib/issues/2: a long warning, then a line of its own.
    got = found(report("libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0\n"
                       "No IB devices found\n"))
    assert got["VERBS_PROVIDER_MISSING"]["subject"] == "/sys/class/infiniband_verbs/uverbs0"


@pytest.mark.parametrize("nxt", ["Last error:", "ncclSystemError: System call failed", "  File \"x.py\", line 3",
                                 "[rank1]: RuntimeError: x", "2024-05-01 12:00:00 next", "Traceback (most recent call last):",
                                 "h:1:1 [0] NCCL INFO x", "[pod/a/b] x", ""])
def test_a_line_of_its_own_is_not_a_continuation(nxt: str) -> None:
    assert not prefix.continues("x" * 100, nxt)


# ---- 2. tool output without its command line ---------------------------------------------------------


def test_df_rows_without_header() -> None:
    got = found(report("shm 64M 0 64M 0% /dev/shm\n"))
    assert got["SHM_TOO_SMALL"]["data"]["evidence"][0]["text"] == "shm 64M 0 64M 0% /dev/shm"
    got = found(report("shm                               1.0G  883M  142M  87% /dev/shm\n"))
    assert "SHM_NEARLY_FULL" in got and "SHM_TOO_SMALL" not in got


def test_a_filtered_df_still_shows_its_row() -> None:
    got = found(report("root@pod:/# df -h | grep shm\nshm              64M     0   64M   0% /dev/shm\n"))
    assert "SHM_TOO_SMALL" in got


def test_ulimit_lines_without_a_prompt() -> None:
    got = found(report("max locked memory       (kbytes, -l) 64\n"))
    assert got["MEMLOCK_LIMITED"]["data"]["evidence"][0]["text"].startswith("max locked memory")


# https://github.com/openucx/ucx/issues/8229 (comment by thomasgillis): `ulimit -a` as a bare first line.
ULIMIT_A = """\
ulimit -a
core file size          (blocks, -c) 0
data seg size           (kbytes, -d) unlimited
scheduling priority             (-e) 0
pending signals                 (-i) 1030810
max locked memory       (kbytes, -l) 64
max memory size         (kbytes, -m) unlimited
open files                      (-n) 1024
"""


def test_ulimit_a_as_a_bare_first_line() -> None:
    assert "64 KiB" in found(report(ULIMIT_A))["MEMLOCK_LIMITED"]["message"]


# https://github.com/nminoru/pib/issues/2 (description): the kernel has the devices, userspace no provider.
PIB = """\
# ibv_devinfo
libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs1
libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0
No IB devices found
"""
# https://github.com/SoftRoCE/rxe-dev/issues/74 (comment by fwmiller): ABI mismatch, then an empty list.
RXE = """\
root@arria10:~# ibv_devices
libibverbs: Warning: Driver rxe does not support the kernel ABI of 1 (supports 2 to 2) for device /sys/class/infiniband/rxe0
    device                 node GUID
    ------              ----------------
"""


@pytest.mark.parametrize("text, root", [(PIB, "VERBS_PROVIDER_MISSING"), (RXE, "VERBS_KERNEL_ABI_MISMATCH")])
def test_no_devices_after_libibverbs_skipped_them_follows_that(text: str, root: str) -> None:
    got = found(report(text))
    assert root in got and "IB_NO_DEVICES" not in got
    if "VERBS_NO_DEVICES" in got:
        assert got["VERBS_NO_DEVICES"]["cause"] == root


def test_no_devices_alone_is_its_own_problem() -> None:
    got = found(report("$ ibv_devinfo\nNo IB devices found\n"))
    assert not got["VERBS_NO_DEVICES"].get("cause")


# ---- 3. the other stacks that use the same verbs ------------------------------------------------------


@pytest.mark.parametrize("line, code, subject", [
    # https://github.com/openucx/ucx/issues/8746
    ("[1668693503.473099] [ampere:1188443:0]          ib_log.c:246  UCX  ERROR mlx5_0: ibv_create_cq() failed: Cannot "
     "allocate memory. Please set max locked memory (ulimit -l) to 'unlimited' (current: 64 kbytes)", "MEMLOCK_LIMITED", "memlock"),
    # https://github.com/openucx/ucx/issues/8229 (title)
    ("ibv_create_cq(cqe=4096) failed: Cannot allocate memory", "UCX_IB_RESOURCE_FAILED", "ibv_create_cq"),
    # https://github.com/deepseek-ai/DeepEP/issues/55 (comment quoting shmem_put_bw)
    ("/home/nvshmem_src/src/modules/transport/ibrc/ibrc.cpp:nvshmemt_init:1851: neither nv_peer_mem, or nvidia_peermem "
     "detected. Skipping transport.", "GDR_PEERMEM_MISSING", "nvidia_peermem"),
    # https://github.com/NVIDIA/Megatron-LM/issues/516
    ("[09677202c889:5283 :0:5704] Caught signal 7 (Bus error: nonexistent physical address)", "NCCL_SHM_FAILED", "/dev/shm"),
    # https://github.com/aws/aws-ofi-nccl/issues/24
    ("[1,23]<stdout>:ip-172-32-45-165:72593:73427 [7] create_nccl_ofi_component:459 NCCL WARN NET/OFI Couldn't open AV. "
     "RC: -22, ERROR: Invalid argument", "OFI_ERROR", "NET/OFI"),
    # https://github.com/aws/aws-ofi-nccl/issues/67
    ("10.3.35.83: WARN: Function: find_ofi_provider Line: 543: NET/OFI Couldn't find any optimal provider",
     "OFI_NO_PROVIDER", "NET/OFI"),
    # https://github.com/NVIDIA/nccl-tests/issues/219
    ("fengyun: Test NCCL failure common.cu:959 'internal error - please report this issue to the NCCL developers / '",
     "NCCL_TEST_FAILED", "fengyun"),
    # https://github.com/NVIDIA/nccl-tests/issues/7
    ("Out of bounds values : 248 FAILED", "NCCL_TEST_WRONG_RESULTS", "nccl-tests"),
    ("# Out of bounds values : 248 FAILED", "NCCL_TEST_WRONG_RESULTS", "nccl-tests"),
])
def test_other_stacks(line: str, code: str, subject: str) -> None:
    got = found(report(line + "\n"))
    assert got[code]["subject"] == subject, got


def test_ofi_info_lines_are_not_failures() -> None:
    # https://github.com/NVIDIA/nccl/issues/1597
    got = found(report("8h200-3:6310:6318 [0] NCCL INFO NET/OFI Selected Provider is efa (found 16 nics)\n"
                       "8h200-2:6831:6840 [0] NCCL INFO NET/OFI Support for DMA-BUF registrations: false\n"))
    assert not got


def test_the_ofi_plugin_failing_to_start_explains_the_socket_fallback() -> None:
    # An excerpt of https://github.com/aws/aws-ofi-nccl/issues/715 (a table of CloudWatch lines): the
    # plugin cannot open its completion queue and does not start; NCCL_IB_DISABLE=1 leaves sockets.
    text = (
        "  | 2024-11-28T07:42:11.527Z | libfabric:17778:1732779731::efa:cq:efa_rdm_cq_open():688<warn> Unable to create "
        "extended CQ: Invalid argument\n"
        "  | 2024-11-28T07:42:11.527Z | algo-1:17778:17848 [5] nccl_ofi_ofiutils_init_connection:274 NCCL WARN NET/OFI "
        "Couldn't open CQ. RC: -22, ERROR: Invalid argument\n"
        "  | 2024-11-28T07:42:11.527Z | algo-1:17778:17848 [5] nccl_net_ofi_create_plugin:259 NCCL WARN NET/OFI "
        "aws-ofi-nccl initialization failed\n"
        "  | 2024-11-28T07:42:11.527Z | algo-1:17778:17848 [5] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
        "  | 2024-11-28T07:42:11.528Z | algo-1:17778:17848 [5] NCCL INFO NET/Socket : Using [0]eth0:10.0.227.37<0>\n"
        "  | 2024-11-28T07:42:11.528Z | algo-1:17778:17848 [5] NCCL INFO Using network Socket\n"
    )
    rep = report(text)
    got = found(rep)
    assert got["NCCL_SOCKET_FALLBACK"]["cause"] == "OFI_ERROR", got["NCCL_SOCKET_FALLBACK"]
    assert "could not start" in got["NCCL_SOCKET_FALLBACK"]["message"]
    ofi = [f for c in rep["checks"] for f in c["findings"] if f["code"] == "OFI_ERROR"]
    assert {f["data"]["pattern"] for f in ofi} == {"ofi.call_failed", "ofi.init_failed"}


def test_ucx_enomem_follows_a_pasted_memlock_limit() -> None:
    got = found(report("max locked memory       (kbytes, -l) 64\nibv_create_cq(cqe=4096) failed: Cannot allocate memory\n"))
    assert got["UCX_IB_RESOURCE_FAILED"]["cause"] == "MEMLOCK_LIMITED"


def test_nccl_facts_shown_other_ways() -> None:
    rep = report(
        "RCCL version 2.18.3+hip6.1 develop:aa5a9b4\n"
        "gpu1:1:2 [0] NCCL INFO NET/IB : Using [0]={[0] mlx5_2:1/RoCE, [1] mlx5_3:1/RoCE} [1]={[0] mlx5_4:1/RoCE, "
        "[1] mlx5_5:1/RoCE} [RO]; OOB eth0:10.0.0.1<0>\n"
        "gpu1:1:3 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IBext/1/GDRDMA\n")
    nccl = rep["nccl"]
    assert nccl["version"] == "2.18.3" and nccl["network"] == "IBext" and nccl["gdr"] is True
    assert [d["name"] for d in nccl["net_devices"]] == ["mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5"]
    assert "NCCL_SOCKET_FALLBACK" not in found(rep)


def test_fastsocket_is_the_designed_transport_not_a_socket_fallback() -> None:
    # https://github.com/NVIDIA/nccl/issues/1519 (excerpt of the poster's fastsocket debug log). GCP's
    # FastSocket plugin is TCP by design, the transport those VMs are built for (issue 30): information
    # (NCCL_GCP_NET_PLUGIN), not NCCL falling back to its own sockets; its interfaces are still listed.
    rep = report("nathan-h100-1:14492:14492 [0] NCCL INFO NET/Plugin: Loaded net plugin FastSocket (v6)\n"
                 "nathan-h100-1:14492:14492 [0] NCCL INFO NCCL version 2.20.5+cuda12.4\n"
                 "nathan-h100-1:14492:14605 [0] NCCL INFO NET/FastSocket : Using [0]enp0s12:10.0.0.6<0> "
                 "[1]enp6s0f0:10.0.1.4<0> [2]enp7s0f0:10.0.2.4<0>\n")
    assert "NCCL_SOCKET_FALLBACK" not in found(rep) and rep["nccl"]["plugin"] == "FastSocket"
    assert "NCCL_GCP_NET_PLUGIN" in {f["code"] for c in rep["checks"] for f in c["findings"]} and rep["status"] == "pass"
    assert rep["nccl"]["socket_ifaces"] == ["enp0s12", "enp6s0f0", "enp7s0f0"]


# ---- linear in every input --------------------------------------------------------------------------


@pytest.mark.parametrize("line", [
    ">" * 65536, "> " * 32768, "`" * 65536, "`a" * 32768, "[" * 65536, "[a](http://a" * 6000, "<http://a|" * 7000,
    "a" * 65536, "x5_1:1/IB " * 6000, "[1]" * 20000,
])
def test_line_preparation_on_adversarial_lines(line: str) -> None:
    text, spans = prefix.unwrap(line)
    assert len(spans) <= prefix.MAX_SPANS
    prefix.continues("x" * 100, line)
    prefix.joined("a" * 65536, line)
    assert prefix._NCCL_BARE.match(line) is None  # prefix.split's own search is bounded by its own test


# ---- nccl-tests' bandwidth table against the fabric the same log shows ---------------------------------

# The rank list and the table's shape are nccl-tests' own (https://github.com/NVIDIA/nccl-tests/issues/204,
# https://github.com/NVIDIA/nccl-tests/issues/252); the rows and the pasted ibstat are written here.
NCCL_TESTS_RUN = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  63755 on DisAI-4090-3 device  0 [0x1b] NVIDIA GeForce RTX 4090
#  Rank  1 Group  0 Pid 914454 on DisAI-4090-2 device  0 [0x1b] NVIDIA GeForce RTX 4090
DisAI-4090-3:63755:63755 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eno1:10.102.0.233<0>
DisAI-4090-3:63755:63755 [0] NCCL INFO Using network IB
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
    67108864      16777216     float     sum      -1    61956    1.08    1.08      0    61901    1.08    1.08      0
   134217728      33554432     float     sum      -1   123411    {busbw}    {busbw}      0   123395    1.09    1.09      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 1.08167
#
$ ibstat mlx5_0
CA 'mlx5_0'
\tCA type: MT4129
\tNumber of ports: 1
\tPort 1:
\t\tState: Active
\t\tPhysical state: LinkUp
\t\tRate: 100
\t\tLink layer: Ethernet
"""


def test_busbw_far_below_the_fabric() -> None:
    rep = report(NCCL_TESTS_RUN.format(busbw="1.09"))
    f = found(rep)["NCCL_TEST_BUSBW_LOW"]
    assert "1.09 GB/s" in f["message"] and "2 nodes" in f["message"] and "100 Gb/s" in f["message"]
    assert f["data"]["evidence"][0]["line"] == 13 and f["data"]["fabric_gbps"] == 100
    assert rep["nccl"]["nodes"] == 2


def test_busbw_near_the_fabric_is_fine() -> None:
    assert "NCCL_TEST_BUSBW_LOW" not in found(report(NCCL_TESTS_RUN.format(busbw="11.20")))


def test_busbw_on_one_node_is_not_judged_against_the_nics() -> None:
    text = NCCL_TESTS_RUN.format(busbw="1.09").replace("on DisAI-4090-2", "on DisAI-4090-3")
    assert "NCCL_TEST_BUSBW_LOW" not in found(report(text))


def test_the_table_is_one_output_and_its_comments_are_not_prompts() -> None:
    d = diagnose_bytes(NCCL_TESTS_RUN.format(busbw="1.09").encode())
    assert [s.kind for s in d.segments] == ["nccl-tests", "ibstat"]
    assert d.segments[0].text.count("\n") == 4  # header, units, two rows


def test_busbw_parser_reads_columns_by_name() -> None:
    from rdmadoctor.parsers.nccltests import parse_busbw

    # broadcast_perf has root and no redop (https://github.com/NVIDIA/nccl-tests/issues/82)
    text = ("#       size         count    type    root     time   algbw   busbw  error     time   algbw   busbw  error\n"
            "           8             2   float       0    45.82    0.00    0.00    N/A    38.17    0.00    0.00    N/A\n"
            "  2147483648     536870912   float       0   223410    9.61    9.61    N/A   222926    9.63    9.63    N/A\n")
    table = parse_busbw(text).value
    assert table.peak_gbs == 9.63 and table.largest.size_bytes == 2147483648
    assert parse_busbw("no table here").ok is False


def test_the_libfabric_provider_the_ofi_plugin_names() -> None:
    # https://github.com/NVIDIA/nccl/issues/1597 (excerpt)
    rep = report("8h200-2:6831:6840 [0] NCCL INFO Using network Libfabric\n"
                 "8h200-3:6310:6318 [0] NCCL INFO NET/OFI Selected Provider is efa (found 16 nics)\n")
    assert rep["nccl"]["network"] == "Libfabric" and rep["nccl"]["fabric"] == "efa" and rep["nccl"]["fabric_nics"] == 16
    line = next(f["message"] for c in rep["checks"] for f in c["findings"] if f["code"] == "LOGS_READ")
    assert "NET/Libfabric on libfabric provider efa (16 NICs)" in line
    d = diagnose_bytes(b"h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)\n")
    assert d.nccl["fabric"] == "efa (efa-direct)"


@pytest.mark.parametrize("text, code, subject", [
    # the libibverbs 1.1 / librdmacm pair Open MPI users quote when the kernel side is absent
    ("librdmacm: couldn't read ABI version.\nlibrdmacm: assuming: 4\nlibibverbs: Fatal: couldn't read uverbs ABI version.\n",
     "MOD_MISSING", "ib_uverbs"),
    # https://github.com/sgl-project/sglang/issues/16242: bnxt_re's provider and the kernel disagree
    ("libibverbs: Warning: Driver bnxt_re does not support the kernel ABI of 6 (supports 1 to 1) for device "
     "/sys/class/infiniband/bnxt_re2\n", "VERBS_KERNEL_ABI_MISMATCH", "/sys/class/infiniband/bnxt_re2"),
])
def test_abi_messages(text: str, code: str, subject: str) -> None:
    rep = report(text)
    assert subject in [f["subject"] for c in rep["checks"] for f in c["findings"] if f["code"] == code]


def test_a_quoted_terminal_session_is_judged_by_the_node_checks() -> None:
    text = ("> Here is what the pod shows:\n>\n> ```\n> root@trainer-0:/# ibstat\n> CA 'mlx5_0'\n> \tCA type: MT4123\n"
            "> \tNumber of ports: 1\n> \tPort 1:\n> \t\tState: Down\n> \t\tPhysical state: Polling\n> \t\tRate: 10\n"
            "> \t\tLink layer: InfiniBand\n> root@trainer-0:/# df -h /dev/shm\n> Filesystem      Size  Used Avail Use% Mounted on\n"
            "> shm              64M     0   64M   0% /dev/shm\n> ```\n")
    got = found(report(text))
    assert got["IB_PORT_DOWN"]["subject"] == "mlx5_0/1" and "SHM_TOO_SMALL" in got


def test_busbw_against_the_nics_in_nccls_topology() -> None:
    # The topology lines are NCCL's own (https://github.com/NVIDIA/nccl/issues/1519, "+ NET[25.0] - NET/3"):
    # four 200 Gb/s NICs per node, 100 GB/s together; the run peaks at 1.09 GB/s.
    topo = "".join(f"DisAI-4090-3:63755:63760 [0] NCCL INFO               + NET[25.0] - NET/{i} ({i}/0/25.000000)\n"
                   for i in range(4))
    text = NCCL_TESTS_RUN.format(busbw="1.09")
    text = topo + text[: text.index("$ ibstat")]
    rep = report(text)
    assert rep["nccl"]["net_bw_gbs"] == 100.0
    f = found(rep)["NCCL_TEST_BUSBW_LOW"]
    assert "NCCL's topology" in f["message"] and "100 GB/s per node" in f["message"]


@pytest.mark.parametrize("nxt, kind", [("CA 'mlx5_0'", "ibstat"), ("Infiniband device 'mlx5_0' port 1 status:", "ibstatus"),
                                       ("shm 64M 0 64M 0% /dev/shm", "df")])
def test_a_tool_output_after_a_long_line_is_not_its_rest(nxt: str, kind: str) -> None:
    long = "node1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB ; OOB eth0:10.0.0.1<0>"
    d = diagnose_bytes(f"{long}\n{nxt}\n".encode())
    assert [s.kind for s in d.segments] == [kind]


# ---- NCCL's error trace: `file.cc:LINE -> RESULT` INFO lines ------------------------------------


# https://github.com/pytorch/pytorch/issues/131781 (excerpt): no WARN, only the trace of a bootstrap
# connect that never completed, up to init.cc and group.cc.
TRACE_ONLY = """\
g105:26927:27054 [6] NCCL INFO Using network IB
g105:26921:27058 [0] NCCL INFO misc/socket.cc:505 -> 2 (Operation now in progress)
g105:26925:27053 [4] NCCL INFO misc/socket.cc:505 -> 2 (Operation now in progress)
g105:26921:27058 [0] NCCL INFO misc/socket.cc:570 -> 2
g105:26925:27053 [4] NCCL INFO misc/socket.cc:570 -> 2
g105:26921:27058 [0] NCCL INFO bootstrap.cc:275 -> 2
g105:26925:27053 [4] NCCL INFO bootstrap.cc:275 -> 2
g105:26921:27058 [0] NCCL INFO init.cc:1493 -> 2
g105:26925:27053 [4] NCCL INFO init.cc:1493 -> 2
g105:26921:27058 [0] NCCL INFO group.cc:64 -> 2 [Async thread]
g105:26925:27053 [4] NCCL INFO group.cc:64 -> 2 [Async thread]
"""


def test_an_error_trace_that_reaches_the_api_is_an_error_quoted_from_where_it_began() -> None:
    rep = report(TRACE_ONLY)
    got = found(rep)
    f = got["LOG_ERROR_UNKNOWN"]
    assert f["subject"] == "ncclSystemError"
    assert "to its caller (init.cc:1493), passed up from misc/socket.cc:505 (Operation now in progress)" in f["message"]
    assert f["data"]["count"] == 2  # one per thread's trace, not one per line
    assert [e["line"] for e in f["data"]["evidence"]] == [2, 3]
    assert rep["status"] == "fail"


def test_a_trace_nccl_steps_over_is_not_an_error() -> None:
    # https://github.com/NVIDIA/nccl/issues/1053: a disabled net plugin's init returns an error NCCL
    # does not pass on; the job goes on.
    text = ("axa:3048391:3048566 [0] NCCL INFO NCCL_IBEXT_DISABLE set by environment to 1.\n"
            "axa:3048391:3048566 [0] NCCL INFO net.cc:79 -> 3\n"
            "axa:3048391:3048566 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.1<0>\n"
            "axa:3048391:3048566 [0] NCCL INFO Using network IB\n"
            "axa:3048391:3048566 [0] NCCL INFO comm 0x5 rank 0 nranks 16 cudaDev 0 busId 1b000 - Init COMPLETE\n")
    assert "LOG_ERROR_UNKNOWN" not in found(report(text))
    # ncclInProgress (7) is what a nonblocking communicator says while it starts: no error either.
    assert not found(report("h:1:1 [0] NCCL INFO init.cc:1762 -> 7\n"))


def test_a_trace_after_the_warn_that_explains_it_is_that_error_passed_up() -> None:
    # https://github.com/NVIDIA/nccl/issues/562 (excerpt): the trace begins on the line after the WARN a
    # row explains, in the same process: the result it returns is that error, not an unknown one; the
    # finding quotes where it reached NCCL's API.
    text = ("hai-a100-3:3778851:3779883 [4] ibvwrap.c:130 NCCL WARN Call to ibv_create_qp failed\n"
            "hai-a100-3:3778851:3779883 [4] NCCL INFO ib_plugin.c:196 -> 2\n"
            "hai-a100-3:3778851:3779883 [4] NCCL INFO external/nccl_archive/src/init.cc:310 -> 2\n"
            "hai-a100-3:3778851:3779883 [4] NCCL INFO external/nccl_archive/src/group.cc:72 -> 2 [Async thread]\n")
    got = found(report(text))
    assert set(got) == {"NCCL_QP_CQ_CREATE_FAILED"}
    assert [e["line"] for e in got["NCCL_QP_CQ_CREATE_FAILED"]["data"]["evidence"]] == [1, 3]
    # A trace after a WARN no row knows is still said (with that WARN), and one far from the WARN too.
    unknown = text.replace("Call to ibv_create_qp failed", "Something new went wrong")
    assert "LOG_ERROR_UNKNOWN" in found(report(unknown))
    apart = text.replace("\n", "\nhai-a100-3:3778851:3779883 [4] NCCL INFO x\n" * 3, 1)
    assert found(report(apart))["LOG_ERROR_UNKNOWN"]["cause"] == "NCCL_QP_CQ_CREATE_FAILED"


def test_a_connect_to_a_link_local_address_names_the_interface() -> None:
    # https://github.com/NVIDIA/nccl/issues/975 (excerpt)
    text = ("n122-246-085:12251:12400 [5] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
            "fe80::966d:ae03:a2:8cf0%ib1<17943> failed : Software caused connection abort\n")
    f = found(report(text))["NCCL_SOCKET_ERROR"]
    assert f["data"]["pattern"] == "nccl.socket_connect_link_local"
    assert "Software caused connection abort. That is an IPv6 link-local address (fe80::, scope ib1)" in f["message"]
    assert "NCCL_SOCKET_FAMILY" in f["remedy"]
    # An IPv4 peer is the plain row.
    f = found(report(text.replace("fe80::966d:ae03:a2:8cf0%ib1", "10.0.0.3")))["NCCL_SOCKET_ERROR"]
    assert f["data"]["pattern"] == "nccl.socket_connect_failed"


@pytest.mark.parametrize("line, code, said", [
    ("n1:7:9 [0] include/alloc.h:124 NCCL WARN Cuda failure 'out of memory'", "NCCL_CUDA_FAILED", "NCCL_BUFFSIZE"),
    ("n1:7:9 [2] transport/p2p.cc:274 NCCL WARN Cuda failure 'peer access is not supported between these two devices'",
     "NCCL_CUDA_FAILED", "NCCL_P2P_DISABLE=1"),
    ("n1:7:9 [0] transport/nvls.cc:130 NCCL WARN Cuda failure 801 'operation not supported'", "NCCL_CUDA_FAILED",
     "NCCL_NVLS_ENABLE=0"),
    ("n1:7:9 [0] misc/cudawrap.cc:188 NCCL WARN cuDriverGetVersion failed with 35", "NCCL_CUDA_FAILED",
     "driver is older than the CUDA"),
    # https://github.com/NVIDIA/nccl/issues/1029 (mpirun's host tag before NCCL's prefix)
    ("rdma-test-gpu-worker-0: rdma-test-gpu-worker-0:4275:4301 [0] misc/cudawrap.cc:33 NCCL WARN Cuda failure "
     "'initialization error'", "NCCL_CUDA_FAILED", "the container does not see the GPU"),
    ("torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 3 (pid: 812) of binary: "
     "/usr/bin/python3", "JOB_KILLED", "local_rank 3 (PID 812) was killed by signal 9 (SIGKILL)"),
    ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
     "NCCL_BOOTSTRAP_FAILED", "only 1 of 2 ranks connected"),
    # https://github.com/pytorch/pytorch/issues/107021, #69197
    ("[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to connect to 192.0.0.1:1234",
     "NCCL_BOOTSTRAP_FAILED", "timed out after 60s while trying to connect to 192.0.0.1:1234."),
    ("RuntimeError: connect() timed out. Original timeout was 60000 ms.", "NCCL_BOOTSTRAP_FAILED", "within 60000 ms"),
    ("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", "NCCL_BOOTSTRAP_FAILED",
     "fewer nodes than --nnodes"),
])
def test_cuda_launcher_and_store_lines(line: str, code: str, said: str) -> None:
    f = found(report(line + "\n"))[code]
    assert said in f["message"], f["message"]


def test_nccls_graph_fallback_warn_is_information() -> None:
    # NCCL prints it as a WARN; the job goes on (src/graph/search.cc).
    rep = report("n1:7:9 [0] graph/search.cc:1127 NCCL WARN Could not find a path for pattern 4, falling back to "
                 "simple order\nn1:7:9 [0] NCCL INFO Using network IB\n")
    assert rep["status"] == "pass" and not found(rep)
    codes = [f["code"] for c in rep["checks"] for f in c["findings"]]
    assert "NCCL_GRAPH_SIMPLE_ORDER" in codes and "LOG_ERROR_UNKNOWN" not in codes


# ---- Gloo, PyTorch's CPU backend: the same TCP between ranks -------------------------------------

GLOO_WARN = ("[rank9]:[W ProcessGroupGloo.cpp:721] Warning: Unable to resolve hostname to a (local) address. Using the "
             "loopback address as fallback. Manually set the network interface to bind to with GLOO_SOCKET_IFNAME. "
             "(function operator())\n")


def test_gloo_on_loopback_explains_its_mesh_failing() -> None:
    # vLLM on Ray across two hosts (a pasted excerpt quoted in several public issues): the warning,
    # then the mesh that could not be made.
    text = GLOO_WARN + ("[rank8]:[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed with "
                        "[../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n")
    got = found(report(text))
    assert got["NCCL_SOCKET_ERROR"]["cause"] == "GLOO_LOOPBACK"
    assert "Gloo gave no reason" in got["NCCL_SOCKET_ERROR"]["message"]
    assert "GLOO_SOCKET_IFNAME" in got["GLOO_LOOPBACK"]["remedy"]


def test_gloo_on_loopback_is_information_on_one_host() -> None:
    rep = report("n1:1:1 [0] NCCL INFO comm 0x5 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\n" + GLOO_WARN)
    assert rep["status"] == "pass" and not found(rep)
    single = [f for c in rep["checks"] for f in c["findings"] if f["code"] == "NCCL_SINGLE_HOST"]
    assert single and "Gloo on the loopback address is information here" in single[0]["message"]


def test_a_gloo_pair_closed_by_its_peer() -> None:
    got = found(report("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
                       "[10.244.1.12]:28913\n"))
    assert got["NCCL_SOCKET_ERROR"]["message"] == ("A Gloo TCP connection between ranks failed: Connection closed by "
                                                   "peer [10.244.1.12]:28913.")


def test_a_follow_on_of_the_same_code_and_subject_folds_under_the_first() -> None:
    # https://github.com/pytorch/pytorch/issues/107021: the socket timeout, then torchrun's wrapper.
    from rdmadoctor.output.text import folding

    rep = report("[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to connect to "
                 "192.0.0.1:1234\ntorch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection "
                 "to the C10d store has failed. See inner exception for details.\n")
    folded = [f["data"]["pattern"] for fs in folding(rep).values() for f in fs]
    assert folded == ["pytorch.rendezvous_connection"]


# PyTorch's words for an NCCL result, printed under `NCCL error in: ...` (getNcclErrorDetailStr in
# torch/csrc/distributed/c10d/NCCLUtils.cpp); the pairs as issues show them: pytorch/pytorch#149984
# (`NCCL error: unhandled system error ...` then `ncclSystemError: System call (e.g. socket, malloc) ...`),
# rstrudel/segmenter#60 (PyTorch 1.x: `ncclSystemError: System call (socket, malloc, munmap, etc) failed.`).
@pytest.mark.parametrize("error, detail, code, subject", [
    ("unhandled system error (run with NCCL_DEBUG=INFO for details)",
     "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
     "NCCL_SYSTEM_ERROR", "NCCL"),
    ("unhandled system error", "ncclSystemError: System call (socket, malloc, munmap, etc) failed.",
     "NCCL_SYSTEM_ERROR", "NCCL"),
    ("remote process exited or there was a network error",
     "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
     "NCCL_REMOTE_ERROR", "NCCL"),
    ("internal error - please report this issue to the NCCL developers",
     "ncclInternalError: Internal check failed.", "NCCL_CALL_FAILED", "internal error"),
    ("invalid usage (run with NCCL_DEBUG=WARN for details)",
     "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.", "NCCL_CALL_FAILED", "invalid usage"),
    ("unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
     "ncclUnhandledCudaError: Call to CUDA function failed.", "NCCL_CALL_FAILED", "unhandled cuda error"),
])
def test_pytorchs_words_for_an_nccl_result_are_the_same_finding(error: str, detail: str, code: str,
                                                                 subject: str) -> None:
    head = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
            f"{error}, NCCL version 2.19.3\n")
    rep = report(head + detail + "\n")
    problems = [f for c in rep["checks"] for f in c["findings"] if f["severity"] == "error"]
    # One finding with both lines as its evidence: before, the second line was an unknown error
    # ("no row of the knowledge base explains it") following from the first.
    assert [(f["code"], f["subject"]) for f in problems] == [(code, subject)]
    assert [e["line"] for e in problems[0]["data"]["evidence"]] == [1, 2]
    # Alone (the exception line cut off), the detail line still says which result it was.
    alone = [f for c in report(detail + "\n")["checks"] for f in c["findings"] if f["severity"] == "error"]
    assert [(f["code"], f["subject"]) for f in alone] == [(code, subject)]


# https://github.com/Azure/azhpc-images/issues/327 (excerpt): an image's /etc/nccl.conf sets
# NCCL_GRAPH_FILE, written for more GPUs than the VM has.
GRAPH_FILE_LOG = """\
::16674:17023 [0] NCCL INFO comm 0x5640f24752d0 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 100000 commId 0x2064c00fc2f91516 - Init START
::16674:17023 [0] NCCL INFO NCCL_TOPO_FILE set by environment to /opt/microsoft/ncv4/topo.xml
::16674:17023 [0] NCCL INFO NCCL_GRAPH_FILE set by environment to /opt/microsoft/ncv4/graph.xml

::16674:17023 [0] graph/search.cc:703 NCCL WARN XML Import Channel : dev 1 not found.
::16674:17023 [0] NCCL INFO graph/search.cc:733 -> 2
::16674:17023 [0] NCCL INFO init.cc:880 -> 2
::16674:17023 [0] NCCL INFO group.cc:64 -> 2 [Async thread]
"""


def test_an_injected_graph_file_is_the_cause_of_the_import_failure() -> None:
    rep = report(GRAPH_FILE_LOG)
    problems = [f for c in rep["checks"] for f in c["findings"] if f["severity"] in ("error", "warning")]
    root = [f for f in problems if not f.get("cause")]
    assert [(f["code"], f["subject"]) for f in root] == [("NCCL_GRAPH_FILE", "NCCL_GRAPH_FILE")]
    assert "/opt/microsoft/ncv4/graph.xml" in root[0]["message"] and "/etc/nccl.conf" in root[0]["remedy"]
    failed = next(f for f in problems if f["subject"] == "graph file, GPU 1")
    assert failed["severity"] == "error" and failed["cause"] == "NCCL_GRAPH_FILE"
    assert rep["status"] == "fail"
    # NCCL_TOPO_FILE alone is fine (it describes the topology), and the import failure alone is
    # still the error it is.
    assert not found(report(GRAPH_FILE_LOG.replace("NCCL_GRAPH_FILE set", "NCCL_GRAPH_FILX set").split("\n\n")[0] + "\n"))
    alone = found(report(GRAPH_FILE_LOG.split("\n\n")[1]))
    assert alone["NCCL_GRAPH_FILE"]["severity"] == "error" and not alone["NCCL_GRAPH_FILE"].get("cause")


# ---- pastes found for this round (issue 16, classes 2 and 3), each with its source -----------------

# https://github.com/openshift/sriov-network-operator/issues/635 (excerpt): `rdma link` on a DGX A100.
RDMA_LINK = """\
root@node2$ rdma link
link mlx5_0/1 subnet_prefix fe80:0000:0000:0000 lid 3 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP
link mlx5_1/1 subnet_prefix fe80:0000:0000:0000 lid 65535 sm_lid 0 lmc 0 state DOWN physical_state DISABLED
link mlx5_4/1 state ACTIVE physical_state LINK_UP netdev enp97s0f0
"""


def test_rdma_link_is_parsed_and_its_ports_judged() -> None:
    from rdmadoctor.parsers.rdma_link import parse_rdma_link

    parsed = parse_rdma_link(RDMA_LINK)
    assert parsed.ok and [d.name for d in parsed.value] == ["mlx5_0", "mlx5_1", "mlx5_4"]
    ib, down, eth = (d.ports[0] for d in parsed.value)
    assert (ib.state, ib.phys_state, ib.link_layer, ib.lid, ib.sm_lid) == ("ACTIVE", "LinkUp", "InfiniBand", 3, 1)
    assert (down.state, down.phys_state) == ("DOWN", "Disabled")
    assert (eth.link_layer, eth.netdev, eth.lid) == ("Ethernet", "enp97s0f0", None)
    # iproute2 4.x wrote "1/1: mlx5_0/1: ..."; other text is skipped with a warning, never a port.
    old = parse_rdma_link("1/1: mlx5_0/1: state DOWN physical_state POLLING netdev ens1f0\nhello\n")
    assert [(d.name, d.ports[0].phys_state) for d in old.value] == [("mlx5_0", "Polling")] and old.warnings
    assert not parse_rdma_link("\xff\x00 garbage\n").ok
    # Pasted with its prompt, and without it: the DOWN port is found (before: PASS, nothing read it).
    for text in (RDMA_LINK, RDMA_LINK.split("\n", 1)[1]):
        got = found(report(text))
        assert got["IB_PORT_DOWN"]["subject"] == "mlx5_1/1", text
        assert "rdma link" in got["IB_PORT_DOWN"]["message"]


def test_a_port_that_knows_its_subnet_manager_is_not_waiting_for_one() -> None:
    # https://github.com/Mellanox/network-operator/issues/1646 (excerpt): a VF in a pod, GUID all zeros.
    text = ("root@test-pod:/# ibv_devinfo\nhca_id: mlx5_7\n    transport:    InfiniBand (0)\n"
            "    node_guid:    0000:0000:0000:0000\n    phys_port_cnt:    1\n    port: 1\n"
            "    state:    PORT_INIT (2)\n    sm_lid:    4\n    port_lid:    65535\n    link_layer:    InfiniBand\n")
    got = found(report(text))
    assert "IB_NO_SM" not in got
    f = got["IB_PORT_INIT"]
    assert "SM LID 4" in f["message"] and "GUID is 0000:0000:0000:0000" in f["message"] and "node_guid" in f["remedy"]
    # With sm_lid 0 it is still a missing subnet manager.
    assert "IB_NO_SM" in found(report(text.replace("sm_lid:    4", "sm_lid:    0")))


def test_a_port_down_with_its_link_up_is_not_a_cable() -> None:
    # https://github.com/Mellanox/network-operator/issues/249 (excerpt): an SR-IOV VF in a pod.
    text = ("root@test-sriov-ib-pod:~# ibstat mlx5_7\nCA 'mlx5_7'\n\tCA type: MT4124\n\tNumber of ports: 1\n\tPort 1:\n"
            "\t\tState: Down\n\t\tPhysical state: LinkUp\n\t\tRate: 200\n\t\tBase lid: 65535\n\t\tSM lid: 1\n"
            "\t\tLink layer: InfiniBand\n")
    msg = found(report(text))["IB_PORT_DOWN"]["message"]
    assert "no link" not in msg and "logically down" in msg and "virtual function" in msg


@pytest.mark.parametrize("text, code, said", [
    # https://github.com/NVIDIA/JAX-Toolbox/issues/183: gdb's backtrace of the SIGBUS.
    ('Thread 787 "imagenet_fake_d" received signal SIGBUS, Bus error.\n'
     "#0 0x00007f6b59544f3b in ncclShmOpen(char*, unsigned long, void**, void**, int, void**) ()\n",
     "NCCL_SHM_FAILED", "ncclShmOpen"),
    # https://github.com/NVIDIA/nccl-tests/issues/14
    ("e66aa18dc444:3171:3171 [0] include/socket.h:311 WARN Socket creation failed : Address family not supported "
     "by protocol\n", "NCCL_NO_SOCKET_INTERFACE", "no usable IP interface"),
    # https://github.com/NVIDIA/nccl-tests/issues/188
    ("user:16902:16954 [3] misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong type 4 != 3\n",
     "NCCL_SOCKET_ERROR", "Using network Socket"),
    # https://github.com/NVIDIA/nccl-tests/issues/263
    ("g0010: Test CUDA failure common.cu:941 'invalid device ordinal'\n", "NCCL_CUDA_FAILED", "-g 1"),
    # https://github.com/NVIDIA/nccl/issues/1769
    ("[rank2]: Cuda failure 802 'system not yet initialized'\n", "NCCL_CUDA_FAILED", "nvidia-fabricmanager"),
    # https://github.com/NVIDIA/nccl/issues/1710: a queue's event, not the device's.
    ("node:1:2 [0] transport/net_ib.cc:142 NCCL WARN NET/IB : mlx5_0:1 Got async event : local access violation "
     "work queue error\n", "NCCL_IB_ASYNC_FATAL", "the HCA itself reported no fault"),
])
def test_more_real_lines(text: str, code: str, said: str) -> None:
    f = found(report(text))[code]
    assert said in f["message"] + " " + f["remedy"], f


def test_a_device_fatal_event_still_says_the_hca_failed() -> None:
    f = found(report("n:1:2 [0] transport/net_ib.cc:95 NCCL WARN NET/IB : Got async event : local catastrophic "
                     "error\n"))["NCCL_IB_ASYNC_FATAL"]
    assert "for itself" in f["message"] and "Drain the node" in f["remedy"]


# https://github.com/NVIDIA/nccl/issues/1235 (excerpt): one rank runs out of GPU memory; the others
# lose their sockets to it first in the log.
OOM_AFTER_VICTIMS = """\
ng30903:3063025:3066048 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer ng30903-ib<51159>
ng30903:3063025:3066048 [0] NCCL INFO misc/socket.cc:749 -> 6

ng30903:3063025:3066048 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x55a51966cc80
ng30903:3063025:3066048 [0] NCCL INFO transport/p2p.cc:438 -> 3
ng30903:3063025:3066048 [0] NCCL INFO init.cc:1079 -> 3
ng30903:3063025:3066048 [0] NCCL INFO group.cc:65 -> 3 [Async thread]
ng30903:3063025:3066031 [0] NCCL INFO group.cc:406 -> 3
ng30903:3063025:3066031 [0] NCCL INFO group.cc:96 -> 3

ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'
"""


def test_a_cause_leads_victims_that_nothing_explained() -> None:
    rep = report(OOM_AFTER_VICTIMS)
    roots = [f["code"] for c in rep["checks"] for f in c["findings"]
             if f["severity"] == "error" and not f.get("cause")]
    # The out-of-memory rank first; the proxy's lost socket (a victim's line) after it.
    assert roots[0] == "NCCL_CUDA_FAILED" and "NCCL_SOCKET_ERROR" in roots[1:]


def test_an_error_leads_a_warning_nothing_failed_after() -> None:
    # https://github.com/pytorch/pytorch/pull/40622 (a comment's excerpt, verbatim): libibverbs missing (a
    # warning) and then /dev/shm full (the failure).
    text = ("5135fc87695d:126318:126318 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
            "NCCL version 2.7.3+cuda10.2\n\n"
            "5135fc87695d:126319:126319 [1] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n\n"
            "5135fc87695d:126319:126336 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on "
            "device\n\n"
            "5135fc87695d:126319:126336 [1] include/shm.h:48 NCCL WARN Error while creating shared memory segment "
            "nccl-shm-recv-54c7cb5318ccdf40-1-0-1 (size 9637888)\n")
    rep = report(text)
    codes = [f["code"] for c in rep["checks"] for f in c["findings"] if f["severity"] in ("error", "warning")
             and not f.get("cause")]
    assert codes[0] == "NCCL_SHM_FAILED", codes


@pytest.mark.parametrize("text, code, said", [
    # https://github.com/WukLab/LITE/issues/5, pasted without the space
    ("Failed to get IB devices list:Function not implemented\n", "MOD_MISSING", "ib_uverbs"),
    # https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/106
    ("Did not detect devices \nIf device exists, check if driver is up\nUnable to find the Infiniband/RoCE device\n",
     "VERBS_NO_DEVICES", "rdma-core"),
    # https://github.com/ofiwg/libfabric/issues/7324 (PSM3 under Open MPI)
    ("hostname.domain.edu:pid502724.hello_world: Unable to create send CQ of size 5080 on mlx5_0: Cannot allocate memory\n",
     "OFI_ERROR", "ulimit -l unlimited"),
    # https://github.com/HiFiLES/HiFiLES-solver/issues/99
    ("WARNING: It appears that your OpenFabrics subsystem is configured to only\nallow registering part of your "
     "physical memory.\n", "VERBS_REG_MEMORY_LIMITED", "log_num_mtt"),
    # https://github.com/kubeflow/pytorch-operator/issues/125
    ("    store = TCPStore(master_addr, master_port, start_daemon)\nValueError: host not found: Name or service not "
     "known\n", "NCCL_BOOTSTRAP_FAILED", "does not resolve"),
    # https://github.com/modelscope/ms-swift/issues/6368
    ("nslookup: can't resolve 'dlc1dwuhvtro4c27-master-0': Name does not resolve\nwaiting for master\n",
     "NCCL_BOOTSTRAP_FAILED", "dlc1dwuhvtro4c27-master-0"),
])
def test_more_tool_and_stack_lines(text: str, code: str, said: str) -> None:
    f = found(report(text))[code]
    assert said in f["message"] + " " + f["remedy"], f


def test_perftest_explains_its_own_device_search_failure() -> None:
    # The "Unable to find" after "Did not detect devices" is what the first line became.
    rep = report("Did not detect devices \nIf device exists, check if driver is up\n"
                 "Unable to find the Infiniband/RoCE device\n")
    by_code = {f["code"]: f for c in rep["checks"] for f in c["findings"]}
    assert by_code["IB_DEVICE_NAME_UNKNOWN"]["cause"] == "VERBS_NO_DEVICES"
    assert not by_code["VERBS_NO_DEVICES"].get("cause")


def test_perftest_zero_gids_explain_the_failed_connect() -> None:
    # https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/72 (excerpt)
    text = (" Link type       : Ethernet\n GID index       : 0\n"
            " local address: LID 0000 QPN 0x003b PSN 0xab3a5e RKey 0x015b1a VAddr 0x007f72e9620000\n"
            " GID: 00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00\n"
            " remote address: LID 0000 QPN 0x003c PSN 0x65b096 RKey 0x014d0c VAddr 0x007fcb322d5000\n"
            " GID: 00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00\n"
            "Failed to modify QP 59 to RTR\n Unable to Connect the HCA's through the link\n")
    rep = report(text)
    got = [(f["code"], f.get("cause")) for c in rep["checks"] for f in c["findings"] if f["severity"] == "error"]
    assert got[0] == ("ROCE_NO_V2_GID", None)
    assert ("IB_QP_CONNECT_FAILED", "ROCE_NO_V2_GID") in got
    # A real GID is not a finding.
    assert "ROCE_NO_V2_GID" not in found(report(" GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:00:00:07\n"))


def test_libfabric_failing_under_the_plugin_is_the_reason_for_sockets() -> None:
    # https://github.com/aws/aws-ofi-nccl/issues/715 (excerpt, CloudWatch's table kept)
    text = (" | 2024-11-28T07:42:11.527Z | libfabric:17778:1732779731::efa:cq:efa_cq_ibv_cq_ex_open_with_ibv_create_cq_ex"
            "():92<warn> Unable to create extended CQ: Cannot allocate memory\n"
            " | 2024-11-28T07:42:11.527Z | algo-1:17778:17848 [5] nccl_ofi_ofiutils_init_connection:274 NCCL WARN NET/OFI "
            "Couldn't open CQ. RC: -22, ERROR: Invalid argument\n"
            " | 2024-11-28T07:42:11.527Z | algo-1:17778:17848 [5] nccl_net_ofi_create_plugin:259 NCCL WARN NET/OFI "
            "aws-ofi-nccl initialization failed\n"
            " | 2024-11-28T07:42:11.528Z | algo-1:17778:17848 [5] NCCL INFO NET/Socket : Using [0]eth0:10.0.227.37<0>\n"
            " | 2024-11-28T07:42:11.528Z | algo-1:17778:17848 [5] NCCL INFO Using network Socket\n")
    rep = report(text)
    fs = [f for c in rep["checks"] for f in c["findings"] if f["severity"] == "error"]
    root = [f for f in fs if not f.get("cause")]
    assert root[0]["code"] == "OFI_ERROR" and "Cannot allocate memory" in root[0]["message"]
    assert all(f.get("cause") == "OFI_ERROR" for f in fs if "NET/OFI" in f["data"]["evidence"][0]["text"])
    # One host in the paste, and nothing saying the job spans more: a warning, with its reason.
    fallback = next(f for c in rep["checks"] for f in c["findings"] if f["code"] == "NCCL_SOCKET_FALLBACK")
    assert "Cannot allocate memory" in fallback["message"] and fallback["severity"] == "warning"


def test_libfabric_that_cannot_open_a_device_lists_none() -> None:
    # https://github.com/ofiwg/libfabric/issues/12708 (the reporter's excerpt, "..." theirs)
    text = ("libfabric:...:efa:ep_data:efa_device_construct_gid():47<warn> ibv_open_device failed! errno: 2\n"
            "libfabric:...:core:core:fi_getinfo_():1391<warn> fi_getinfo: provider efa output empty list\n"
            "fi_getinfo: -61 (No data available)\n")
    rep = report(text)
    fs = {f["code"]: f for c in rep["checks"] for f in c["findings"] if f["severity"] == "error"}
    assert "efa provider" in fs["DEV_UVERBS_MISSING"]["message"] and not fs["DEV_UVERBS_MISSING"].get("cause")
    assert fs["OFI_NO_PROVIDER"]["cause"] == "DEV_UVERBS_MISSING"


def test_ib_disabled_in_the_pasted_launch_makes_libibverbs_information() -> None:
    # https://github.com/NVIDIA/nccl-tests/issues/82 (excerpt): a TCP benchmark on purpose.
    text = ("(base) gandiva@v100-gpu-1:~/nccl-tests$ mpirun --bind-to none -x NCCL_DEBUG=WARN -x NCCL_IB_DISABLE=1 "
            "-x NCCL_SOCKET_IFNAME=eth0 -np 2 --host 10.0.0.48:1,10.0.0.52:1 ./build/broadcast_perf -b 8 -e 2G\n"
            "v100-gpu-1:14926:14926 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
            "NCCL version 2.9.6+cuda11.2\n")
    rep = report(text)
    sev = {f["code"]: f["severity"] for c in rep["checks"] for f in c["findings"]}
    assert sev["NCCL_IB_DISABLED_BY_ENV"] == "warning" and sev["VERBS_LIB_MISSING"] == "info"
    # NCCL_IB_DISABLE=0 is not a finding, and without the setting libibverbs missing stays a warning.
    assert "NCCL_IB_DISABLED_BY_ENV" not in found(report(text.replace("NCCL_IB_DISABLE=1", "NCCL_IB_DISABLE=0")))
    assert found(report(text.split("\n", 1)[1]))["VERBS_LIB_MISSING"]["severity"] == "warning"


def test_devices_a_pod_was_not_given_fail_to_open_beside_its_own() -> None:
    # https://github.com/hustcat/k8s-rdma-device-plugin/issues/8 (excerpt): 8 VFs, the pod got mlx4_2.
    text = ("Failed to open device\nFailed to open device\nhca_id: mlx4_2\n        transport:   InfiniBand (0)\n"
            "        phys_port_cnt:  1\n        Device ports:\n                port:   1\n"
            "                        state:   PORT_ACTIVE (4)\n                        sm_lid:  2\n"
            "                        port_lid:  1\n                        link_layer:  InfiniBand\n\n"
            "Failed to open device\n")
    rep = report(text)
    f = next(f for c in rep["checks"] for f in c["findings"] if f["code"] == "DEV_UVERBS_MISSING")
    assert f["severity"] == "info" and "mlx4_2" in f["message"]
    # Alone, it is still the problem it is.
    assert found(report("Failed to open device\n"))["DEV_UVERBS_MISSING"]["severity"] == "error"


def test_hosts_are_every_host_that_printed_not_only_those_that_warned() -> None:
    # https://github.com/NVIDIA/nccl/issues/1029 (excerpt, pdsh's "host: " kept)
    text = ("rdma-test-gpu-worker-0: rdma-test-gpu-worker-0:4280:5850 [5] NCCL INFO NVLS multicast support is not "
            "available on dev 5\n"
            "rdma-test-gpu-worker-1: rdma-test-gpu-worker-1:2918:4483 [4] transport/nvls.cc:245 NCCL WARN Cuda failure "
            "'initialization error'\n")
    d = diagnose_bytes(text.encode())
    assert d.nccl["hosts"] == ["rdma-test-gpu-worker-0", "rdma-test-gpu-worker-1"]


def test_a_warning_that_sent_nccl_to_sockets_leads_as_the_cause_it_is() -> None:
    # IB not found on one host (a warning), NCCL on sockets there (an error that follows from it), then
    # a later failure elsewhere: the warning keeps its place, first, with the fallback under it.
    text = ("h1:1:1 [0] NCCL INFO NET/IB : No device found.\n"
            "h1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
            "h1:1:1 [0] NCCL INFO Using network Socket\n"
            "h2:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.2<0>\n"
            "h2:1:1 [0] NCCL INFO Using network IB\n"
            "h2:1:1 [0] transport/net_ib.cc:1034 NCCL WARN NET/IB : Got completion from peer 10.0.0.3<4> with status=12 "
            "opcode=0 len=0 vendor err 129 (Recv)\n")
    d = diagnose_bytes(text.encode())
    assert [f.code for f in d.findings if f.severity in ("error", "warning")][:3] == [
        "NCCL_IB_NO_DEVICE", "NCCL_SOCKET_FALLBACK", "NCCL_IB_COMPLETION_ERROR"]


def test_nccls_proxy_failures_follow_the_socket_error_before_them() -> None:
    # https://github.com/dmlc/xgboost/issues/7982 (excerpt): before, "Proxy Call to rank 3 failed
    # (Connect)" was an unknown error that led the report.
    text = ("ip-172-31-12-104:28056:39685 [0] misc/socket.cc:503 NCCL WARN Net : Call to recv from 172.18.0.1<34483> "
            "failed : Broken pipe\n"
            "ip-172-31-12-104:28056:39685 [0] proxy.cc:1040 NCCL WARN [Proxy Service 3] Failed to execute operation "
            "Connect from rank 3, retcode 2\n"
            "ip-172-31-12-104:28056:17126 [0] proxy.cc:808 NCCL WARN Proxy Call to rank 3 failed (Connect)\n")
    rep = report(text)
    fs = [f for c in rep["checks"] for f in c["findings"] if f["severity"] == "error"]
    assert "LOG_ERROR_UNKNOWN" not in {f["code"] for f in fs}
    roots = [f for f in fs if not f.get("cause")]
    assert [f["subject"] for f in roots] == ["172.18.0.1<34483>"]


def test_output_printed_after_a_prompt_is_read() -> None:
    # https://github.com/openshift/sriov-network-operator/issues/635 (excerpt): a background job's
    # output lands after the next prompt.
    text = ("root@sample-pod2-5d9957776c-jkvml:/# ib_write_bw -a -d mlx5_18 &\n[1] 10690\n"
            "root@sample-pod2-5d9957776c-jkvml:/#  Port number 1 state is Down\n Couldn't set the link layer\n"
            " Couldn't get context for the device\n")
    rep = report(text)
    fs = {f["code"]: f for c in rep["checks"] for f in c["findings"] if f["severity"] == "error"}
    assert not fs["IB_PORT_DOWN"].get("cause") and fs["DEV_UVERBS_MISSING"]["cause"] == "IB_PORT_DOWN"
    # A command after a prompt is not read as a line of output.
    assert not found(report('root@pod:/# grep "Connection closed by remote peer" job.log\n'))


def test_a_json_log_gives_its_line_not_its_record() -> None:
    # Before, the network was read as `IB\n","stream":"stdout","time":...`.
    text = ('{"log":"node-1:77:77 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.1\\u003c0\\u003e\\n",'
            '"stream":"stdout","time":"2024-05-01T10:00:00.1Z"}\n'
            '{"log":"node-1:77:77 [0] NCCL INFO Using network IB\\n","stream":"stdout","time":"2024-05-01T10:00:00.2Z"}\n')
    d = diagnose_bytes(text.encode())
    assert d.nccl["network"] == "IB" and d.nccl["hosts"] == ["node-1"]


def test_a_fallback_on_some_hosts_names_what_the_others_use_only_when_the_log_says() -> None:
    text = ("node-1:77:90 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\nnode-1:77:90 [0] NCCL INFO Using network "
            "Socket\nnode-2:77:90 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.1<43210> "
            "failed : Connection refused\n")
    msg = found(report(text))["NCCL_SOCKET_FALLBACK"]["message"]
    assert "while the others use Socket" not in msg and "not in the log" in msg
    msg = found(report(text + "node-2:77:90 [0] NCCL INFO Using network IB\n"))["NCCL_SOCKET_FALLBACK"]["message"]
    assert "while the others use IB" in msg


def test_names_mentioned_in_a_sentence_are_not_the_jobs_errors() -> None:
    # NVIDIA/nccl#795 and ai4d-iasc/trixie#77 (excerpts): prose about a result name and a setting.
    prose = ("One interesting thing is that the initial error down the stack -- `ncclRemoteError` (code 6) -- becomes "
             "a system error.\nIf I set `NCCL_IB_DISABLE=1`, I get a bit further.\n")
    assert not found(report(prose))
    # The same names as programs print them still count.
    assert "NCCL_REMOTE_ERROR" in found(report("ncclRemoteError: A call failed possibly due to a network error or a "
                                               "remote process exiting prematurely.\n"))
    assert "NCCL_IB_DISABLED_BY_ENV" in found(report("export NCCL_IB_DISABLE=1\n"))


def test_a_setting_that_only_moves_nccl_to_sockets_does_not_explain_a_closed_connection() -> None:
    # ai4d-iasc/trixie#77 (excerpt): IB disabled as a workaround; the peer closing its socket is
    # the firewall's doing, not the setting's.
    text = ("cn135:30932:30932 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
            "cn135:30932:30932 [0] NCCL INFO NET/Socket : Using [0]ib0:10.11.0.135<0>\n"
            "cn135:30932:30932 [0] NCCL INFO Using network Socket\n"
            "cn135:30932:30990 [0] include/socket.h:409 NCCL WARN Net : Connection closed by remote peer 10.11.0.136<20368>\n")
    fs = {f["code"]: f for c in report(text)["checks"] for f in c["findings"]}
    assert not fs["NCCL_SOCKET_ERROR"].get("cause")
    # A timeout after it is the slowness of sockets: that one follows from it.
    text2 = text.replace("include/socket.h:409 NCCL WARN Net : Connection closed by remote peer 10.11.0.136<20368>",
                         "x") + ("[E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog caught collective operation timeout: "
                                 "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800466 milliseconds "
                                 "before timing out.\n")
    fs = {f["code"]: f for c in report(text2)["checks"] for f in c["findings"]}
    assert fs["NCCL_TIMEOUT"]["cause"] == "NCCL_IB_DISABLED_BY_ENV"


def test_part_of_nccl_tests_rank_list_is_not_one_host() -> None:
    # NVIDIA/nccl-tests#284 (excerpt): the list cut to rank 1, NCCL lines from two hosts.
    text = ("#  Rank  1 Group  0 Pid 475220 on agzen-worker device  0 [0x01] NVIDIA GeForce RTX 4090\n"
            "agzen-master:3867861:3867861 [0] NCCL INFO Bootstrap: Using enp3s0:10.42.0.4<0>\n"
            "agzen-worker:475220:475228 [0] NCCL INFO Using network Socket\n")
    d = diagnose_bytes(text.encode())
    assert d.nccl["nodes"] != 1 and not any(f.code == "NCCL_SINGLE_HOST" for f in d.findings)


@pytest.mark.parametrize("text, code, said", [
    # https://github.com/NVIDIA/nccl/issues/1672: NVLS, not a /dev/shm problem nor the GPU's health
    ("[2025-04-06 22:31:56] ccw-gpu-128:3485254:3487188 [0] transport/nvls.cc:598 NCCL WARN Cuda failure 1 "
     "'invalid argument'\n", "NCCL_CUDA_FAILED", "NCCL_NVLS_ENABLE=0"),
    # https://github.com/NVIDIA-NeMo/Speech/issues/13996 (NCCL 2.25's bug, fixed in 2.27)
    ("node:1:2 [0] graph/topo.h:230 NCCL WARN Could not find NET with id 0\n", "NCCL_TOPOLOGY_FAILED", "2.27"),
    # https://github.com/NVIDIA/nccl/issues/1247 (vLLM under Ray)
    ("(RayWorkerVllm pid=7602) ERROR 04-07 00:57:46 ray_utils.py:45] Attribute busid of node nic not found\n",
     "NCCL_TOPOLOGY_FAILED", "PCI"),
    # https://github.com/NVIDIA/nccl/issues/573 (WSL2)
    ("SHJS-PF4ZKYLL:92777:92889 [0] graph/xml.cc:332 NCCL WARN Could not find real path of "
     "/sys/class/pci_bus/0000:01/../../0000:01:00.0\n", "NCCL_TOPOLOGY_FAILED", "/sys"),
    # https://github.com/ROCm/rccl/issues/1026
    ('g1064:11143:11143 [0] init.cpp:120 NCCL WARN Missing "amd_iommu=on" from kernel command line which can lead to '
     "system instablity or hang!\n", "RCCL_HOST_SETUP", "iommu=pt"),
    # https://github.com/deepspeedai/DeepSpeed/issues/1834
    ("[1,19]<stderr>:RuntimeError[1,19]<stderr>:: NCCL communicator was aborted on rank 19.\n", "NCCL_CALL_FAILED",
     "rank 19"),
    # https://github.com/sgl-project/sglang/issues/552
    ("Failed: Cuda error /home/runner/work/vllm/vllm/csrc/custom_all_reduce.cuh:307 'peer access is not supported "
     "between these two devices'\n", "NCCL_CUDA_FAILED", "--disable-custom-all-reduce"),
])
def test_framework_and_topology_lines(text: str, code: str, said: str) -> None:
    f = found(report(text))[code]
    assert said in f["message"] + " " + f["remedy"], f
    assert not f.get("cause")


def test_rccls_default_plugin_name_is_not_a_missing_plugin() -> None:
    # ROCm/rccl#1026: RCCL tries librccl-net.so as NCCL tries libnccl-net.so, and goes on without it.
    assert not found(report("g1064:11143:11143 [0] NCCL INFO NET/Plugin : No plugin found (librccl-net.so), using "
                            "internal implementation\n"))
    assert "NCCL_NET_PLUGIN_LOAD_FAILED" in found(report("h:1:1 [0] NCCL INFO NET/Plugin : No plugin found "
                                                         "(libnccl-net-ofi.so), using internal implementation\n"))


# ---- the launchers: before NCCL runs, they are the job's only account of why it did not start ------


@pytest.mark.parametrize("text, code, said", [
    # https://github.com/kubeflow/mpi-operator/issues/429
    ("Permissions 0640 for '/root/.ssh/id_rsa' are too open.\nLoad key \"/root/.ssh/id_rsa\": bad permissions\n"
     "Permission denied, please try again.\n", "MPI_LAUNCH_FAILED", "defaultMode"),
    # https://github.com/kubeflow/mpi-operator/issues/424
    ("root@tensorflow-benchmarks-worker-1.tensorflow-benchmarks-worker: Permission denied (publickey,password).\n"
     "ORTE was unable to reliably start one or more daemons.\n", "MPI_LAUNCH_FAILED", "authorized_keys"),
    # https://github.com/kubeflow/mpi-operator/issues/481
    ("ssh: Could not resolve hostname tensorflow-benchmarks-worker-0.tensorflow-benchmarks-worker: Name or service not "
     "known\nORTE was unable to reliably start one or more daemons.\n", "MPI_LAUNCH_FAILED", "Running"),
    # https://github.com/horovod/horovod/issues/301
    ("bash: /usr/local/bin/orted: No such file or directory\n", "MPI_LAUNCH_FAILED", "same path"),
    # https://github.com/horovod/horovod/issues/504
    ("ssh: connect to host 192.168.11.1 port 50000: Connection refused\n", "MPI_LAUNCH_FAILED", "sshd"),
    # https://github.com/openpmix/prrte/issues/1493
    ("ssh_exchange_identification: Connection closed by remote host\n", "MPI_LAUNCH_FAILED", "MaxStartups"),
    # https://github.com/horovod/horovod/issues/978
    ("There are not enough slots available in the system to satisfy the 2 slots\n", "MPI_LAUNCH_FAILED", "slots"),
    # https://github.com/horovod/horovod/issues/2043
    ("A process or daemon was unable to complete a TCP connection\nto another process:\n", "MPI_LAUNCH_FAILED",
     "firewall"),
    # https://github.com/kubeflow/mpi-operator/issues/152
    ("ORTE has lost communication with a remote daemon.\n", "MPI_LAUNCH_FAILED", "daemon"),
    # https://github.com/NVIDIA/pyxis/issues/88
    ("It looks like pmix_init failed for some reason; your parallel process is\n", "MPI_LAUNCH_FAILED",
     "PMIX_MCA_psec=native"),
    # https://github.com/NVIDIA/deepops/issues/1179
    ("slurmstepd: error:  mpi/pmix_v3: pmixp_coll_ring_reset_if_to: adas-ml [0]: pmixp_coll_ring.c:742: 0x14ce0c02cb20: "
     "collective timeout seq=0\n", "MPI_LAUNCH_FAILED", "adas-ml"),
    # https://github.com/deepspeedai/DeepSpeed/issues/4907
    ("subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no 192.168.3.100 hostname' returned "
     "non-zero exit status 255.\n", "MPI_LAUNCH_FAILED", "192.168.3.100"),
    # https://github.com/open-mpi/ompi/issues/2661
    ("mpirun noticed that process rank 0 with PID 21183 on node host01 exited on signal 9 (Killed).\n", "JOB_KILLED",
     "OOM"),
    # https://github.com/NVIDIA/nccl-tests/issues/218
    ("[a1eb0914a5e2:01167] *** Process received signal ***\n[a1eb0914a5e2:01167] Signal: Segmentation fault (11)\n",
     "PROCESS_CRASHED", "UCX_TLS=tcp"),
    # https://github.com/NVIDIA/Megatron-LM/issues/516: a bus error in a container, not a kill
    ("torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -7) local_rank: 0 (pid: 5275) of "
     "binary: /usr/bin/python\n", "PROCESS_CRASHED", "/dev/shm"),
    # https://github.com/hiyouga/LLaMA-Factory/issues/163 (with the `stderr: ` a tool put in front)
    ("stderr: ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 7 (pid: 153932) of "
     "binary: /home/panww/miniconda3/tools/bin/python\n", "JOB_FAILED", "local_rank 7"),
    # https://github.com/deepspeedai/DeepSpeed/issues/4510
    ("192.169.83.120: [2023-10-13 11:31:28,593] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 249\n",
     "JOB_FAILED", "exits with return code"),
    # https://github.com/kubeflow/trainer/issues/2008
    ('time="2024-02-21T09:32:29Z" level=info msg="Pod: kubeflow.pytorch-simple-worker-0 exited with code 1" '
     "job=kubeflow.pytorch-simple\n", "JOB_FAILED", "--previous"),
    # https://github.com/horovod/horovod/issues/2431
    ("Tue Nov 10 10:05:04 2020[13]<stderr>:  what():  [enforce fail at /tmp/horovod/third_party/compatible_gloo/gloo/"
     "transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: enp129s0f1\n", "NCCL_NO_SOCKET_INTERFACE",
     "enp129s0f1"),
    # https://github.com/NVIDIA/nccl-tests/issues/247
    ("[1723337199.099229] [ai-worker03:1382 :0] tl_shm_team.c:617 TL_SHM ERROR Child failed to attach to shmseg, errno: "
     "Invalid argument\n", "NCCL_SHM_FAILED", "IPC namespace"),
    # https://github.com/NVIDIA/nccl/issues/1219
    ("node:174:4368 [3] sharp_plugin.c:354 NCCL WARN SHARP group create: Streaming Tree lock failed (-18)\n",
     "NCCL_COLLNET_FAILED", "NCCL_COLLNET_ENABLE=0"),
])
def test_launcher_and_outcome_lines(text: str, code: str, said: str) -> None:
    f = found(report(text))[code]
    assert said in f["message"] + " " + f["remedy"], f


def test_a_launchers_summary_follows_the_ssh_error_that_explains_it() -> None:
    rep = report("ssh: Could not resolve hostname w-0.w: Name or service not known\n"
                 "ORTE was unable to reliably start one or more daemons.\n")
    fs = [f for c in rep["checks"] for f in c["findings"] if f["severity"] == "error"]
    assert [f["subject"] for f in fs if not f.get("cause")] == ["w-0.w"]


def test_a_ray_worker_that_died_leads_the_errors_it_caused() -> None:
    # https://github.com/OpenRLHF/OpenRLHF/issues/621 (excerpt)
    text = ("(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot "
            "the problem, check the logs for the dead worker.\n"
            "(RayWorkerWrapper pid=92234, ip=172.19.24.110) mlx5: host_unknown: got completion with error:\n"
            "(RayWorkerWrapper pid=92234, ip=172.19.24.110) [rank1]: torch.distributed.DistBackendError: NCCL error: "
            "remote process exited or there was a network error, NCCL version 2.21.5\n")
    fs = [f for c in report(text)["checks"] for f in c["findings"] if f["severity"] == "error"]
    assert [f["code"] for f in fs if not f.get("cause")] == ["JOB_FAILED"]
    assert {f["code"] for f in fs if f.get("cause") == "JOB_FAILED"} >= {"NCCL_IB_COMPLETION_ERROR", "NCCL_REMOTE_ERROR"}


def test_nccl_tests_wrong_column_is_wrong_data() -> None:
    # https://github.com/NVIDIA/nccl/issues/1184 (excerpt; the reporter left rows out with "...")
    table = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
             "#wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
             "  (GB/s)       \n"
             "           8             2     float     sum      -1    130.1    0.00    0.00      0    118.6    0.00    0.00"
             "      0\n...\n"
             "      524288        131072     float     sum      -1    663.1    0.79    0.79  237858    569.4    0.92    0.92"
             "  238038\n")
    f = found(report(table))["NCCL_TEST_WRONG_RESULTS"]
    assert "524288" in f["message"] and f["data"]["wrong"] == 237858 + 238038
    assert "NCCL_TEST_WRONG_RESULTS" not in found(report(table.replace("  237858", "       0").replace("  238038", "       0")))


@pytest.mark.parametrize("text, code, said", [
    # https://github.com/rwth-i6/returnn/issues/1486
    ("Unable to determine the device handle for GPU0000:03:00.0: Unknown Error\n", "GPU_XID", "fallen off the bus"),
    ("[ 5123.456789] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n", "GPU_XID", "Xid 79"),
    # https://github.com/sgl-project/sglang/issues/3784 (a docker run's environment)
    ("  -e NCCL_IB_DISABLE='0' \\\n  -e NCCL_NET='Socket' \\\n", "NCCL_IB_DISABLED_BY_ENV", "NCCL_NET=Socket"),
    ("node-1:4127:4127 [0] NCCL INFO NCCL_NET set by environment to Socket\n", "NCCL_IB_DISABLED_BY_ENV", "Socket"),
])
def test_gpu_and_setting_lines(text: str, code: str, said: str) -> None:
    f = found(report(text))[code]
    assert said in f["message"] + " " + f["remedy"], f


def test_an_application_xid_follows_what_caused_it() -> None:
    # Xid 13/31/43 are the program's own faults: a symptom, never the GPU's hardware.
    f = found(report("NVRM: Xid (PCI:0000:3b:00): 31, pid=1234, name=python, Ch 00000008, intr 10000000. MMU Fault\n"))
    assert "page fault" in f["GPU_XID"]["message"]
    assert "NCCL_IB_DISABLED_BY_ENV" not in found(report("  -e NCCL_NET='IB' \\\n"))


def test_hosts_on_different_net_plugins() -> None:
    # https://github.com/NVIDIA/nccl/issues/1634 (excerpt, quoted twice): one host without the HPC-X
    # SHARP plugin, one with it; the job hung. Before: PASS.
    text = ("> > HGX-H100-11:18226:18274 [5] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal "
            "network plugin.\n"
            "> > HGX-H100-04:589474:589541 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so\n")
    f = found(report(text))["NCCL_PLUGIN_MISMATCH"]
    assert "HGX-H100-11" in f["message"] and "nccl_rdma_sharp_plugin" in f["message"]
    # The same plugin on both (seen once as its path, once by name), or none on both: no finding.
    same = text.replace("NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
                        "NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)")
    assert "NCCL_PLUGIN_MISMATCH" not in found(report(same))
    none = text.replace("Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so",
                        "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.")
    assert "NCCL_PLUGIN_MISMATCH" not in found(report(none))


def test_sockets_on_the_one_host_a_log_shows_are_a_warning_until_the_job_spans_more() -> None:
    # https://github.com/vllm-project/vllm/issues/6370 (excerpt): one machine, TP2; NCCL on sockets
    # carries nothing between hosts there. Before: FAIL "inter-node traffic over TCP".
    text = ("flow-matic:1:1 [0] NCCL INFO NET/IB : No device found.\n"
            "flow-matic:1:1 [0] NCCL INFO NET/Socket : Using [0]eno3:192.168.1.2<0>\n"
            "flow-matic:1:1 [0] NCCL INFO Using network Socket\n")
    f = found(report(text))["NCCL_SOCKET_FALLBACK"]
    assert f["severity"] == "warning" and "spans several" in f["message"]
    # A NET channel line is traffic between nodes; nNodes 2 says so too: an error then.
    chan = text + "flow-matic:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n"
    assert found(report(chan))["NCCL_SOCKET_FALLBACK"]["severity"] == "error"
    nodes = text + "flow-matic:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0\n"
    assert found(report(nodes))["NCCL_SOCKET_FALLBACK"]["severity"] == "error"


# ---- Kubernetes around the job ------------------------------------------------------------------


@pytest.mark.parametrize("text, code, said", [
    # https://github.com/NVIDIA/k8s-device-plugin/issues/119
    (" Warning FailedScheduling  40s (x2 over 40s)  default-scheduler  0/2 nodes are available: 1 Insufficient "
     "nvidia.com/gpu, 1 node(s) were unschedulable.\n", "K8S_UNSCHEDULABLE", "nvidia.com/gpu"),
    # https://github.com/volcano-sh/volcano/issues/3220
    ("queue resource quota insufficient\n", "K8S_UNSCHEDULABLE", "capability"),
    # https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/192
    ('2025/07/26 20:29:31 error creating new device: "missing RDMA device spec for device 0000:16:00.0, RDMA device '
     '\\"rdma_cm\\" not found"\n2025/07/26 20:29:31 exposing "0" devices\n', "MOD_MISSING", "rdma_ucm"),
    # https://github.com/k8snetworkplumbingwg/sriov-network-device-plugin/issues/189
    ("I1213 07:34:11.231124  110908 server.go:138] ListAndWatch(mlnx_sriov_rdma): send devices "
     "&ListAndWatchResponse{Devices:[]*Device{},}\n", "RDMA_DEVICE_PLUGIN_EMPTY", "mlx5_core"),
    # https://github.com/k8snetworkplumbingwg/sriov-network-device-plugin/issues/310
    ('error adding container to network "sriov-network": SRIOV-CNI failed to load netconf: LoadConf(): VF pci addr is '
     "required\n", "POD_NETWORK_FAILED", "resourceName"),
    # https://github.com/k8snetworkplumbingwg/multus-cni/issues/386
    ('Failed create pod sandbox: failed to find plugin "macvlan" in path [/opt/cni/bin]\n', "POD_NETWORK_FAILED",
     "/opt/cni/bin"),
    # https://github.com/k8snetworkplumbingwg/multus-cni/issues/1010
    ('error adding container to network "ipvlan-multus": error at storage engine: Could not allocate IP in range: ip: '
     "100.76.215.210 / - 100.76.215.213 / range: 100.76.215.208/29\n", "POD_NETWORK_FAILED", "whereabouts"),
    # https://github.com/Mellanox/network-operator/issues/830
    ("No OFED driver found for kernel 5.14.0-284.40.1.el9_2.x86_64\n", "NODE_DRIVER_FAILED", "repositories"),
    # https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/105
    ('"Couldn\'t get device attribute.\nUnable to create QP.\nFailed to create QP.\nCouldn\'t create IB resource."\n',
     "VERBS_RESOURCE_FAILED", "IPC_LOCK"),
    # https://github.com/NVIDIA/cloudai/issues/720
    ("/bin/bash: line 1: /usr/sbin/sshd: No such file or directory\n", "MPI_LAUNCH_FAILED", "openssh-server"),
    # https://github.com/NVIDIA/gpu-operator/issues/130
    ("stderr: nvidia-container-cli.real: initialization error: driver error: failed to process request\\n: unknown\n",
     "NODE_DRIVER_FAILED", "driver.enabled=false"),
    # https://github.com/NVIDIA/gpu-operator/issues/1947
    ("Failed to allocate device vector A (error code CUDA driver version is insufficient for CUDA runtime version)!\n",
     "NCCL_CUDA_FAILED", "driver"),
])
def test_kubernetes_lines(text: str, code: str, said: str) -> None:
    f = found(report(text))[code]
    assert said in f["message"] + " " + f["remedy"], f


def test_output_of_a_command_rdmadoctor_does_not_read_earns_no_pass() -> None:
    # Before: PASS, because a prompt's output was "recognised" though nothing judged it.
    text = "$ kubectl get pods\nNAME        READY   STATUS    RESTARTS   AGE\ntrainer-0   1/1     Running   0          5m\n"
    assert report(text)["status"] == "unknown"
    # https://github.com/Mellanox/network-operator/issues/438 (excerpt): a node that advertises its
    # RDMA resource at 0 (it passed before).
    cap = ("$ k get node mito26 -ojson | jq '.status.capacity'\n{\n  \"cpu\": \"64\",\n"
           "  \"rdma/rdma_shared_device_a\": \"0\"\n}\n")
    assert found(report(cap))["RDMA_DEVICE_PLUGIN_EMPTY"]["subject"] == "rdma/rdma_shared_device_a"
    assert "RDMA_DEVICE_PLUGIN_EMPTY" not in found(report(cap.replace('\"0\"', '\"1k\"')))
    # A /proc/<pid>/limits table is judged (a 64 KiB memlock passed before).
    lim = ("Limit                     Soft Limit           Hard Limit           Units\n"
           "Max locked memory         65536                65536                bytes\n")
    assert found(report(lim))["MEMLOCK_LIMITED"]["severity"] == "warning"


def test_nccl_on_infiniband_and_roce_ports_together() -> None:
    # https://github.com/NVIDIA/nccl/issues/302 (excerpt): a RoCE port in an InfiniBand list, then
    # ibv_modify_qp EINVAL on the ring through it.
    text = ("[155] crow:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_3:1/IB [1]mlx5_0:1/IB [2]mlx5_2:1/RoCE [3]mlx5_4:1/IB ; "
            "OOB eth0:10.0.0.1<0>\n"
            "[155] crow:1:2 [0] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument\n")
    f = found(report(text))["NCCL_MIXED_LINK_LAYERS"]
    assert f["severity"] == "warning" and "NCCL_IB_HCA=^mlx5_2" in f["remedy"]
    assert "NCCL_MIXED_LINK_LAYERS" not in found(report(text.replace("mlx5_2:1/RoCE", "mlx5_2:1/IB")))


def test_a_pods_dev_infiniband_without_uverbs() -> None:
    # https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/169 (excerpt, k9s' gutter kept):
    # the pod got rdma_cm and umad0, and no uverbs node.
    text = ("      ls -l /dev/infiniband /sys/class/infiniband /sys/class/net\n"
            "/dev/infiniband:                                    │\n"
            "│ crw-rw-rw- 1 root root  10, 121 Apr  6 09:26 rdma_cm │\n"
            "│ crw------- 1 root root 231,   0 Apr  6 09:26 umad0   │\n\n")
    f = found(report(text))["DEV_UVERBS_MISSING"]
    assert "rdma_cm, umad0" in f["message"] and "rdma/hca" in f["remedy"]
    # With a uverbs node, and as a prompt's `ls`, nothing is missing.
    assert "DEV_UVERBS_MISSING" not in found(report("$ ls /dev/infiniband\nrdma_cm  uverbs0\n"))
    assert "DEV_UVERBS_MISSING" in found(report("$ ls -l /dev/infiniband\ncrw-rw-rw- 1 root root 10, 121 Apr  6 rdma_cm\n"))


# ---- tool outputs run through another command, and the outputs told apart from "nothing to judge" ------


@pytest.mark.parametrize("command, inner", [
    ("kubectl exec -it trainer-0 -n ml -- ibstat", "ibstat"),
    ("kubectl -n ml exec trainer-0 -c main -- bash -c \"ulimit -a\"", "ulimit -a"),
    ("sudo kubectl exec pod -- sudo ibv_devinfo", "ibv_devinfo"),
    ("docker exec -it ctr ibv_devinfo", "ibv_devinfo"),
    ("docker exec --user root ctr ibstat", "ibstat"),
    ("podman exec -e A=1 ctr ibstat mlx5_0", "ibstat mlx5_0"),
    ("ssh -p 22 root@node-3 ibv_devinfo -v", "ibv_devinfo -v"),
    ("ssh node-3 ibstat", "ibstat"),
    ("ssh node-3", "ssh node-3"),  # a login: what follows is a shell, not one command's output
    ("kubectl logs trainer-0", "kubectl logs trainer-0"),
    ("kubectl get pods -- x", "kubectl get pods -- x"),
])
def test_a_command_run_in_a_pod_container_or_host_is_read_as_the_command_it_runs(command: str, inner: str) -> None:
    from rdmadoctor.logs.scan import _inner_command

    assert _inner_command(command) == inner


def test_a_memlock_limit_pasted_from_kubectl_exec_is_judged() -> None:
    rep = report("$ kubectl exec -it trainer-0 -- bash -c 'ulimit -a'\nmax locked memory       (kbytes, -l) 64\n"
                 "open files                      (-n) 1048576\n")
    assert "MEMLOCK_LIMITED" in found(rep)


def test_a_known_output_inside_another_commands_output_is_judged() -> None:
    # Mellanox/k8s-rdma-shared-dev-plugin#64 ("is this a correct output?"): the demo pod ran
    # `ls -l /dev/infiniband /sys/class/infiniband /sys/class/net` and the user pasted its `kubectl logs`.
    text = ("-MacBookPro:~$ kubectl  logs mofed-test-pod\n/dev/infiniband:\ntotal 0\n"
            "crw------- 1 root root 231,  64 Nov 21 02:18 issm0\ncrw-rw-rw- 1 root root  10,  57 Nov 21 02:18 rdma_cm\n"
            "crw------- 1 root root 231,   0 Nov 21 02:18 umad0\ncrw-rw-rw- 1 root root 231, 192 Nov 21 02:18 uverbs0\n"
            "crw-rw-rw- 1 root root 231, 193 Nov 21 02:18 uverbs1\n\n/sys/class/infiniband:\ntotal 0\n"
            "lrwxrwxrwx 1 root root 0 Nov 21 02:18 mlx5_0 -> ../../devices/pci0000:c0/0000:c3:00.0/infiniband/mlx5_0\n")
    rep = report(text)
    assert rep["status"] == "pass", found(rep)
    read = next(f for c in rep["checks"] for f in c["findings"] if f["code"] == "LOGS_READ")
    assert read["data"]["judged"] == ["ls /dev/infiniband"]
    # The same pod without its uverbs nodes is the error the shared device plugin's issues are about.
    rep = report(text.replace("uverbs0", "umad1").replace("uverbs1", "issm1"))
    assert "DEV_UVERBS_MISSING" in found(rep)


def test_the_headline_of_a_passing_paste_says_what_was_judged() -> None:
    from rdmadoctor.output.text import summary_line

    rep = report("$ ibstat\nCA 'mlx5_0'\n\tCA type: MT4123\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n"
                 "\t\tPhysical state: LinkUp\n\t\tRate: 200\n\t\tBase lid: 5\n\t\tSM lid: 1\n\t\tLink layer: InfiniBand\n")
    assert rep["status"] == "pass"
    assert summary_line(rep).endswith("no known problem in the log (judged: the pasted `ibstat`)")


_SHOW_GIDS = """\
[root@localhost ~]# show_gids mlx5_0
DEV     PORT    INDEX   GID                                     IPv4            VER     DEV
---     ----    -----   ---                                     ------------    ---     ---
mlx5_0  1       0       fe80:0000:0000:0000:0e42:a1ff:fe5d:4db8                 v1      ens1f0
mlx5_0  1       1       fe80:0000:0000:0000:0e42:a1ff:fe5d:4db8                 v2      ens1f0
mlx5_0  1       4       0000:0000:0000:0000:0000:ffff:ac13:003c 172.19.0.60     v1      ens1f0
mlx5_0  1       5       0000:0000:0000:0000:0000:ffff:ac13:003c 172.19.0.60     v2      ens1f0
n_gids_found=4
"""


def test_show_gids_is_judged_a_routable_v2_gid_named_and_its_absence_an_error() -> None:
    # IBM/SpectrumScale_NETWORK_READINESS#4 (a healthy RoCE port's table, excerpt).
    rep = report(_SHOW_GIDS)
    assert rep["status"] == "pass"
    info = next(f for c in rep["checks"] for f in c["findings"] if f["code"] == "ROCE_V2_GID")
    assert "NCCL_IB_GID_INDEX=5" in info["message"] and "172.19.0.60" in info["data"]["evidence"][0]["text"]
    # Without the address the port has only link-local v2 GIDs: NCCL has none a peer routes to.
    rep = report("".join(x + "\n" for x in _SHOW_GIDS.splitlines() if "172.19" not in x))
    f = found(rep)["ROCE_NO_V2_GID"]
    assert f["subject"] == "mlx5_0/1" and "ens1f0" in f["remedy"]
    # Headerless (the heading row is enough) and with the tabs the script prints.
    tabs = "\n".join("\t".join(x.split()) for x in _SHOW_GIDS.splitlines()[1:] if "172.19" not in x) + "\n"
    assert "ROCE_NO_V2_GID" in found(report(tabs))


def test_show_gids_of_infiniband_ports_is_not_read_as_roce() -> None:
    text = ("$ show_gids\nDEV     PORT    INDEX   GID                                     IPv4            VER     DEV\n"
            "mlx5_0  1       0       fe80:0000:0000:0000:b83f:d203:0094:1c1a                 v1\n")
    rep = report(text)
    assert "ROCE_NO_V2_GID" not in found(rep)


# imbue-ai/cluster-health#4: a healthy H100 node on a pure InfiniBand fabric without IPoIB (every IB
# port's netdev Down, as the author explains), two dual-port ConnectX-6 Ethernet cards with one port used.
_IBDEV2NETDEV = """\
$ ibdev2netdev | column -t
mlx5_0   port  1  ==>  ibp26s0        (Down)  # CX-7 1/8 infiniband
mlx5_1   port  1  ==>  enp27s0f0np0   (Up)    # CX-6 2/2 *ethernet* port 1/2
mlx5_2   port  1  ==>  enp27s0f1np1   (Down)  # CX-6 2/2 *ethernet* port 2/2
mlx5_3   port  1  ==>  ibp60s0        (Down)  # CX-7 2/8 infiniband
"""


def test_ibdev2netdev_judges_roce_netdevs_and_never_the_ipoib_state_of_an_ib_port() -> None:
    rep = report(_IBDEV2NETDEV)
    f = found(rep)
    assert set(f) == {"ROCE_NETDEV_DOWN"}, f  # `| column -t` drops no row: the paste is whole
    down = f["ROCE_NETDEV_DOWN"]
    assert down["severity"] == "warning" and down["subject"] == "mlx5_2/1" and "unused on purpose" in down["message"]
    assert "enp27s0f1np1" in down["data"]["evidence"][0]["text"]
    # Only the InfiniBand rows: their (Down) says nothing of the ports, so nothing was judged, and the
    # reason says why.
    rep = report("".join(x + "\n" for x in _IBDEV2NETDEV.splitlines() if "ethernet" not in x))
    assert rep["status"] == "unknown"
    unknown = next(f for c in rep["checks"] for f in c["findings"] if f["code"] == "LOGS_NOTHING_TO_JUDGE")
    assert "IPoIB" in unknown["message"] and "`ibdev2netdev | column -t`" in unknown["message"]
    # A RoCE node whose only netdev is down, pasted without its prompt: an error.
    rep = report("mlx5_0 port 1 ==> ens1f0np0 (Down)\n")
    assert found(rep)["ROCE_NETDEV_DOWN"]["severity"] == "error"
    # Filtered by grep, a paste proves nothing missing: nothing judged.
    rep = report("$ ibdev2netdev | grep Up\nmlx5_1 port 1 ==> enp27s0f0np0 (Up)\n")
    assert rep["status"] == "unknown"


# NVIDIA/nccl#1357: an H100 node with six NICs, four of them next to a GPU (the matrix, excerpt: GPU0..3
# and the NIC columns; the user's question was about the layout, not a failure).
_TOPO = """\
$ nvidia-smi topo -m
        GPU0    GPU1    GPU2    GPU3    NIC0    NIC1    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV18    NV18    NV18    PIX     SYS     0-47,96-143     0               N/A
GPU1    NV18     X      NV18    NV18    SYS     SYS     0-47,96-143     0               N/A
GPU2    NV18    NV18     X      NV18    SYS     PIX     0-47,96-143     0               N/A
GPU3    NV18    NV18    NV18     X      SYS     SYS     0-47,96-143     0               N/A
NIC0    PIX     SYS     SYS     SYS      X      SYS
NIC1    SYS     SYS     PIX     SYS     SYS      X

NIC Legend:

  NIC0: mlx5_0
  NIC1: mlx5_3
"""


def test_a_pasted_gpu_nic_matrix_is_judged_as_the_node_check_judges_it() -> None:
    # The GPUs without a NIC beside them reach one over NVLink (NV18): NCCL's PXN sends their data
    # through the GPU next to it, so nothing crosses the CPU and nothing is wrong.
    rep = report(_TOPO)
    assert rep["status"] == "pass", found(rep)
    near = next(f for c in rep["checks"] for f in c["findings"] if f["code"] == "GPU_NIC_NEAR")
    assert near["data"]["via_nvlink"] == ["GPU1", "GPU3"] and "PXN" in near["message"]
    # The same PCIe server without NVLink (the GPUs talk through the CPU): those two are far.
    pcie = _TOPO.replace("NV18", "SYS ")
    rep = report(pcie)
    far = {f["subject"]: f for c in rep["checks"] for f in c["findings"] if f["code"] == "GPU_NIC_FAR"}
    assert set(far) == {"GPU1", "GPU3"}
    assert far["GPU1"]["severity"] == "warning" and "at SYS" in far["GPU1"]["message"]
    assert far["GPU3"]["data"]["evidence"][0]["text"].startswith("GPU3 ")
    # Every GPU beside a NIC, pasted without the prompt: judged, and the headline says what.
    near_all = pcie.replace("SYS     SYS     0-47", "PIX     SYS     0-47")  # GPU1 and GPU3 beside NIC0 too
    rep = report(near_all.split("\n", 1)[1])
    assert rep["status"] == "pass", found(rep)
    read = next(f for c in rep["checks"] for f in c["findings"] if f["code"] == "LOGS_READ")
    assert read["data"]["judged"] == ["nvidia-smi topo -m"]
    # `nvidia-smi`'s GPU table is not the matrix: nothing judged.
    rep = report("$ nvidia-smi\n+-----------------------------------------------------------------------------+\n"
                 "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |\n")
    assert rep["status"] == "unknown"


def test_a_pods_net1_is_judged_by_the_link_layer_the_paste_shows() -> None:
    # openshift/sriov-network-operator#635: an InfiniBand VF in a pod, its IPoIB netdev named net1 by the
    # SR-IOV CNI, Down with the port; the port is what matters (IB_PORT_DOWN), not a "RoCE netdev".
    ibstat = ("$ ibstat mlx5_18\nCA 'mlx5_18'\n\tCA type: MT4124\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Down\n"
              "\t\tPhysical state: LinkUp\n\t\tRate: 100\n\t\tBase lid: 65535\n\t\tSM lid: 0\n\t\tLink layer: InfiniBand\n")
    rows = "$ ibdev2netdev\nmlx5_18 port 1 ==> net1 (Down)\n"
    f = found(report(rows + ibstat))
    assert "IB_PORT_DOWN" in f and "ROCE_NETDEV_DOWN" not in f
    assert report(rows)["status"] == "unknown"  # net1 alone: InfiniBand or RoCE cannot be told
    # The same name on a RoCE VF (the paste's ibstat says Ethernet): its netdev is judged.
    roce = ibstat.replace("InfiniBand", "Ethernet").replace("State: Down", "State: Active")
    assert found(report(rows + roce))["ROCE_NETDEV_DOWN"]["severity"] == "error"


_GID_LOG = ("node-1:7:7 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to {idx}.\n"
            "node-1:7:7 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB ens1f0:172.19.0.60<0>\n"
            "node-1:7:9 [0] transport/net_ib.cc:798 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out\n")


@pytest.mark.parametrize("idx, bad", [(0, "is IB/RoCE v1"), (1, "is link-local"), (7, "has no GID 7"), (5, None)])
def test_nccl_ib_gid_index_is_judged_against_the_gid_table_pasted_beside_it(idx: int, bad: str | None) -> None:
    # The classic RoCE misconfiguration: the index names a v1 or link-local GID, and NCCL's queue pairs
    # time out on the way to RTR (the table: IBM/SpectrumScale_NETWORK_READINESS#4's healthy port).
    rep = report(_GID_LOG.format(idx=idx) + _SHOW_GIDS)
    f = found(rep)
    if bad is None:
        assert "NCCL_IB_GID_INDEX_BAD" not in f
        return
    gid = f["NCCL_IB_GID_INDEX_BAD"]
    assert bad in gid["message"] and "NCCL_IB_GID_INDEX=5" in gid["remedy"]
    assert [e["line"] for e in gid["data"]["evidence"]][0] == 1  # the setting's line, then the table's row
    qp = next(x for c in rep["checks"] for x in c["findings"] if x["code"] == "NCCL_IB_MODIFY_QP_FAILED")
    assert qp["cause"] == "NCCL_IB_GID_INDEX_BAD"


def test_nccl_ib_gid_index_alone_or_on_infiniband_ports_is_not_judged() -> None:
    assert "NCCL_IB_GID_INDEX_BAD" not in found(report(_GID_LOG.format(idx=0)))  # no table: nothing to judge it by
    ib = ("$ show_gids\nDEV     PORT    INDEX   GID                                     IPv4            VER     DEV\n"
          "mlx5_0  1       0       fe80:0000:0000:0000:b83f:d203:0094:1c1a                 v1\n")
    log = _GID_LOG.format(idx=0).replace("/RoCE", "/IB")
    assert "NCCL_IB_GID_INDEX_BAD" not in found(report(log + ib))


def test_nccl_ib_gid_index_is_judged_against_a_pasted_ibv_devinfo_v(realworld) -> None:
    from conftest import sample_text

    text = sample_text(realworld / "samples" / "ibv_devinfo" / "scaleoutsean_cx6_roce_ibv_devinfo_v_full.txt")
    rep = report("node-1:7:7 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 0.\n$ ibv_devinfo -v\n" + text)
    gid = found(rep)["NCCL_IB_GID_INDEX_BAD"]
    assert "GID 0 of mlx5_0/1 is IB/RoCE v1" in gid["message"] and "NCCL_IB_GID_INDEX=3" in gid["remedy"]
    rep = report("node-1:7:7 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.\n$ ibv_devinfo -v\n" + text)
    assert "NCCL_IB_GID_INDEX_BAD" not in found(rep)


_RAILS = "".join(f"CA 'mlx5_{i}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n"
                 f"\t\tRate: 400\n\t\tBase lid: {i + 5}\n\t\tSM lid: 1\n\t\tLink layer: InfiniBand\n" for i in range(4))


def test_nccl_on_fewer_rails_than_the_pasted_ports_is_said_with_the_setting_that_narrows_it() -> None:
    log = ("node-1:7:7 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0\n"
           "node-1:7:7 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n"
           "node-1:7:7 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n")
    f = found(report(log + "$ ibstat\n" + _RAILS))["NCCL_NICS_UNUSED"]
    assert f["severity"] == "warning" and f["subject"] == "NCCL_IB_HCA"
    assert f["data"]["idle"] == ["mlx5_1", "mlx5_2", "mlx5_3"] and "1/4" in f["message"]
    assert [e["line"] for e in f["data"]["evidence"]] == [1, 15]  # the setting, then the first idle port's CA line
    # Without the setting the pod's devices are the suspect.
    f = found(report(log.split("\n", 1)[1] + "$ ibstat\n" + _RAILS))["NCCL_NICS_UNUSED"]
    assert f["subject"] == "NCCL devices" and "rdma/hca" in f["message"]
    # Every rail in NCCL's list; one node (NVLink carries it all); a paste of another node: nothing.
    every = log.replace("[0]mlx5_0:1/IB", "[0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB")
    assert "NCCL_NICS_UNUSED" not in found(report(every + "$ ibstat\n" + _RAILS))
    one = log.replace("nNodes 2 localRanks 8", "nNodes 1 localRanks 16")
    assert "NCCL_NICS_UNUSED" not in found(report(one + "$ ibstat\n" + _RAILS))
    other = log.replace("mlx5_0:1/IB", "mlx5_8:1/IB")
    assert "NCCL_NICS_UNUSED" not in found(report(other + "$ ibstat\n" + _RAILS))


def test_the_lines_nccl_prints_after_an_error_follow_it() -> None:
    # NVIDIA/nccl#1235 (excerpt): CUDA out of memory while NCCL makes its P2P buffers.
    oom = ("ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'\n"
           "ng30903:3063028:3066152 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes\n"
           "ng30903:3063028:3066152 [3] NCCL INFO transport/p2p.cc:204 -> 1\n")
    rep = report(oom)
    calloc = next(f for c in rep["checks"] for f in c["findings"] if "calloc" in f["message"])
    assert calloc["cause"] == "NCCL_CUDA_FAILED" and "6291456 bytes" in calloc["message"]
    # Alone, the allocation failure is the cause itself.
    alone = found(report(oom.split("\n", 1)[1]))["NCCL_CUDA_FAILED"]
    assert alone.get("cause") is None and "6291456" in alone["message"]
    # NVIDIA/nccl#230 (excerpt): the HCA's catastrophic error, then the events thread giving up.
    rep = report("c-57:815:864 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error\n"
                 "c-57:815:864 [0] misc/ibvwrap.cu:220 NCCL WARN Call to ibv_get_async_event failed\n")
    events = next(f for c in rep["checks"] for f in c["findings"] if f["subject"] == "HCA events")
    assert events["cause"] == "NCCL_IB_ASYNC_FATAL"


def test_a_truncated_bootstrap_message_says_the_ranks_disagree() -> None:
    # NVIDIA/nccl#1176 (excerpt, srun's task labels kept).
    rep = report("0: compute-st-p4de24xlarge-1:34639:36718 [5] bootstrap.cc:77 NCCL WARN Message truncated : received 256 "
                 "bytes instead of 4\n0: compute-st-p4de24xlarge-1:34639:36718 [5] NCCL INFO bootstrap.cc:554 -> 3\n"
                 "0: compute-st-p4de24xlarge-1:34639:36718 [5] NCCL INFO group.cc:110 -> 3\n")
    f = found(rep)
    assert set(f) == {"NCCL_RANKS_MISMATCH"}
    assert "256 bytes where it expected 4" in f["NCCL_RANKS_MISMATCH"]["message"]


# A bug report's "expected versus actual" (the shape of NVIDIA/nccl issue forms and many tickets): the
# fenced block after an "Expected:" label is what the writer hoped to see, not what ran.
_EXPECTED = """\
### Describe the bug

Cross-node collectives are 4-5x slower than expected. NCCL logs show:
```
NCCL INFO NET/Socket : Using [0]bond0:200.8.184.2<0>
```

### Expected behavior

Expected:
```
NCCL INFO NET/IB : Using [0]mlx5_bond:1/RoCE ...
```
"""


def test_what_a_ticket_says_it_expected_is_not_evidence() -> None:
    rep = report(_EXPECTED)
    assert "NCCL_SOCKET_FALLBACK" in found(rep)
    assert not (rep["nccl"] or {}).get("net_devices")
    # Without the label the second block is a log like the first.
    rep = report(_EXPECTED.replace("### Expected behavior\n\nExpected:\n", "### The other node\n\nIt prints:\n"))
    assert [d["name"] for d in rep["nccl"]["net_devices"]] == ["mlx5_bond"]
    # "expected" in a sentence is no label, and a label far above a block does not reach it.
    far = _EXPECTED.replace("### Expected behavior\n\nExpected:\n", "### Expected behavior\n\nsee below\n\nfor "
                            "the other node, which does better than expected, it prints\n")
    assert [d["name"] for d in report(far)["nccl"]["net_devices"]] == ["mlx5_bond"]
    # Quoted in a reply, with a heading label in bold: the same.
    quoted = "\n".join("> " + x for x in _EXPECTED.replace("Expected:", "**Expected output:**").splitlines()) + "\n"
    assert not (report(quoted)["nccl"] or {}).get("net_devices")


def test_a_ticket_that_only_mentions_nccl_has_nothing_judged() -> None:
    # NVIDIA/nccl-tests#112 (an excerpt of its prose): the NCCL version in a sentence, and no
    # NCCL line, error or tool output: nothing was judged, so no PASS.
    rep = report("Environment:\n\n2 nodes with A100 GPUs, four 200Gb RoCEv2 NICs.\nNCCL version is: 2.11.4\n"
                 "CUDA version is: 11.6\n\nThe average bus bandwidth is only 9.84 GB/s.\n")
    assert rep["status"] == "unknown"
    # The same version as NCCL prints it, on its own line with its prefix: NCCL ran and said so.
    rep = report("node-1:1:1 [0] NCCL INFO NCCL version 2.11.4+cuda11.6\n")
    assert rep["status"] == "pass" and rep["nccl"]["version"] == "2.11.4"


@pytest.mark.parametrize("line", [
    # NVIDIA/Megatron-LM#1541, pytorch/pytorch#126275, vllm-project/vllm#25532, deepspeedai/DeepSpeed#7266
    "[rank1]:[W326 09:37:44.752383442 ProcessGroupNCCL.cpp:1487] Warning: WARNING: destroy_process_group() was not called "
    "before program exit, which can leak resources. For more info, please see "
    "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())",
    "[rank3]:[W515 07:06:42.915740178 ProcessGroupNCCL.cpp:1117] WARNING: process group has NOT been destroyed before it "
    "is being destructed. On normal program exit, the application should call destroy_process_group to ensure that any "
    "pending NCCL data transfers have finished in this process.",
    "[W924 02:01:18.426673989 ProcessGroupNCCL.cpp:981] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the default now, this "
    "environment variable is thus deprecated. (function operator())",
    "[W404 00:15:21.693690333 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 0]  using GPU 0 to perform barrier as "
    "devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping "
    "is incorrect.",
])
def test_pytorchs_harmless_notices_pass_and_say_so(line: str) -> None:
    from rdmadoctor.output.text import summary_line

    rep = report(line + "\n" + line.replace("rank1", "rank0").replace("rank3", "rank2") + "\n")
    assert rep["status"] == "pass"
    notices = [f for c in rep["checks"] for f in c["findings"] if f["code"] == "PYTORCH_NOTICE"]
    assert len(notices) == 1 and notices[0]["severity"] == "info"
    assert summary_line(rep).endswith("(1 known notice, none a problem: --verbose shows it)")


def test_ucx_and_nvshmem_under_other_stacks_are_read() -> None:
    # openucx/ucx#6000 (excerpt): retries exceeded on RoCE, sent to a link-local GID.
    rep = found(report("[compute001:31180:0:31180] ib_mlx5_log.c:143  Transport retry count exceeded on mlx5_0:1/RoCE (synd "
                       "0x15 vend 0x81 hw_synd 0/0)\n[compute001:31180:0:31180] ib_mlx5_log.c:143  DCI QP 0x14e4 wqe[0]: SEND "
                       "s-e [rqpn 0x2248a rmac 50:6b:4b:cb:be:ce sgix 0 dgid fe80::526b:4bff:fecb:bece tc 0] [inl len 18]\n"))
    assert rep["NCCL_IB_COMPLETION_ERROR"]["subject"] == "mlx5_0:1" and "RoCE" in rep["NCCL_IB_COMPLETION_ERROR"]["message"]
    assert rep["ROCE_NO_V2_GID"]["severity"] == "warning" and "fe80::526b" in rep["ROCE_NO_V2_GID"]["message"]
    # openucx/ucx#4770 (excerpt): an HPC-X built for MLNX_OFED on upstream rdma-core; the bandwidth table after it.
    rep = found(report("[1581627489.217854] [upstreamhost1:195530:0]       ib_verbs.h:84   UCX  ERROR "
                       "ibv_exp_query_device(mlx5_0) returned 38: No space left on device\n"))
    assert set(rep) == {"VERBS_ABI_MISMATCH"}
    # deepseek-ai/DeepEP#163 and #202 (excerpts): IBGDA cannot use the NIC; the job goes on, slower or without it.
    for line in ("WARN: GPU cannot map UAR of device mlx5_0. Skipping...",
                 "WARN: device erdma_0 is not enumerated as an mlx5 device. Skipping..."):
        f = found(report(line + "\n"))["NVSHMEM_IBGDA_UNAVAILABLE"]
        assert f["severity"] == "warning" and f["subject"] in ("mlx5_0", "erdma_0")
    # awslabs/awsome-distributed-ai#647: libfabric's EFA provider aborting for want of locked memory.
    rep = found(report("Libfabric EFA provider has encountered an internal error:\n\nLibfabric error: (-12) Cannot allocate "
                       "memory\nEFA internal error: (4112) Failure to post internal receive buffers\n\nYour application will "
                       "now abort().\n"))
    assert "MEMLOCK_LIMITED" in rep


def test_a_pasted_roce_port_list_is_judged_as_the_roce_check_judges_it() -> None:
    # openucx/ucx#6000 (excerpt): a RoCE port ACTIVE at MTU 1024 (its netdev at 1500).
    text = ("sudo ibv_devinfo\nhca_id: mlx5_0\n        transport:                      InfiniBand (0)\n"
            "        fw_ver:                         16.23.1020\n        phys_port_cnt:                  1\n"
            "                port:   1\n                        state:                  PORT_ACTIVE (4)\n"
            "                        max_mtu:                4096 (5)\n                        active_mtu:             1024 (3)\n"
            "                        sm_lid:                 0\n                        port_lid:               0\n"
            "                        link_layer:             Ethernet\n")
    f = found(report(text))["NET_MTU_LOW"]
    assert f["severity"] == "warning" and f["subject"] == "mlx5_0/1" and "1024" in f["message"]
    # The same at 4096, and an InfiniBand port at 2048 (the RoCE check's expectation is not IB's): nothing.
    assert "NET_MTU_LOW" not in found(report(text.replace("1024 (3)", "4096 (5)")))
    assert "NET_MTU_LOW" not in found(report(text.replace("1024 (3)", "2048 (4)").replace("Ethernet", "InfiniBand")))


def test_a_show_gids_paste_cut_inside_its_last_port_proves_nothing_missing_there() -> None:
    # NVIDIA/nccl#1538 (excerpt as quoted): a pod's table cut after mlx5_1's IPv4 v1 row, before its v2 row.
    head = ("$ show_gids\nDEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n"
            "mlx5_0\t1\t4\tfe80:0000:0000:0000:c025:a1ff:fe31:2e81\t\t\tv1\tnet1\n"
            "mlx5_0\t1\t5\tfe80:0000:0000:0000:c025:a1ff:fe31:2e81\t\t\tv2\tnet1\n"
            "mlx5_0\t1\t7\t0000:0000:0000:0000:0000:ffff:0a9c:8184\t10.156.129.132  \tv2\tnet1\n"
            "mlx5_1\t1\t4\tfe80:0000:0000:0000:58f6:6bff:fe9a:8027\t\t\tv1\tnet2\n"
            "mlx5_1\t1\t5\tfe80:0000:0000:0000:58f6:6bff:fe9a:8027\t\t\tv2\tnet2\n")
    assert report(head)["status"] == "pass"
    # With show_gids' own last line the table is whole: mlx5_1 has no routable v2 GID.
    assert found(report(head + "n_gids_found=5\n"))["ROCE_NO_V2_GID"]["subject"] == "mlx5_1/1"
    # A port before the last one is whole in any case.
    lines = head.splitlines(keepends=True)
    reordered = "".join(lines[:2] + lines[5:] + lines[2:5])  # mlx5_1's rows first, then mlx5_0's
    assert found(report(reordered))["ROCE_NO_V2_GID"]["subject"] == "mlx5_1/1"


def test_nccl_reading_an_empty_gid_index_names_the_setting() -> None:
    # uccl-project/uccl#301 (NCCL's code, in UCCL): GIDs 0 and 1 are empty in the pod.
    f = found(report("W20250825 11:10:33.595331   331 util_rdma.h:547] NET/IB: read failed in ncclIbRoceGetVersionNum: "
                     "Invalid argument\n"))["NCCL_IB_GID_INDEX_BAD"]
    assert f["severity"] == "error" and "show_gids" in f["remedy"]


def test_recent_nccl_messages_are_read() -> None:
    # NVIDIA/nccl#1808 (excerpt): an HTTP scraper reached NCCL's listening port; its bytes read "GET /met".
    f = found(report("2025-08-12 09:37:03.463948 worker-9 >> [2025-08-12 01:37:03] :166:1226 [0] misc/socket.cc:484 NCCL "
                     "WARN socketFinalizeAccept: wrong magic 74656d2f20544547 != 7970663b906d70b9\n"))["NCCL_SOCKET_ERROR"]
    assert f["severity"] == "warning" and '"GET /met"' in f["message"]
    # hiyouga/LlamaFactory#8045 (excerpt): the bootstrap connect finds no route, retry after retry.
    f = found(report("zgiot:1183664:1184669 [0] NCCL INFO socketPollConnect: connect returned No route to host, retrying "
                     "(34/34) after sleep for 3400 msec\n"))["NCCL_SOCKET_ERROR"]
    assert "retry 34 of 34" in f["message"]
    # A refused connect while the peer starts is not one (NCCL retries it by design).
    assert not found(report("h:1:2 [0] NCCL INFO socketPollConnect: connect returned Connection refused, retrying (1/34) "
                            "after sleep for 100 msec\n"))
    # tinygrad/open-gpu-kernel-modules#29 (excerpt): NCCL 2.25.1 on an RTX 5090.
    f = found(report("test:259034:259124 [0] NCCL INFO ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856\n"))
    assert "2.26" in f["NCCL_CUDA_FAILED"]["remedy"]
    # NVIDIA/nccl#1905 (excerpt): the communicator marked failed, beside the fatal event that caused it.
    rep = report("[2025-11-09 07:39:30] h100-28:238:1313 [0] transport/net_ib.cc:139 NCCL WARN communicator encountered a "
                 "fatal error (detected in ncclIbTest)\n[2025-11-09 07:39:30] h100-28:238:1219 [0] transport/net_ib.cc:180 "
                 "NCCL WARN NET/IB : mlx5_ib0:1 async fatal event on QP (0x7f69f01519a8): local access violation work queue "
                 "error\n")
    assert not any(f["code"] == "LOG_ERROR_UNKNOWN" for c in rep["checks"] for f in c["findings"])
    assert {f["subject"] for c in rep["checks"] for f in c["findings"] if f["code"] == "NCCL_IB_ASYNC_FATAL"} >= {"communicator"}


def test_nccl_on_the_loopback_is_said_with_the_setting_that_left_it_there() -> None:
    # aws/aws-ofi-nccl#803 (excerpt): `^docker0` excluded the only other interface of the container.
    text = ("6f2d8a82d208:1287:1287 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ^docker0\n"
            "6f2d8a82d208:1287:1287 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\n"
            "6f2d8a82d208:1287:1287 [0] NCCL INFO NCCL version 2.23.4+cuda12.4\n")
    f = found(report(text))["NCCL_LOOPBACK"]
    assert f["severity"] == "warning" and "^docker0" in f["message"] and f["data"]["setting"]["value"] == "^docker0"
    assert f["remedy"].count("NCCL_SOCKET_IFNAME") == 1
    # On one host (nNodes 1) it is information.
    one = text + "6f2d8a82d208:1287:1287 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0\n"
    assert "NCCL_LOOPBACK" not in found(report(one))


def test_an_expected_block_never_closed_hides_at_most_its_bound() -> None:
    from rdmadoctor.logs.scan import _HYPOTHETICAL_LINES

    text = "Expected:\n```\n" + "training step\n" * (_HYPOTHETICAL_LINES + 5) + (
        "h:1:2 [0] transport/net_ib.cc:798 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out\n")
    assert "NCCL_IB_MODIFY_QP_FAILED" in found(report(text))
    inside = "Expected:\n```\n" + text.split("\n", 2)[2].replace("training step\n" * (_HYPOTHETICAL_LINES + 5), "")
    assert "NCCL_IB_MODIFY_QP_FAILED" not in found(report(inside))


def test_an_ethernet_port_beside_active_infiniband_ones_is_the_front_end_nic() -> None:
    # Azure/azhpc-images#44 (excerpt): HBv2's accelerated-networking VF (Ethernet, MTU 1024) beside its IB HCA.
    text = ("$ ibv_devinfo\nhca_id: mlx5_0\n        transport:                      InfiniBand (0)\n"
            "        phys_port_cnt:                  1\n                port:   1\n"
            "                        state:                  PORT_ACTIVE (4)\n"
            "                        active_mtu:             4096 (5)\n                        link_layer:             InfiniBand\n\n"
            "hca_id: rdmaP23800p0s2\n        transport:                      InfiniBand (0)\n"
            "        phys_port_cnt:                  1\n                port:   1\n"
            "                        state:                  PORT_ACTIVE (4)\n"
            "                        active_mtu:             1024 (3)\n                        link_layer:             Ethernet\n")
    assert "NET_MTU_LOW" not in found(report(text))
    rdma = text.split("\n\n", 1)[1]
    assert "NET_MTU_LOW" in found(report("$ ibv_devinfo\n" + rdma))


def test_aws_ofi_nccl_on_libfabrics_tcp_provider_is_tcp() -> None:
    # aws/aws-ofi-nccl#803 (excerpt): no EFA device in the container, so the plugin took the tcp provider.
    text = ("6f2d8a82d208:1287:1328 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.12.1-aws\n"
            "6f2d8a82d208:1287:1328 [0] NCCL INFO NET/OFI Selected Provider is tcp (found 1 nics)\n"
            "6f2d8a82d208:1287:1328 [0] NCCL INFO Using network AWS Libfabric\n")
    rep = report(text)
    f = found(rep)["NCCL_SOCKET_FALLBACK"]
    assert "libfabric's tcp provider" in f["message"] and "vpc.amazonaws.com/efa" in f["remedy"]
    assert f["data"]["evidence"][0]["line"] == 2
    from rdmadoctor.logs import transport_line

    assert transport_line(rep["nccl"]).startswith("WARNING:")
    # The efa provider is RDMA: nothing said.
    assert "NCCL_SOCKET_FALLBACK" not in found(report(text.replace("is tcp (found 1 nics)", "is efa (found 4 nics)")))
    # One host (nNodes 1): information, as for NCCL's own sockets.
    one = text + "6f2d8a82d208:1287:1328 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0\n"
    assert "NCCL_SOCKET_FALLBACK" not in found(report(one))
