"""Never a silent pass (issue 30, item 2): a failing text is never read as clean or as "nothing to judge",
and a healthy one that only says "error" or "failed" in passing stays clean.

Each text is an excerpt of output posted in a public issue (its URL above it), fed to the diagnosis the
way `rdmadoctor diagnose FILE` feeds it (the logs.diagnose check on a logs-only host). The shapes the scan
reads (rdmadoctor/logs/scan/errors.py ``_failure_shape``) are also held here one by one, beside the
lines that look like them and are not failures.
"""

from __future__ import annotations

import pytest
from diagnosed import PROBLEM, findings, problems, quoted, report  # noqa: F401 - test_mpi_boxes imports them from here

from rdmadoctor.logs.scan.errors import _failure_shape

# ---- failing texts: each gets a problem, with the line that shows it quoted ------------------------------

# https://github.com/Mellanox/k8s-rdma-sriov-dev-plugin/issues/30 (a pod on calico's CNI: ibv_devices shows
# the ConnectX-4 Lx, show_gids lists no GID at all)
GIDS_EMPTY = (
    "[root@rdma-test-wv8kj tmp]# show_gids \n"
    "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n"
    "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n"
    "n_gids_found=0\n"
    "[root@rdma-test-wv8kj tmp]# ibv_devices \n"
    "    device          \t   node GUID\n"
    "    ------          \t----------------\n"
    "    mlx5_0          \t98039b03003b0346\n"
)


def test_a_gid_table_with_no_gids_beside_a_device_list_that_shows_the_device() -> None:
    rep = report(GIDS_EMPTY)
    assert rep["status"] == "fail"
    f = next(f for f in problems(rep) if f["code"] == "ROCE_NO_V2_GID")
    assert f["subject"] == "mlx5_0" and "n_gids_found=0" in f["message"]
    assert f["data"]["evidence"][0]["line"] == 4 and quoted(f) == ["n_gids_found=0"]


def test_an_empty_gid_table_alone_says_nothing_of_devices_it_does_not_show() -> None:
    # No device list beside it: the table may be of a host without RDMA devices (nothing to fault).
    rep = report(GIDS_EMPTY.split("[root@rdma-test-wv8kj tmp]# ibv_devices")[0])
    assert "ROCE_NO_V2_GID" not in {f["code"] for f in findings(rep)}


# https://github.com/open-mpi/ompi/issues/12038 (Open MPI 5.0's OFI MTL in MPI_Init on Crusher)
OMPI_FI_DOMAIN = (
    "--------------------------------------------------------------------------\n"
    "Open MPI failed an OFI Libfabric library call (fi_domain).  This is highly\n"
    "unusual; your job may behave unpredictably (and/or abort) after this.\n"
    "\n"
    "  Local host: crusher051\n"
    "  Location: ../../../../../ompi/mca/mtl/ofi/mtl_ofi_component.c:999\n"
    "  Error: Function not implemented (38)\n"
    "--------------------------------------------------------------------------\n"
)
# https://github.com/open-mpi/ompi/issues/13803 (btl/ofi on Polaris: fi_domain fails, then a double free)
BTL_OFI_FI_DOMAIN = (
    "[polaris-login-02][[46076,1],0][../../../../../opal/mca/btl/ofi/btl_ofi_component.c:581:mca_btl_ofi_init_device] "
    "cxi0 failed fi_domain with err=Function not implemented\n"
    "free(): double free detected in tcache 2\n"
)
# https://github.com/open-mpi/ompi/issues/166 (the openib BTL's ibv_create_cq fails in MPI_Init)
OPENIB_CREATE_CQ = (
    "The OpenFabrics (openib) BTL failed to initialize while trying to\n"
    "create an internal queue.  This typically indicates a failed\n"
    "OpenFabrics installation, faulty hardware, or that Open MPI is\n"
    "attempting to use a feature that is not supported on your hardware\n"
    "  Local host:  rc008\n"
    "  OMPI source: btl_openib.c:190\n"
    "  Function:    ibv_create_cq()\n"
    "  Error:       Device or resource busy (errno=16)\n"
    "  Device:      mlx4_0\n"
)
# https://github.com/openucx/ucx/issues/551 (Open MPI's oob/ud creating its CQ at init)
CREATE_CQ_ENOMEM = (
    "--------------------------------------------------------------------------\n"
    "Failed to create a completion queue (CQ):\n"
    "\n"
    "Hostname: XXXX\n"
    "Requested CQE: 16384\n"
    "Error:    Cannot allocate memory\n"
    "\n"
    "Check the CQE attribute.\n"
    "--------------------------------------------------------------------------\n"
)
# https://github.com/open-mpi/ompi/issues/3144 (MPI_Init failing, Open MPI's own banner)
MPI_INIT_FATAL = (
    "*** An error occurred in MPI_Init\n"
    "*** on a NULL communicator\n"
    "*** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n"
    "***    and potentially your MPI job)\n"
)
# https://github.com/open-mpi/ompi/issues/12913 (a segfault in MPI_Init after fi_domain failed): the banner
# cut after its first line, as a paste cut short or a log that stops there shows it.
SIGNAL_BANNER_CUT = "[nid007955:08519] *** Process received signal ***\n"

FAILING = {
    "ompi-12038-ofi-fi-domain": (OMPI_FI_DOMAIN, "Open MPI failed an OFI Libfabric library call (fi_domain)."),
    "ompi-13803-btl-ofi-fi-domain": (BTL_OFI_FI_DOMAIN, "cxi0 failed fi_domain with err=Function not implemented"),
    "ompi-166-openib-create-cq": (OPENIB_CREATE_CQ, "The OpenFabrics (openib) BTL failed to initialize"),
    "ucx-551-create-cq-enomem": (CREATE_CQ_ENOMEM, "Failed to create a completion queue (CQ):"),
    "ompi-3144-mpi-init": (MPI_INIT_FATAL, "*** An error occurred in MPI_Init"),
    "ompi-12913-signal-banner-cut": (SIGNAL_BANNER_CUT, "*** Process received signal ***"),
}
# Read by a knowledge-base row since (issue 30, item 3: Open MPI's own OFI and BTL messages, kb/mpi.py): the
# same line heads the report, as that row's code.
READ_BY_A_ROW = {"ompi-12038-ofi-fi-domain": "MPI_TRANSPORT_FAILED", "ompi-13803-btl-ofi-fi-domain": "MPI_TRANSPORT_FAILED",
                 "ompi-166-openib-create-cq": "MPI_TRANSPORT_FAILED"}


@pytest.mark.parametrize("name", sorted(FAILING))
def test_an_mpi_failure_no_row_knows_is_an_unknown_error_quoting_its_first_line(name: str) -> None:
    """An MPI library's fatal error in its own init, a transport layer's failed libfabric call, a crash banner
    cut before its signal line: each read as "nothing to judge" before; now LOG_ERROR_UNKNOWN heads the report
    and quotes the line where the failure is first said."""
    text, first = FAILING[name]
    rep = report(text)
    assert rep["status"] == "fail", [(f["code"], f["severity"]) for f in findings(rep)]
    head = problems(rep)[0]
    assert head["code"] == READ_BY_A_ROW.get(name, "LOG_ERROR_UNKNOWN") and first in quoted(head)[0], (head["code"], quoted(head))
    assert not head.get("cause")


def test_the_signal_lines_after_the_banner_are_told_by_the_crash_row() -> None:
    # https://github.com/open-mpi/ompi/issues/12913: with its signal line the banner is PROCESS_CRASHED (a row);
    # the banner's first line no row knows is told by that finding, not a second one.
    rep = report(SIGNAL_BANNER_CUT + "[nid007955:08519] Signal: Segmentation fault (11)\n"
                 "[nid007955:08519] Signal code: Address not mapped (1)\n")
    assert [f["code"] for f in problems(rep)] == ["PROCESS_CRASHED"]
    assert any("Process received signal" in t for t in quoted(problems(rep)[0]))


def test_an_unknown_line_next_to_a_known_error_follows_it() -> None:
    # https://github.com/open-mpi/ompi/issues/12913 (the same report): Open MPI's fi_domain box, then the crash;
    # the crash (a row) and the box's lines (none) are one failure, the first line seen heads it.
    rep = report(OMPI_FI_DOMAIN + SIGNAL_BANNER_CUT + "[nid007955:08519] Signal: Segmentation fault (11)\n")
    shown = problems(rep)
    assert shown[0]["code"] == READ_BY_A_ROW["ompi-12038-ofi-fi-domain"] and "fi_domain" in quoted(shown[0])[0]
    assert "PROCESS_CRASHED" in {f["code"] for f in shown}


# ---- healthy texts: something said "error" or "failed", nothing failed -----------------------------------

HEALTHY = {
    # https://github.com/CSTR-Edinburgh/merlin/issues/324 ("error" is a distance here, its maintainer says)
    "merlin-324-metric-named-error": "epoch 1, validation error 4.640231, train error 4.867310 time spent 6.72.\n",
    # https://github.com/NVIDIA/nccl-tests/issues/119 (nccl-tests' summary of a run with no wrong value)
    "nccltests-119-zero-wrong": "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 84.8558\n",
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_a_healthy_text_that_says_error_stays_clean(name: str) -> None:
    rep = report(HEALTHY[name])
    assert not problems(rep), [(f["code"], quoted(f)) for f in problems(rep)]


def test_a_pytorch_warning_that_says_failed_adds_no_unknown_error() -> None:
    # https://github.com/pytorch/PiPPy/issues/158: the [W] retry of the c10d store's client, a warning's own
    # line. (Its row, NCCL_BOOTSTRAP_FAILED, judges what it says; the failure-shaped reader adds nothing.)
    rep = report("[W socket.cpp:558] [c10d] The client socket has failed to connect to [localhost]:29500 "
                 "(errno: 99 - Cannot assign requested address).\n")
    assert "LOG_ERROR_UNKNOWN" not in {f["code"] for f in findings(rep)}


# ---- the shapes, one line each ----------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "label", "symptom"), [
    ("FATAL: rank 3 aborted: unable to allocate verbs resources", "fatal", False),
    ("cannot create cq", "cannot", False),
    ("No RDMA-capable devices found.", "not found", False),
    ("bash: ibv_devinfo: command not found", "not found", False),
    ("RuntimeError: NCCL communicator was aborted on rank 3.", "error", False),
    ("2024-03-18 17:38:50 ERROR worker 3 lost", "error", False),
    ("Error while loading shared libraries: libibverbs.so.1", "error", False),
    ("srun: error: node7: task 3: Exited with exit code 1", "error", False),
    ("task 3: Exited with exit code 1", "exit status", True),
    ("  exitcode  : -9 (pid: 2411)", "exit status", True),
    ("Primary job  terminated normally, but 1 process returned a non-zero exit code.", "exit status", True),
    ("[node1:12345] *** Process received signal ***", "signal", True),
    ("Aborted (core dumped)", "abort", True),
    ("MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD", "abort", True),
    # "Couldn't" / "Could not" / "Unable to" with what a verbs program or a socket exchange could not do, as perftest
    # (linux-rdma/perftest src/perftest_communication.c, perftest_resources.c) and rdma-core's examples print it
    ("Couldn't connect to 192.168.1.20:18515", "cannot", False),
    ("Unable to connect (retries = 3)", "cannot", False),
    ("Unable to open file descriptor for socket connection", "cannot", False),
    ("Unable to init the socket connection", "cannot", False),
    ("Couldn't allocate MR", "cannot", False),
    ("Unable to create QP.", "cannot", False),
    ("Couldn't create CQ", "cannot", False),
    ("Couldn't get context for mlx5_0", "cannot", False),
    ("Couldn't post send: scnt=1", "cannot", False),
    ("ethernet_read_keys: Couldn't read remote address", "cannot", False),
    ("Could not resolve host: node-2", "cannot", False),
])
def test_a_failure_shape(line: str, label: str, symptom: bool) -> None:
    got = _failure_shape(line)
    assert got is not None and got[0] == label and got[2] is symptom, got


@pytest.mark.parametrize("line", [
    "0 errors, 2 warnings",
    "no errors found",
    "No problems found.",
    "train/error_rate: 0.031 | val_error: 0.12",
    "validation error 4.640231, train error 4.867310",
    "Tests: 12 passed, failed: 0",
    "failures=0 retries=0",
    "fatal: false",
    "a non-fatal condition",
    "exited with code 0",
    "Exit status: 0",
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500",
    "[W1128 10:00:00.000000 1005 socket.cpp:697] [c10d] The server socket cannot be initialized on [::]:29500",
    "/usr/lib/python3/site-packages/torch/cuda/__init__.py:52: UserWarning: CUDA initialization failed",
    "WARNING: retrying after the connection failed",
    "[user:852715] 15 more processes have sent help message help-mpi-btl-openib.txt / error in device init",
    "I cannot resolve this, could you please give me some guidance?",
    "Why does ibv_devinfo say failed?",
    "abortFlag 0",
    "error_handler=default",
    # "couldn't" / "unable to" alone is no failure
    "Couldn't be happier with the new fabric",
    "I couldn't connect to the server, could you help?",
    "Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been registered",
    "Could not load dynamic library 'libcudart.so.11.0'",
    "unable to say which port is faster",
])
def test_not_a_failure_shape(line: str) -> None:
    assert _failure_shape(line) is None


def test_nccls_own_info_lines_are_not_read_for_failure_words() -> None:
    # ../shared/realworld/gpu-h200/dense_all.log.gz (a healthy H200 run) prints these: NCCL INFO, not errors.
    rep = report("vm:438:438 [0] NCCL INFO dlvsym failed on mlx5dv_reg_dmabuf_mr - /lib/x86_64-linux-gnu/libmlx5.so: "
                 "undefined symbol: mlx5dv_reg_dmabuf_mr, version MLX5_1.25\n"
                 "vm:438:470 [0] NCCL INFO [Proxy Service UDS] exit: stop 1 abortFlag 0\n")
    assert "LOG_ERROR_UNKNOWN" not in {f["code"] for f in findings(rep)}


def test_a_long_line_of_failure_words_is_read_in_linear_time() -> None:
    # Bounded repeats only (no possessive quantifiers in Python 3.10): a line of many "no"s and no "found" is
    # read within _FAILURE_SPAN, as one of many "error"s.
    for line in ("no " * 50000, "error " * 50000, "exit code " * 20000, "No x " * 40000 + "found"):
        _failure_shape(line)


# ---- a cascade of failure lines is one failure ------------------------------------------------------------

def _fixture(name: str) -> str:
    from pathlib import Path

    data = (Path(__file__).resolve().parents[2] / "fixtures" / "silent" / name).read_text()
    return data.partition("\n# ---\n")[2]


def test_perftests_mr_cascade_is_one_finding_and_its_segfault_follows_it() -> None:
    # https://github.com/zrlio/softiwarp/issues/23: perftest prints `Couldn't allocate MR`, then each caller its own
    # `failed to create mr` / `Failed to create MR`: one failure, where it began first; the segfault is what it became.
    rep = report(_fixture("perftest-softiwarp-23-allocate-mr-segv.txt"))
    shown = problems(rep)
    assert [f["code"] for f in shown] == ["LOG_ERROR_UNKNOWN", "LOG_ERROR_UNKNOWN"], [quoted(f) for f in shown]
    head, crash = shown
    assert quoted(head) == ["Couldn't allocate MR", "failed to create mr", "Failed to create MR"]
    assert not head.get("cause") and "Segmentation fault" in quoted(crash)[0] and crash.get("cause")


def test_a_servers_cascade_is_one_finding() -> None:
    # https://github.com/jcxue/RDMA-Tutorial/issues/6 (tests/fixtures/silent): `Failed to create qp`, then main's
    # `Failed to setup IB`.
    shown = problems(report(_fixture("verbs-rdmatutorial-6-create-qp-enomem.txt")))
    assert len(shown) == 1 and "Failed to create qp" in quoted(shown[0])[0]
    assert "Failed to setup IB" in quoted(shown[0])[1]


def test_a_row_on_a_cascades_next_line_names_it() -> None:
    # https://github.com/linux-rdma/perftest/issues/139: `Unable to create QP.` no row knows, then `Failed to create QP.`,
    # which VERBS_RESOURCE_FAILED knows: one finding, that row's, quoting where the cascade began.
    shown = problems(report(_fixture("perftest-139-irdma-create-qp-inline.txt")))
    assert [f["code"] for f in shown] == ["VERBS_RESOURCE_FAILED"], [(f["code"], quoted(f)) for f in shown]
    assert quoted(shown[0])[:2] == ["Unable to create QP.", "Failed to create QP."]


def test_failures_apart_or_of_two_processes_are_two() -> None:
    text = ("cannot create cq\n" + "epoch 1 done\n" * 3 + "FATAL: rank 3 aborted\n"
            "[node1:100] Failed to create qp\n[node2:200] Failed to setup IB\n")
    assert len([f for f in problems(report(text)) if f["code"] == "LOG_ERROR_UNKNOWN"]) == 4


def test_a_symptom_neither_continues_nor_takes_a_cascade() -> None:
    # A known symptom right after a cascade's first line (a crash) does not take the finding: the cascade stays first.
    rep = report("[h:1] Couldn't allocate MR\n[h:1] failed to create mr\n[h:1] *** Process received signal ***\n"
                 "[h:1] Signal: Segmentation fault (11)\n")
    shown = problems(rep)
    assert shown[0]["code"] == "LOG_ERROR_UNKNOWN" and quoted(shown[0]) == ["[h:1] Couldn't allocate MR", "[h:1] failed to create mr"]
    assert "PROCESS_CRASHED" in {f["code"] for f in shown[1:]}


# ---- a Python traceback without its exception line ---------------------------------------------------------

# https://github.com/NVIDIA/nccl/issues/1247 (vLLM under Ray): each line of the worker's traceback behind vLLM's
# `ERROR date file:line]` prefix and Ray's actor prefix; cut here before its exception line, as a log that stops
# there shows it.
_P = "(RayWorkerVllm pid=7500) ERROR 04-07 00:57:46 ray_utils.py:45]"
_V = "/root/miniconda3/lib/python3.10/site-packages/vllm-0.3.3+cu122-py3.10-linux-ppc64le.egg/vllm"
VLLM_TB_CUT = (
    f"{_P} Traceback (most recent call last):\n"
    f'{_P}   File "{_V}/engine/ray_utils.py", line 38, in execute_method\n'
    f"{_P}     return executor(*args, **kwargs)\n"
    f'{_P}   File "{_V}/worker/worker.py", line 92, in init_device\n'
    f"{_P}     init_distributed_environment(self.parallel_config, self.rank,\n"
    f'{_P}   File "{_V}/worker/worker.py", line 284, in init_distributed_environment\n'
    f"{_P}     torch.distributed.all_reduce(torch.zeros(1).cuda())\n"
    f'{_P}   File "/root/miniconda3/lib/python3.10/site-packages/torch/distributed/c10d_logger.py", line 47, in wrapper\n'
    f"{_P}     return func(*args, **kwargs)\n"
)
# https://github.com/pytorch/pytorch/issues/29482 (tests/fixtures/frames/pytorch-29482-bullet-setting.txt): the
# traceback after NCCL's WARN, pasted without its exception line.
PLAIN_TB_CUT = ("Traceback (most recent call last):\n"
                '  File "/workspace/pyface/engine/trainer.py", line 325, in <module>\n'
                "    main(args)\n")


@pytest.mark.parametrize("text", [VLLM_TB_CUT, PLAIN_TB_CUT], ids=["vllm-prefixed", "plain"])
def test_a_traceback_cut_before_its_exception_line_is_a_failure(text: str) -> None:
    rep = report(text)
    assert rep["status"] == "fail"
    (f,) = problems(rep)
    assert f["code"] == "LOG_ERROR_UNKNOWN" and "without its exception line (cut?)" in f["message"]
    last = text.rstrip("\n").split("\n")[-2:]  # the last frame and the code under it: what was running
    assert quoted(f)[-2:] == last and ("Traceback" in quoted(f)[0] or "File" in quoted(f)[0])


def test_its_exception_line_read_gives_no_cut_traceback() -> None:
    text = VLLM_TB_CUT + (f"{_P} torch.distributed.DistBackendError: NCCL error in: "
                          "/root/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, internal error\n")
    rep = report(text)
    assert [f["code"] for f in problems(rep)] == ["NCCL_CALL_FAILED"]
    assert "without its exception line" not in " ".join(f["message"] for f in findings(rep))


def test_a_traceback_whose_frames_end_in_another_line_lost_its_exception() -> None:
    # The header seen, frames, then the process prints something that is no exception: the exception line was lost.
    text = VLLM_TB_CUT + f"{_P} Shutting down the worker\n"
    cut = [f for f in problems(report(text)) if "without its exception line" in f["message"]]
    assert len(cut) == 1 and "Traceback (most recent call last)" in quoted(cut[0])[0]


def test_frames_without_a_header_followed_by_more_output_are_no_failure() -> None:
    # traceback.print_stack(): frames, no header, no exception, and the program goes on.
    text = '  File "train.py", line 9, in step\n    traceback.print_stack()\nstep 10 loss 0.31\nstep 11 loss 0.30\n'
    assert not problems(report(text))


# ---- a crash banner whose prefix was stripped, a vLLM worker's caught exception: one message each ---------------

# https://github.com/horovod/horovod/issues/107 (Horovod 0.12 over Open MPI: rank 0 segfaults in mpi_lib.so): Open MPI's
# crash banner pasted without its `[host:pid]` prefix, opening with the markdown backtick the writer put there.
BANNER_UNPREFIXED = (
    "`*** Process received signal ***\n"
    "Signal: Segmentation fault (11)\n"
    "Signal code: Address not mapped (1)\n"
    "Failing at address: (nil)\n"
    "[ 0] /opt/compiler/gcc-4.8.2/lib/libpthread.so.0(+0x10160)[0x7f8258e93160]\n"
    "[ 1] /opt/compiler/gcc-4.8.2/lib/libc.so.6(+0x940bf)[0x7f82584600bf]\n"
)
# https://github.com/horovod/horovod/issues/489 (Horovod with PyTorch: a rank aborts in libcuda): the banner with its
# `[nmyjs-202-75:40360] ` prefix removed (a log viewer's copy, or `sed 's/^\[[^]]*\] //'`); a frame says `abort`.
BANNER_ABORT_STRIPPED = (
    "*** Process received signal ***\n"
    "Signal: Aborted (6)\n"
    "Signal code:  (-6)\n"
    "[ 0] /usr/lib64/libpthread.so.0(+0xf5e0)[0x7f2b5372f5e0]\n"
    "[ 1] /usr/lib64/libc.so.6(gsignal+0x37)[0x7f2b533921f7]\n"
    "[ 2] /usr/lib64/libc.so.6(abort+0x148)[0x7f2b533938e8]\n"
    "[ 3] /usr/lib64/libc.so.6(+0x74f47)[0x7f2b533d1f47]\n"
    "[ 4] /usr/lib64/libc.so.6(+0x7ab54)[0x7f2b533d7b54]\n"
    "[ 5] /usr/lib64/libcuda.so.1(+0x1e3835)[0x7f2b3efbf835]\n"
    "[ 6] /usr/lib64/libcuda.so.1(+0x248aaf)[0x7f2b3f024aaf]\n"
    "[ 7] /usr/lib64/libcuda.so.1(+0x1e5180)[0x7f2b3efc1180]\n"
    "[ 8] /usr/lib64/libpthread.so.0(+0x7e25)[0x7f2b53727e25]\n"
    "[ 9] /usr/lib64/libc.so.6(clone+0x6d)[0x7f2b5345534d]\n"
    "*** End of error message ***\n"
)


@pytest.mark.parametrize(("text", "signal"), [(BANNER_UNPREFIXED, "signal 11 (Segmentation fault)"),
                                              (BANNER_ABORT_STRIPPED, "signal 6 (Aborted)")],
                         ids=["horovod-107-unprefixed", "horovod-489-prefix-stripped"])
def test_a_crash_banner_without_its_prefix_is_one_crash(text: str, signal: str) -> None:
    """Two LOG_ERROR_UNKNOWN before (the banner's first line, its signal line): the signal line is read by Open MPI's
    crash row wherever a prefix was, and the banner's lines (its `abort` frame too) are that one finding's."""
    rep = report(text)
    (f,) = problems(rep)
    assert (f["code"], f["subject"]) == ("PROCESS_CRASHED", signal), (f["code"], f["subject"])
    assert "Process received signal" in quoted(f)[0] and quoted(f)[1].startswith("Signal: "), quoted(f)


def test_the_crash_row_reads_the_signal_line_after_the_banner_on_one_line() -> None:
    # (the banner's lines joined into one, as a chat or an issue form pastes them)
    (f,) = problems(report(" ".join(BANNER_UNPREFIXED.strip("`").split("\n")[:3]) + "\n"))
    assert f["code"] == "PROCESS_CRASHED" and f["subject"] == "signal 11 (Segmentation fault)"


def test_a_crash_banner_cut_before_its_signal_line_is_one_unknown_error_that_says_so() -> None:
    (f,) = problems(report(BANNER_UNPREFIXED.split("\n", 1)[0] + "\n"))
    assert f["code"] == "LOG_ERROR_UNKNOWN" and "crash banner cut before the signal line" in f["message"], f["message"]


def test_signal_lines_that_are_no_crash_banner_give_no_crash() -> None:
    # (a word that ends in "signal", a setting named so: no `Signal: NAME (N)` at a line's start)
    for line in ("The CPU's Signal: Segmentation fault (11) was handled by the debugger", "USR1 Signal: Ignore (10)",
                 "Signal code: Address not mapped (1)"):
        assert "PROCESS_CRASHED" not in {f["code"] for f in findings(report(line + "\n"))}, line


# https://github.com/vllm-project/vllm-ascend/issues/4020 (vLLM 0.11 on Ascend: a worker's attention kernel fails in
# execute_model): vLLM's worker logs `WorkerProc hit an exception.` then the traceback (frames in the middle left out
# here); each line was a finding of its own, linked. One message now: the exception line's finding, quoting both.
_W = "(Worker_TP0 pid=948496) ERROR 11-06 11:21:05 [multiproc_executor.py:699]"
VLLM_WORKER_EXCEPTION = (
    f"{_W} WorkerProc hit an exception.\n"
    f"{_W} Traceback (most recent call last):\n"
    f'{_W}   File "/vllm-workspace/vllm/vllm/v1/executor/multiproc_executor.py", line 694, in worker_busy_loop\n'
    f"{_W}     output = func(*args, **kwargs)\n"
    f"{_W}              ^^^^^^^^^^^^^^^^^^^^^\n"
    f'{_W}   File "/vllm-workspace/vllm-ascend/vllm_ascend/attention/attention_v1.py", line 707, in _forward_v1_style\n'
    f"{_W}     output, _ = torch_npu.npu_fused_infer_attention_score(\n"
    f"{_W}                 ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    f'{_W}   File "/usr/local/python3.11.10/lib/python3.11/site-packages/torch/_ops.py", line 1158, in __call__\n'
    f"{_W}     return self._op(*args, **(kwargs or {{}}))\n"
    f"{_W}            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    f"{_W} RuntimeError: npu_fused_infer_attention_score_symint:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:208 "
    "NPU function error: call aclnnFusedInferAttentionScoreV3 failed, error code is 561002\n"
)


def test_a_vllm_workers_caught_exception_and_its_traceback_are_one_message() -> None:
    found = problems(report(VLLM_WORKER_EXCEPTION))
    (f,) = found
    assert f["code"] == "LOG_ERROR_UNKNOWN" and f["subject"] == "RuntimeError", (f["code"], f["subject"])
    assert quoted(f)[0].endswith("WorkerProc hit an exception.") and "RuntimeError: npu_fused" in quoted(f)[1], quoted(f)
    assert "aclnnFusedInferAttentionScoreV3" in f["message"]


def test_a_vllm_workers_exception_a_row_knows_is_that_rows_finding() -> None:
    # The same worker's traceback ending in the NCCL error vLLM's pynccl wrapper raises (its words from
    # https://github.com/vllm-project/vllm/issues/21661): the row that knows it quotes the WorkerProc line.
    lines = VLLM_WORKER_EXCEPTION.splitlines()
    lines[-1] = f"{_W} RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"
    (f,) = problems(report("\n".join(lines) + "\n"))
    assert f["code"] != "LOG_ERROR_UNKNOWN" and quoted(f)[0].endswith("WorkerProc hit an exception."), (f["code"], quoted(f))


def test_a_workerproc_line_with_no_traceback_after_it_stays_a_finding() -> None:
    (f,) = problems(report(VLLM_WORKER_EXCEPTION.split("\n", 1)[0] + "\n"))
    assert f["code"] == "LOG_ERROR_UNKNOWN" and "WorkerProc hit an exception" in quoted(f)[0]


# https://github.com/karfly/learnable-triangulation-pytorch/issues/81 (multi-GPU training: `NCCL communicator was
# aborted`): the paste ends in another process's traceback, its header and first frame, then a line that is no
# exception (the terminal cut the frame's line at its `$`). Its header is what says a traceback began: `Traceback` is a
# scan needle (issue 30; the dense log's figures moved by less than 2%, docs/diagnose.md).
TB_CUT_MID_TEXT = (
    '  File "train.py", line 398, in one_epoch\n'
    "    total_loss.backward()\n"
    '  File "/home/scleong/.pyenv/versions/vol/lib/python3.6/site-packages/torch/auto\n'
    'grad/__init__.py", line 100, in backward\n'
    "    allow_unreachable=True)  # allow_unreachable flag\n"
    "RuntimeError: NCCL communicator was aborted.\n"
    "Traceback (most recent call last):\n"
    '  File "/home/scleong/.pyenv/versions/3.6.8/lib/python3.6/runpy.py", line 193, $\n'
    "n _run_module_as_main\n"
    '    "__main__", mod_spec)\n'
)


def test_a_plain_traceback_cut_mid_text_is_read_from_its_header() -> None:
    found = problems(report(TB_CUT_MID_TEXT))
    cut = [f for f in found if "without its exception line" in f["message"]]
    assert len(cut) == 1, [(f["code"], quoted(f)) for f in found]
    assert quoted(cut[0])[:2] == ["Traceback (most recent call last):", TB_CUT_MID_TEXT.split("\n")[7]], quoted(cut[0])
    assert any("NCCL communicator was aborted" in q for f in found for q in quoted(f))
