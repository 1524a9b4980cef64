"""Stacks and releases read (issue 30, item 3): MPI libraries' own transports (Open MPI's MTL/BTL/PML,
MVAPICH2, Intel MPI), NVSHMEM's device-level failures, NCCL's sockets and its 2.29/2.30 messages, GCP's
socket plugins as the designed transport, and PyTorch's store client retrying (not failing).

Each text is an excerpt of output posted in a public issue or forum (its URL above it), fed to the diagnosis
the way `rdmadoctor diagnose FILE` feeds it (the logs.diagnose check on a logs-only host). Lines made from a
source's format string (where no public text was found) say so and name the file:line.
"""

from __future__ import annotations

import pytest
from diagnosed import PROBLEM, findings, problems, quoted, report  # noqa: F401

from tests.unit.logs import test_silent_pass


def pattern(f: dict) -> str:
    return (f.get("data") or {}).get("pattern", "")


def only_problem(text: str, code: str, subject: str | None = None) -> dict:
    """The one problem the text shows (every other finding is information): its code and subject."""
    rep = report(text)
    shown = problems(rep)
    assert [f["code"] for f in shown] == [code], [(f["code"], f["subject"], f["message"]) for f in shown]
    if subject is not None:
        assert shown[0]["subject"] == subject, shown[0]["subject"]
    return shown[0]


def nothing_alarms(text: str) -> dict:
    rep = report(text)
    assert not problems(rep), [(f["code"], f["subject"], f["message"]) for f in problems(rep)]
    return rep


# ---- PyTorch's c10d store client: retries are not failures, the timeout is ---------------------------------

# https://github.com/gensyn-ai/rl-swarm/issues/197 (a [W] retry line, posted alone)
STORE_RETRY_W = ("[W427 01:04:16.149509694 socket.cpp:752] [c10d] The client socket has failed to connect to "
                 "[::ffff:198.18.0.1]:3254 (errno: 110 - Connection timed out).\n")
# https://github.com/hpcaitech/Open-Sora/issues/667 (PyTorch 2.2: a [W] line per address, an [E] line per round)
STORE_RETRY_ROUNDS = (
    "[W socket.cpp:697] [c10d] The client socket has failed to connect to [::ffff:0.104.99.143]:47389 (errno: 110 - "
    "Connection timed out).\n"
    "[W socket.cpp:697] [c10d] The client socket has failed to connect to 0.104.99.143:47389 (errno: 110 - Connection "
    "timed out).\n"
    "[E socket.cpp:753] [c10d] The client socket has failed to connect to any network address of (6841231, 47389).\n"
)
# https://github.com/TheTom/vllm-swift/issues/9 (PyTorch 2.7's TCPStore client retrying)
STORE_RETRY_TCPSTORE = ("[W426 16:56:01.831041000 TCPStore.cpp:347] [c10d] TCP client failed to connect/validate to "
                        "host 100.64.0.1:59782 - retrying (try=6, timeout=1800000ms, delay=5241ms): Connection reset by "
                        "peer\n")
# https://github.com/lzhxmu/CPPO/issues/6 (the end of the retries: the timeout, twice)
STORE_TIMEOUT = (
    "[E521 15:43:02.707733876 socket.cpp:1023] [c10d] The client socket has timed out after 600000ms while trying to "
    "connect to (172.18.21.4, 37907).\n"
    "[E521 15:43:02.707888867 TCPStore.cpp:318] [c10d] TCP client failed to connect/validate to host 172.18.21.4:37907 "
    "- timed out (try=1, timeout=600000ms): The client socket has timed out after 600000ms while trying to connect to "
    "(172.18.21.4, 37907).\n"
    "Exception raised from throwTimeoutError at /pytorch/torch/csrc/distributed/c10d/socket.cpp:1025 (most recent call "
    "first):\n"
)


@pytest.mark.parametrize("text", [STORE_RETRY_W, STORE_RETRY_ROUNDS, STORE_RETRY_TCPSTORE],
                         ids=["rl-swarm-197", "open-sora-667", "vllm-swift-9"])
def test_the_store_clients_retries_are_information(text: str) -> None:
    rep = nothing_alarms(text)
    notes = [f for f in findings(rep) if f["code"] == "PYTORCH_NOTICE"]
    assert notes and all(pattern(f).startswith("pytorch.store_connect_retry") for f in notes)
    assert notes[0]["subject"] == "c10d store" and "retries until its timeout" in notes[0]["message"]


def test_the_store_clients_timeout_is_the_failure() -> None:
    f = only_problem(STORE_RETRY_TCPSTORE + STORE_TIMEOUT, "NCCL_BOOTSTRAP_FAILED", "c10d store")
    assert pattern(f) == "pytorch.store_connect_failed"
    assert "timed out after 600000ms while trying to connect to (172.18.21.4, 37907)" in f["message"]


# ---- MPI libraries' own transports ------------------------------------------------------------------------

def roots(rep: dict) -> list[dict]:
    """The problems nothing else explains (no cause): what heads the account."""
    return [f for f in problems(rep) if not f.get("cause")]


def read_as(text: str, row: str, subject: str) -> dict:
    """Every problem is MPI_TRANSPORT_FAILED, one root (the given row's, on the given subject)."""
    rep = report(text)
    shown = problems(rep)
    assert {f["code"] for f in shown} <= {"MPI_TRANSPORT_FAILED", "LOG_ERROR_UNKNOWN"}, [f["code"] for f in shown]
    top = roots(rep)
    assert [(pattern(f), f["subject"]) for f in top] == [(row, subject)], [(pattern(f), f["subject"]) for f in top]
    return top[0]


# https://github.com/ofiwg/libfabric/issues/6710 (Open MPI 4.1.1's ofi MTL over libfabric 1.12 with psm3)
OMPI_FI_ENDPOINT = (
    "--------------------------------------------------------------------------\n"
    "Open MPI failed an OFI Libfabric library call (fi_endpoint).  This is highly\n"
    "unusual; your job may behave unpredictably (and/or abort) after this.  Local host: bear-pg0211u17a\n"
    "  Location: mtl_ofi_component.c:513\n"
    "  Error: Invalid argument (22)\n"
    "--------------------------------------------------------------------------\n"
)
# https://github.com/open-mpi/ompi/issues/2168 (the TCP BTL pairing interfaces that cannot reach each other)
BTL_TCP_CONNECT = ("[ivy08][[463,1],0][btl_tcp_endpoint.c:803:mca_btl_tcp_endpoint_complete_connect] connect() to "
                   "10.102.1.194 failed: No route to host (113)\n")
# https://github.com/openucx/ucx/issues/3513 (Open MPI over UCX_TLS=tcp, mpirun's --timestamp-output --tag-output)
PML_UCX_UNREACHABLE = (
    "Sat Apr 20 22:59:55 2019[1,220]<stderr>:[clx-orion-037:24850] pml_ucx.c:380  Error: ucp_ep_create(proc=219) "
    "failed: Destination is unreachable\n"
    "Sat Apr 20 22:59:55 2019[1,220]<stderr>:[clx-orion-037:24850] pml_ucx.c:447  Error: Failed to resolve UCX "
    "endpoint for rank 219\n"
)
# https://github.com/flux-framework/flux-core/issues/4451 (MVAPICH2 2.3.6 under Flux: the error stack on one line)
MVAPICH2_CREATE_CQ = (
    "0.260s: job.exception type=exec severity=0 MPI_Abort: Fatal error in MPI_Init: Other MPI error, error stack: "
    "MPIR_Init_thread(493)....:  MPID_Init(419)...........: channel initialization failed MPIDI_CH3_Init(550)......:  "
    "MPIDI_CH3I_RDMA_init(446):  rdma_iba_hca_init(1636)..: cannot create cq \n"
)
# https://github.com/pmodels/mpich/issues/6547 (MPICH 4.1 on a laptop with no network up)
MPICH_FI_FABRIC = (
    "Abort(337237391): Fatal error in internal_Init_thread: Other MPI error, error stack:\n"
    "internal_Init_thread(67).: MPI_Init_thread(argc=0x7ffee0cd3980, argv=0x7ffee0cd3988, required=0, "
    "provided=0x7ffee0cd3984) failed\n"
    "MPII_Init_thread(234)....: \n"
    "MPID_Init(513)...........: \n"
    "MPIDI_OFI_init_local(580): OFI fi_fabric failed (ofi_init.c:580:MPIDI_OFI_init_local:Invalid argument)\n"
)
# https://github.com/ofiwg/libfabric/issues/5648 (Intel MPI 2019.6: a completion poll fails in MPI_Iprobe)
IMPI_CQ_ENOMEM = (
    "Abort(1681039) on node 18 (rank 18 in comm 0): Fatal error in PMPI_Iprobe: Other MPI error, error stack:\n"
    "PMPI_Iprobe(119)...............: MPI_Iprobe(src=39, tag=820, MPI_COMM_WORLD, flag=0x7ffe34a5f8dc, "
    "status=0x7ffe34a5f920) failed\n"
    "MPID_Iprobe(441)...............: \n"
    "MPIDI_Progress_test_impl(195)..: \n"
    "MPIDI_OFI_handle_cq_error(1008): OFI poll failed (ofi_events.h:1008:MPIDI_OFI_handle_cq_error:Cannot allocate "
    "memory)\n"
)
# https://github.com/easybuilders/easybuild-easyconfigs/issues/10213 (Intel MPI 2019.6 with an external libfabric)
IMPI_OPEN_DOMAIN = (
    "Abort(1091471) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init: Other MPI error, error stack:\n"
    "MPIR_Init_thread(703)........: \n"
    "MPID_Init(958)...............: \n"
    "MPIDI_OFI_mpi_init_hook(1060): OFI fi_open domain failed (ofi_init.c:1060:MPIDI_OFI_mpi_init_hook:No data "
    "available)\n"
)

# https://github.com/jbornschein/mpi4py-examples/issues/11 (Open MPI 4 on Raspberry Pis: the tcp BTL picked a
# link-local 169.254 address), with the help-aggregation lines after the box
BTL_TCP_BOX = (
    "--------------------------------------------------------------------------\n"
    "WARNING: Open MPI failed to TCP connect to a peer MPI process.  This\n"
    "should not happen.\n"
    "\n"
    "Your Open MPI job may now fail.\n"
    "\n"
    "  Local host: pi02\n"
    "  PID:        24783\n"
    "  Message:    connect() to 169.254.140.13:1026 failed\n"
    "  Error:      Resource temporarily unavailable (11)\n"
    "--------------------------------------------------------------------------\n"
    "[pi01:28731] 3 more processes have sent help message help-mpi-btl-tcp.txt / dropped inbound connection\n"
    "[pi01:28731] Set MCA parameter \"orte_base_help_aggregate\" to 0 to see all help / error messages\n"
)
# https://github.com/open-mpi/ompi/issues/13803 (btl/ofi on Polaris: fi_domain fails on the cxi provider)
BTL_OFI_DOMAIN = ("[polaris-login-02][[46076,1],0][../../../../../opal/mca/btl/ofi/btl_ofi_component.c:581:"
                  "mca_btl_ofi_init_device] cxi0 failed fi_domain with err=Function not implemented\n")
# https://github.com/open-mpi/ompi/issues/166 (the openib BTL's ibv_create_cq fails in MPI_Init): the text test_silent_pass holds
OPENIB_CREATE_CQ = test_silent_pass.OPENIB_CREATE_CQ

MPI_TEXTS = {
    "mpi4py-examples-11-btl-tcp-box": (BTL_TCP_BOX, "mpi.btl_tcp_connect_box", "btl tcp", "TCP transport"),
    "ompi-13803-btl-ofi-domain": (BTL_OFI_DOMAIN, "mpi.btl_ofi_call", "btl ofi cxi0",
                                  "fi_domain failed with `Function not implemented`"),
    "ompi-166-openib-create-cq": (OPENIB_CREATE_CQ, "mpi.openib_create_queue", "btl openib", "verbs queue"),
    "libfabric-6710-ompi-fi-endpoint": (OMPI_FI_ENDPOINT, "mpi.ompi_ofi_call", "mtl ofi fi_endpoint", "fi_endpoint"),
    "ompi-2168-btl-tcp-connect": (BTL_TCP_CONNECT, "mpi.btl_tcp_connect", "btl tcp", "10.102.1.194 (No route to host"),
    "ucx-3513-pml-ucx-unreachable": (PML_UCX_UNREACHABLE, "mpi.pml_ucx_error", "pml ucx", "Destination is unreachable"),
    "flux-4451-mvapich2-create-cq": (MVAPICH2_CREATE_CQ, "mpi.mvapich2_iba_init", "MVAPICH2 rdma_iba_hca_init",
                                     "cannot create cq"),
    "mpich-6547-fi-fabric": (MPICH_FI_FABRIC, "mpi.ofi_init_local", "MPI OFI", "`fi_fabric` (Invalid argument)"),
    "libfabric-5648-impi-cq-enomem": (IMPI_CQ_ENOMEM, "mpi.ofi_cq", "MPI OFI", "`poll` (Cannot allocate memory)"),
    "easybuild-10213-impi-open-domain": (IMPI_OPEN_DOMAIN, "mpi.ofi_addrinfo", "MPI OFI", "`fi_open domain`"),
}


@pytest.mark.parametrize("name", sorted(MPI_TEXTS))
def test_an_mpi_librarys_own_transport_failure_is_read(name: str) -> None:
    text, row, subject, said = MPI_TEXTS[name]
    f = read_as(text, row, subject)
    assert said in f["message"], f["message"]


@pytest.mark.parametrize("name", ["mpich-6547-fi-fabric", "libfabric-5648-impi-cq-enomem", "easybuild-10213-impi-open-domain"])
def test_mpichs_abort_banner_is_one_message_with_the_frame_that_names_the_layer(name: str) -> None:
    # The banner and its error stack are one message (rdmadoctor/logs/scan/errors.py): the row of the frame that
    # names the layer (an OFI call) takes the generic banner and the frames no row reads (`MPI_Init_thread(...)
    # failed`) as its quotes, in the order printed; no banner finding beside it, no LOG_ERROR_UNKNOWN.
    text, row, _, _ = MPI_TEXTS[name]
    rep = report(text)
    (f,) = problems(rep)
    assert pattern(f) == row and "Fatal error in" in quoted(f)[0] and quoted(f)[-1].startswith("MPIDI_OFI_"), quoted(f)


def test_mpichs_abort_banner_on_one_line_follows_the_layer_its_stack_names() -> None:
    # Flux's job.exception prints the stack on one line: both rows read it, the banner follows the layer.
    rep = report(MVAPICH2_CREATE_CQ)
    banner = next(f for f in problems(rep) if pattern(f) == "mpi.mpich_fatal")
    assert banner["cause"] == "MPI_TRANSPORT_FAILED" and banner["data"]["follows"]["subject"] == roots(rep)[0]["subject"]
    assert "Other MPI error" in banner["message"]
    assert "LOG_ERROR_UNKNOWN" not in {f["code"] for f in problems(rep)}


# https://github.com/openucx/ucx/issues/7978 (Intel MPI 2019u12 over UCX's mlx provider, 128 ranks a node): UCX's
# DevX QP creation fails for memory, then MPICH's banner whose stack was cut. Its first line is Intel MPI's own
# healthy report of the provider it chose.
IMPI_UCX_DEVX = (
    "[0] MPI startup(): libfabric provider: mlx\n"
    "[1645552289.027611] [m7-31:723275:0]      ib_mlx5_dv.c:161  UCX  ERROR   mlx5dv_devx_obj_create(QP) failed, "
    "syndrome 0: Cannot allocate memory\n"
    "Abort(1091215) on node 5 (rank 5 in comm 0): Fatal error in PMPI_Init: Other MPI error, error stack:\n"
    "MPIR_Init_thread(138)........:\n"
    "MPID_Init(1139)..............:\n"
)


def test_intel_mpis_banner_follows_ucxs_devx_failure() -> None:
    rep = report(IMPI_UCX_DEVX)
    top = roots(rep)
    assert [(f["code"], pattern(f)) for f in top] == [("UCX_IB_RESOURCE_FAILED", "ucx.devx_no_memory")], top
    assert "QP" in top[0]["subject"] and "locked-memory" in top[0]["message"]
    banner = next(f for f in problems(rep) if pattern(f) == "mpi.mpich_fatal")
    assert banner["cause"] == "UCX_IB_RESOURCE_FAILED"
    assert "LOG_ERROR_UNKNOWN" not in {f["code"] for f in problems(rep)}


# https://github.com/openucx/ucx/issues/6223 (UCX 1.9 on ThunderX2: DevX is not there, then Open MPI's endpoint)
UCX_DEVX_UAR = (
    "[1611787738.347966] [pacu02:233164:0]        ib_mlx5.c:395  UCX  ERROR mlx5dv_devx_alloc_uar() failed: Operation "
    "not supported\n"
    "[pacu02:233164] pml_ucx.c:383  Error: ucp_ep_create(proc=0) failed: Out of memory\n"
)


def test_ucxs_devx_uar_failure_heads_open_mpis_endpoint_failure() -> None:
    rep = report(UCX_DEVX_UAR)
    top = roots(rep)
    assert [(f["code"], f["subject"]) for f in top] == [("UCX_IB_RESOURCE_FAILED", "mlx5dv_devx_alloc_uar")]
    assert "doorbell page (UAR) through DevX" in top[0]["message"] and "UCX_IB_MLX5_DEVX=n" in top[0]["remedy"]
    assert {f["code"]: f.get("cause") for f in problems(rep)}["MPI_TRANSPORT_FAILED"] == "UCX_IB_RESOURCE_FAILED"


# ---- NVSHMEM's device-level (DevX) failures ---------------------------------------------------------------

# https://github.com/sgl-project/sglang/issues/12533 (GB200 CI runner, not privileged: IBGDA cannot get a UAR)
NVSHMEM_DEVX_UAR = ("/opt/nvshmem/nvshmem/src/modules/transport/ibgda/ibgda.cpp:1889: NULL value cannot allocate "
                    "mlx5dv_devx_uar\n")


def test_nvshmems_devx_uar_failure_is_read() -> None:
    f = only_problem(NVSHMEM_DEVX_UAR, "NVSHMEM_IBGDA_RESOURCE_FAILED", "ibgda UAR")
    assert pattern(f) == "nvshmem.devx_uar" and "privileged" in f["remedy"] and "NVSHMEM_IB_ENABLE_IBGDA=0" in f["remedy"]


# ---- NCCL: sockets, and 2.29 / 2.30's new WARNs ------------------------------------------------------------
# No public log shows these 2.29/2.30 WARNs yet: each line is made from the format string at the file:line its
# row's ref names (NVIDIA/nccl v2.30.7-1), with a prefix as NCCL prints it.

NCCL_30 = {
    "incompatible-link-layers": (
        "gpu-2:4101:4188 [3] transport/net_ib/connect.cc:987 NCCL WARN NET/IB : Attempted to connect incompatible "
        "devices: [1]mlx5_1:1/RoCE and [0]mlx5_0:1/IB. Try selecting NICs of only one link type using NCCL_IB_HCA\n",
        "NCCL_MIXED_LINK_LAYERS", "mlx5_1 (RoCE) and mlx5_0 (IB)"),
    "remote-incompatible": (
        "gpu-2:4101:4188 [3] transport/net_ib/connect.cc:1034 NCCL WARN NET/IB : Remote RoCE device is incompatible "
        "with the local [0]mlx5_0:1/IB. Try selecting NICs of only one link type using NCCL_IB_HCA\n",
        "NCCL_MIXED_LINK_LAYERS", "mlx5_0 (IB) and a remote RoCE device"),
    "ras-version-mismatch": (
        "gpu-7:2210:2299 [0] ras/ras.cc:415 NCCL WARN NCCL version mismatch with remote peer 10.0.3.17<37211> "
        "(local: 2.30.7, remote 2.28.9)\n", "NCCL_RANKS_MISMATCH", "NCCL 2.30.7 and 2.28.9"),
    "failover-no-replacement": (
        "gpu-3:812:901 [2] transport/net_ib/p2p_resiliency.cc:116 NCCL WARN NET/IB: Could not find a replacement QP for "
        "the failed QP with qpIndex=0 (devIndex=1)\n", "NCCL_IB_FAILOVER_FATAL", "NET/IB failover"),
    "failover-probes": (
        "gpu-3:812:901 [2] transport/net_ib/p2p_resiliency.cc:460 NCCL WARN NET/IB: Maximum number of probing attempts "
        "(10) reached for request 0x7f3a2c0a1200 (id=17). Cannot post another probe.\n",
        "NCCL_IB_FAILOVER_FATAL", "NET/IB failover"),
    "ooo-rq-forced": (
        "gpu-1:91:150 [0] transport/net_ib/connect.cc:670 NCCL WARN NET/IB: OOO RQ is force enabled but AR is not "
        "enabled, which is required for OOO RQ (device=mlx5_0)\n", "NCCL_QP_CQ_CREATE_FAILED", "mlx5_0"),
    "multi-rank-gpu": (
        "ubuntu1583:1585:1585 [0] init.cc:1057 NCCL WARN Multiple Ranks are using the same GPU/Partition. Set "
        "NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.\n", "NCCL_DUPLICATE_GPU", "GPU"),
    "socket-truncated": (
        "node-2:301:399 [2] transport/net_socket.cc:636 NCCL WARN NET/Socket : peer 10.0.0.7<38212> message truncated : "
        "receiving 1048576 bytes instead of 65536. If you believe your socket network is in a healthy state, there may "
        "be a mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks\n",
        "NCCL_RANKS_MISMATCH", "NET/Socket"),
    "gin-no-gdr": (
        "gpu-1:91:150 [0] transport/net_ib/gin.cc:42 NCCL WARN Unable to use GIN: Peermem is not supported, and device "
        "0 does not support DMA-BUF.\n", "GDR_PEERMEM_MISSING", "GPU 0"),
}


@pytest.mark.parametrize("name", sorted(NCCL_30))
def test_nccl_2_29_and_2_30_warns_are_read(name: str) -> None:
    text, code, subject = NCCL_30[name]
    only_problem(text, code, subject)


def test_a_cqe_error_follows_the_completion_status_nccl_prints_after_it() -> None:
    # 2.29.7+: the CQE line first, then ncclIbLogCompletionWithError's status line (p2p.cc:854, then :870).
    rep = report(
        "gpu-3:812:901 [2] transport/net_ib/p2p.cc:854 NCCL WARN NET/IB: Got CQE with error (devIndex=1, "
        "req=0x7f3a2c0a1200, comm=0x7f3a2c001230 (send), wr_id=3, qp_num=4711)\n"
        "gpu-3:812:901 [2] transport/net_ib/p2p.cc:870 NCCL WARN NET/IB: Got completion from peer 10.1.1.2<51234> with "
        "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129  localGid ::ffff:10.1.1.1 "
        "remoteGids::ffff:10.1.1.2 hca mlx5_3\n")
    top = roots(rep)
    assert [pattern(f) for f in top] == ["nccl.wc_error"] and "IBV_WC_RETRY_EXC_ERR" in top[0]["subject"]
    cqe = next(f for f in problems(rep) if pattern(f) == "nccl.ib_cqe_error")
    assert cqe["cause"] == "NCCL_IB_COMPLETION_ERROR" and cqe["subject"] == "send QP 4711"


# https://github.com/NVIDIA/nccl/issues/1515 (a maintainer: NCCL retries ECONNREFUSED and ETIMEDOUT silently, a WARN
# only when the retries are spent). The INFO lines of a retry (src/misc/socket.cc:471 in 2.12-2.23, `Call to connect
# returned %s, retrying`; src/os/linux.cc:293 in 2.29-2.30, `%s: connect to %s returned %s, retrying (%d/%ld) after
# sleep for %u msec`) are not failures; the final WARN is.
SOCKET_RETRIES = (
    "node-1:55:120 [1] NCCL INFO Call to connect returned Connection refused, retrying\n"
    "node-1:55:120 [1] NCCL INFO ncclOsSocketPollConnect: connect to 10.0.0.3<45119> returned Connection refused, "
    "retrying (1/34) after sleep for 100 msec\n"
)
SOCKET_GAVE_UP = ("node-1:55:120 [1] os/linux.cc:288 NCCL WARN ncclOsSocketPollConnect: connect to 10.0.0.3<45119> "
                  "returned Connection timed out, exceeded error retry count after 35 attempts\n")


def test_ncclss_socket_retries_are_not_failures_and_giving_up_is() -> None:
    nothing_alarms(SOCKET_RETRIES)
    f = only_problem(SOCKET_RETRIES + SOCKET_GAVE_UP, "NCCL_SOCKET_ERROR", "10.0.0.3<45119>")
    assert "Connection timed out" in f["message"]


# ---- GCP's socket plugins: the designed transport, one note, no warning per NIC ------------------------------

# The TCPXO plugin's teardown lines are quoted from a public test of a GKE benchmark runner (NCCL's prefix, `NET/FasTrak:`
# then the plugin's message); the `GPU Direct RDMA Disabled` lines are NCCL's src/graph/topo.cc format
# (`NET/%s : GPU Direct RDMA %s for HCA %d '%s'`) with the plugin's name, one per GPU NIC as on A3 Mega.
TCPXO = "".join(f"node-0-0:870:938 [0] NCCL INFO NET/FasTrak : GPU Direct RDMA Disabled for HCA {i} 'eth{i + 1}'\n"
                for i in range(8)) + (
    "node-0-0:870:938 [0] NCCL INFO NET/FasTrak: SCTP Closed\n"
    "node-0-0:870:938 [0] NCCL INFO NET/FasTrak: Socket closed, handler exiting.\n"
)


def test_gcp_tcpxo_is_one_note_not_a_warning_per_nic() -> None:
    rep = nothing_alarms(TCPXO)
    notes = [f for f in findings(rep) if f["code"] == "NCCL_GCP_NET_PLUGIN"]
    assert len(notes) == 1 and notes[0]["subject"] == "FasTrak" and notes[0]["severity"] == "info"
    assert not {"NCCL_GDR_DISABLED", "NCCL_SOCKET_FALLBACK"} & {f["code"] for f in findings(rep)}


def test_gcp_tcpxos_daemon_timeout_is_a_failure_not_the_plugins_note() -> None:
    # Made from the plugin's format (tcpdirect_plugin/fastrak_offload/init.cc WaitForRxDM, logged as
    # `NET/FasTrak %s: %s`): the plugin names itself on the line, and the line says it failed.
    text = TCPXO.splitlines(keepends=True)[0] + (
        "node-0-0:870:870 [0] NCCL WARN NET/FasTrak 2025-03-04T10:22:33.123456-08:00: Timeout: RxDM not ready on "
        "node-0-0 after 600 seconds: UNAVAILABLE: failed to connect to all addresses\n")
    f = only_problem(text, "NCCL_NET_PLUGIN_LOAD_FAILED", "FasTrak RxDM")
    assert "600 s" in f["message"] and "tcpxo-daemon" in f["remedy"]


# ---- the real H200 logs (NCCL 2.28.9, ../shared/realworld/gpu-h200): none of these rows fires on them ---------

NEW_ROWS = ("pytorch.store_connect_retry", "pytorch.store_connect_retry_tcpstore", "mpi.mpich_fatal", "mpi.mvapich2_iba_init",
            "mpi.ompi_ofi_call", "mpi.btl_ofi_call", "mpi.openib_create_queue", "mpi.btl_tcp_connect_box",
            "mpi.btl_tcp_connect", "mpi.ofi_init_local", "mpi.ofi_cq", "ucx.devx_no_memory", "nvshmem.devx_uar",
            "nccl.ib_incompatible_devices", "nccl.ras_version_mismatch", "nccl.ib_cqe_error", "nccl.ib_failover_no_device",
            "nccl.ib_failover_probes", "nccl.ib_ooo_rq_forced", "nccl.multi_rank_gpu", "nccl.net_socket_truncated",
            "nccl.gin_no_gdr", "nccl.gcp_tcpxo", "nccl.gcp_tcpxo_rxdm")


def test_the_new_rows_fire_on_nothing_in_a_real_healthy_h200_run(realworld) -> None:
    import gzip
    import re

    from rdmadoctor.logs import kb

    rows = {p.id: p for p in kb.patterns() if p.id in NEW_ROWS}
    assert set(rows) == set(NEW_ROWS)
    compiled = {i: re.compile(p.regex) for i, p in rows.items()}
    folder = realworld / "gpu-h200"
    texts = [gzip.open(folder / "dense_all.log.gz", "rt", errors="replace").read()]
    texts += [(folder / name).read_text(errors="replace") for name in ("nccl_run.txt", "nccl_ib_disable.log",
                                                                         "nccl_torchrun2.log")]
    fired = [(i, line) for text in texts for line in text.splitlines() for i, p in rows.items()
             if p.needle in line and compiled[i].search(line)]
    assert not fired, fired[:3]
