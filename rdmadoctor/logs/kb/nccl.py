"""NCCL's own messages: transport choice, IB verbs wrappers, work completions, shared memory.

Strings verified against NVIDIA/nccl (tags named in each row's ``ref``).
"""

from __future__ import annotations

from rdmadoctor.core.model import ERROR, GPUDIRECT, INFO, LINK, WARNING, Code
from rdmadoctor.logs.kb import Pattern

NCCL_SOCKET_FALLBACK = Code(
    "NCCL_SOCKET_FALLBACK",
    "NCCL sends inter-node traffic over TCP sockets",
    "NCCL chose its socket transport (NET/Socket, or a socket-based plugin such as FastSocket) for "
    "traffic between nodes, by choice or because no RDMA device was usable. All-reduce bandwidth "
    "drops to what TCP on the named interface gives, typically a few GB/s instead of tens; a "
    "multi-node job runs, but slowly.",
    "Find why NCCL could not use IB from the lines before `Using network Socket` (`NET/IB : No "
    "device found`, `NCCL_IB_DISABLE set by environment to 1`) or run `rdmadoctor diagnose LOG "
    "--live` in the pod: the uverbs device must be visible (request rdma/hca), NCCL_IB_HCA must "
    "name ACTIVE ports, NCCL_IB_DISABLE must be unset.",
    condition=LINK,
)
NCCL_GDR_DISABLED = Code(
    "NCCL_GDR_DISABLED",
    "GPUDirect RDMA is off for an HCA or a GPU/HCA pair",
    "NCCL stages every inter-node transfer through host memory instead of letting the HCA read "
    "and write GPU memory: extra copies and PCIe crossings, lower bandwidth and more CPU.",
    "Load the peer-memory module on the node (`modprobe nvidia_peermem`; the GPU Operator's "
    "`driver.rdma.enabled=true`) or use DMA-BUF (NVIDIA open kernel driver, kernel >= 5.12, NCCL "
    ">= 2.13); when NCCL names a distance, place the GPU and HCA under one PCIe switch or raise "
    "NCCL_NET_GDR_LEVEL only if the topology really allows it.",
    condition=GPUDIRECT,
)
NCCL_IB_COMPLETION_ERROR = Code(
    "NCCL_IB_COMPLETION_ERROR",
    "An InfiniBand/RoCE work request completed with an error",
    "A send or receive between two ranks failed in the HCA; NCCL aborts the communicator and the "
    "job dies or hangs. The status (ibv_wc_status) says which: 12 IBV_WC_RETRY_EXC_ERR is an "
    "unreachable or misrouted peer, 4 IBV_WC_LOC_PROT_ERR a broken GPUDirect path, 5 "
    "IBV_WC_WR_FLUSH_ERR only follows an earlier error.",
    "Read the status in the subject and its fix in the finding; test the pair of hosts with "
    "perftest (`ib_write_bw -d mlx5_0 <peer>`), check the port counters (`perfquery -x`), the "
    "RoCE GID index (NCCL_IB_GID_INDEX) and the rail wiring.",
    condition=LINK,
)
NCCL_SHM_FAILED = Code(
    "NCCL_SHM_FAILED",
    "NCCL could not create, extend or attach a shared-memory segment",
    "NCCL's intra-node transport and its proxy use /dev/shm; when a segment cannot be made the "
    "communicator fails to initialise (`unhandled system error`), and socket errors on other "
    "ranks follow.",
    "Give the pod a large /dev/shm: an emptyDir with `medium: Memory` mounted on /dev/shm (a "
    "`sizeLimit` of several GiB), or `--shm-size` / `--ipc=host` outside Kubernetes.",
)
NCCL_QP_CQ_CREATE_FAILED = Code(
    "NCCL_QP_CQ_CREATE_FAILED",
    "ibv_create_qp or ibv_create_cq failed",
    "NCCL could not create the queue pairs or completion queues it needs per connection; the "
    "communicator fails to initialise. With `Cannot allocate memory` the locked-memory limit is "
    "almost always the reason.",
    "Raise the pod's memlock limit: add IPC_LOCK to the container's capabilities (or run with an "
    "unlimited `ulimit -l`); on many ranks per node also check the HCA's QP limits (`ibv_devinfo -v`, max_qp).",
)
NCCL_REG_MR_FAILED = Code(
    "NCCL_REG_MR_FAILED",
    "ibv_reg_mr failed: NCCL could not register (pin) its buffers",
    "The HCA can only reach memory that is registered and pinned; when registration fails NCCL "
    "cannot use RDMA for the buffer and the communicator fails. `Cannot allocate memory` means the "
    "locked-memory limit (RLIMIT_MEMLOCK) is too small; a GPU buffer failing alone points to GPUDirect.",
    "Add IPC_LOCK to the container's capabilities (securityContext.capabilities.add: [IPC_LOCK]) "
    "or set an unlimited memlock limit; for GPU buffers load nvidia_peermem or use DMA-BUF.",
)

CODES = (NCCL_SOCKET_FALLBACK, NCCL_GDR_DISABLED, NCCL_IB_COMPLETION_ERROR, NCCL_SHM_FAILED,
         NCCL_QP_CQ_CREATE_FAILED, NCCL_REG_MR_FAILED)

# ibv_wc_status (rdma-core libibverbs/verbs.h), by number: its enum name.
WC_STATUS = {
    0: "IBV_WC_SUCCESS", 1: "IBV_WC_LOC_LEN_ERR", 2: "IBV_WC_LOC_QP_OP_ERR", 3: "IBV_WC_LOC_EEC_OP_ERR",
    4: "IBV_WC_LOC_PROT_ERR", 5: "IBV_WC_WR_FLUSH_ERR", 6: "IBV_WC_MW_BIND_ERR", 7: "IBV_WC_BAD_RESP_ERR",
    8: "IBV_WC_LOC_ACCESS_ERR", 9: "IBV_WC_REM_INV_REQ_ERR", 10: "IBV_WC_REM_ACCESS_ERR",
    11: "IBV_WC_REM_OP_ERR", 12: "IBV_WC_RETRY_EXC_ERR", 13: "IBV_WC_RNR_RETRY_EXC_ERR",
    14: "IBV_WC_LOC_RDD_VIOL_ERR", 15: "IBV_WC_REM_INV_RD_REQ_ERR", 16: "IBV_WC_REM_ABORT_ERR",
    17: "IBV_WC_INV_EECN_ERR", 18: "IBV_WC_INV_EEC_STATE_ERR", 19: "IBV_WC_FATAL_ERR",
    20: "IBV_WC_RESP_TIMEOUT_ERR", 21: "IBV_WC_GENERAL_ERR", 22: "IBV_WC_TM_ERR", 23: "IBV_WC_TM_RNDV_INCOMPLETE",
}


def _wc(groups: dict[str, str]) -> dict[str, str]:
    try:
        n = int(groups.get("status") or "")
    except ValueError:
        return {"status_name": "unknown status"}
    return {"status_name": WC_STATUS.get(n, f"status {n}")}


PATTERNS: tuple[Pattern, ...] = (
    # Seed row; the full table is being written from the catalogue (see the package docstring).
    Pattern(
        id="nccl.wc_error",
        code=NCCL_IB_COMPLETION_ERROR.code,
        severity=ERROR,
        needle="Got completion",
        regex=r"Got completion (?:from peer (?P<peer>\S+) )?with (?:error |status=)(?P<status>\d+)"
              r"(?:.*?vendor[ _]err(?:or)?[ =]?(?P<vendor>\d+))?",
        subject="status {status} {status_name}",
        message="NCCL got a work completion with status {status} ({status_name}), vendor error {vendor}",
        meaning="A send or receive failed in the HCA; the communicator aborts.",
        fix="Status 12 (retry exceeded): the peer is unreachable over this rail: run ib_write_bw between the two "
            "hosts, check NCCL_IB_GID_INDEX on RoCE and NCCL_IB_TIMEOUT; 5 (flushed) follows an earlier error.",
        ref="NVIDIA/nccl src/transport/net_ib.cc (2.7-2.21), src/transport/net_ib/common.cc (2.22+)",
        examples=("NET/IB : Got completion from peer 10.0.0.2<42345> with error 12, opcode 0, len 0, vendor err 129",),
        symptom_when=(("status", "5"),),
        derive=_wc,
    ),
    Pattern(
        id="nccl.gdr_disabled_hca",
        code=NCCL_GDR_DISABLED.code,
        severity=WARNING,
        needle="GPU Direct RDMA Disabled for HCA",
        regex=r"NET/(?P<net>\w+) ?: GPU Direct RDMA Disabled for HCA (?P<index>\d+) '(?P<hca>[^']+)'(?P<why> \(no module\))?",
        subject="{hca}",
        message="NCCL says GPU Direct RDMA is disabled for HCA {index} '{hca}'{why}: transfers go through host memory",
        meaning="Every inter-node transfer is staged through host memory.",
        fix="modprobe nvidia_peermem on the node (GPU Operator: driver.rdma.enabled=true), or DMA-BUF with the open driver.",
        ref="NVIDIA/nccl src/transport/net_ib.cc ncclIbGdrSupport (2.7-2.30)",
        examples=("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)",),
    ),
)
_ = INFO  # used by rows of kind info
