"""UCX (Open MPI's pml ucx, UCC, RAPIDS, Spark-RAPIDS): its verbs failures and its signal handler.

UCX logs ``[time] [host:pid:tid] file.c:NNN  UCX  ERROR <device>: <call>(...) failed: <strerror>``
(src/uct/ib/base/ib_log.c, ib_md.c) and, when it has a signal handler installed, ``[host:pid:0:tid]
Caught signal N (<name>: <reason>)`` followed by a backtrace (src/ucs/debug/debug.c). Strings
checked against openucx/ucx v1.13 .. v1.18 and the issues named in each ``ref``.
"""

from __future__ import annotations

from rdmadoctor.core.codes.mpi import (
    UCX_IB_RESOURCE_FAILED,
    VERBS_REG_MEMORY_LIMITED,
)
from rdmadoctor.core.codes.nccl import NCCL_IB_COMPLETION_ERROR
from rdmadoctor.core.model import ERROR, WARNING
from rdmadoctor.logs.kb import Pattern

CODES = (UCX_IB_RESOURCE_FAILED, VERBS_REG_MEMORY_LIMITED)

# Codes that live with their checks or other sources, named by string (the logs layer is below the checks).
MEMLOCK_LIMITED = "MEMLOCK_LIMITED"
ROCE_NO_V2_GID = "ROCE_NO_V2_GID"
VERBS_ABI_MISMATCH = "VERBS_ABI_MISMATCH"
NCCL_SHM_FAILED = "NCCL_SHM_FAILED"


def _limit(groups: dict[str, str]) -> dict[str, str]:
    kb = groups.get("kb") or ""
    return {"limit_text": f"{kb} KiB" if kb.isdigit() else "low"}


PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        id="ucx.retry_exceeded",
        code=NCCL_IB_COMPLETION_ERROR.code,
        severity=ERROR,
        needle="Transport retry count exceeded on",
        regex=r"Transport retry count exceeded on (?P<dev>[\w.-]{1,64}):(?P<port>\d{1,3})/(?P<ll>IB|RoCE)",
        subject="{dev}:{port}",
        message="UCX's send on {dev} port {port} ({ll}) was never acknowledged by the peer within its retries "
                "(IBV_WC_RETRY_EXC_ERR): the peer's port, the path between them, or on RoCE the GID it was sent to.",
        meaning="The endpoint fails and UCX aborts the process (Open MPI, UCC, NVSHMEM over UCX); the peer is "
                "unreachable over RDMA or died.",
        fix="Test the pair with `ib_write_bw -d <dev>` (on RoCE with `-x` set to the RoCE v2 IPv4 GID of both hosts); "
            "check both ports are ACTIVE and their counters (`perfquery -x`, `ethtool -S`); on RoCE the switch's "
            "PFC/ECN and UCX_IB_GID_INDEX; if it starts mid-run, the peer node or its link failed first.",
        ref="openucx/ucx src/uct/ib/mlx5/ib_mlx5_log.c uct_ib_mlx5_completion_with_err `%s on %s:%d/%s (synd 0x%x vend "
            "0x%x hw_synd %d/%d)`; https://github.com/openucx/ucx/issues/6000, https://github.com/openucx/ucx/issues/9590",
        examples=("[compute001:31180:0:31180] ib_mlx5_log.c:143  Transport retry count exceeded on mlx5_0:1/RoCE (synd "
                  "0x15 vend 0x81 hw_synd 0/0)",
                  "[lxbk1127:2330856:0:2330856] ib_mlx5_log.c:177  Transport retry count exceeded on mlx5_0:1/IB (synd "
                  "0x15 vend 0x81 hw_synd 0/0)"),
    ),
    Pattern(
        id="ucx.dgid_link_local",
        code=ROCE_NO_V2_GID,
        severity=WARNING,
        needle="dgid fe80",
        regex=r"\bQP 0x[0-9a-f]{1,8} wqe\[\d{1,9}\]: [^\n]{0,200}?\bdgid (?P<gid>fe80:[0-9a-f:]{1,40})",
        subject="RoCE GID",
        message="UCX sent to the peer's link-local GID {gid}: a RoCE v2 packet to a link-local address is not routed "
                "beyond one L2 segment; the GID with the peer's IPv4 address is the one that reaches it.",
        meaning="Between subnets (or with a netdev without an address) the sends are never acknowledged: retries exceed.",
        fix="Give the RoCE netdev an IPv4 address on both hosts and let UCX pick its GID, or set UCX_IB_GID_INDEX to the "
            "RoCE v2 IPv4 index `show_gids` lists (the same on every host).",
        ref="openucx/ucx src/uct/ib/mlx5/ib_mlx5_log.c uct_ib_mlx5_wqe_dump (`dgid %s`); "
            "https://github.com/openucx/ucx/issues/6000",
        examples=("[compute001:31180:0:31180] ib_mlx5_log.c:143  DCI QP 0x14e4 wqe[0]: SEND s-e [rqpn 0x2248a rmac "
                  "50:6b:4b:cb:be:ce sgix 0 dgid fe80::526b:4bff:fecb:bece tc 0] [inl len 18]",),
    ),
    Pattern(
        id="ucx.devx_failed",
        code=UCX_IB_RESOURCE_FAILED.code,
        severity=ERROR,
        needle="mlx5dv_devx_obj_",
        # (Syndrome 0 with `Cannot allocate memory` is the kernel's refusal, not the firmware's: the row below.)
        regex=r"mlx5dv_devx_obj_(?P<op>create|modify)\((?P<obj>\w{1,32})\) failed on (?P<dev>[\w.-]{1,64}), syndrome "
              r"(?P<syndrome>0x(?!0: Cannot allocate memory)[0-9a-f]{1,8})",
        subject="{dev} {obj}",
        message="The firmware of {dev} refused UCX's command to {op} a {obj} (syndrome {syndrome}): the firmware and "
                "the driver or UCX are out of step, or the firmware ran out of that resource.",
        meaning="UCX cannot use that device's accelerated transports: endpoints fail (`ucp_ep_create ... failed`) and "
                "the job aborts.",
        fix="`dmesg | grep mlx5` shows the command's syndrome from the driver's side; bring the firmware to the "
            "version the driver (MLNX_OFED/DOCA or the kernel) expects (`mlxfwmanager --query`); as a workaround "
            "UCX_IB_MLX5_DEVX=n keeps UCX off DevX.",
        ref="openucx/ucx src/uct/ib/mlx5/dv/ib_mlx5_dv.c uct_ib_mlx5_devx_create_qp `mlx5dv_devx_obj_create(QP) failed "
            "on %s, syndrome 0x%x: %m`; https://github.com/openucx/ucx/issues/10451",
        examples=("1737742661.094513] [cn0244:260472:0]      ib_mlx5_dv.c:430  UCX  ERROR   mlx5dv_devx_obj_create(QP) "
                  "failed on mlx5_0, syndrome 0x2c4154: Remote I/O error",),
    ),
    Pattern(
        id="ucx.devx_no_memory",
        code=UCX_IB_RESOURCE_FAILED.code,
        severity=ERROR,
        needle="mlx5dv_devx_obj_",
        regex=r"mlx5dv_devx_obj_(?P<op>create|modify)\((?P<obj>\w{1,32})\) failed(?: on (?P<dev>[\w.-]{1,64}))?, syndrome "
              r"(?:0x)?0: Cannot allocate memory",
        subject="{dev_subject}{obj}",
        message="UCX could not {op} a {obj}{on} through DevX: `Cannot allocate memory` with no firmware syndrome, the "
                "locked-memory limit or the NIC's resources for that many processes.",
        meaning="UCX cannot open its accelerated (rc_x, dc_x) transports: endpoints fail and MPI_Init or the first "
                "connection aborts; it often appears only when every core of a node runs a rank.",
        fix="Run with `ulimit -l unlimited` (IPC_LOCK in a container); with many ranks per node use fewer QPs "
            "(UCX_TLS=dc_x or ud_x instead of rc_x, UCX_RC_MLX5_TX_QUEUE_LEN smaller) or fewer ranks per NIC.",
        ref="openucx/ucx src/uct/ib/mlx5/dv/ib_mlx5_dv.c (`mlx5dv_devx_obj_create(QP) failed, syndrome %x: %m` before "
            "1.12, `failed on %s, syndrome 0x%x: %m` after); https://github.com/openucx/ucx/issues/7978, "
            "https://github.com/openucx/ucx/issues/5351",
        examples=("[1645552289.027611] [m7-31:723275:0]      ib_mlx5_dv.c:161  UCX  ERROR   mlx5dv_devx_obj_create(QP) failed, "
                  "syndrome 0: Cannot allocate memory",),
        derive=lambda g: {"on": f" on {g['dev']}" if g.get("dev") else "",
                          "dev_subject": f"{g['dev']} " if g.get("dev") else ""},
    ),
    Pattern(
        id="ucx.exp_query_device",
        code=VERBS_ABI_MISMATCH,
        severity=ERROR,
        needle="ibv_exp_query_device(",
        regex=r"ibv_exp_query_device\((?P<dev>[\w.-]{1,64})\) returned (?P<rc>\d{1,4})",
        subject="{dev}",
        message="UCX calls MLNX_OFED's experimental verbs (ibv_exp_query_device) and the installed libibverbs is "
                "rdma-core's, which has none: UCX was built for another verbs stack and cannot use {dev}.",
        meaning="UCX leaves the RDMA transports out: MPI runs over TCP (bandwidth in MB/s, not GB/s) or fails.",
        fix="Use a UCX (HPC-X) built for the verbs the host has: HPC-X for upstream rdma-core (the `-inbox` builds), "
            "or MLNX_OFED on the host; `ucx_info -v` shows what UCX was configured with.",
        ref="openucx/ucx src/uct/ib/base/ib_verbs.h (HAVE_DECL_IBV_EXP_QUERY_DEVICE, MLNX_OFED < 5 only); "
            "https://github.com/openucx/ucx/issues/4770",
        examples=("[1581627489.217854] [upstreamhost1:195530:0]       ib_verbs.h:84   UCX  ERROR ibv_exp_query_device(mlx5_0) "
                  "returned 38: No space left on device",),
    ),
    Pattern(
        id="ucx.memlock_hint",
        code=MEMLOCK_LIMITED,
        severity=ERROR,
        needle="set max locked memory",
        regex=r"(?:(?<![\w.-])(?P<dev>[\w.-]{1,64}): )?(?P<call>ibv_\w{1,32})\([^)\n]{0,200}\) failed: (?P<error>[^.\n]{1,80})\. "
              r"Please set max locked memory \(ulimit -l\) to 'unlimited' \(current: (?P<kb>\d{1,19}) kbytes\)",
        subject="memlock",
        message="UCX: {call} failed with `{error}` and UCX names the cause: the locked-memory limit is {limit_text}; RDMA "
                "needs it unlimited (or CAP_IPC_LOCK).",
        meaning="UCX cannot use the RDMA device; the job runs over TCP or fails.",
        fix="Add IPC_LOCK to the container (securityContext.capabilities.add: [IPC_LOCK]), or raise the limit: "
            "`ulimit -l unlimited` in the entrypoint, LimitMEMLOCK=infinity for the container runtime, `docker run "
            "--ulimit memlock=-1:-1`.",
        ref="openucx/ucx src/uct/ib/base/ib_log.c (UCX >= 1.13 appends the memlock hint to ENOMEM); "
            "https://github.com/openucx/ucx/issues/8746",
        examples=(
            "[1668693503.473099] [ampere:1188443:0]          ib_log.c:246  UCX  ERROR mlx5_0: ibv_create_cq() failed: "
            "Cannot allocate memory. Please set max locked memory (ulimit -l) to 'unlimited' (current: 64 kbytes)",
        ),
        derive=_limit,
    ),
    Pattern(
        id="ucx.verbs_call_failed",
        code=UCX_IB_RESOURCE_FAILED.code,
        severity=ERROR,
        needle=") failed: ",
        # The line with UCX's own memlock hint is the row above (the look-ahead reads the error to its period).
        regex=r"(?:(?<![\w.-])(?P<dev>[\w.-]{1,64}): )?(?P<call>ibv_(?:create_cq|create_qp|create_srq|reg_mr|reg_dmabuf_mr|alloc_pd)"
              r"(?:_ex)?|mlx5dv_(?:create_cq|create_qp|devx_alloc_uar|devx_umem_reg))\((?P<args>[^)\n]{0,200})\) failed: "
              r"(?![^.\n]{1,80}\. Please set max locked memory)(?P<error>[^.\n]{1,80})",
        subject="{call}",
        message="UCX could not {what}{on}: {call}({args}) failed with `{error}`.",
        meaning="The RDMA transport on that device is unusable: UCX falls back to TCP or the job fails. `Cannot allocate "
                "memory` is the locked-memory limit almost every time.",
        fix="`ulimit -l` in the job must say unlimited: add IPC_LOCK to the container or raise LimitMEMLOCK / "
            "`--ulimit memlock=-1:-1`; for `Bad address` on ibv_reg_mr, UCX's huge-page allocator is involved "
            "(UCX_*_ALLOC without `huge`); `Operation not supported` from an mlx5dv_devx call means DevX is not "
            "allowed there (the firmware, or a container without the rights): UCX_IB_MLX5_DEVX=n avoids it.",
        ref="openucx/ucx src/uct/ib/base/ib_md.c uct_ib_reg_mr `%s(address=%p, length=%zu, access=0x%lx) failed: %m`, "
            "src/uct/ib/base/ib_iface.c `ibv_create_cq(cqe=%d) failed: %m`; https://github.com/openucx/ucx/issues/8229, "
            "https://github.com/openucx/ucx/issues/8999; mlx5dv_* (src/uct/ib/mlx5): https://github.com/openucx/ucx/issues/6223 "
            "(`mlx5dv_devx_alloc_uar() failed: Operation not supported`), https://github.com/openucx/ucx/issues/8229",
        examples=(
            "ibv_create_cq(cqe=4096) failed: Cannot allocate memory",
            "[1652770215.176529] [node1:48133:0]        ib_iface.c:733  UCX  ERROR ibv_create_cq(cqe=4096) failed: Cannot "
            "allocate memory",
            "ib_md.c:309  UCX  ERROR ibv_reg_mr(address=0x7f1c3a000000, length=2097152, access=0xf) failed: Bad address",
            "[1611787738.347966] [pacu02:233164:0]        ib_mlx5.c:395  UCX  ERROR mlx5dv_devx_alloc_uar() failed: "
            "Operation not supported",
            "[1652740949.516398] [cn0337:3290573:0]         ib_mlx5.c:90   UCX  ERROR mlx5dv_create_cq(cqe=4096) failed: "
            "Cannot allocate memory",
        ),
        derive=lambda g: {
            "what": {"create_cq": "create a completion queue", "create_qp": "create a queue pair",
                     "create_srq": "create a shared receive queue", "alloc_pd": "allocate a protection domain",
                     "devx_alloc_uar": "allocate a doorbell page (UAR) through DevX",
                     "devx_umem_reg": "register memory through DevX"}.get(
                g.get("call", "").split("_", 1)[-1].removesuffix("_ex"), "register memory with the HCA"),
            "on": f" on {g['dev']}" if g.get("dev") else "",
        },
    ),
    Pattern(
        id="ucx.create_qp_failed",
        code=UCX_IB_RESOURCE_FAILED.code,
        severity=ERROR,
        needle=" QP TX wr:",
        regex=r"failed to create (?P<type>\w{1,8}) QP TX wr:\d{1,9}[^\n]{0,200}?: (?P<error>[A-Z][a-z][^:`\n]{1,80}?)`?\s*$",
        subject="{type} QP",
        message="UCX could not create a {type} queue pair on the device: `{error}`.",
        meaning="That transport of UCX is unusable: Open MPI's pml ucx cannot create its worker (`Failed to create UCP "
                "worker`) and the job fails or runs without RDMA. `Cannot allocate memory` is the locked-memory "
                "limit or, with hundreds of ranks per node, the HCA's resources; `Invalid argument` a provider "
                "(a non-Mellanox RoCE card's) that refuses what UCX asks for.",
        fix="`Cannot allocate memory`: `ulimit -l unlimited` for the job (IPC_LOCK in a container), then fewer UD "
            "resources (UCX_UD_VERBS_RX_QUEUE_LEN, or UCX_TLS=rc,sm without ud); `Invalid argument`: leave that "
            "transport out (UCX_TLS without `ud`) or use the card vendor's provider and firmware.",
        ref="openucx/ucx src/uct/ib/base/ib_iface.c uct_ib_iface_create_qp (`iface=%p: failed to create %s QP TX wr:%d "
            "sge:%d inl:%d resp:%d RX wr:%d sge:%d resp:%d: %m`); https://github.com/openucx/ucx/issues/8336, "
            "https://github.com/openucx/ucx/issues/5148",
        examples=("ib_iface.c:988  UCX  ERROR iface=0x224c8a10: failed to create UD QP TX wr:256 sge:6 inl:64 resp:0 RX "
                  "wr:4096 sge:1 resp:0: Cannot allocate memory",
                  "[1588956223.719348] [vinci115:55453:0]       ib_iface.c:623  UCX  ERROR iface=0x2535490: failed to "
                  "create UD QP TX wr:256 sge:2 inl:64 RX wr:4096 sge:1 inl 0: Invalid argument"),
    ),
    Pattern(
        id="ucx.sigbus_shm",
        code=NCCL_SHM_FAILED,
        severity=ERROR,
        needle="Caught signal 7",
        regex=r"Caught signal 7 \(Bus error: nonexistent physical address\)",
        subject="/dev/shm",
        message="A process died of SIGBUS (`Bus error: nonexistent physical address`): it wrote to a shared-memory "
                "mapping that /dev/shm could not back. With NCCL (libnccl frames in the backtrace) that is NCCL's "
                "shared-memory transport outgrowing a small /dev/shm, the container default of 64 MiB.",
        meaning="The ranks on this host crash during communicator setup or the first collectives.",
        fix="Give the pod a bigger /dev/shm: an emptyDir with medium: Memory (sizeLimit: 16Gi or more) mounted at "
            "/dev/shm; with docker, `--shm-size=16g` or `--ipc=host`. Or, to confirm, NCCL_SHM_DISABLE=1 (slower).",
        ref="openucx/ucx src/ucs/debug/debug.c (`Caught signal %d (%s)`, the si_code of SIGBUS); "
            "https://github.com/NVIDIA/Megatron-LM/issues/516, https://github.com/msr-fiddle/pipedream/issues/76",
        examples=(
            "[09677202c889:5283 :0:5704] Caught signal 7 (Bus error: nonexistent physical address)",
            "[cf0b62962198:378934:0:382579] Caught signal 7 (Bus error: nonexistent physical address)",
        ),
    ),
    Pattern(
        id="ucx.ompi_registerable_memory",
        code=VERBS_REG_MEMORY_LIMITED.code,
        severity=WARNING,
        needle="OpenFabrics subsystem is configured to only",
        regex=r"OpenFabrics subsystem is configured to only",
        subject="registerable memory",
        message="Open MPI found that the OpenFabrics (verbs) stack lets a process register only part of the physical "
                "memory (its `Registerable memory` against `Total memory` below says how much).",
        meaning="MPI jobs that register more run with erratic performance, hang or crash.",
        fix="Raise the HCA driver's translation-table limits (mlx4_core log_num_mtt / log_mtts_per_seg) and the "
            "locked-memory limit (`ulimit -l unlimited`).",
        ref="open-mpi/ompi opal/mca/btl/openib/help-mpi-btl-openib.txt [reg mem limit low] (1.6-4.1); "
            "https://www.open-mpi.org/faq/?category=openfabrics#ib-locked-pages; "
            "https://github.com/HiFiLES/HiFiLES-solver/issues/99",
        examples=("WARNING: It appears that your OpenFabrics subsystem is configured to only",),
    ),
    Pattern(
        id="ucx.ucc_shm_attach",
        code=NCCL_SHM_FAILED,
        severity=ERROR,
        needle="failed to attach to shmseg",
        regex=r"TL_SHM ERROR Child failed to attach to shmseg, errno: (?P<error>[^\n]{1,80}?)\s*$",
        subject="/dev/shm",
        message="UCC's shared-memory collectives could not attach the segment another rank of this host made "
                "({error}): the ranks of one host do not share an IPC namespace (separate containers or pods).",
        meaning="Collectives through UCC (Open MPI's coll ucc, PyTorch's UCC backend) fail on that host.",
        fix="Run the ranks of a host in one container, or share the IPC namespace (`--ipc=host`, hostIPC); or turn UCC's "
            "shared-memory team off (UCC_TL_SHM_TUNE=0).",
        ref="openucx/ucc src/components/tl/shm/tl_shm_team.c `Child failed to attach to shmseg, errno: %s`; "
            "https://github.com/NVIDIA/nccl-tests/issues/247",
        examples=("[1723337199.099229] [ai-worker03:1382 :0] tl_shm_team.c:617 TL_SHM ERROR Child failed to attach to "
                  "shmseg, errno: Invalid argument",),
    ),
)
