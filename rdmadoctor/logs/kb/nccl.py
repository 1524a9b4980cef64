"""NCCL's own messages: transport choice, IB verbs wrappers, work completions, sockets, shared memory.

Every string was checked against NVIDIA/nccl at the tags named in each row's ``ref`` (v2.5.6-1 ..
v2.30.7-1): where a message changed between releases the regex takes every form, and one example
per form is kept. Paths moved twice: ``src/include/*.h`` (<= 2.11) to ``src/misc/*.cc``, and in
2.29 ``src/transport/net_ib.cc`` split into ``src/transport/net_ib/*.cc``; 2.30 moved sockets and
shared memory into ``src/os/linux.cc``.
"""

from __future__ import annotations

from rdmadoctor.core.codes.nccl import (
    JOB_HANG,
    LOG_ERROR_UNKNOWN,
    NCCL_BOOTSTRAP_FAILED,
    NCCL_COLLNET_FAILED,
    NCCL_CUDA_FAILED,
    NCCL_DUPLICATE_GPU,
    NCCL_GCP_NET_PLUGIN,
    NCCL_GDR_DISABLED,
    NCCL_GDR_DISTANCE,
    NCCL_GRAPH_FILE,
    NCCL_GRAPH_SIMPLE_ORDER,
    NCCL_IB_ASYNC_EVENT,
    NCCL_IB_ASYNC_FATAL,
    NCCL_IB_COMPLETION_ERROR,
    NCCL_IB_FAILOVER_FATAL,
    NCCL_IB_MODIFY_QP_FAILED,
    NCCL_IB_NO_DEVICE,
    NCCL_IB_PORT_FAILOVER,
    NCCL_IB_PORT_RECOVERED,
    NCCL_INVALID_RANK,
    NCCL_LOOPBACK,
    NCCL_MIXED_LINK_LAYERS,
    NCCL_NET_COUNT_MISMATCH,
    NCCL_NET_INIT_FAILED,
    NCCL_NET_PLUGIN_LOAD_FAILED,
    NCCL_NO_SOCKET_INTERFACE,
    NCCL_PLUGIN_MISMATCH,
    NCCL_QP_CQ_CREATE_FAILED,
    NCCL_RANKS_MISMATCH,
    NCCL_RAS_PROCESS_DEAD,
    NCCL_RAS_QUIET,
    NCCL_RAS_RANK_ERROR,
    NCCL_RAS_RANK_MISSING,
    NCCL_RAS_STRAGGLER,
    NCCL_RAS_UNAVAILABLE,
    NCCL_REG_MR_FAILED,
    NCCL_REMOTE_ERROR,
    NCCL_SHM_FAILED,
    NCCL_SINGLE_HOST,
    NCCL_SOCKET_ERROR,
    NCCL_SOCKET_FALLBACK,
    NCCL_SYSTEM_ERROR,
    NCCL_TOPOLOGY_FAILED,
    RCCL_HOST_SETUP,
)
from rdmadoctor.core.codes.node import NIC_LINK_DOWN
from rdmadoctor.core.model import ERROR, INFO, WARNING
from rdmadoctor.logs.kb import Pattern

CODES = (NCCL_SOCKET_FALLBACK, NCCL_IB_NO_DEVICE, NCCL_GDR_DISABLED, NCCL_IB_COMPLETION_ERROR, NCCL_SHM_FAILED,
         NCCL_QP_CQ_CREATE_FAILED, NCCL_REG_MR_FAILED,
         NCCL_NO_SOCKET_INTERFACE, NCCL_BOOTSTRAP_FAILED, NCCL_SOCKET_ERROR, NCCL_SYSTEM_ERROR,
         NCCL_REMOTE_ERROR, NCCL_IB_ASYNC_FATAL, NCCL_IB_ASYNC_EVENT, NCCL_IB_MODIFY_QP_FAILED,
         NCCL_NET_PLUGIN_LOAD_FAILED, NCCL_NET_INIT_FAILED, NCCL_GDR_DISTANCE,
         NCCL_DUPLICATE_GPU, NCCL_INVALID_RANK, NCCL_SINGLE_HOST, NCCL_CUDA_FAILED, NCCL_GRAPH_SIMPLE_ORDER,
         NCCL_GRAPH_FILE, NCCL_TOPOLOGY_FAILED, RCCL_HOST_SETUP, NCCL_COLLNET_FAILED, NCCL_PLUGIN_MISMATCH,
         NCCL_MIXED_LINK_LAYERS, NCCL_RANKS_MISMATCH, NCCL_LOOPBACK, LOG_ERROR_UNKNOWN,
         JOB_HANG, NCCL_RAS_PROCESS_DEAD, NCCL_RAS_RANK_MISSING, NCCL_RAS_STRAGGLER, NCCL_RAS_RANK_ERROR, NCCL_RAS_QUIET,
         NCCL_RAS_UNAVAILABLE, NCCL_IB_PORT_FAILOVER, NCCL_IB_PORT_RECOVERED, NCCL_IB_FAILOVER_FATAL)

# Codes that live with their checks (rdmadoctor.checks.*); the logs layer sits below the checks
# and names them by string. tests/unit/logs/test_kb.py checks that each exists.
NCCL_IB_DISABLED_BY_ENV = "NCCL_IB_DISABLED_BY_ENV"
GDR_PEERMEM_MISSING = "GDR_PEERMEM_MISSING"
VERBS_LIB_MISSING = "VERBS_LIB_MISSING"
DEV_UVERBS_MISSING = "DEV_UVERBS_MISSING"
NCCL_IB_GID_INDEX_BAD = "NCCL_IB_GID_INDEX_BAD"

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
# What a status means for the job (NCCL's own hints, printIbWcStatusHint in net_ib/common.h, and
# the verbs spec); the rest get a generic sentence.
WC_WHY = {
    4: "the HCA could not access the local buffer, which on GPU buffers means GPUDirect RDMA is broken "
       "(ACS or the IOMMU on the PCIe path, nvidia_peermem)",
    5: "the request was flushed because its queue pair had already failed, so an earlier error is the cause",
    10: "the peer refused access to its buffer (a memory-key or GPUDirect problem on the other host)",
    12: "the peer never acknowledged (transport retry counter exceeded): it is unreachable over this rail "
        "(cable, switch, RoCE routing or GID, rail wiring) or the fabric dropped the packets",
    13: "the receiver had no buffer posted in time (RNR retry counter exceeded)",
    20: "the response did not arrive in time",
}


def _wc(groups: dict[str, str]) -> dict[str, str]:
    try:
        n = int(groups.get("status") or "")
    except ValueError:
        n = -1
    out = {
        "status_name": WC_STATUS.get(n, f"status {n}" if n >= 0 else "unknown status"),
        "status_why": WC_WHY.get(n, "the HCA failed the request"),
    }
    vendor = groups.get("vendor") or ""
    out["vendor_note"] = f", vendor err {vendor} (0x{int(vendor):x})" if vendor.isdigit() else ""
    where = ""
    if groups.get("peer"):
        where += f" with peer {groups['peer']}"
    if groups.get("hca"):
        where += f" on {groups['hca']}"
    out["where"] = where
    return out


def _dev(groups: dict[str, str]) -> dict[str, str]:
    """``dev``/``port`` groups (absent before 2.20) as a subject and a phrase."""
    dev, port = groups.get("dev") or "", groups.get("port") or ""
    name = f"{dev}:{port}" if dev and port else dev
    return {"device": name or "NET/IB", "dev_note": f" {name}" if name else ""}


def _async_event(groups: dict[str, str]) -> dict[str, str]:
    out = _dev(groups)
    out["event_text"] = (groups.get("event") or groups.get("what") or "an event").strip()
    return out


def _shm(groups: dict[str, str]) -> dict[str, str]:
    err = (groups.get("error") or "").strip()
    return {"error_note": f" ({err})" if err else ""}


def _call_error(groups: dict[str, str]) -> dict[str, str]:
    err = (groups.get("error") or "").strip()
    return {"error_note": f" with `{err}`" if err else " (no reason printed, NCCL <= 2.12)"}


def _modify_qp(groups: dict[str, str]) -> dict[str, str]:
    err = (groups.get("error") or "").strip()
    errno = groups.get("errno") or groups.get("errno2") or ""
    out = {"error_text": err + (f" (errno {errno})" if errno else "")}
    if groups.get("qpdev"):
        out["qp_where"] = (f" on {groups['qpdev']}:{groups.get('qpport') or '?'}, moving to {groups.get('next') or '?'}"
                           f", GID index {groups.get('gid_index') or '?'}")
        out["device"] = f"{groups['qpdev']}:{groups.get('qpport') or '?'}"
    else:
        out["qp_where"] = ""
        out["device"] = "ibv_modify_qp"
    return out


def _plugin(groups: dict[str, str]) -> dict[str, str]:
    lib = groups.get("lib") or groups.get("lib2") or groups.get("lib3") or ""
    note = f" {lib}" if lib else ""  # not repeated when the error text already starts with it
    if not lib:  # dlerror names the plugin when the plugin itself is broken: "/x/libnccl-net.so: undefined symbol"
        first = (groups.get("error") or "").split(":", 1)[0]
        lib = first if "nccl-net" in first else ""
    return {"plugin": lib or "libnccl-net", "plugin_note": note}


# What to do about the CUDA error NCCL quotes (`Cuda failure 'out of memory'`), first match wins.
_CUDA_FIXES = (
    ("out of memory", "The GPU's memory was full when NCCL allocated its buffers: lower the job's own use (batch "
     "size, activation checkpointing), make sure no other process holds the GPU (`nvidia-smi`), or lower "
     "NCCL_BUFFSIZE."),
    ("invalid device ordinal", "A rank asked for a GPU its process cannot see: set the device from LOCAL_RANK "
     "(`torch.cuda.set_device(local_rank)`), run at most as many ranks per pod as it got GPUs (nvidia.com/gpu), "
     "and do not narrow CUDA_VISIBLE_DEVICES below that."),
    ("peer access", "Two GPUs of this host cannot map each other's memory (an IOMMU or ACS on the PCIe path, a "
     "VM): turn peer-to-peer on in the BIOS/hypervisor (ACS off, iommu=pt), or set NCCL_P2P_DISABLE=1 and go "
     "through host memory, slower."),
    ("not supported", "A CUDA feature NCCL asked for is missing here; for NVLS (NVLink SHARP) it needs the fabric "
     "manager and, in a container, IMEX channels: set NCCL_NVLS_ENABLE=0 to run without it."),
    ("driver", "The NVIDIA driver is older than the CUDA the job was built with: update the driver (or use an "
     "image built for this driver's CUDA); `nvidia-smi` shows the driver's CUDA version."),
    ("initialization error", "CUDA could not start in this process: the container does not see the GPU (the pod's "
     "nvidia.com/gpu request, NVIDIA_VISIBLE_DEVICES, the NVIDIA container toolkit), or CUDA was used before the "
     "process forked (a DataLoader worker, multiprocessing with fork): check `nvidia-smi` in the pod and start "
     "worker processes with spawn."),
    ("system not yet initialized", "CUDA error 802: on an NVSwitch system (HGX/DGX A100, H100, B200) the fabric "
     "manager is not running, or runs a version other than the driver's: `systemctl status nvidia-fabricmanager` on "
     "the node (the GPU operator runs it as a pod); `nvidia-smi -q | grep -A2 Fabric` shows the state."),
    ("illegal", "A GPU kernel failed: look for Xid errors on the node (`dmesg | grep -i xid`) and rerun with "
     "CUDA_LAUNCH_BLOCKING=1 to find the kernel."),
)
# cuDriverGetVersion's CUresult: 35 CUDA_ERROR_INSUFFICIENT_DRIVER, 34 CUDA_ERROR_STUB_LIBRARY, 100 no device.
_CU_RESULTS = {"35": "driver version is insufficient for the CUDA runtime", "34": "the CUDA driver is a stub library",
               "100": "no CUDA-capable device is detected", "999": "unknown error"}


# What breaks the connection NCCL's proxy sets up or uses: the errors its failures follow from.
_PROXY_CAUSES = ("NCCL_SOCKET_ERROR", "NCCL_IB_COMPLETION_ERROR", "NCCL_IB_MODIFY_QP_FAILED", "NCCL_QP_CQ_CREATE_FAILED",
                 "NCCL_REG_MR_FAILED", "NCCL_CUDA_FAILED", "NCCL_SHM_FAILED")


def _cuda(groups: dict[str, str]) -> dict[str, str]:
    what = groups.get("what") or _CU_RESULTS.get(groups.get("cu") or "", f"CUresult {groups.get('cu')}")
    fix = next((f for key, f in _CUDA_FIXES if key in what.lower()), "Read the CUDA error; check the GPU with "
               "`nvidia-smi` and the node's kernel log for Xid errors (`dmesg | grep -i xid`).")
    if groups.get("cu") in ("34", "35"):
        fix = dict(_CUDA_FIXES)["driver"]
    nvls = "nvls." in groups.get("_loc", "")
    if nvls:
        # NCCL's NVLink SHARP setup (cuMulticast*): multicast memory is not there for this job.
        fix = dict(_CUDA_FIXES)["not supported"]
    # `invalid argument` from shmutils.cc follows a /dev/shm failure; from NVLS it is its own.
    return {"what": what, "cuda_fix": fix, "shm_arg": "" if nvls or what != "invalid argument" else "yes"}


def _gdr_pair(groups: dict[str, str]) -> dict[str, str]:
    return {"gpu_text": groups.get("gpu") or "?", "hca_text": groups.get("net") or "?"}


def _magic_text(groups: dict[str, str]) -> dict[str, str]:
    """The bytes NCCL read as a magic number, as text when they are (little-endian: `GET /met`)."""
    got = groups.get("got") or ""
    try:
        raw = bytes.fromhex(got.rjust(16, "0"))[::-1].rstrip(b"\0")
    except ValueError:
        return {"text_note": ""}
    text = raw.decode("ascii", "replace")
    return {"text_note": f' read as text: "{text}"' if raw and text.isprintable() else f" {got}"}


PATTERNS: tuple[Pattern, ...] = (
    # -- transport choice ------------------------------------------------------------------------
    Pattern(
        id="nccl.ib_disabled_env",
        code=NCCL_IB_DISABLED_BY_ENV,
        explains_fallback=True,
        severity=WARNING,
        needle="NCCL_IB_DISABLE set by environment to",
        regex=r"NCCL_IB_DISABLE set by environment to (?!0\.)(?P<value>-?\d+)\.",
        subject="NCCL_IB_DISABLE",
        message="NCCL_IB_DISABLE is set to {value} in the job's environment, so NCCL does not use RDMA and sends "
                "inter-node traffic over TCP sockets; it should be unset on an RDMA node.",
        meaning="The job runs its collectives over TCP sockets although the node may have ACTIVE RDMA ports.",
        fix="Remove NCCL_IB_DISABLE (and NCCL_NET=Socket) from the pod spec, the image's /etc/nccl.conf and the "
            "launcher scripts.",
        ref="NVIDIA/nccl src/misc/param.cc ncclLoadParam `%s set by environment to %lld.` (2.12-2.30); "
            "src/include/param.h NCCL_PARAM `%lu.` (2.5-2.11)",
        examples=(
            "node-1:4127:4127 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
            "NvYt-dcf441d17e21:97:221 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
        ),
    ),
    Pattern(
        id="nccl.ib_disabled_command",
        code=NCCL_IB_DISABLED_BY_ENV,
        explains_fallback=True,
        severity=WARNING,
        needle="NCCL_IB_DISABLE=",
        # As a launch sets it: `-x NCCL_IB_DISABLE=1` (mpirun), `export ...`, `env ...`, `--env ...`, a
        # variable before the command, a line of `env` output.
        # (not prose: "if I set NCCL_IB_DISABLE=1 it works" is a workaround told, not this job's setting)
        regex=r"(?:^\s*(?:export\s+|env\s+|ENV\s+)?|(?:-x|--env|-e|--export|\benv|\bexport)\s+|\bNCCL_\w{1,40}=\S{0,200}\s+)"
              r"NCCL_IB_DISABLE=[\"']?(?!0\b)(?P<value>\d{1,3})\b",
        subject="NCCL_IB_DISABLE",
        message="NCCL_IB_DISABLE={value} is set where the job is launched, so NCCL does not use RDMA and sends "
                "inter-node traffic over TCP sockets; it should be unset on an RDMA node.",
        meaning="The job runs its collectives over TCP sockets although the node may have ACTIVE RDMA ports; NCCL's "
                "warnings about libibverbs do not matter then.",
        fix="Remove NCCL_IB_DISABLE from the launch command, the pod spec and the image's /etc/nccl.conf, unless TCP is "
            "what this run is meant to measure.",
        ref="NVIDIA/nccl docs/env.html NCCL_IB_DISABLE; https://github.com/NVIDIA/nccl-tests/issues/82",
        examples=(
            "$ mpirun -x NCCL_DEBUG=WARN -x NCCL_IB_DISABLE=1 -np 2 --host 10.0.0.48:1,10.0.0.52:1 ./build/broadcast_perf",
            "export NCCL_IB_DISABLE=1",
        ),
    ),
    Pattern(
        id="nccl.net_socket_command",
        code=NCCL_IB_DISABLED_BY_ENV,
        explains_fallback=True,
        severity=WARNING,
        needle="NCCL_NET=",
        regex=r"(?:^\s*(?:export\s+|env\s+|ENV\s+)?|(?:-x|--env|-e|--export|\benv|\bexport)\s+|\bNCCL_\w{1,40}=\S{0,200}\s+)"
              r"NCCL_NET=[\"']?(?P<value>Socket)\b",
        subject="NCCL_NET",
        message="NCCL_NET=Socket is set where the job is launched: NCCL sends inter-node traffic over TCP sockets even "
                "where RDMA works.",
        meaning="Collectives between nodes run at a fraction of the fabric's bandwidth; long ones hit the timeout.",
        fix="Remove NCCL_NET from the launch command, the pod spec and /etc/nccl.conf (NCCL picks IB when it works).",
        ref="NVIDIA/nccl docs/env.html NCCL_NET; https://github.com/sgl-project/sglang/issues/3784",
        examples=("  -e NCCL_NET='Socket' \\", "export NCCL_NET=Socket"),
    ),
    Pattern(
        id="nccl.net_socket_env",
        code=NCCL_IB_DISABLED_BY_ENV,
        explains_fallback=True,
        severity=WARNING,
        needle="NET set by environment",
        regex=r"NCCL_NET set by environment to (?P<value>Socket)\b",
        subject="NCCL_NET",
        message="NCCL_NET is set to Socket in the job's environment: NCCL sends inter-node traffic over TCP sockets "
                "even where RDMA works.",
        meaning="Collectives between nodes run at a fraction of the fabric's bandwidth; long ones hit the timeout.",
        fix="Remove NCCL_NET from the pod spec, the image's /etc/nccl.conf and the launcher scripts.",
        ref="NVIDIA/nccl src/misc/param.cc ncclGetEnv `%s set by environment to %s` (2.12-2.30)",
        examples=("node-1:4127:4127 [0] NCCL INFO NCCL_NET set by environment to Socket",),
    ),
    Pattern(
        id="nccl.ib_no_device",
        code=NCCL_IB_NO_DEVICE.code,
        explains_fallback=True,
        severity=WARNING,
        needle="No device found",
        regex=r"NET/IB : No device found\.",
        subject="NET/IB",
        message="NCCL's IB transport found no usable RDMA device (no verbs device, no ACTIVE port, or NCCL_IB_HCA "
                "matched nothing), so inter-node traffic goes over TCP sockets instead of RDMA.",
        meaning="Multi-node collectives run over TCP at a fraction of the RDMA bandwidth; single-node jobs are not "
                "affected.",
        fix="In the pod: `ibv_devices` must list the HCAs (request rdma/hca, install ibverbs-providers), `ibstat` must "
            "show them ACTIVE, and NCCL_IB_HCA must name them (`=mlx5_0,mlx5_1`) or be unset.",
        ref="NVIDIA/nccl src/transport/net_ib.cc ncclIbInit (2.5-2.28), src/transport/net_ib/init.cc (2.29-2.30)",
        examples=(
            "instance-8g-96c-2:525781:525957 [0] NCCL INFO NET/IB : No device found.",
            "[2025-03-04 10:12:33] node-7:2211:2290 [3] NCCL INFO NET/IB : No device found.",
        ),
    ),
    Pattern(
        id="nccl.libibverbs_missing",
        code=VERBS_LIB_MISSING,
        explains_fallback=True,
        severity=WARNING,
        needle="libibverbs.so",
        # 2.30 tries NCCL_IBVERBS_LIB, libibverbs.so, then libibverbs.so.1 and logs each miss: only the
        # last one (.so.1) means there is none; a missing unversioned dev symlink is harmless.
        regex=r"Failed to open libibverbs\.so\[\.1\]|Count not open (?P<lib>\S*libibverbs\.so\.1)(?![\w.])",
        subject="libibverbs",
        message="NCCL could not load libibverbs (libibverbs.so.1), so its IB transport is off and inter-node traffic "
                "goes over TCP sockets.",
        meaning="Without the verbs library NCCL cannot use RDMA at all in this container.",
        fix="Install it in the image: `apt-get install -y libibverbs1 ibverbs-providers` (Debian/Ubuntu) or "
            "`dnf install -y rdma-core libibverbs` (RHEL); NGC images ship it.",
        ref="NVIDIA/nccl src/misc/ibvwrap.cc (2.5-2.17, WARN until 2.10), src/misc/ibvsymbols.cc (2.18-2.29 "
            "`Failed to open libibverbs.so[.1]`; 2.30 `Count not open %s`, sic)",
        examples=(
            "26a46eb2b1d3:111329:111329 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
            "node-3:812:812 [0] NCCL INFO Failed to open libibverbs.so[.1]",
            "node-3:812:812 [0] NCCL INFO Count not open libibverbs.so.1",
        ),
    ),
    Pattern(
        id="nccl.ib_open_device",
        code=DEV_UVERBS_MISSING,
        explains_fallback=True,
        severity=WARNING,
        needle="Unable to open device",
        regex=r"NET/IB : Unable to open device (?P<dev>\S+)",
        subject="{dev}",
        message="NCCL could not open RDMA device {dev} (ibv_open_device failed), so it skips it; the device's "
                "/dev/infiniband/uverbs node must be present and usable in the container.",
        meaning="NCCL uses fewer rails, or none and falls back to sockets.",
        fix="Request the device in the pod spec (resources.limits: {rdma/hca: 1} with the RDMA shared device plugin, "
            "or the SR-IOV VF resource); check `ls -l /dev/infiniband/` in the pod.",
        ref="NVIDIA/nccl src/transport/net_ib.cc ncclIbInit (2.5-2.28), src/transport/net_ib/init.cc (2.29-2.30)",
        examples=("node-2:33:33 [0] transport/net_ib.cc:158 NCCL WARN NET/IB : Unable to open device mlx5_0",),
    ),
    Pattern(
        id="nccl.ibv_open_device_call",
        code=DEV_UVERBS_MISSING,
        explains_fallback=True,
        severity=WARNING,
        needle="Call to ibv_open_device failed",
        regex=r"Call to ibv_open_device failed",
        subject="ibv_open_device",
        message="NCCL could not open an RDMA device (ibv_open_device failed; the next line, when NCCL prints it, names "
                "the device): its /dev/infiniband/uverbs node is missing or unusable in the container.",
        meaning="NCCL skips that device: fewer rails, or none and a fallback to sockets.",
        fix="Request the device in the pod spec (resources.limits: {rdma/hca: 1} with the RDMA shared device plugin, "
            "or the SR-IOV VF resource); check `ls -l /dev/infiniband/` in the pod.",
        ref="NVIDIA/nccl src/misc/ibvwrap.cc wrap_ibv_open_device `Call to ibv_open_device failed` (2.4-2.30)",
        examples=("tf2-horovod-6clzb:30:97 [0] misc/ibvwrap.cc:212 NCCL WARN Call to ibv_open_device failed",),
    ),
    Pattern(
        id="nccl.ib_no_ip_interface",
        code=NCCL_NO_SOCKET_INTERFACE.code,
        severity=ERROR,
        needle="No IP interface found",
        regex=r"NET/IB : No IP interface found\.",
        subject="NET/IB",
        message="NCCL's IB transport found no IP interface for its out-of-band connection, so it cannot use RDMA; "
                "an interface that is up with an address is needed.",
        meaning="NET/IB is off on this rank; the socket transport needs the same interface and fails too.",
        fix="Set NCCL_SOCKET_IFNAME to an interface that is up with an address (`ip -br addr`; eth0 in a pod, net1 "
            "for Multus); unset NCCL_SOCKET_FAMILY if it excludes that address.",
        ref="NVIDIA/nccl src/transport/net_ib.cc ncclIbInit (2.5-2.28), src/transport/net_ib/init.cc (2.29-2.30)",
        examples=("gpu-node-4:2811:2811 [0] transport/net_ib.cc:610 NCCL WARN NET/IB : No IP interface found.",),
    ),
    Pattern(
        id="nccl.bootstrap_loopback",
        code=NCCL_LOOPBACK.code,
        severity=WARNING,
        needle="lo:127.",
        regex=r"(?P<what>Bootstrap|NET/Socket) ?: Using (?:\[\d{1,3}\])?lo:127\.\d{1,3}\.\d{1,3}\.\d{1,3}<\d{1,5}>",
        subject="{what}",
        message="NCCL's {what_text} uses the loopback interface (lo, 127.0.0.1): no other interface was up with an "
                "address, or NCCL_SOCKET_IFNAME left none; ranks on other hosts cannot reach it.",
        meaning="On several hosts the communicator cannot be made (bootstrap timeouts, connect refused); on one host "
                "nothing is wrong.",
        fix="Set NCCL_SOCKET_IFNAME to the pod's shared interface (eth0, net1) and check it is up with an address "
            "(`ip -br addr` in the pod).",
        ref="NVIDIA/nccl src/misc/socket.cc ncclFindInterfaces (lo only as the last choice), src/bootstrap.cc "
            "`Bootstrap : Using %s` (2.5-2.30); https://github.com/aws/aws-ofi-nccl/issues/803",
        examples=("6f2d8a82d208:1287:1287 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>",
                  "h:1:1 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>"),
        derive=lambda g: {"what_text": "bootstrap" if g.get("what") == "Bootstrap" else "socket transport"},
    ),
    Pattern(
        id="nccl.bootstrap_no_interface",
        code=NCCL_NO_SOCKET_INTERFACE.code,
        severity=ERROR,
        needle="Bootstrap : no socket interface found",
        regex=r"Bootstrap : no socket interface found",
        subject="Bootstrap",
        message="NCCL found no network interface for its bootstrap (none up with an address, or none that "
                "NCCL_SOCKET_IFNAME/NCCL_SOCKET_FAMILY select), so the communicator cannot be created.",
        meaning="NCCL initialisation fails on this rank.",
        fix="Set NCCL_SOCKET_IFNAME to an interface that is up with an address in the job's network namespace "
            "(`ip -br addr`; eth0 in a pod, net1 for Multus), or unset it.",
        ref="NVIDIA/nccl src/bootstrap.cc bootstrapNetInit (2.5-2.30)",
        examples=("trainer-0:212:212 [0] bootstrap.cc:63 NCCL WARN Bootstrap : no socket interface found",),
    ),
    Pattern(
        id="nccl.socket_no_interface",
        code=NCCL_NO_SOCKET_INTERFACE.code,
        severity=ERROR,
        needle="NET/Socket : no interface found",
        regex=r"NET/Socket : no interface found",
        subject="NET/Socket",
        message="NCCL's socket transport found no network interface it may use (none up with an address that "
                "NCCL_SOCKET_IFNAME selects), so it cannot carry inter-node traffic.",
        meaning="With no RDMA transport either, a multi-node communicator cannot be created.",
        fix="Set NCCL_SOCKET_IFNAME to an interface that is up with an address (`ip -br addr`), or unset it.",
        ref="NVIDIA/nccl src/transport/net_socket.cc ncclNetSocketInit (2.5-2.30)",
        examples=("trainer-0:212:260 [0] transport/net_socket.cc:47 NCCL WARN NET/Socket : no interface found",),
    ),
    Pattern(
        id="nccl.no_interface_subnet",
        code=NCCL_NO_SOCKET_INTERFACE.code,
        severity=ERROR,
        needle="No interface found in the same subnet as remote address",
        regex=r"No interface found in the same subnet as remote address (?P<addr>\S+)",
        subject="{addr}",
        message="No local interface is in the same subnet as {addr} (the address NCCL_COMM_ID names), so NCCL "
                "cannot choose one to reach it.",
        meaning="NCCL initialisation fails on this rank.",
        fix="Make NCCL_COMM_ID name rank 0's address on a network this pod shares, or set NCCL_SOCKET_IFNAME to the "
            "interface that reaches it.",
        ref="NVIDIA/nccl src/include/socket.h (2.5-2.11), src/misc/socket.cc ncclFindInterfaceMatchSubnet (2.12-2.26)",
        examples=("node-1:77:77 [0] misc/socket.cc:339 NCCL WARN Net : No interface found in the same subnet as "
                  "remote address 10.20.0.5<34567>",),
    ),
    Pattern(
        id="nccl.bootstrap_bad_family",
        code=NCCL_BOOTSTRAP_FAILED.code,
        severity=ERROR,
        needle="is neither AF_INET(",
        regex=r"connecting to address +(?:(?P<addr>\S+) +)?with family (?P<family>\d+) is neither AF_INET\(\d+\) nor AF_INET6",
        subject="bootstrap",
        message="NCCL was asked to connect to an address of family {family}, neither IPv4 nor IPv6: the bootstrap "
                "handle this rank received from rank 0 is empty or corrupt.",
        meaning="The rank cannot join the communicator; typically rank 0 failed before publishing its id, the ranks "
                "run different NCCL versions, or the id was never passed on.",
        fix="Check rank 0's log for an earlier failure; run the same NCCL build on every rank; with a custom launcher "
            "make every rank get the ncclUniqueId rank 0 created (torch: one init_process_group per rank).",
        ref="NVIDIA/nccl src/misc/socket.cc: `Error : connecting to address with family` (2.8-2.9), `Net : "
            "connecting to address %s with family` (2.10-2.15), `ncclSocketInit: connecting to address` "
            "(2.16-2.30); NVIDIA/nccl#1267, #1837",
        examples=(
            "node-0:1021:1021 [0] misc/socket.cc:484 NCCL WARN ncclSocketInit: connecting to address  with family 0 "
            "is neither AF_INET(2) nor AF_INET6(10)",
            "node-0:1021:1021 [0] misc/socket.cc:390 NCCL WARN Net : connecting to address  with family 0 is neither "
            "AF_INET(2) nor AF_INET6(10)",
            "node-0:1021:1021 [0] include/socket.h:390 NCCL WARN Error : connecting to address with family 0 is "
            "neither AF_INET(2) nor AF_INET6(10)",
        ),
    ),
    Pattern(
        id="nccl.roce_gid_type_unreadable",
        code=NCCL_IB_GID_INDEX_BAD,
        severity=ERROR,
        needle="read failed in ncclIbRoceGetVersionNum",
        regex=r"read failed in ncclIbRoceGetVersionNum: (?P<error>[^\n]{1,80})",
        subject="NCCL_IB_GID_INDEX",
        message="NCCL could not read the RoCE version of the GID it was going to use ({error}): that GID index is "
                "empty on this port, as in a pod whose GID table starts later (macvlan, SR-IOV, shared RDMA devices).",
        meaning="NCCL's IB transport cannot set up the RoCE port: the communicator fails (ncclSystemError).",
        fix="Run `show_gids` in the pod and set NCCL_IB_GID_INDEX to the RoCE v2 index with the IPv4 address (the same "
            "on every pod), or upgrade to NCCL 2.21+, which picks an existing GID itself.",
        ref="NVIDIA/nccl src/transport/net_ib.cc ncclIbRoceGetVersionNum `NET/IB: read failed in ncclIbRoceGetVersionNum: "
            "%s` (2.12-2.30); https://github.com/NVIDIA/nccl/issues/1573, https://github.com/uccl-project/uccl/issues/301",
        examples=("W20250825 11:10:33.595331   331 util_rdma.h:547] NET/IB: read failed in ncclIbRoceGetVersionNum: Invalid "
                  "argument",
                  "node-1:77:90 [0] transport/net_ib.cc:160 NCCL WARN NET/IB: read failed in ncclIbRoceGetVersionNum: "
                  "Invalid argument"),
    ),
    # -- sockets between ranks ---------------------------------------------------------------------
    Pattern(
        id="nccl.message_truncated",
        code=NCCL_RANKS_MISMATCH.code,
        severity=ERROR,
        needle="Message truncated",
        regex=r"Message truncated : received (?P<got>\d{1,12}) bytes instead of (?P<want>\d{1,12})",
        subject="ranks",
        message="A rank received {got} bytes where it expected {want}: the ranks are not exchanging the same "
                "thing (different NCCL versions or settings, another job's rendezvous, or different collectives).",
        meaning="NCCL returns an error (ncclInternalError, ncclInvalidUsage in 2.12+) and the job fails; the other "
                "ranks see closed connections or time out.",
        fix="Compare every rank's `NCCL version` line and NCCL_* settings (the same image everywhere); give the job "
            "its own MASTER_PORT; in PyTorch, TORCH_DISTRIBUTED_DEBUG=DETAIL finds ranks calling different "
            "collectives.",
        ref="NVIDIA/nccl src/bootstrap.cc bootstrapNetRecv, src/misc/socket.cc `Message truncated : received %d "
            "bytes instead of %d` (2.5-2.30); https://github.com/NVIDIA/nccl/pull/605 (mismatched collectives or "
            "settings); https://github.com/NVIDIA/nccl/issues/1176",
        examples=("0: compute-st-p4de24xlarge-1:34639:36718 [5] bootstrap.cc:77 NCCL WARN Message truncated : "
                  "received 256 bytes instead of 4",),
    ),
    Pattern(
        id="nccl.socket_connect_link_local",
        code=NCCL_SOCKET_ERROR.code,
        severity=ERROR,
        needle="onnect to ",
        regex=r"[Cc]onnect to (?P<peer>[fF][eE]80:[0-9a-fA-F:]{0,40}%(?P<iface>[\w.-]{1,32})<\d{1,5}>) (?:failed(?: :| with "
              r"error)|returned) (?P<error>[^,\n]{0,512}?[^,\s])(?:, exceeded error retry count[^\n]*)?\s*$",
        subject="{peer}",
        message="NCCL could not connect to {peer}: {error}. That is an IPv6 link-local address (fe80::, scope {iface}): "
                "NCCL took {iface} for its sockets, and there it has only an address that reaches nothing beyond that "
                "one link.",
        meaning="The ranks cannot meet (bootstrap) or connect their proxies over the interface NCCL chose; the job "
                "fails at its start, or some ranks wait for ever.",
        fix="Point NCCL at an interface with an IPv4 (or routable IPv6) address every host shares: set "
            "NCCL_SOCKET_IFNAME to `=eth0` (the pod's network; `net1` for a Multus one), or NCCL_SOCKET_FAMILY to "
            "`AF_INET` to leave IPv6 aside; `ip -br addr` in the pod lists what each interface has.",
        ref="NVIDIA/nccl src/misc/socket.cc (link-local addresses carry their scope, `%ib1`); "
            "https://github.com/NVIDIA/nccl/issues/975",
        examples=(
            "n122-246-085:12251:12400 [5] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
            "fe80::966d:ae03:a2:8cf0%ib1<17943> failed : Software caused connection abort",
        ),
    ),
    Pattern(
        id="nccl.socket_connect_failed",
        code=NCCL_SOCKET_ERROR.code,
        severity=ERROR,
        needle="onnect to ",
        # 2.24+ retries refused and timed-out connects, logging each retry at INFO (`..., retrying
        # (1/34) after sleep for 100 msec`); only the final WARN (failed, or retries exceeded) counts.
        # (A link-local peer is the row above.)
        regex=r"[Cc]onnect to (?![fF][eE]80:[0-9a-fA-F:]{0,40}%)(?P<peer>\S+) (?:failed(?: :| with error)|returned) "
              r"(?P<error>[^,\n]{0,512}?[^,\s])"
              r"(?:, exceeded error retry count[^\n]*)?\s*$",
        subject="{peer}",
        message="NCCL could not connect to {peer}: {error}.",
        meaning="The rank cannot reach a peer's bootstrap or proxy socket; if the peer had already died this only "
                "follows that failure.",
        fix="Find the first error on the peer at that address; if there is none, check that pod-to-pod TCP is "
            "allowed on all ports and that NCCL_SOCKET_IFNAME selects the interface the peers share.",
        ref="NVIDIA/nccl `Connect to %s failed : %s` src/include/socket.h (2.5-2.9), `Net : Connect to` (2.10-2.15), "
            "`socketStartConnect: Connect to` src/misc/socket.cc (2.16-2.23), `%s: Connect to` (2.24-2.26), "
            "`%s: connect to` (2.27-2.30), `%s: connect to %s returned %s, exceeded error retry count after %d "
            "attempts` (2.27-2.30), `socketPollConnect to %s failed with error %s` (2.27-2.28), "
            "`ncclOsSocketPollConnect to` src/os/linux.cc (2.29-2.30)",
        examples=(
            "node-1:55:120 [1] include/socket.h:403 NCCL WARN Connect to 10.0.0.3<45119> failed : Connection refused",
            "node-1:55:120 [1] misc/socket.cc:464 NCCL WARN socketStartConnect: Connect to 10.0.0.3<45119> failed : "
            "No route to host",
            "node-1:55:120 [1] misc/socket.cc:580 NCCL WARN socketPollConnect to 10.0.0.3<45119> failed with error "
            "Connection refused",
            "node-1:55:120 [1] os/linux.cc:302 NCCL WARN ncclOsSocketStartConnect: connect to 10.0.0.3<45119> failed : "
            "Network is unreachable",
            "node-1:55:120 [1] os/linux.cc:288 NCCL WARN ncclOsSocketPollConnect: connect to 10.0.0.3<45119> returned "
            "Connection timed out, exceeded error retry count after 35 attempts",
        ),
        symptom_when=(("error", "Connection refused"), ("error", "Connection reset by peer")),
    ),
    Pattern(
        id="nccl.socket_connect_retries",
        code=NCCL_SOCKET_ERROR.code,
        severity=ERROR,
        needle="connect returned ",
        regex=r"connect returned (?P<error>[^,\n]{0,512}?[^,\s]), exceeded error retry count",
        subject="connect",
        message="NCCL gave up connecting to a peer after its retries: {error}.",
        meaning="The rank cannot reach a peer's bootstrap or proxy socket; if the peer had already died this only "
                "follows that failure.",
        fix="Find the first error on the peer ranks; if there is none, check that pod-to-pod TCP is allowed on all "
            "ports and that NCCL_SOCKET_IFNAME selects the interface the peers share.",
        ref="NVIDIA/nccl src/misc/socket.cc socketConnectCheck `%s: connect returned %s, exceeded error retry count "
            "(%d)` (2.24-2.26)",
        examples=("node-1:55:120 [1] misc/socket.cc:544 NCCL WARN socketPollConnect: connect returned Connection "
                  "refused, exceeded error retry count (35)",),
        symptom_when=(("error", "Connection refused"),),
    ),
    Pattern(
        id="nccl.socket_closed",
        code=NCCL_SOCKET_ERROR.code,
        severity=ERROR,
        needle="Connection closed by remote peer",
        regex=r"Connection closed by remote peer(?: (?P<peer>\S+))?",
        subject="{peer_subject}",
        message="The TCP connection to {peer_text} was closed by the other side in the middle of NCCL's exchange.",
        meaning="The peer process exited or aborted first; this rank is a victim.",
        fix="Find the first error of the rank on that host (its log ends first, or shows a WARN or traceback).",
        ref="NVIDIA/nccl `Net : Connection closed by remote peer` src/include/socket.h (2.5-2.11, peer from 2.10), "
            "src/misc/socket.cc (2.12-2.15); `socketProgress: Connection closed by remote peer %s` (2.16-2.30)",
        examples=(
            "node-2:301:399 [2] misc/socket.cc:47 NCCL WARN socketProgress: Connection closed by remote peer "
            "node-5.train.svc<52140>",
            "node-2:301:399 [2] include/socket.h:423 NCCL WARN Net : Connection closed by remote peer",
        ),
        symptom=True,
        derive=lambda g: {"peer_text": f"peer {g['peer']}" if g.get("peer") else "a peer",
                          "peer_subject": g.get("peer") or "socket"},
    ),
    Pattern(
        id="nccl.socket_io_failed",
        code=NCCL_SOCKET_ERROR.code,
        severity=ERROR,
        needle=" failed : ",
        regex=r"Call to (?:recv|send)(?: (?:from|to) (?P<peer>\S+))? failed : (?P<error>.*?\S)\s*$",
        subject="{peer_subject}",
        message="A socket read or write to {peer_text} failed: {error}.",
        meaning="The connection to the peer broke; a reset connection almost always means the peer died first.",
        fix="Find the first error of the rank at that address; if it has none, look for network drops between the "
            "hosts (`ip -s link`, NetworkPolicy).",
        ref="NVIDIA/nccl `Call to recv failed : %s` src/include/socket.h (2.5-2.9), `Net : Call to recv from %s` "
            "(2.10-2.15), `socketProgressOpt: Call to recv from` src/misc/socket.cc (2.16-2.23), `socketProgressOpt: "
            "Call to %s %s failed` (2.24-2.28), `ncclOsSocketProgressOpt:` src/os/linux.cc (2.29-2.30)",
        examples=(
            "node-2:301:399 [2] misc/socket.cc:34 NCCL WARN socketProgressOpt: Call to recv from 10.0.0.7<38212> "
            "failed : Connection reset by peer",
            "node-2:301:399 [2] include/socket.h:416 NCCL WARN Call to recv failed : Connection reset by peer",
        ),
        symptom_when=(("error", "Connection reset by peer"), ("error", "Broken pipe")),
        derive=lambda g: {"peer_text": g.get("peer") or "a peer", "peer_subject": g.get("peer") or "socket"},
    ),
    Pattern(
        id="nccl.proxy_recv_polling",
        code=NCCL_SOCKET_ERROR.code,
        severity=ERROR,
        needle="Socket recv failed while polling",
        regex=r"Socket recv failed while polling(?: for opId=(?P<op>0x[0-9a-fA-F]{1,16}))?",
        subject="proxy",
        message="NCCL's proxy thread lost its socket to a local rank while waiting for a reply: that rank's process "
                "died or aborted first.",
        meaning="This rank is a victim; the rank that failed first (out of memory, a crash) says why.",
        fix="Find the first error of the other ranks of this host (a CUDA failure, a killed process) and fix that.",
        ref="NVIDIA/nccl src/proxy.cc ncclPollProxyResponse `Socket recv failed while polling for opId=%p` (2.12-2.30); "
            "https://github.com/NVIDIA/nccl/issues/1235",
        examples=("ng30903:3063025:3066048 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for "
                  "opId=0x55a51966cc80",),
        symptom=True,
    ),
    Pattern(
        id="nccl.proxy_call_failed",
        code=NCCL_SOCKET_ERROR.code,
        severity=ERROR,
        needle="Proxy Call to rank",
        regex=r"Proxy Call to rank (?P<rank>\d{1,7}) failed \((?P<op>\w{1,32})\)",
        subject="proxy",
        message="NCCL's proxy could not carry out `{op}` for rank {rank}: the operation it relays (setting up or using a "
                "network connection) failed.",
        meaning="This rank's communicator fails; the lines before it (a socket, IB or plugin error) say why.",
        fix="Read the error before it on this host and on the rank it names.",
        ref="NVIDIA/nccl src/proxy.cc ncclProxyCallBlocking `Proxy Call to rank %d failed (%s)` (2.12-2.30); "
            "https://github.com/dmlc/xgboost/issues/7982",
        examples=("ip-172-31-12-104:28056:17126 [0] proxy.cc:808 NCCL WARN Proxy Call to rank 3 failed (Connect)",),
        follows=_PROXY_CAUSES,
        symptom=True,
    ),
    Pattern(
        id="nccl.proxy_op_failed",
        code=NCCL_SOCKET_ERROR.code,
        severity=ERROR,
        needle="Failed to execute operation",
        regex=r"\[Proxy Service (?P<rank>\d{1,7})\] Failed to execute operation (?P<op>\w{1,32}) from rank (?P<from>\d{1,7}), "
              r"retcode (?P<rc>\d{1,3})",
        subject="proxy",
        message="NCCL's proxy service for rank {rank} could not execute `{op}` (result {rc}).",
        meaning="The connection the operation sets up does not work; the socket or verbs error before it says why.",
        fix="Read the error before it (a socket or IB error naming a peer).",
        ref="NVIDIA/nccl src/proxy.cc proxyServiceLoop `[Proxy Service %d] Failed to execute operation %s from rank %d, "
            "retcode %d` (2.12-2.30); https://github.com/dmlc/xgboost/issues/7982",
        examples=("ip-172-31-12-104:28056:39685 [0] proxy.cc:1040 NCCL WARN [Proxy Service 3] Failed to execute operation "
                  "Connect from rank 3, retcode 2",),
        follows=_PROXY_CAUSES,
        symptom=True,
    ),
    Pattern(
        id="nccl.socket_wrong_type",
        code=NCCL_SOCKET_ERROR.code,
        severity=ERROR,
        needle="wrong type",
        regex=r"socketFinalizeAccept: wrong type (?P<got>\d{1,3}) != (?P<want>\d{1,3})",
        subject="socket type",
        message="A peer connected to this rank's NCCL socket for another purpose (type {got}, expected {want}): the ranks "
                "do not agree on how they connect, most often because some use the IB transport and others sockets "
                "(`Using network IB` on some hosts, `Using network Socket` on others), or they run different NCCL "
                "versions.",
        meaning="The communicator cannot be made, or the job hangs where the two kinds of rank meet.",
        fix="Make every host use the same transport: get IB working on the hosts that say `NET/IB : No device found` "
            "(or set NCCL_IB_DISABLE=1 on all of them), and run one NCCL build everywhere.",
        ref="NVIDIA/nccl src/misc/socket.cc socketFinalizeAccept `wrong type %d != %d` (2.16-2.30); "
            "https://github.com/NVIDIA/nccl-tests/issues/188",
        examples=("user:16902:16954 [3] misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong type 4 != 3",),
    ),
    Pattern(
        id="nccl.socket_wrong_magic",
        code=NCCL_SOCKET_ERROR.code,
        severity=WARNING,
        needle="wrong magic",
        regex=r"socketFinalizeAccept: wrong magic (?P<got>[0-9a-f]{1,16}) != (?P<want>[0-9a-f]{1,16})",
        subject="listening port",
        message="Something that is not NCCL connected to this rank's NCCL listening port (its first bytes{text_note}): "
                "a scraper, health check or port scanner reaching the pod's ephemeral ports.",
        meaning="NCCL drops that connection; a proxy thread kept waiting on it can stall the job.",
        fix="Keep scrapers and probes off the ports NCCL listens on: a Prometheus scrape of every port (a PodMonitor "
            "or `prometheus.io/port` aimed at a port range), a service-mesh sidecar or a load balancer health check; "
            "scrape the metrics port only.",
        ref="NVIDIA/nccl src/misc/socket.cc socketFinalizeAccept `wrong magic %lx != %lx` (2.12-2.30); "
            "https://github.com/NVIDIA/nccl/issues/1808",
        examples=("2025-08-12 09:37:03.463948 worker-9 >> [2025-08-12 01:37:03] :166:1226 [0] misc/socket.cc:484 NCCL WARN "
                  "socketFinalizeAccept: wrong magic 74656d2f20544547 != 7970663b906d70b9",),
        derive=_magic_text,
    ),
    Pattern(
        id="nccl.socket_connect_unreachable",
        code=NCCL_SOCKET_ERROR.code,
        severity=WARNING,
        needle="connect returned ",
        regex=r"connect returned (?P<error>No route to host|Network is unreachable|Connection timed out), retrying "
              r"\((?P<n>\d{1,4})/(?P<max>\d{1,4})\)",
        subject="connect",
        message="NCCL cannot reach a peer's socket (`{error}`, retry {n} of {max}): no route from the interface it uses "
                "to the peer's address; when the retries run out, the communicator fails.",
        meaning="Init stalls for the retries and then fails (NCCL_BOOTSTRAP_FAILED or a socket error) unless the route "
                "appears.",
        fix="Check the route and firewall between the two hosts on the interface NCCL uses (NCCL_SOCKET_IFNAME; "
            "`ip route get <peer>` from the pod); a pod network policy or a security group may drop it.",
        ref="NVIDIA/nccl src/misc/socket.cc socketPollConnect `connect returned %s, retrying (%d/%d) after sleep for %d "
            "msec` (2.20-2.30); https://github.com/hiyouga/LlamaFactory/issues/8045",
        examples=("zgiot:1183664:1184669 [0] NCCL INFO socketPollConnect: connect returned No route to host, retrying "
                  "(34/34) after sleep for 3400 msec",),
    ),
    Pattern(
        id="nccl.socket_create_family",
        code=NCCL_NO_SOCKET_INTERFACE.code,
        severity=ERROR,
        needle="Socket creation failed",
        regex=r"Socket creation failed : (?P<error>Address family not supported by protocol)",
        subject="socket",
        message="NCCL could not create a socket (`{error}`): it found no usable IP interface, and the address family it "
                "fell back to is not available in this network namespace.",
        meaning="No communicator can be made; NCCL prints `unhandled system error` next.",
        fix="Give the container a network with an IPv4 interface (`--net host`, or the pod's network), then set "
            "NCCL_SOCKET_IFNAME to it (`ip -br addr` lists them).",
        ref="NVIDIA/nccl src/include/socket.h createListenSocket `Socket creation failed : %s` (2.3-2.11), "
            "src/misc/socket.cc (2.12-2.30); https://github.com/NVIDIA/nccl-tests/issues/14 (\"the first one is to be "
            "ignored unless you want to use Infiniband\"), https://github.com/NVIDIA/nccl/issues/210",
        examples=("e66aa18dc444:3171:3171 [0] include/socket.h:311 WARN Socket creation failed : Address family not "
                  "supported by protocol",),
    ),
    Pattern(
        id="nccl.shm_open_frame",
        code=NCCL_SHM_FAILED.code,
        severity=ERROR,
        needle="in ncclShmOpen",
        regex=r"\bin ncclShmOpen\b",
        subject="/dev/shm",
        message="The process crashed inside NCCL's shared-memory setup (ncclShmOpen in the backtrace): with SIGBUS, "
                "/dev/shm is too small for the segment NCCL maps (the container default is 64 MiB).",
        meaning="The ranks on this host crash during communicator setup.",
        fix="Give the pod a bigger /dev/shm: an emptyDir with medium: Memory (sizeLimit: 16Gi or more) at /dev/shm; with "
            "docker `--shm-size=16g` or `--ipc=host`. NCCL_SHM_DISABLE=1 confirms it (slower).",
        ref="NVIDIA/nccl src/misc/shmutils.cc ncclShmOpen; https://github.com/NVIDIA/JAX-Toolbox/issues/183 "
            "(`--shm-size=1g` fixed it)",
        examples=("#0 0x00007f6b59544f3b in ncclShmOpen(char*, unsigned long, void**, void**, int, void**) ()",),
    ),
    # -- GPUDirect RDMA ----------------------------------------------------------------------------
    Pattern(
        id="nccl.gdr_disabled_hca",
        code=NCCL_GDR_DISABLED.code,
        severity=WARNING,
        needle="GPU Direct RDMA Disabled for HCA",
        # Not NET/Socket: its "HCA" is a socket interface ('lo'), where GPUDirect RDMA never applies.
        # Nor GCP's socket plugins (FastSocket, GPUDirectTCPX/FasTrak): nccl.gcp_net_plugin says it once.
        regex=r"NET/(?!Socket |FastSocket |GPUDirectTCPX|FasTrak)(?P<net>[^\s:]{1,64}) : GPU Direct RDMA Disabled for HCA "
              r"(?P<index>\d+) '(?P<hca>[^']*)'(?P<why> \(no module\))?",
        subject="{hca}",
        message="NCCL says GPUDirect RDMA is disabled for HCA {index} '{hca}'{why}: transfers from GPU memory go "
                "through host memory; they should go straight to the HCA.",
        meaning="Every inter-node transfer on this HCA is staged through host memory: lower bandwidth, more CPU.",
        fix="`modprobe nvidia_peermem` on the node (GPU Operator: driver.rdma.enabled=true), or DMA-BUF with the open "
            "NVIDIA kernel module on a kernel >= 5.12.",
        ref="NVIDIA/nccl src/transport/net_ib.cc ncclIbGdrSupport `NET/IB : ... (no module)` (2.5-2.12); "
            "src/graph/topo.cc `NET/%s : GPU Direct RDMA %s for HCA %d '%s'` (2.13-2.30)",
        examples=(
            "node-1:91:91 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)",
            "node-1:91:150 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1'",
            "[2025-06-02 08:00:01] node-1:91:150 [0] NCCL INFO NET/IBext_v8 : GPU Direct RDMA Disabled for HCA 0 "
            "'mlx5_0'",
        ),
    ),
    Pattern(
        id="nccl.gdr_distance",
        code=NCCL_GDR_DISTANCE.code,
        severity=INFO,
        needle="GPU Direct RDMA Disabled for GPU",
        regex=r"GPU Direct RDMA Disabled for GPU[ /](?P<gpu>[\w-]+)(?: \(rank \d+\))? [/-] (?:HCA |NET/)(?P<net>[\w-]+)"
              r" \((?:[^)]{0,256}?)distance (?P<distance>\d{1,9}) >=? (?P<level>\d{1,9})\)",
        subject="GPU {gpu_text} / HCA {hca_text}",
        message="NCCL turned GPUDirect RDMA off between GPU {gpu_text} and HCA {hca_text}: their PCIe distance "
                "{distance} is above NCCL_NET_GDR_LEVEL {level}.",
        meaning="Only matters when this GPU has no nearer HCA; NCCL prints it for every far pair.",
        fix="Nothing when the GPU's NET channels show /GDRDMA; otherwise pair GPUs with HCAs under one PCIe switch.",
        ref="NVIDIA/nccl src/transport/net.cc (2.5), src/graph/paths.cc ncclTopoCheckGdr: `GPU %lx / HCA %d` "
            "(2.6-2.20), `GPU %lx / HCA %lx` (2.21-2.23), `GPU %d / HCA %lx` (2.24-2.28), `GPU/%ld-%ld (rank %d) - "
            "NET/%ld-%ld (...)` (2.29; TRACE only from 2.30)",
        examples=(
            "node-1:91:150 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 1b000 / HCA 3 (distance 5 > 4)",
            "node-1:91:150 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 0 / HCA 4b000 (distance 6 > 4)",
            "node-1:91:150 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for GPU 1b000 / HCA 0 (distance 5 >= 4)",
            "node-1:91:150 [0] NCCL INFO GPU Direct RDMA Disabled for GPU/0-1b000 (rank 0) - NET/0-3 (distance 5 > 4)",
        ),
        derive=_gdr_pair,
    ),
    # -- work completions --------------------------------------------------------------------------
    Pattern(
        id="nccl.wc_error",
        code=NCCL_IB_COMPLETION_ERROR.code,
        severity=ERROR,
        needle="Got completion",
        # status 0 is success: only a debug build's TRACE prints it, never a failure. The 2.29 INFO
        # line `Got completion with error (devIndex=...` repeats the WARN that follows it: not taken.
        regex=r"Got completion (?:from peer (?P<peer>\S*) +)?(?:with )?(?:error |status=)(?:IBV_WC_\w+\()?(?P<status>[1-9]\d*)"
              r"(?:.*?vendor[ _]err[ =](?P<vendor>\d+))?(?:.*? hca (?P<hca>\S+))?",
        subject="status {status} {status_name}{vendor_note}",
        message="An RDMA work request{where} completed with status {status} ({status_name}) instead of success: "
                "{status_why}.",
        meaning="A send or receive failed in the HCA; the communicator aborts and the job dies or hangs.",
        fix="Status 12: run `ib_write_bw -d <hca> <peer>` between the two hosts, check the rail wiring, "
            "NCCL_IB_GID_INDEX on RoCE, then NCCL_IB_TIMEOUT (default 20, try 22); 4: disable ACS on the PCIe path "
            "(see PCIE_ACS_ENABLED) or test with NCCL_NET_GDR_LEVEL=LOC; 5: fix the error before it.",
        ref="NVIDIA/nccl src/transport/net_ib.cc: `NET/IB : Got completion with error %d, opcode %d, len %d, vendor "
            "err %d` (2.5-2.9), `from peer %s with error %d` (2.10-2.17), `(%s)` request type and GIDs (2.18-2.19), "
            "`with status=%d opcode=%d len=%d vendor err %d` (2.20-2.21), `NET/IB:` + `hca %s` (2.22-2.28.3), "
            "`status=%s(%d) opcode=%s(%d) reqSize=%d vendor_err=%u req_type=%s` (2.28.9); "
            "src/transport/net_ib/p2p.cc `status=%s(%d) opcode=%s(%d) vendor_err=%u` (2.29-2.30); "
            "`NET/IB/GIN:` gin.cc (2.28.9-2.30)",
        examples=(
            "node-1:330:401 [0] transport/net_ib.cc:1019 NCCL WARN NET/IB : Got completion with error 12, opcode 0, "
            "len 0, vendor err 129",
            "NET/IB : Got completion from peer 10.42.0.2<47534> with error 5, opcode 48, len 32764, vendor err 244",
            "node-1:330:401 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.1.2<51234> "
            "with error 12, opcode 0, len 0, vendor err 129 (Send) localGid ::ffff:10.1.1.1 remoteGid ::ffff:10.1.1.2",
            "NET/IB : Got completion from peer 10.1.1.2<51234> with status=12 opcode=0 len=0 vendor err 129 (Send) "
            "localGid ::ffff:10.1.1.1 remoteGid ::ffff:10.1.1.2",
            "[2025-03-04 10:12:33] node-1:330:401 [0] transport/net_ib.cc:2470 NCCL WARN NET/IB: Got completion from "
            "peer 10.1.1.2<51234> with status=4 opcode=1 len=0 vendor err 81 (Recv) hca mlx5_3",
            "NET/IB: Got completion from peer 10.1.1.2<51234> with status=IBV_WC_RETRY_EXC_ERR(12) "
            "opcode=IBV_WC_RDMA_WRITE(1) reqSize=524288 vendor_err=129 req_type=Send localGid ::ffff:10.1.1.1 "
            "remoteGids::ffff:10.1.1.2 hca mlx5_3",
            "node-1:330:401 [0] transport/net_ib/p2p.cc:651 NCCL WARN NET/IB: Got completion from peer "
            "10.1.1.2<51234> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129  "
            "localGid ::ffff:10.1.1.1 remoteGids::ffff:10.1.1.2 hca mlx5_3",
            "NET/IB/GIN: Got completion from peer 10.1.1.2<51234> with status=13 opcode=0 len=0 vendor err 136 (IPut) "
            "hca mlx5_1",
        ),
        symptom_when=(("status", "5"),),
        derive=_wc,
    ),
    # -- asynchronous events -----------------------------------------------------------------------
    Pattern(
        id="nccl.ib_async_fatal",
        code=NCCL_IB_ASYNC_FATAL.code,
        severity=ERROR,
        needle="async",
        regex=r"NET/IB : (?:(?P<dev>[\w.-]+):(?P<port>\d+) )?(?:async fatal event(?: on (?P<object>CQ|QP|SRQ)[^:]*)?: "
              r"|Got async event : )(?P<event>local catastrophic error)",
        subject="{device}",
        message="The HCA{dev_note} reported a fatal asynchronous event for itself: {event}. Every NCCL connection on it "
                "fails.",
        meaning="The job aborts; `local catastrophic error` means the HCA or its firmware failed.",
        fix="Drain the node; check `dmesg | grep mlx5` (health syndrome, command timeouts) and the firmware "
            "(`mlxfwmanager --query`); reset the driver or reboot, and replace the card if it repeats.",
        ref="NVIDIA/nccl src/transport/net_ib.cc ncclIbAsyncThreadMain: `NET/IB : Got async event : %s` (2.5-2.19), "
            "`%s:%d Got async event` (2.20-2.22), `%s:%d async fatal event[ on CQ|QP|SRQ (...)]: %s` (2.23-2.28), "
            "src/transport/net_ib/common.cc (2.29-2.30); event strings: rdma-core libibverbs/enum_strs.c",
        examples=(
            "node-4:71:140 [5] transport/net_ib.cc:95 NCCL WARN NET/IB : Got async event : local catastrophic error",
            "node-4:71:140 [5] transport/net_ib.cc:140 NCCL WARN NET/IB : mlx5_5:1 async fatal event: local "
            "catastrophic error",
        ),
        derive=_dev,
    ),
    Pattern(
        id="nccl.ib_async_queue_fatal",
        code=NCCL_IB_ASYNC_FATAL.code,
        severity=ERROR,
        needle="async",
        # A queue's event, not the device's: IBV_EVENT_QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR, CQ_ERR, SRQ_ERR.
        regex=r"NET/IB : (?:(?P<dev>[\w.-]+):(?P<port>\d+) )?(?:async fatal event(?: on (?P<object>CQ|QP|SRQ)[^:]*)?: "
              r"|Got async event : )(?P<event>CQ error|local work queue catastrophic error"
              r"|invalid request local work queue error|local access violation work queue error|SRQ catastrophic error"
              r"|WQ fatal)",
        subject="{device}",
        message="A queue NCCL uses on the HCA{dev_note} failed (async event `{event}`): the connections on that queue "
                "fail and the job aborts. The event is the queue's, not the device's: the HCA itself reported no fault.",
        meaning="`local access violation` is a memory access the registration does not allow (a buffer unregistered or "
                "freed while in use, a GPUDirect RDMA or dma-buf registration problem, a net plugin bug); `invalid "
                "request` a work request the QP refused.",
        fix="Read the peer's log at the same time (completion status 9/10: remote access errors); rerun without "
            "GPUDirect RDMA (NCCL_NET_GDR_LEVEL=LOC) or without the net plugin to tell which one; replace nothing yet.",
        ref="NVIDIA/nccl src/transport/net_ib.cc ncclIbAsyncThreadMain (2.5-2.28), src/transport/net_ib/common.cc "
            "(2.29-2.30); rdma-core libibverbs/enum_strs.c ibv_event_type_str (QP_ACCESS_ERR `local access violation "
            "work queue error`); https://github.com/NVIDIA/nccl/issues/1710",
        examples=(
            "node-4:71:140 [5] transport/net_ib.cc:142 NCCL WARN NET/IB : mlx5_0:1 Got async event : local access "
            "violation work queue error",
            "node-4:71:140 [5] transport/net_ib/common.cc:140 NCCL WARN NET/IB : mlx5_5:1 async fatal event on QP "
            "(0x55d1c0a0b2f0) qpn=4711 handle=12 send_cq=3 recv_cq=3 state=6 sq_psn=0 rq_psn=0: local work queue "
            "catastrophic error",
            "node-4:71:140 [5] transport/net_ib.cc:95 NCCL WARN NET/IB : Got async event : CQ error",
        ),
        derive=_dev,
    ),
    Pattern(
        id="nccl.ib_comm_fatal",
        code=NCCL_IB_ASYNC_FATAL.code,
        severity=ERROR,
        needle="communicator encountered a fatal error",
        regex=r"communicator encountered a fatal error \(detected in (?P<where>\w{1,64})\)",
        subject="communicator",
        message="NCCL's IB transport marked the communicator failed (seen in {where}): a fatal event of the HCA or a "
                "queue pair came first, printed by NCCL's event thread near this line.",
        meaning="Every operation on the communicator fails from here; the job aborts.",
        fix="Read the async event or completion error printed beside it (`async fatal event`, `Got completion ... "
            "status=`): that is the cause.",
        ref="NVIDIA/nccl src/transport/net_ib.cc ncclIbStatsCheckFatalCount `communicator encountered a fatal error "
            "(detected in %s)` (2.24-2.30); https://github.com/NVIDIA/nccl/issues/1905",
        examples=("2025-11-09 15:39:31.043 +08:00 [2025-11-09 07:39:30] h100-28:238:1313 [0] transport/net_ib.cc:139 NCCL "
                  "WARN communicator encountered a fatal error (detected in ncclIbTest)",),
        symptom=True,
    ),
    Pattern(
        id="nccl.ib_async_read_failed",
        code=NCCL_IB_ASYNC_FATAL.code,
        severity=WARNING,
        needle="ibv_get_async_event failed",
        regex=r"Call to ibv_get_async_event failed",
        subject="HCA events",
        message="NCCL's thread that reads the HCA's asynchronous events could not read one and stopped: the device "
                "context broke (after a fatal event, a driver reset or a device removed).",
        meaning="NCCL no longer hears of the device's events; after a fatal event printed before it, that event "
                "is the cause.",
        fix="Read the event printed before it; `dmesg | grep mlx5` on the node shows a reset or a health syndrome.",
        ref="NVIDIA/nccl src/misc/ibvwrap.cc wrap_ibv_get_async_event `Call to ibv_get_async_event failed` "
            "(2.4-2.30); https://github.com/NVIDIA/nccl/issues/230",
        examples=("container-e275:815:864 [0] misc/ibvwrap.cu:220 NCCL WARN Call to ibv_get_async_event failed",),
        follows=("nccl.ib_async_fatal", "nccl.ib_async_queue_fatal"),
        symptom_after=("nccl.ib_async_fatal", "nccl.ib_async_queue_fatal"),
    ),
    Pattern(
        id="nccl.ib_async_port_error",
        code=NIC_LINK_DOWN.code,
        severity=ERROR,
        needle="async",
        regex=r"NET/IB : (?:(?P<dev>[\w.-]+):(?P<port>\d+) )?Got (?:async event : |async error event: "
              r"|non-fatal async event: )port error",
        subject="{device}",
        message="The RDMA port{dev_note} went down while NCCL was using it (async event `port error`); it should "
                "stay ACTIVE for the whole run.",
        meaning="Connections over the port fail (completion errors, timeouts) and the job dies or hangs.",
        fix="Check the cable, transceiver and switch port (`ibstat`, `mlxlink -d <dev> -m`, `perfquery -x`, the "
            "switch's log); a port that flaps repeatedly should be taken out of service.",
        ref="NVIDIA/nccl src/transport/net_ib.cc: `Got async event : %s` (2.5-2.22), `Got async error event: %s` "
            "(2.23-2.27), `Got non-fatal async event: %s(%d)` (2.28), src/transport/net_ib/common.cc (2.29-2.30)",
        examples=(
            "node-4:71:140 [5] transport/net_ib.cc:95 NCCL WARN NET/IB : Got async event : port error",
            "node-4:71:140 [5] transport/net_ib.cc:99 NCCL WARN NET/IB : mlx5_5:1 Got async event : port error",
            "node-4:71:140 [5] transport/net_ib.cc:171 NCCL WARN NET/IB : mlx5_5:1 Got async error event: port error",
            "node-4:71:140 [5] transport/net_ib/common.cc:179 NCCL WARN NET/IB : mlx5_5:1 Got non-fatal async "
            "event: port error(10)",
        ),
        derive=_dev,
    ),
    Pattern(
        id="nccl.ib_async_event",
        code=NCCL_IB_ASYNC_EVENT.code,
        severity=WARNING,
        needle="async",
        regex=r"NET/IB : (?:(?P<dev>[\w.-]+):(?P<port>\d+) )?Got (?:async event : |async error event: "
              r"|non-fatal async event: )(?!port error|local catastrophic error|CQ error|local work queue catastrophic"
              r"|invalid request local|local access violation|SRQ catastrophic|WQ fatal)(?P<event>[^(]{0,512}?[^(\s])\s*(?!\s)(?:\(\d{1,9}\))?\s*$",
        subject="{device}",
        message="The HCA{dev_note} reported `{event_text}` while NCCL was running; a stable fabric reports none.",
        meaning="Not fatal by itself, but connections made before a LID, SM or P_Key change can fail afterwards.",
        fix="Match the time against the subnet manager and switch logs; check the port's cable and counters "
            "(`perfquery -x`) if it repeats.",
        ref="NVIDIA/nccl src/transport/net_ib.cc ncclIbAsyncThreadMain: `Got async event : %s` (2.5-2.22), `Got async "
            "error event: %s` (2.23-2.27), `Got non-fatal async event: %s(%d)` (2.28), src/transport/net_ib/common.cc "
            "(2.29-2.30); event strings: rdma-core libibverbs/enum_strs.c",
        examples=(
            "node-4:71:140 [5] transport/net_ib.cc:95 NCCL WARN NET/IB : Got async event : port active",
            "node-4:71:140 [5] transport/net_ib.cc:171 NCCL WARN NET/IB : mlx5_2:1 Got async error event: SM change",
            "node-4:71:140 [5] transport/net_ib/common.cc:179 NCCL WARN NET/IB : mlx5_2:1 Got non-fatal async event: "
            "client reregistration(17)",
        ),
        derive=_async_event,
    ),
    Pattern(
        id="nccl.ib_gid_changed",
        code=NCCL_IB_ASYNC_EVENT.code,
        severity=WARNING,
        needle="GID table changed",
        regex=r"NET/IB : (?:(?P<dev>[\w.-]+):(?P<port>\d+) )?GID table changed",
        subject="{device}",
        message="The GID table of{dev_note} changed while NCCL was running (on RoCE: an IP address of the netdev was "
                "added, removed or moved); the GIDs NCCL connected with should stay put.",
        meaning="Connections made with a GID that went away fail; new ones may pick another GID index.",
        fix="Keep the RoCE netdev's IP addresses stable while jobs run (no DHCP renumbering, no address moves by the "
            "CNI); pin NCCL_IB_GID_INDEX only to an index that exists on every node.",
        ref="NVIDIA/nccl src/transport/net_ib.cc ncclIbAsyncThreadMain IBV_EVENT_GID_CHANGE (2.28), "
            "src/transport/net_ib/common.cc (2.29-2.30); earlier releases print `Got async event : GID table change`",
        examples=("node-4:71:140 [5] transport/net_ib/common.cc:153 NCCL WARN NET/IB : mlx5_2:1 GID table changed",),
        derive=lambda g: {**_dev(g), "dev_note": f" {_dev(g)['device']}" if g.get("dev") else " the HCA"},
    ),
    # -- verbs resources ---------------------------------------------------------------------------
    Pattern(
        id="nccl.reg_mr_failed",
        code=NCCL_REG_MR_FAILED.code,
        severity=ERROR,
        needle="Call to ibv_reg_",
        regex=r"Call to (?P<call>ibv_reg_(?:dmabuf_)?mr(?:_iova2)?) failed(?: with error (?P<error>.*?\S)(?: errno \d{1,9})?)?\s*$",
        subject="{call}",
        message="NCCL could not register a buffer with the HCA: {call} failed{error_note}. Registration must succeed "
                "for RDMA to reach the buffer.",
        meaning="The communicator fails; `Cannot allocate memory` is the locked-memory limit, `Bad address` or "
                "`Invalid argument` on GPU buffers is GPUDirect (peermem or DMA-BUF) not working.",
        fix="Add IPC_LOCK to the container (securityContext.capabilities.add: [IPC_LOCK]) or set memlock unlimited "
            "(`ulimit -l unlimited`); for GPU buffers load nvidia_peermem or use DMA-BUF (NCCL_DMABUF_ENABLE=1).",
        ref="NVIDIA/nccl src/misc/ibvwrap.cc IBV_PTR_CHECK `Call to %s failed` (2.5-2.12) and IBV_PTR_CHECK_ERRNO "
            "`Call to %s failed with error %s` (2.13-2.30)",
        examples=(
            "node-6:91:180 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory",
            "node-6:91:180 [0] misc/ibvwrap.cc:262 NCCL WARN Call to ibv_reg_mr failed",
            "node-6:91:180 [0] misc/ibvwrap.cc:167 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Bad address",
            "node-6:91:180 [0] misc/ibvwrap.cc:174 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Invalid argument",
        ),
        derive=_call_error,
    ),
    Pattern(
        id="nccl.ofi_reg_mr_failed",
        code=NCCL_REG_MR_FAILED.code,
        severity=ERROR,
        needle="Unable to register memory",
        regex=r"NET/OFI Unable to register memory \(type = (?P<type>\d+)\) for device (?P<dev>\d+)\. RC: (?P<rc>-?\d+), "
              r"Error: (?P<error>.*?\S)\s*$",
        subject="OFI device {dev}",
        message="aws-ofi-nccl could not register a {mem} buffer on device {dev}: {error} (RC {rc}).",
        meaning="The communicator fails; GPU buffers (type 2) failing means GPUDirect RDMA over EFA is not working.",
        fix="Use the libfabric and aws-ofi-nccl versions of the EFA installer, FI_EFA_USE_DEVICE_RDMA=1 on instances "
            "that support it, and for `Invalid argument` on older efa-installer FI_EFA_SET_CUDA_SYNC_MEMOPS=0.",
        ref="aws/aws-ofi-nccl src/nccl_ofi_rdma.cpp / nccl_ofi_sendrecv.cpp register_mr_buffers; aws/aws-ofi-nccl#584",
        examples=("nid001264:1291155:1293014 [1] register_mr_buffers:647 NCCL WARN NET/OFI Unable to register memory "
                  "(type = 2) for device 5. RC: -22, Error: Invalid argument",),
        derive=lambda g: {"mem": {"1": "host", "2": "GPU"}.get(g.get("type") or "", "type " + (g.get("type") or "?"))},
    ),
    Pattern(
        id="nccl.qp_cq_create_failed",
        code=NCCL_QP_CQ_CREATE_FAILED.code,
        severity=ERROR,
        needle="Call to ibv_create_",
        regex=r"Call to (?P<call>ibv_create_(?:qp|cq)) failed(?: with error (?P<error>.*?\S)(?: errno \d{1,9})?)?\s*$",
        subject="{call}",
        message="NCCL could not create an RDMA queue: {call} failed{error_note}.",
        meaning="The communicator fails to initialise; `Cannot allocate memory` is the locked-memory limit or the "
                "HCA's queue limit.",
        fix="Add IPC_LOCK to the container or set memlock unlimited; with many ranks per HCA lower NCCL_IB_QPS_PER_CONNECTION "
            "and check max_qp/max_cq in `ibv_devinfo -v`.",
        ref="NVIDIA/nccl src/misc/ibvwrap.cc IBV_PTR_CHECK `Call to %s failed` (2.5-2.13), IBV_PTR_CHECK_ERRNO "
            "(2.14-2.30)",
        examples=(
            "node-6:91:180 [0] misc/ibvwrap.cc:202 NCCL WARN Call to ibv_create_qp failed with error Cannot allocate memory",
            "node-6:91:180 [0] misc/ibvwrap.cc:268 NCCL WARN Call to ibv_create_cq failed",
        ),
        derive=_call_error,
    ),
    Pattern(
        id="nccl.modify_qp_iwarp",
        code="IWARP_NCCL_IB",  # checks/nccl.py: the same meaning, judged there from the node
        severity=ERROR,
        needle="Call to ibv_modify_qp failed",
        # cxgb4 (Chelsio) and siw (soft iWARP) are iWARP only; irdma may be RoCE or iWARP, so not named.
        regex=r"Call to ibv_modify_qp failed with 22 Invalid argument, on dev (?P<dev>(?:cxgb4|iw_cxgb4|siw)[^:,\s]*):"
              r"(?P<port>\d+), curr state \w+, next state (?P<next>\w+)",
        subject="{dev}/{port}",
        message="NCCL's IB transport took iWARP device {dev} as RoCE and could not move its queue pair to {next}: "
                "iWARP queue pairs are connected by the iWARP connection manager, which NCCL does not use.",
        meaning="The communicator fails to connect (`unhandled system error`); NCCL's own hint about "
                "NCCL_IB_GID_INDEX does not apply to iWARP.",
        fix="Set NCCL_IB_HCA to the node's InfiniBand/RoCE devices only (e.g. `NCCL_IB_HCA=mlx5`), or NCCL_IB_DISABLE=1 "
            "to train over TCP on purpose; `rdmadoctor explain IWARP_NCCL_IB` says more.",
        ref="NVIDIA/nccl src/transport/net_ib/init.cc ncclIbInitDevices (no transport check), connect.cc "
            "ncclIbRtrQp/ncclIbRtsQp; linux drivers/infiniband/hw/cxgb4/qp.c, sw/siw/siw_qp.c (EINVAL)",
        examples=(
            "node-1:91:180 [0] misc/ibvwrap.cc:291 NCCL WARN Call to ibv_modify_qp failed with 22 Invalid argument, on "
            "dev cxgb4_0:1, curr state INIT, next state RTR, local GID index 0, local GID ::ffff:10.1.1.1, remote GID "
            "::ffff:10.1.2.1",
        ),
    ),
    Pattern(
        id="nccl.modify_qp_failed",
        code=NCCL_IB_MODIFY_QP_FAILED.code,
        severity=ERROR,
        needle="Call to ibv_modify_qp failed",
        # 2.24+ logs each retry at INFO (`..., retrying 3/35 after 300 msec of sleep`): only the final
        # WARN (no `retrying`) is the failure.
        # From the needle's first place in the line only: a line that repeats it is not read to its
        # end again (the retry look-ahead) from each repeat.
        regex=r"^(?:(?!Call to ibv_modify_qp failed with ).)*Call to ibv_modify_qp failed with (?!.*retrying \d)(?:error )?(?:(?P<errno>\d+) )?"
              r"(?P<error>[A-Za-z](?:[^,]*?[^,\s])?)(?: errno (?P<errno2>\d{1,9}))?(?:,|\s*$)"
              r"(?: on dev (?P<qpdev>[^:,\s]+):(?P<qpport>-?\d+), curr state \w+, next state (?P<next>\w+), "
              r"local GID index (?P<gid_index>-?\d+))?",
        subject="{device}",
        message="NCCL could not connect a queue pair{qp_where}: ibv_modify_qp failed with {error_text}.",
        meaning="`Invalid argument`: the GID index is wrong for this port or the peer; `No such device`: the GID's "
                "network device is not in this pod (a RoCE GID of the host's interface, not the pod's); `Connection "
                "timed out`: the two NICs cannot reach each other.",
        fix="EINVAL: unset NCCL_IB_GID_INDEX (NCCL >= 2.21 picks it) or set the RoCE v2 index `show_gids` lists on "
            "every node; ENODEV: set NCCL_IB_GID_INDEX to the RoCE v2 GID of the pod's own interface (`show_gids` in "
            "the pod; an SR-IOV VF or a host-device network gives the pod one); ETIMEDOUT: on RoCE, a GID index whose "
            "GID is link-local (fe80::) is not routed, use the RoCE v2 index with the IPv4 address (NVIDIA/nccl#769); "
            "otherwise NCCL_CROSS_NIC=0 and check the rail wiring.",
        ref="NVIDIA/nccl src/misc/ibvwrap.cc IBV_INT_CHECK_RET_ERRNO `Call to ibv_modify_qp failed with error %s` "
            "(2.5-2.18), `... errno %d` (2.19-2.23), wrap_ibv_modify_qp `failed with %d %s, %s` + printIbModifyQpHint "
            "(2.24-2.30)",
        examples=(
            "node-1:91:180 [0] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument",
            "node-1:91:180 [0] misc/ibvwrap.cc:206 NCCL WARN Call to ibv_modify_qp failed with error Connection timed "
            "out errno 110",
            "node-1:91:180 [0] misc/ibvwrap.cc:291 NCCL WARN Call to ibv_modify_qp failed with 22 Invalid argument, on "
            "dev mlx5_0:1, curr state INIT, next state RTR, local GID index 3, local GID ::ffff:10.1.1.1, remote GID "
            "::ffff:10.1.2.1",
        ),
        derive=_modify_qp,
    ),
    # -- shared memory -----------------------------------------------------------------------------
    Pattern(
        id="nccl.shm_extend",
        code=NCCL_SHM_FAILED.code,
        severity=ERROR,
        needle="Error: failed to extend",
        regex=r"Error: failed to extend (?P<path>\S+) to (?P<size>\d+) bytes(?:, error: (?P<error>[^(]{0,512}?[^(\s])(?: \(\d{1,9}\))?)?\s*$",
        subject="{path}",
        message="NCCL could not grow shared-memory file {path} to {size} bytes{error_note}; /dev/shm is too small or "
                "full.",
        meaning="The intra-node transport cannot be set up; NCCL fails with `unhandled system error`.",
        fix="Mount a memory-backed emptyDir on /dev/shm (medium: Memory, sizeLimit: 16Gi) or run with --shm-size=16g "
            "/ --ipc=host; remove leftover /dev/shm/nccl-* files.",
        ref="NVIDIA/nccl src/misc/shmutils.cc ncclShmOpen `%d bytes` (2.12-2.15), `%ld bytes` (2.16-2.21), `, error: "
            "%s (%d)` (2.22-2.29), src/os/linux.cc (2.30)",
        examples=(
            "node-1:60:60 [1] misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-vhGGZv to 9637892 "
            "bytes, error: No space left on device (28)",
            "node-1:60:60 [1] misc/shmutils.cc:70 NCCL WARN Error: failed to extend /dev/shm/nccl-Ab1cDe to 9637892 bytes",
        ),
        derive=_shm,
    ),
    Pattern(
        id="nccl.shm_create_file",
        code=NCCL_SHM_FAILED.code,
        severity=ERROR,
        needle="Error: failed to create shared memory file",
        regex=r"Error: failed to create shared memory file (?P<path>\S+), error (?P<error>[^(]{0,512}?[^(\s])(?: \(\d{1,9}\))?\s*$",
        subject="{path}",
        message="NCCL could not create shared-memory file {path}: {error}.",
        meaning="The intra-node transport cannot be set up; NCCL fails with `unhandled system error`.",
        fix="Give the pod a writable, memory-backed /dev/shm (emptyDir medium: Memory) large enough for NCCL, or "
            "--ipc=host outside Kubernetes.",
        ref="NVIDIA/nccl src/misc/shmutils.cc `%p` (2.22-2.23, prints a pointer), `%s` (2.24-2.29), src/os/linux.cc (2.30)",
        examples=("node-1:60:60 [1] misc/shmutils.cc:73 NCCL WARN Error: failed to create shared memory file "
                  "/dev/shm/nccl-Qw3Rt9, error No space left on device (28)",),
    ),
    Pattern(
        id="nccl.shm_syscall",
        code=NCCL_SHM_FAILED.code,
        severity=ERROR,
        needle="Call to ",
        regex=r"Call to (?P<call>posix_fallocate|shm_open) failed ?: (?P<error>.*?\S)\s*$",
        subject="/dev/shm",
        message="NCCL's {call} on /dev/shm failed: {error}.",
        meaning="The intra-node transport cannot be set up; NCCL fails with `unhandled system error`.",
        fix="Mount a memory-backed emptyDir on /dev/shm (medium: Memory, sizeLimit: 16Gi) or run with --shm-size=16g "
            "/ --ipc=host.",
        ref="NVIDIA/nccl src/include/shm.h shmOpen SYSCHECK `Call to %s failed : %s` (2.5-2.11)",
        examples=(
            "node-1:60:60 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
            "node-1:60:60 [1] include/shm.h:22 NCCL WARN Call to shm_open failed : Permission denied",
        ),
    ),
    Pattern(
        id="nccl.shm_segment",
        code=NCCL_SHM_FAILED.code,
        severity=ERROR,
        needle="shared memory segment",
        regex=r"Error while (?P<op>creating|attaching to) shared memory segment (?P<path>\S+) \(size (?P<size>\d+)\)"
              r"(?:, error: (?P<error>[^(]{0,512}?[^(\s])(?: \(\d{1,9}\))?)?\s*$",
        subject="{path}",
        message="NCCL failed {op} shared-memory segment {path} of {size} bytes{error_note}.",
        meaning="The intra-node transport cannot be set up; NCCL fails with `unhandled system error` and peers see "
                "closed sockets.",
        fix="Mount a memory-backed emptyDir on /dev/shm (medium: Memory, sizeLimit: 16Gi) or run with --shm-size=16g "
            "/ --ipc=host.",
        ref="NVIDIA/nccl src/include/shm.h (2.5-2.11), src/misc/shmutils.cc `(size %d)` (2.12-2.15), `(size %ld)` "
            "(2.16-2.21), `, error: %s (%d)` (2.22-2.29), src/os/linux.cc (2.30)",
        examples=(
            "node-1:60:60 [1] misc/shmutils.cc:128 NCCL WARN Error while creating shared memory segment "
            "/dev/shm/nccl-vhGGZv (size 9637888), error: No space left on device (28)",
            "node-1:60:60 [1] include/shm.h:48 NCCL WARN Error while attaching to shared memory segment "
            "nccl-shm-recv-b3c1a2-0-1-2 (size 4194656)",
        ),
        # It closes the failure the lines above it describe (which file, which call).
        symptom=True,
        follows=("nccl.shm_extend", "nccl.shm_create_file", "nccl.shm_syscall"),
        derive=_shm,
    ),
    # -- plugins -----------------------------------------------------------------------------------
    Pattern(
        id="nccl.net_plugin_load_failed",
        code=NCCL_NET_PLUGIN_LOAD_FAILED.code,
        explains_fallback=True,
        severity=WARNING,
        needle="NET/Plugin",
        # A plain `libnccl-net.so: cannot open shared object file` is the default plugin being absent:
        # harmless, NCCL uses its own transports (and 2.22+ says `Could not find:` instead).
        regex=r"NET/Plugin ?: (?:Plugin load (?:\((?P<lib>[^)]*)\) )?returned -?\d+ : |dlerror="
              r"|(?P<lib2>\S+\.so(?:\.\d+)*): )?(?P<error>(?![^\s=]*lib[nr]ccl-net[\w.-]*\.so: cannot open shared object "
              r"file)[^\s=]+: (?:cannot open shared object file|undefined symbol|version `|wrong ELF class|invalid ELF header"
              r"|file too short)(?:[^\n]*?\S)?)(?: No plugin found \((?P<lib3>[^)]{0,256})\).*|\.? ?(?:: )?when loading \S+)?\.?\s*$",
        subject="{plugin}",
        message="NCCL could not load its net plugin{plugin_note}: {error}; it uses its internal transports instead.",
        meaning="A plugin the job relies on (aws-ofi-nccl for EFA, SHARP, gIB) is not in use; on EFA traffic falls "
                "back to TCP sockets.",
        fix="`ldd` the plugin in the container and install or add to LD_LIBRARY_PATH what it lacks (libfabric for "
            "aws-ofi-nccl); rebuild the plugin against this NCCL if a symbol is undefined.",
        ref="NVIDIA/nccl src/net.cc `NET/Plugin : Plugin load returned %d : %s.` (2.5-2.20), `Plugin load (%s) "
            "returned` (2.17-2.18), `dlerror=%s No plugin found (%s)` (2.19-2.20), `Plugin load returned %d : %s when "
            "loading %s` (2.21), `NET/Plugin: %s` (2.22-2.27, src/plugin/plugin_open.cc from 2.26), `%s/Plugin: %s: %s` "
            "(2.28-2.30)",
        examples=(
            "node-1:40:40 [0] NCCL INFO NET/Plugin : Plugin load returned 2 : libfabric.so.1: cannot open shared "
            "object file: No such file or directory.",
            "node-1:40:40 [0] NCCL INFO NET/Plugin: Plugin load returned 0 : /opt/amazon/ofi-nccl/lib/libnccl-net.so: "
            "undefined symbol: fi_mr_regattr when loading libnccl-net.so",
            "node-1:40:40 [0] NCCL INFO NET/Plugin: libfabric.so.1: cannot open shared object file: No such file or "
            "directory",
            "node-1:40:40 [0] NCCL INFO NET/Plugin: libnccl-net.so: libfabric.so.1: cannot open shared object file: No "
            "such file or directory",
            "node-1:40:40 [0] NCCL INFO NET/Plugin : dlerror=libfabric.so.1: cannot open shared object file: No such "
            "file or directory No plugin found (libnccl-net.so), using internal implementation",
        ),
        derive=_plugin,
    ),
    Pattern(
        id="nccl.net_plugin_not_found",
        code=NCCL_NET_PLUGIN_LOAD_FAILED.code,
        explains_fallback=True,
        severity=WARNING,
        needle="NET/Plugin",
        # Only a plugin someone asked for (NCCL_NET_PLUGIN): the default name alone is harmless.
        # (libnccl-net.so, RCCL's librccl-net.so: the default names NCCL/RCCL try and do without)
        regex=r"NET/Plugin ?: (?:Could not find:(?! lib[nr]ccl-net\.so(?:\.|$| Using))(?P<names>(?: (?!Using\b)\S+)+?)\.?"
              r"(?: Using internal.*)?$|No plugin found \((?!lib[nr]ccl-net\.so\))(?P<lib>[^)]+)\))",
        subject="{plugin}",
        message="The net plugin NCCL was told to use ({plugin}) was not found, so NCCL uses its internal transports.",
        meaning="The job does not use the network plugin it was configured for; on EFA that means TCP sockets.",
        fix="Install the plugin in the image and put its directory on LD_LIBRARY_PATH, or correct NCCL_NET_PLUGIN "
            "(`ofi` finds libnccl-net-ofi.so).",
        ref="NVIDIA/nccl src/net.cc `No plugin found (%s), using internal implementation` (2.11-2.16), `No plugin "
            "found (%s)` (2.21); `Could not find:%s` src/net.cc (2.22-2.25), src/plugin/plugin_open.cc (2.26-2.30)",
        examples=(
            "node-1:40:40 [0] NCCL INFO NET/Plugin: Could not find: aws-ofi libnccl-net-aws-ofi.so. Using internal "
            "net plugin.",
            "node-1:40:40 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net-ofi.so",
            "node-1:40:40 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net-aws.so), using internal implementation",
        ),
        derive=lambda g: {"plugin": (g.get("names") or g.get("lib") or "").strip().rstrip(".") or "the named plugin"},
    ),
    Pattern(
        id="nccl.net_init_failed",
        code=NCCL_NET_INIT_FAILED.code,
        explains_fallback=True,
        severity=ERROR,
        needle="Failed to initialize any NET plugin",
        regex=r"Failed to initialize any NET plugin",
        subject="NCCL network",
        message="NCCL could initialise no network transport (no plugin, no NET/IB, no NET/Socket); one is needed to "
                "reach other nodes.",
        meaning="A communicator that spans nodes cannot be created.",
        fix="Fix the message before it (usually `NET/Socket : no interface found`: set NCCL_SOCKET_IFNAME); unset "
            "NCCL_NET unless it names a transport this node has.",
        ref="NVIDIA/nccl src/plugin/net.cc ncclNetInit (2.27-2.30)",
        examples=("node-1:40:40 [0] plugin/net.cc:349 NCCL WARN Failed to initialize any NET plugin",),
    ),
    # -- NCCL's result strings, as frameworks and nccl-tests print them ---------------------------
    Pattern(
        id="nccl.system_error",
        code=NCCL_SYSTEM_ERROR.code,
        severity=ERROR,
        needle="unhandled system error",
        regex=r"unhandled system error(?: \(run with NCCL_DEBUG=INFO for details\))?(?:, NCCL version (?P<version>[\w.+-]+))?",
        subject="NCCL",
        message="An NCCL call failed with `unhandled system error` (ncclSystemError): a system or verbs call inside "
                "NCCL failed; the WARN line before it names which.",
        meaning="The framework aborts the job; this line alone does not say why.",
        fix="Read the cause this finding is linked to; without one rerun with NCCL_DEBUG=INFO "
            "NCCL_DEBUG_SUBSYS=INIT,NET and diagnose that log.",
        ref="NVIDIA/nccl src/init.cc ncclGetErrorString `unhandled system error` (2.5-2.17), `... (run with "
            "NCCL_DEBUG=INFO for details)` (2.18-2.30); pytorch/pytorch torch/csrc/distributed/c10d/NCCLUtils.hpp "
            "`NCCL error in: %s:%d, %s, NCCL version %s`",
        examples=(
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3",
            "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:784, unhandled system error, "
            "NCCL version 2.7.8",
            "node-1: Test NCCL failure common.cu:1005 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '",
        ),
        symptom=True,
    ),
    Pattern(
        id="nccl.remote_error",
        code=NCCL_REMOTE_ERROR.code,
        severity=ERROR,
        needle="remote process exited or there was a network error",
        regex=r"remote process exited or there was a network error(?:, NCCL version (?P<version>[\w.+-]+))?",
        subject="NCCL",
        message="NCCL lost a peer: `remote process exited or there was a network error` (ncclRemoteError); another "
                "rank died or the network between them failed.",
        meaning="This rank is a victim; the cause is on another rank or in the fabric.",
        fix="Find the rank that failed first and diagnose its log; if all ranks show only this, look for IB "
            "completion errors and port events at the same time.",
        ref="NVIDIA/nccl src/init.cc ncclGetErrorString ncclRemoteError (2.13-2.30)",
        examples=(
            "[E ProcessGroupNCCL.cpp:852] [Rank 16] NCCL watchdog thread terminated with exception: NCCL error: remote "
            "process exited or there was a network error, NCCL version 2.19.3",
        ),
        symptom=True,
    ),
    # -- CUDA under NCCL -------------------------------------------------------------------------
    Pattern(
        id="nccl.cuda_failure",
        code=NCCL_CUDA_FAILED.code,
        severity=ERROR,
        needle="Cuda failure",
        regex=r"Cuda failure (?:\d{1,5} )?'(?P<what>[^'\n]{1,200})'",
        subject="CUDA",
        message="NCCL's call to CUDA failed: {what}. {cuda_fix}",
        meaning="The communicator cannot be made, or the collective fails (ncclUnhandledCudaError); the network is "
                "not involved.",
        fix="Follow what the message says for this CUDA error; `nvidia-smi` and `dmesg | grep -i xid` on the node "
            "show the GPU's state.",
        ref="NVIDIA/nccl src/include/checks.h CUDACHECK `Cuda failure '%s'` (2.5-2.18), `Cuda failure %d '%s'` "
            "(2.19-2.30); https://github.com/NVIDIA/nccl/issues/1026",
        examples=(
            "node-1:77:90 [0] include/alloc.h:124 NCCL WARN Cuda failure 'out of memory'",
            "node-1:77:90 [1] init.cc:154 NCCL WARN Cuda failure 'invalid device ordinal'",
            "node-1:77:90 [2] transport/p2p.cc:274 NCCL WARN Cuda failure 'peer access is not supported between "
            "these two devices'",
            "node-1:77:90 [0] transport/nvls.cc:130 NCCL WARN Cuda failure 801 'operation not supported'",
            # https://github.com/NVIDIA/nccl/issues/1672: NVLS, where `invalid argument` is no /dev/shm problem
            "[2025-04-06 22:31:56] ccw-gpu-128:3485254:3487188 [0] transport/nvls.cc:598 NCCL WARN Cuda failure 1 "
            "'invalid argument'",
        ),
        derive=_cuda,
        # `invalid argument` from shmutils.cc is CUDA refusing to register a /dev/shm segment NCCL could
        # not create whole: the shared-memory failure printed next explains it (NVIDIA/nccl#1518).
        symptom_when=(("shm_arg", "yes"),),
    ),
    Pattern(
        id="nccl.cuda_driver_version",
        code=NCCL_CUDA_FAILED.code,
        severity=ERROR,
        needle="cuDriverGetVersion failed",
        regex=r"cuDriverGetVersion failed with (?P<cu>-?\d{1,5})",
        subject="CUDA",
        message="NCCL could not ask the CUDA driver for its version: {what} (CUresult {cu}). {cuda_fix}",
        meaning="NCCL cannot use the GPU's driver: every communicator fails.",
        fix="Make the NVIDIA driver and the job's CUDA agree (`nvidia-smi` shows the driver's CUDA version); in a "
            "container, the driver comes from the node (the GPU Operator or the host's driver).",
        ref="NVIDIA/nccl src/misc/cudawrap.cc ncclCudaLibraryInit `cuDriverGetVersion failed with %d` (2.13-2.30); "
            "CUresult values from CUDA's cuda.h",
        examples=("node-1:77:77 [0] misc/cudawrap.cc:188 NCCL WARN cuDriverGetVersion failed with 35",),
        derive=_cuda,
    ),
    Pattern(
        id="nccl.topo_net_id",
        code=NCCL_TOPOLOGY_FAILED.code,
        severity=ERROR,
        needle="Could not find NET with id",
        regex=r"Could not find NET with id (?P<id>-?\d{1,10})",
        subject="topology",
        message="NCCL's topology search asked for NET {id}, which this machine's graph does not have: a bug of NCCL "
                "2.25 and 2.26 when NICs are fused (NCCL_NET_MERGE_LEVEL) and its graph search falls back.",
        meaning="The communicator is not made (`internal error`).",
        fix="Upgrade NCCL to 2.27 or later (the fix); meanwhile NCCL_NET_MERGE_LEVEL=LOC avoids the fusion.",
        ref="NVIDIA/nccl src/graph/topo.h ncclTopoIdToIndex `Could not find %s with id %lx` (2.19-2.30); "
            "https://github.com/NVIDIA/nccl/issues/1748, https://github.com/NVIDIA-NeMo/Speech/issues/13996 (2.27.3 "
            "solved it)",
        examples=("node-1:77:90 [0] graph/topo.h:230 NCCL WARN Could not find NET with id 0",),
    ),
    Pattern(
        id="nccl.topo_attribute",
        code=NCCL_TOPOLOGY_FAILED.code,
        severity=ERROR,
        needle="of node ",
        regex=r"Attribute (?P<attr>\w{1,32}) of node (?P<node>nic|net|gpu|pci|cpu) not found",
        subject="topology",
        message="NCCL could not place a {node_text} in the PCI tree (attribute `{attr}` missing): the device has no PCI "
                "path NCCL can read from /sys (a virtual NIC, a container or VM that hides the host's PCI tree).",
        meaning="The communicator is not made (`internal error`).",
        fix="Keep devices without a PCI path out of NCCL_IB_HCA / NCCL_SOCKET_IFNAME, mount /sys read-only in the "
            "container, or give NCCL the topology (NCCL_TOPO_FILE).",
        ref="NVIDIA/nccl src/graph/xml.h xmlGetAttr* `Attribute %s of node %s not found` (2.6-2.30); "
            "https://github.com/NVIDIA/nccl/issues/1247",
        examples=("(RayWorkerVllm pid=7602) ERROR 04-07 00:57:46 ray_utils.py:45] Attribute busid of node nic not found",),
        derive=lambda g: {"node_text": {"nic": "NIC", "net": "network device", "gpu": "GPU"}.get(g.get("node", ""),
                                                                                              g.get("node") or "device")},
    ),
    Pattern(
        id="nccl.topo_real_path",
        code=NCCL_TOPOLOGY_FAILED.code,
        severity=ERROR,
        needle="Could not find real path of",
        # (a GPU's PCI bus; NCCL <= 2.7 said `INFO Could not find real path of /sys/class/net/eth0/device`
        # of a virtual NIC, harmless)
        regex=r"Could not find real path of (?P<path>/sys/class/pci_bus/\S{1,300})",
        subject="topology",
        message="NCCL could not resolve {path} in /sys: the PCI tree it reads the GPUs and NICs from is not there "
                "(a container with a partial /sys, WSL or a VM whose devices have no PCI path).",
        meaning="The communicator is not made, or NCCL plans without the topology.",
        fix="Run with the host's /sys visible (read-only) in the container; under WSL or a VM, NCCL_TOPO_FILE with the "
            "machine's topology, or a newer NCCL.",
        ref="NVIDIA/nccl src/graph/xml.cc, src/misc/utils.cc `Could not find real path of %s` (2.6-2.30); "
            "https://github.com/NVIDIA/nccl/issues/573 (WSL2)",
        examples=("SHJS-PF4ZKYLL:92777:92889 [0] graph/xml.cc:332 NCCL WARN Could not find real path of "
                  "/sys/class/pci_bus/0000:01/../../0000:01:00.0",),
    ),
    Pattern(
        id="nccl.rccl_host_setup",
        code=RCCL_HOST_SETUP.code,
        severity=WARNING,
        needle="Missing \"",
        regex=r"Missing \"(?P<what>amd_iommu=on|iommu=pt|HSA_FORCE_FINE_GRAIN_PCIE=1)\" from (?P<where>kernel command line|environment)",
        subject="{what}",
        message="RCCL found `{what}` missing from the {where}: RCCL warns that this can make the job unstable or hang.",
        meaning="Multi-node jobs on this host can hang or fail to connect unless peer-to-peer is turned off (slower).",
        fix="Kernel: add `amd_iommu=on iommu=pt` to GRUB_CMDLINE_LINUX and reboot; environment: "
            "HSA_FORCE_FINE_GRAIN_PCIE=1 in the job.",
        ref="ROCm/rccl src/init.cc (`Missing \"%s\" from kernel command line which can lead to system instablity or "
            "hang!`, `... from environment which can lead to low RCCL performance, system instablity or hang!`); "
            "https://github.com/ROCm/rccl/issues/1026",
        examples=(
            "g1064:11143:11143 [0] /long_pathname_so_that_rpms_can_package_the_debug_info/src/extlibs/rccl/build/src/"
            "init.cpp:120 NCCL WARN Missing \"amd_iommu=on\" from kernel command line which can lead to system "
            "instablity or hang!",
            "g1064:11143:11143 [0] init.cpp:126 NCCL WARN Missing \"HSA_FORCE_FINE_GRAIN_PCIE=1\" from environment which "
            "can lead to low RCCL performance, system instablity or hang!",
        ),
    ),
    Pattern(
        id="nccl.sharp_failed",
        code=NCCL_COLLNET_FAILED.code,
        severity=ERROR,
        needle="SHARP ",
        regex=r"SHARP (?P<what>group create|coll init|comm create|reg mr|init)[^:\n]{0,40}: (?P<why>[^\n]{1,200}?)\s*$",
        subject="SHARP",
        message="NCCL's SHARP plugin failed ({what}: {why}): the communicator cannot use in-network reduction and "
                "fails.",
        meaning="The job fails where it makes that communicator; nccl-tests with one communicator may still pass.",
        fix="NCCL_COLLNET_ENABLE=0 to run without SHARP; then the SHARP aggregation manager's log for the job's "
            "trees (streaming-aggregation trees are few).",
        ref="Mellanox/nccl-rdma-sharp-plugins src/sharp_plugin.c (`SHARP group create: %s`); "
            "https://github.com/NVIDIA/nccl/issues/1219",
        examples=("node:174:4368 [3] sharp_plugin.c:354 NCCL WARN SHARP group create: Streaming Tree lock failed (-18)",),
    ),
    Pattern(
        id="nccl.graph_simple_order",
        code=NCCL_GRAPH_SIMPLE_ORDER.code,
        severity=INFO,
        needle="falling back to simple order",
        regex=r"Could not find a path for pattern (?P<pattern>\d{1,3}), falling back to simple order",
        subject="pattern {pattern}",
        message="NCCL found no topology path for search pattern {pattern} and uses a simple order instead (NCCL "
                "prints this as a WARN; the job goes on).",
        meaning="The rings or trees of that pattern may cross slower links than the hardware offers.",
        fix="Nothing when busbw is as expected; otherwise compare `nvidia-smi topo -m` with what NCCL sees "
            "(NCCL_TOPO_DUMP_FILE).",
        ref="NVIDIA/nccl src/graph/search.cc ncclTopoCompute `Could not find a path for pattern %d, falling back to "
            "simple order` (2.8-2.30)",
        examples=("node-1:77:90 [0] graph/search.cc:1127 NCCL WARN Could not find a path for pattern 4, falling back "
                  "to simple order",),
    ),
    Pattern(
        id="nccl.graph_file_set",
        code=NCCL_GRAPH_FILE.code,
        severity=WARNING,
        needle="GRAPH_FILE set by environment",
        regex=r"NCCL_GRAPH_FILE set by environment to (?P<path>\S{1,400})",
        subject="NCCL_GRAPH_FILE",
        message="NCCL_GRAPH_FILE is set to {path}: NCCL takes its rings and trees from that file instead of searching "
                "this machine's topology; a file written for another machine or GPU count fails the communicator "
                "or runs it several times slower.",
        meaning="Azure's NCv4 images set it in /etc/nccl.conf: with fewer GPUs than the file names NCCL fails "
                "(`XML Import Channel : dev 1 not found`); on one NC48ads_A100_v4 nccl-tests ran at about 58 GB/s "
                "with it and 220 GB/s without.",
        fix="Unset NCCL_GRAPH_FILE (environment, /etc/nccl.conf, ~/.nccl.conf); keep NCCL_TOPO_FILE.",
        ref="NVIDIA/nccl src/misc/param.cc `%s set by environment to %s`; https://github.com/NVIDIA/nccl/issues/1240, "
            "https://github.com/NVIDIA/nccl/issues/1008 (\"should never be set in production\"); "
            "https://github.com/Azure/azurehpc/pull/730 (58 vs 220 GB/s)",
        examples=("Spotllm:73025:73112 [0] NCCL INFO NCCL_GRAPH_FILE set by environment to /opt/microsoft/ncv4/graph.xml",),
    ),
    Pattern(
        id="nccl.graph_import_dev",
        code=NCCL_GRAPH_FILE.code,
        severity=ERROR,
        needle="XML Import Channel",
        regex=r"XML Import Channel : dev (?P<dev>-?\d{1,19}) not found",
        subject="graph file, GPU {dev}",
        message="The graph NCCL was given (NCCL_GRAPH_FILE) puts GPU {dev} in a channel, and this communicator "
                "has no such GPU: the file was written for another machine or more GPUs, and the communicator "
                "cannot be made.",
        meaning="NCCL returns ncclSystemError; the job fails at its first collective.",
        fix="Unset NCCL_GRAPH_FILE (environment, /etc/nccl.conf, ~/.nccl.conf); keep NCCL_TOPO_FILE.",
        ref="NVIDIA/nccl src/graph/search.cc ncclTopoGetChannelFromXml `XML Import Channel : dev %d not found.` "
            "(2.6-2.30); https://github.com/Azure/azhpc-images/issues/327",
        examples=("::16674:17023 [0] graph/search.cc:703 NCCL WARN XML Import Channel : dev 1 not found.",),
        follows=("nccl.graph_file_set",),
        symptom_after=(NCCL_GRAPH_FILE.code,),
    ),
    Pattern(
        id="nccl.max_shared_mem",
        code=NCCL_CUDA_FAILED.code,
        severity=ERROR,
        needle="exceeds device/fn maxSharedMem",
        regex=r"ncclMaxSharedMem (?P<need>\d{1,9}) exceeds device/fn maxSharedMem (?P<has>\d{1,9})",
        subject="CUDA",
        message="NCCL's kernels need {need} bytes of shared memory per block and this GPU allows {has}: this NCCL "
                "cannot run its kernels on this GPU (NCCL 2.25 on consumer Blackwell GPUs such as the RTX 5090).",
        meaning="Collectives fail or hang from the first one; the network is not involved.",
        fix="Use an NCCL release that supports the GPU (2.26 or later for the RTX 50 series): a newer PyTorch wheel or "
            "`pip install nvidia-nccl-cu12>=2.26`.",
        ref="NVIDIA/nccl src/enqueue.cc ncclInitKernelsForDevice `ncclMaxSharedMem %d exceeds device/fn maxSharedMem %zu` "
            "(2.19-2.30); https://github.com/tinygrad/open-gpu-kernel-modules/issues/29",
        examples=("test:259034:259124 [0] NCCL INFO ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856",),
    ),
    Pattern(
        id="nccl.cuda_alloc_failed",
        code=NCCL_CUDA_FAILED.code,
        severity=ERROR,
        needle="Failed to CUDA",
        regex=r"Failed to CUDA (?P<call>calloc|malloc|host alloc) (?P<bytes>\d{1,19}) bytes",
        subject="CUDA",
        message="NCCL could not allocate {bytes} bytes with CUDA ({call}): the GPU's memory (or pinned host "
                "memory) is exhausted when NCCL makes its buffers.",
        meaning="The communicator cannot be made (ncclUnhandledCudaError); its peers then see closed "
                "connections. The network is not involved.",
        fix="Make the communicators before the model fills the GPU (init_process_group and a first collective "
            "before loading), or leave memory free (a smaller batch, activation checkpointing); `nvidia-smi` shows "
            "whether another process holds the GPU. Many communicators or channels cost memory too: fewer process "
            "groups, or NCCL_BUFFSIZE / NCCL_MAX_NCHANNELS lower.",
        ref="NVIDIA/nccl src/include/alloc.h ncclCudaCalloc / ncclCudaHostCalloc `Failed to CUDA calloc %ld "
            "bytes`, `Failed to CUDA host alloc %ld bytes` (2.12-2.30); https://github.com/NVIDIA/nccl/issues/1235",
        examples=("ng30903:3063028:3066152 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes",
                  "node-1:77:90 [0] include/alloc.h:60 NCCL WARN Failed to CUDA host alloc 2097152 bytes"),
        follows=("nccl.cuda_failure",),
        symptom_after=("nccl.cuda_failure",),
    ),
    # -- IB port failover and recovery (2.29.7+, 2.30) ---------------------------------------------
    Pattern(
        id="nccl.ib_port_failover",
        code=NCCL_IB_PORT_FAILOVER.code,
        severity=WARNING,
        needle="marked as failed",
        regex=r"NET/IB: (?:\w{1,80}: )?Device (?P<dev>\d{1,3}) marked as failed\.(?: Initiating recovery\? "
              r"(?P<recovery>Yes|No))? \((?P<side>send|recv) comm=(?P<comm>\w{1,20})",
        subject="device {dev} of the {side} communicator",
        message="NCCL marked device {dev} of a {side} communicator (comm={comm}) as failed and moved its traffic to the "
                "other devices of that NIC{recovery_said}: the job runs on fewer devices from here on, at their bandwidth.",
        meaning="The job did not stop, and nothing else says it slowed down: one device of a merged NIC carries no "
                "traffic until NCCL recovers it (2.30, NCCL_IB_RESILIENCY_PORT_RECOVERY=1) or the job restarts.",
        fix=NCCL_IB_PORT_FAILOVER.fix,
        ref="NVIDIA/nccl src/transport/net_ib/p2p_resiliency.cc ncclIbResiliencyHandleDeviceFailure: `NET/IB: %s: Device "
            "%d marked as failed. (%s comm=%p)` (2.29.7), `NET/IB: Device %d marked as failed. Initiating recovery? %s "
            "(%s comm=%p, outstandingRecovery=%d)` (2.30)",
        examples=(
            "gpu-3:812:901 [2] transport/net_ib/p2p_resiliency.cc:312 NCCL WARN NET/IB: ncclIbResiliencyHandleDeviceFailure: "
            "Device 1 marked as failed. (send comm=0x7f3a2c001230)",
            "gpu-3:812:901 [2] transport/net_ib/p2p_resiliency.cc:376 NCCL WARN NET/IB: Device 1 marked as failed. "
            "Initiating recovery? Yes (recv comm=0x7f3a2c004560, outstandingRecovery=0)",
        ),
        derive=lambda g: {"recovery_said": {"Yes": " (recovery is on: NCCL will try to bring it back)",
                                            "No": " (recovery is off: it stays out until the job restarts)"}.get(g.get("recovery", ""), "")},
        versions="NCCL 2.29.7+",
    ),
    Pattern(
        id="nccl.ib_port_recovered",
        code=NCCL_IB_PORT_RECOVERED.code,
        severity=INFO,
        needle="has been recovered",
        regex=r"NET/IB: \w{1,80}: Device (?P<dev>\d{1,3}) has been recovered for resiliency context \((?P<side>send|recv) "
              r"comm=(?P<comm>\w{1,20})",
        subject="device {dev} of the {side} communicator",
        message="NCCL recovered device {dev} of a {side} communicator (comm={comm}): it carries traffic again.",
        meaning=NCCL_IB_PORT_RECOVERED.meaning,
        fix=NCCL_IB_PORT_RECOVERED.fix,
        ref="NVIDIA/nccl src/transport/net_ib/p2p_resiliency.cc (2.30) `NET/IB: %s: Device %d has been recovered for "
            "resiliency context (%s comm=%p, outstandingRecovery=%d)` (INFO, NCCL_DEBUG_SUBSYS=NET)",
        examples=("gpu-3:812:901 [2] NCCL INFO NET/IB: ncclIbResiliencyProgress: Device 1 has been recovered for resiliency "
                  "context (send comm=0x7f3a2c001230, outstandingRecovery=0)",),
        versions="NCCL 2.30+",
    ),
    Pattern(
        id="nccl.ib_failover_devices_lost",
        code=NCCL_IB_FAILOVER_FATAL.code,
        severity=ERROR,
        needle="failed devices out of",
        regex=r"Detected (?P<failed>\d{1,3}) failed devices out of (?P<total>\d{1,3}) devices on the (?P<side>send|recv) "
              r"communicator",
        subject="{side} communicator",
        message="NCCL found {failed} of the {total} devices of a {side} communicator failed; its failover handles one: the "
                "communicator fails (ncclRemoteError) and the job stops.",
        meaning=NCCL_IB_FAILOVER_FATAL.meaning,
        fix=NCCL_IB_FAILOVER_FATAL.fix,
        ref="NVIDIA/nccl src/transport/net_ib/p2p_resiliency.cc ncclIbResiliencyCheckErrorNotFatal (2.30) `NET/IB: Fatal "
            "error. Detected %d failed devices out of %d devices on the %s communicator (comm=%p). No support for more than "
            "a single failed device.`",
        examples=("gpu-3:812:901 [2] transport/net_ib/p2p_resiliency.cc:47 NCCL WARN NET/IB: Fatal error. Detected 2 failed "
                  "devices out of 4 devices on the send communicator (comm=0x7f3a2c001230). No support for more than a "
                  "single failed device.",),
        versions="NCCL 2.30+",
    ),
    Pattern(
        id="nccl.ib_failover_fatal",
        code=NCCL_IB_FAILOVER_FATAL.code,
        severity=ERROR,
        needle="The error is fatal (",
        regex=r"NET/IB: (?:\w{1,80}: )?The error is fatal \((?P<why>No functional devices left|Fatal error status in work "
              r"completion)\)\. Cannot continue",
        subject="NET/IB failover",
        message="NCCL's port failover gave up: {why}. The communicator fails and the job stops.",
        meaning=NCCL_IB_FAILOVER_FATAL.meaning,
        fix=NCCL_IB_FAILOVER_FATAL.fix,
        ref="NVIDIA/nccl src/transport/net_ib/p2p_resiliency.cc ncclIbResiliencyCheckErrorNotFatal `NET/IB: %s: The error "
            "is fatal (%s). Cannot continue.` (2.29.7), without the function name (2.30)",
        examples=("gpu-3:812:901 [2] NCCL WARN NET/IB: The error is fatal (No functional devices left). Cannot continue.",
                  "gpu-3:812:901 [2] NCCL WARN NET/IB: ncclIbResiliencyCheckErrorNotFatal: The error is fatal (Fatal error "
                  "status in work completion). Cannot continue."),
        versions="NCCL 2.29.7+",
    ),
    # -- how ranks were placed -------------------------------------------------------------------
    Pattern(
        id="nccl.duplicate_gpu",
        code=NCCL_DUPLICATE_GPU.code,
        severity=ERROR,
        needle="Duplicate GPU detected",
        regex=r"Duplicate GPU detected : rank (?P<rank>\d{1,7}) and rank (?P<other>\d{1,7}) both on CUDA device "
              r"(?P<busid>[0-9a-fA-F]{1,16})",
        subject="CUDA device {busid}",
        message="Ranks {rank} and {other} are both on the GPU with bus id {busid} of one host: NCCL needs one GPU per "
                "rank and refused to create the communicator (invalid usage).",
        meaning="The job stops at its first collective; the rank-to-GPU mapping is wrong, not the network.",
        fix="Call `torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"]))` before init_process_group; run no more "
            "ranks per host than it has GPUs; do not give every rank the same CUDA_VISIBLE_DEVICES.",
        ref="NVIDIA/nccl src/init.cc initTransportsRank `Duplicate GPU detected : rank %d and rank %d both on CUDA "
            "device %lx` -> ncclInvalidUsage (2.5-2.30)",
        examples=(
            "ubuntu1583:1585 [0] init.cc:738 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device "
            "1000",
            "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 60",
        ),
    ),
    Pattern(
        id="nccl.invalid_rank",
        code=NCCL_INVALID_RANK.code,
        severity=ERROR,
        needle="Invalid rank requested",
        regex=r"Invalid rank requested : (?P<rank>-?\d{1,7})/(?P<nranks>-?\d{1,7})",
        subject="rank {rank}",
        message="A rank asked for position {rank} in a communicator of {nranks} ranks (valid: 0 to one less than its "
                "size): NCCL refused (invalid argument).",
        meaning="The communicator is never created; RANK and WORLD_SIZE disagree.",
        fix="Let the launcher set RANK and WORLD_SIZE (torchrun --nnodes/--nproc_per_node/--node_rank); WORLD_SIZE "
            "must be nodes x ranks per node and every RANK unique below it.",
        ref="NVIDIA/nccl src/init.cc ncclCommInitRankDev `Invalid rank requested : %d/%d` -> ncclInvalidArgument "
            "(2.5-2.30)",
        examples=("node-1:40:40 [0] init.cc:1612 NCCL WARN Invalid rank requested : 8/8",),
    ),
)


# ---- Sockets (2.23-2.30), GCP's socket plugins, and NCCL 2.30's new WARNs --------------------------
# Kept apart from the rows above so that additions there and here do not touch the same lines.

CODES = CODES + (NCCL_NET_COUNT_MISMATCH, NCCL_GCP_NET_PLUGIN)  # type: ignore[assignment]  # a longer tuple


# A GCP plugin's line that reports a failure is not its healthy note (the error reader, or a row, takes it).
_NOT_A_FAILURE = r"(?![^\n]{0,160}?(?:[Ff]ail|[Ee]rror|[Tt]imeout|not ready|[Uu]nable|[Cc]ould not|[Cc]annot))"

PATTERNS = PATTERNS + (
    Pattern(
        id="nccl.socket_poll_failed",
        code=NCCL_SOCKET_ERROR.code,
        severity=ERROR,
        needle="socketPollConnect poll() ",
        # The `... to %s failed with error` forms (2.27-2.30) are nccl.socket_connect_failed's.
        regex=r"socketPollConnect poll\(\) failed with error (?P<error>[^\n]{1,200}?)\s*$",
        subject="connect",
        message="NCCL's connect to a peer failed while it waited for the socket (poll): {error}. The rank cannot "
                "reach that peer's bootstrap or proxy socket.",
        meaning="The communicator is not created; NCCL reports a system error (ncclSystemError) to the framework.",
        fix="Check that the peer is reachable from this pod on the interface NCCL uses (NCCL_SOCKET_IFNAME; `nc -vz "
            "<ip> <port>` between the pods), and that no NetworkPolicy or firewall drops its ephemeral ports.",
        ref="NVIDIA/nccl src/misc/socket.cc socketPollConnect `socketPollConnect poll() failed with error %s` (2.23-2.26)",
        examples=("node-1:55:120 [1] misc/socket.cc:580 NCCL WARN socketPollConnect poll() failed with error Invalid "
                  "argument",),
    ),
    Pattern(
        id="nccl.socket_poll_no_pollout",
        code=NCCL_SOCKET_ERROR.code,
        severity=ERROR,
        needle="socketPollConnect poll() ",
        regex=r"socketPollConnect poll\(\) returned (?P<ret>-?\d{1,6}), no POLLOUT events",
        subject="connect",
        message="NCCL's connect to a peer ended with an error on the socket instead of the connection (poll() returned "
                "{ret} without POLLOUT): the peer's host dropped or refused the TCP handshake.",
        meaning="NCCL 2.23-2.26 gives up at once (no retry): init fails on this rank; the peer is not reachable over "
                "TCP at that moment (SYN dropped, a firewall, a host that is not listening yet).",
        fix="Check TCP between the two hosts on NCCL's interface (NCCL_SOCKET_IFNAME, `nc -vz`), the peer's firewall and "
            "SYN backlog (net.core.somaxconn, net.ipv4.tcp_max_syn_backlog on large jobs); NCCL 2.27+ retries this case.",
        ref="NVIDIA/nccl src/misc/socket.cc socketPollConnect `socketPollConnect poll() returned %d%s` (2.23-2.26); "
            "https://github.com/NVIDIA/nccl/pull/1618 (a 1024-rank job whose peer dropped TCP SYN packets)",
        examples=("[0604/1024][2025-02-16 22:31:34,422] [misc/socket.cc:586] [s12gn3064:pid=3942408] NCCL WARN "
                  "socketPollConnect poll() returned 1, no POLLOUT events",),
    ),
    Pattern(
        id="nccl.socket_accept_failed",
        code=NCCL_SOCKET_ERROR.code,
        severity=ERROR,
        needle="ocketTryAccept: ",
        regex=r"(?:ncclOsS|s)ocketTryAccept: (?:Accept failed: (?P<error>[^\n]{1,200}?)|exceeded error retry count "
              r"(?:\((?P<n>\d{1,6})\)|after (?P<n2>\d{1,6}) attempts), (?P<error2>[^\n]{1,200}?))\s*$",
        subject="accept",
        message="NCCL could not accept a peer's connection on its listening socket: {why}.",
        meaning="A peer cannot connect to this rank; init fails or hangs. `Too many open files` is the process's file "
                "limit (every NCCL connection is a socket).",
        fix="`Too many open files`: raise the open-files limit of the job (`ulimit -n 1048576`, LimitNOFILE in the "
            "runtime); otherwise the peer's connect error on the other side says more.",
        ref="NVIDIA/nccl src/misc/socket.cc socketTryAccept (2.19-2.28), src/os/linux.cc ncclOsSocketTryAccept "
            "`ncclOsSocketTryAccept: Accept failed: %s`, `... exceeded error retry count after %d attempts, %s` (2.29-2.30)",
        examples=(
            "node-1:55:120 [1] os/linux.cc:204 NCCL WARN ncclOsSocketTryAccept: Accept failed: Too many open files",
            "node-1:55:120 [1] misc/socket.cc:442 NCCL WARN socketTryAccept: exceeded error retry count (30), Resource "
            "temporarily unavailable",
        ),
        derive=lambda g: {"why": g.get("error") or f"{g.get('error2') or '?'} after "
                          f"{g.get('n') or g.get('n2') or 'its'} retries"},
    ),
    Pattern(
        id="nccl.net_count_mismatch",
        code=NCCL_NET_COUNT_MISMATCH.code,
        severity=ERROR,
        needle="Detected mixed local Net device counts",
        regex=r"Detected mixed local (?P<kind>Net|CollNet) device counts across ranks \(min (?P<min>\d{1,4}), max "
              r"(?P<max>\d{1,4})\)\. Set",
        subject="{kind} devices",
        message="The ranks' nodes offer different numbers of {kind} devices (from {min} to {max}): NCCL 2.30 refuses to "
                "build the communicator on unequal nodes.",
        meaning="Init fails with a system error; a node has lost NICs (or was given fewer), which would slow every "
                "collective to its rails.",
        fix="Find the node with fewer devices (NCCL's `Rank N has M local Net devices` lines) and restore its NICs; "
            "NCCL_IGNORE_NET_MISMATCH=1 runs on the unequal nodes anyway.",
        ref="NVIDIA/nccl src/init.cc initTransportsRank `Detected mixed local Net device counts across ranks (min %d, "
            "max %d). Set NCCL_IGNORE_NET_MISMATCH=1 to continue.` (2.30)",
        examples=("node-3:71:71 [0] init.cc:1339 NCCL WARN Detected mixed local Net device counts across ranks (min 7, "
                  "max 8). Set NCCL_IGNORE_NET_MISMATCH=1 to continue.",),
        versions="NCCL 2.30+",
    ),
    Pattern(
        id="nccl.ib_mlx5dv_create_qp",
        code=NCCL_QP_CQ_CREATE_FAILED.code,
        severity=ERROR,
        needle="mlx5dv_create_qp failed to create QP",
        regex=r"NET/IB: mlx5dv_create_qp failed to create QP: (?P<error>[^\n]{1,120}?)\s*$",
        subject="mlx5dv_create_qp",
        message="NCCL could not create a queue pair through mlx5's direct-verbs call (used for out-of-order receive): "
                "{error}.",
        meaning="The IB transport cannot connect: init fails (internal error). `Cannot allocate memory` is the "
                "locked-memory limit or the HCA's resources; `Operation not supported` a NIC or firmware without it.",
        fix="Raise memlock (`ulimit -l unlimited`, IPC_LOCK in a pod); on a NIC that lacks the feature set "
            "NCCL_IB_OOO_RQ=0 so NCCL creates ordinary QPs.",
        ref="NVIDIA/nccl src/transport/net_ib/connect.cc ncclIbCreateQpDv `NET/IB: mlx5dv_create_qp failed to create "
            "QP: %m` (2.30)",
        examples=("node-1:91:150 [0] transport/net_ib/connect.cc:372 NCCL WARN NET/IB: mlx5dv_create_qp failed to create "
                  "QP: Cannot allocate memory",),
        versions="NCCL 2.30+",
    ),
    # -- 2.29 / 2.30's new WARNs that matter for RDMA training (NVIDIA/nccl v2.29.2-1 .. v2.30.7-1) --------------
    Pattern(
        id="nccl.ib_incompatible_devices",
        code=NCCL_MIXED_LINK_LAYERS.code,
        severity=ERROR,
        needle="incompatible",
        regex=r"NET/IB : (?:Attempted to (?P<act>connect|merge) incompatible devices: \[\d{1,4}\](?P<dev>[\w.-]{1,64}):\d{1,3}/"
              r"(?P<ll>IB|RoCE|UNSPECIFIED) and \[\d{1,4}\](?P<dev2>[\w.-]{1,64}):\d{1,3}/(?P<ll2>IB|RoCE|UNSPECIFIED)"
              r"|Remote (?P<rll>IB|RoCE|UNSPECIFIED) device is incompatible with the local \[\d{1,4}\](?P<ldev>[\w.-]{1,64}):"
              r"\d{1,3}/(?P<lll>IB|RoCE|UNSPECIFIED))",
        subject="{pair}",
        message="NCCL refused to {act_text} {pair}: one is an InfiniBand port, the other RoCE (Ethernet), and NCCL's IB "
                "transport cannot mix link layers on one connection.",
        meaning="The connection (or the merged NIC) is not made: init fails with an internal error.",
        fix="Keep NCCL on the ports of one fabric: NCCL_IB_HCA naming only the InfiniBand (or only the RoCE) devices, "
            "the same list on every node; `ibv_devinfo | grep link_layer` shows each port's.",
        ref="NVIDIA/nccl src/transport/net_ib/connect.cc:987,1522 `NET/IB : Attempted to connect incompatible devices: "
            "[%d]%s:%d/%s and [%d]%s:%d/%s. Try selecting NICs of only one link type using NCCL_IB_HCA`, connect.cc:1034,1535 "
            "`NET/IB : Remote %s device is incompatible with the local [%d]%s:%d/%s. ...`, init.cc:250 `... Attempted to "
            "merge incompatible devices ...` (2.29.2-2.30.7)",
        examples=(
            "gpu-2:4101:4188 [3] transport/net_ib/connect.cc:987 NCCL WARN NET/IB : Attempted to connect incompatible "
            "devices: [1]mlx5_1:1/RoCE and [0]mlx5_0:1/IB. Try selecting NICs of only one link type using NCCL_IB_HCA",
            "gpu-2:4101:4188 [3] transport/net_ib/connect.cc:1034 NCCL WARN NET/IB : Remote RoCE device is incompatible "
            "with the local [0]mlx5_0:1/IB. Try selecting NICs of only one link type using NCCL_IB_HCA",
        ),
        derive=lambda g: {
            "act_text": "merge into one NIC" if g.get("act") == "merge" else "connect",
            "pair": (f"{g['dev']} ({g.get('ll', '')}) and {g.get('dev2', '')} ({g.get('ll2', '')})" if g.get("dev")
                     else f"{g.get('ldev') or 'a local device'} ({g.get('lll', '')}) and a remote {g.get('rll', '')} device"),
        },
        versions="NCCL 2.29+",
    ),
    Pattern(
        id="nccl.ras_version_mismatch",
        code=NCCL_RANKS_MISMATCH.code,
        severity=ERROR,
        needle="NCCL version mismatch with remote peer",
        regex=r"NCCL version mismatch with remote peer (?P<peer>\S{1,300}) \(local: (?P<local>[\d.]{1,16}), remote "
              r"(?P<remote>[\d.]{1,16})\)",
        subject="NCCL {local} and {remote}",
        message="NCCL's RAS found a peer process ({peer}) running NCCL {remote} while this one runs {local}: the job's "
                "ranks do not run the same NCCL.",
        meaning="Ranks on different NCCL releases can disagree on what they exchange: init fails or collectives hang "
                "(RAS closes that connection at once).",
        fix="Run every rank from the same image (or the same NCCL in LD_LIBRARY_PATH); each rank's `NCCL version` line "
            "must be the same.",
        ref="NVIDIA/nccl src/ras/ras.cc:415 rasNetAcceptNewSocket `NCCL version mismatch with remote peer %s (local: %s, "
            "remote %s)` (version strings from 2.29; numbers `%d` in 2.24-2.28, ras.cc:428)",
        examples=("gpu-7:2210:2299 [0] ras/ras.cc:415 NCCL WARN NCCL version mismatch with remote peer 10.0.3.17<37211> "
                  "(local: 2.30.7, remote 2.28.9)",
                  "gpu-7:2210:2299 [0] ras/ras.cc:428 NCCL WARN NCCL version mismatch with remote peer 10.0.3.17<37211> "
                  "(local: 22809, remote 22703)"),
    ),
    Pattern(
        id="nccl.ib_cqe_error",
        code=NCCL_IB_COMPLETION_ERROR.code,
        severity=ERROR,
        needle="Got CQE with error",
        # 2.29.7+ prints it before the completion's status line (nccl.wc_error), which says what failed.
        regex=r"NET/IB: Got CQE with error \(devIndex=(?P<dev>\d{1,3}), req=\w{1,20}, comm=\w{1,20} \((?P<side>send|recv)\), "
              r"wr_id=\d{1,20}, qp_num=(?P<qpn>\d{1,10})\)",
        subject="{side} QP {qpn}",
        message="A work request of a {side} connection completed with an error (device {dev}, QP {qpn}); the status "
                "line NCCL prints next says which.",
        meaning="Without port failover the communicator fails (ncclRemoteError, or a system error); with "
                "NCCL_IB_RESILIENCY_PORT_FAILOVER=1 NCCL may replay it on another device.",
        fix="Read the `Got completion from peer ... status=` line after it: IBV_WC_RETRY_EXC_ERR (12) is the link or the "
            "peer, IBV_WC_LOC_PROT_ERR (4) GPUDirect RDMA.",
        ref="NVIDIA/nccl src/transport/net_ib/p2p.cc:854 ncclIbTest `NET/IB: Got CQE with error (devIndex=%d, req=%p, "
            "comm=%p (%s), wr_id=%lu, qp_num=%d)` (2.29.7-2.30.7)",
        examples=("gpu-3:812:901 [2] transport/net_ib/p2p.cc:854 NCCL WARN NET/IB: Got CQE with error (devIndex=1, "
                  "req=0x7f3a2c0a1200, comm=0x7f3a2c001230 (send), wr_id=3, qp_num=4711)",),
        symptom=True,
        versions="NCCL 2.29.7+",
    ),
    Pattern(
        id="nccl.ib_failover_no_device",
        code=NCCL_IB_FAILOVER_FATAL.code,
        severity=ERROR,
        needle="Could not find a ",
        regex=r"NET/IB: Could not find a (?P<what>replacement QP for the failed QP|functional device to post the probe)",
        subject="NET/IB failover",
        message="NCCL's port failover found no working device left for the {what_text}: the communicator fails and the "
                "job stops.",
        meaning=NCCL_IB_FAILOVER_FATAL.meaning,
        fix=NCCL_IB_FAILOVER_FATAL.fix,
        ref="NVIDIA/nccl src/transport/net_ib/p2p_resiliency.cc:116 `NET/IB: Could not find a replacement QP for the "
            "failed QP with qpIndex=%d (devIndex=%d)`, :488 `NET/IB: Could not find a functional device to post the probe "
            "for request %p (id=%ld)` (2.29.7-2.30.7)",
        examples=("gpu-3:812:901 [2] transport/net_ib/p2p_resiliency.cc:116 NCCL WARN NET/IB: Could not find a replacement "
                  "QP for the failed QP with qpIndex=0 (devIndex=1)",
                  "gpu-3:812:901 [2] transport/net_ib/p2p_resiliency.cc:488 NCCL WARN NET/IB: Could not find a functional "
                  "device to post the probe for request 0x7f3a2c0a1200 (id=17)"),
        derive=lambda g: {"what_text": "queue pair it had to replace" if g.get("what", "").startswith("replacement")
                          else "probe of a failed request"},
        versions="NCCL 2.29.7+",
    ),
    Pattern(
        id="nccl.ib_failover_probes",
        code=NCCL_IB_FAILOVER_FATAL.code,
        severity=ERROR,
        needle="probing attempts",
        regex=r"NET/IB: Maximum number of probing attempts \((?P<n>\d{1,9})\) reached",
        subject="NET/IB failover",
        message="NCCL's port failover probed a failed request {n} times without an answer from the peer: the "
                "communicator fails (remote error) and the job stops.",
        meaning="The peer did not answer on any device: its node, or the fabric between the two, is down.",
        fix="Check the peer's node and every port between the two (`rdmadoctor check --sample 10` on both); "
            "NCCL_IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS raises the number of probes.",
        ref="NVIDIA/nccl src/transport/net_ib/p2p_resiliency.cc:460 `NET/IB: Maximum number of probing attempts (%ld) "
            "reached for request %p (id=%ld). Cannot post another probe.` -> ncclRemoteError (2.29.7-2.30.7)",
        examples=("gpu-3:812:901 [2] transport/net_ib/p2p_resiliency.cc:460 NCCL WARN NET/IB: Maximum number of probing "
                  "attempts (10) reached for request 0x7f3a2c0a1200 (id=17). Cannot post another probe.",),
        versions="NCCL 2.29.7+",
    ),
    Pattern(
        id="nccl.ib_ooo_rq_forced",
        code=NCCL_QP_CQ_CREATE_FAILED.code,
        severity=ERROR,
        needle="OOO RQ is force enabled but",
        regex=r"NET/IB: OOO RQ is force enabled but (?P<why>AR is not enabled|not supported on both sides of the "
              r"connection)[^\n]{0,80}?\(device=(?P<dev>[\w.-]{1,64})",
        subject="{dev}",
        message="NCCL_IB_OOO_RQ=1 forces out-of-order receive queues, and on {dev} {why_text}: NCCL does not create the "
                "queue pairs.",
        meaning="The IB transport cannot connect: init fails (internal error).",
        fix="Unset NCCL_IB_OOO_RQ (NCCL then uses out-of-order receive only where both sides support it), or enable "
            "adaptive routing on the fabric and use NICs with it on every node.",
        ref="NVIDIA/nccl src/transport/net_ib/connect.cc:670 `NET/IB: OOO RQ is force enabled but AR is not enabled, "
            "which is required for OOO RQ (device=%s)`, :676 `... but not supported on both sides of the connection "
            "(device=%s, localOooRq=%d, remOooRq=%d)` (2.30)",
        examples=("gpu-1:91:150 [0] transport/net_ib/connect.cc:670 NCCL WARN NET/IB: OOO RQ is force enabled but AR is "
                  "not enabled, which is required for OOO RQ (device=mlx5_0)",
                  "gpu-1:91:150 [0] transport/net_ib/connect.cc:676 NCCL WARN NET/IB: OOO RQ is force enabled but not "
                  "supported on both sides of the connection (device=mlx5_0, localOooRq=1, remOooRq=0)"),
        derive=lambda g: {"why_text": "adaptive routing (AR) is off, which it needs" if g.get("why", "").startswith("AR")
                          else "the peer's NIC does not support it"},
        versions="NCCL 2.30+",
    ),
    Pattern(
        id="nccl.multi_rank_gpu",
        code=NCCL_DUPLICATE_GPU.code,
        severity=ERROR,
        needle="Multiple Ranks are using the same GPU",
        regex=r"Multiple Ranks are using the same GPU/Partition",
        subject="GPU",
        message="Two ranks of the communicator are on the same GPU (or MIG partition): NCCL 2.30 refuses unless "
                "NCCL_MULTI_RANK_GPU_ENABLE=1 (invalid usage).",
        meaning="The job stops at its first collective; the rank-to-GPU mapping is wrong, not the network.",
        fix=NCCL_DUPLICATE_GPU.fix,
        ref="NVIDIA/nccl src/init.cc:1057 `Multiple Ranks are using the same GPU/Partition. Set "
            "NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.` -> ncclInvalidUsage (2.30; `Duplicate GPU "
            "detected` before)",
        examples=("ubuntu1583:1585:1585 [0] init.cc:1057 NCCL WARN Multiple Ranks are using the same GPU/Partition. Set "
                  "NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.",),
        versions="NCCL 2.30+",
    ),
    Pattern(
        id="nccl.net_socket_truncated",
        code=NCCL_RANKS_MISMATCH.code,
        severity=ERROR,
        needle="message truncated : receiving",
        regex=r"NET/Socket : peer (?P<peer>\S{1,300}) message truncated : receiving (?P<got>\d{1,12}) bytes instead of "
              r"(?P<want>\d{1,12})",
        subject="NET/Socket",
        message="NCCL's socket transport received {got} bytes from {peer} where it expected {want}: the two ranks are "
                "not running the same collective (sizes, NCCL_PROTO / NCCL_ALGO, NCCL version).",
        meaning="The collective fails on this rank; the network is not at fault.",
        fix=NCCL_RANKS_MISMATCH.fix,
        ref="NVIDIA/nccl src/transport/net_socket.cc:636 `NET/Socket : peer %s message truncated : receiving %d bytes "
            "instead of %d. If you believe your socket network is in a healthy state, there may be a mismatch in "
            "collective sizes or environment settings ...` (2.29.2-2.30.7)",
        examples=("node-2:301:399 [2] transport/net_socket.cc:636 NCCL WARN NET/Socket : peer 10.0.0.7<38212> message "
                  "truncated : receiving 1048576 bytes instead of 65536. If you believe your socket network is in a "
                  "healthy state, there may be a mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, "
                  "NCCL_ALGO) between ranks",),
        versions="NCCL 2.29+",
    ),
    Pattern(
        id="nccl.gin_no_gdr",
        code=GDR_PEERMEM_MISSING,
        severity=ERROR,
        needle="Unable to use GIN: ",
        regex=r"Unable to use GIN: Peermem is not supported, and device (?P<gpu>\d{1,3}) does not support DMA-BUF",
        subject="GPU {gpu}",
        message="NCCL's GPU-initiated networking (GIN) needs GPU memory the NIC can reach, and GPU {gpu} has neither "
                "nvidia_peermem nor DMA-BUF: the communicator that asked for GIN fails (invalid usage).",
        meaning="Device-API kernels that need GIN (and their collectives) cannot run on this node.",
        fix="`modprobe nvidia-peermem`, or a kernel (5.12+) and driver with DMA-BUF for GPU memory; "
            "`rdmadoctor check` on the node says which is missing.",
        ref="NVIDIA/nccl src/transport/net_ib/gin.cc:42 ncclGinIbGdrGpuSupport `Unable to use GIN: Peermem is not "
            "supported, and device %d does not support DMA-BUF.` -> ncclInvalidUsage (2.29.7-2.30.7)",
        examples=("gpu-1:91:150 [0] transport/net_ib/gin.cc:42 NCCL WARN Unable to use GIN: Peermem is not supported, and "
                  "device 0 does not support DMA-BUF.",),
        versions="NCCL 2.29.7+",
    ),
    Pattern(
        id="nccl.gcp_tcpxo",
        code=NCCL_GCP_NET_PLUGIN.code,
        severity=INFO,
        needle="NET/FasTrak",
        regex=r"NET/FasTrak\b" + _NOT_A_FAILURE,
        subject="FasTrak",
        message="NCCL uses GCP's GPUDirect-TCPXO plugin (FasTrak): the transport A3 Mega VMs are built for (the NIC "
                "writes into GPU memory over TCP), not RDMA and not a fallback; its NICs' `GPU Direct RDMA Disabled` "
                "lines are expected.",
        meaning="Inter-node traffic runs over the VM's eight GPU NICs as designed.",
        fix="Nothing to fix; check that every GPU NIC is listed (NCCL_FASTRAK_IFNAME) for full bandwidth.",
        ref="Google's GPUDirect-TCPXO NCCL plugin tcpdirect_plugin/fastrak_offload/init.cc (every message through NCCL's "
            "logger as `NET/FasTrak %s: %s`, time then text; `Initializing network FasTrak, version: %d.%d.%d`); a "
            "teardown log quoted in a public test: `NCCL INFO NET/FasTrak: SCTP Closed`",
        examples=("node-0-0:870:938 [0] NCCL INFO NET/FasTrak: SCTP Closed",
                  "node-0-0:870:938 [0] NCCL INFO NET/FasTrak: Socket closed, handler exiting.",
                  "node-0-0:870:870 [0] NCCL INFO NET/FasTrak 2025-03-04T10:12:33.123456-08:00: Initializing network "
                  "FasTrak, version: 1.0.15"),
    ),
    Pattern(
        id="nccl.gcp_tcpxo_rxdm",
        code=NCCL_NET_PLUGIN_LOAD_FAILED.code,
        severity=ERROR,
        needle="RxDM not ready on ",
        regex=r"Timeout: RxDM not ready on (?P<host>\S{1,255}) after (?P<s>\d{1,6}) seconds",
        subject="FasTrak RxDM",
        message="GCP's TCPXO plugin (FasTrak) waited {s} s for the receive-datapath manager (RxDM) on {host} and it never "
                "answered: the plugin does not start, and NCCL goes on without GPUDirect-TCPXO.",
        meaning="Inter-node traffic falls back to plain sockets over one NIC (a small share of the bandwidth), or the job "
                "fails where the other nodes use TCPXO.",
        fix="Run the TCPXO daemon beside the job (the `tcpxo-daemon` container of Google's GKE manifests, with "
            "/dev/aperture_devices and its host network), then restart the job; `kubectl logs <pod> -c tcpxo-daemon`.",
        ref="Google's GPUDirect-TCPXO NCCL plugin tcpdirect_plugin/fastrak_offload/init.cc WaitForRxDM (LOG(WARNING) "
            "`Timeout: RxDM not ready on %s after %d seconds: %s`, logged as `NET/FasTrak %s: %s`)",
        examples=("node-0-0:870:870 [0] NCCL WARN NET/FasTrak 2025-03-04T10:22:33.123456-08:00: Timeout: RxDM not ready on "
                  "node-0-0 after 600 seconds: UNAVAILABLE: failed to connect to all addresses",),
        explains_fallback=True,
    ),
    Pattern(
        id="nccl.gcp_fastsocket",
        code=NCCL_GCP_NET_PLUGIN.code,
        severity=INFO,
        needle="FastSocket ",  # its anchor is "Socket " (not "ET/FastSocket", a near match on every NET/IB line)
        regex=r"NET/FastSocket (?::|plugin initialized)" + _NOT_A_FAILURE,
        subject="FastSocket",
        message="NCCL uses GCP's FastSocket plugin: the inter-node transport Google Cloud's GPU VMs without RDMA NICs "
                "are built for (many TCP flows over gVNIC), not a fallback from RDMA; its NICs' `GPU Direct RDMA "
                "Disabled` lines are expected.",
        meaning="Bandwidth is what TCP over the VM's NICs gives; there is no InfiniBand to fall back from.",
        fix="Nothing to fix; on A3 VMs GPUDirect-TCPX(O) gives more bandwidth than FastSocket.",
        ref="google/nccl-fastsocket (`NET/FastSocket plugin initialized`, `NET/FastSocket : Using ...`); "
            "https://github.com/NVIDIA/nccl/issues/651, https://github.com/NVIDIA/nccl/issues/1519",
        examples=(
            "a100-4-4-0-train0:1:439 [0] NCCL INFO NET/FastSocket plugin initialized",
            "nathan-h100-1:13878:13953 [0] NCCL INFO NET/FastSocket : GPU Direct RDMA Disabled for HCA 0 'eth0'",
        ),
    ),
    Pattern(
        id="nccl.gcp_tcpx",
        code=NCCL_GCP_NET_PLUGIN.code,
        severity=INFO,
        needle="DirectTCPX",
        regex=r"(?:NET/GPUDirectTCPX(?:_v\d{1,2})? (?::|ver\.)|Using network GPUDirectTCPX)" + _NOT_A_FAILURE,
        subject="GPUDirectTCPX",
        message="NCCL uses GCP's GPUDirect-TCPX plugin: the transport A3 VMs are built for (the NIC writes into GPU "
                "memory over TCP), not RDMA and not a fallback; its NICs' `GPU Direct RDMA Disabled` lines are expected.",
        meaning="Inter-node traffic runs over the VM's GPU NICs as designed.",
        fix="Nothing to fix; check that every GPU NIC is listed (NCCL_GPUDIRECTTCPX_SOCKET_IFNAME) for full bandwidth.",
        ref="google/nccl-plugin-gpudirecttcpx src/net_tcpx.cc (`NET/GPUDirectTCPX ver. %s`, `NET/GPUDirectTCPX : ...`); "
            "https://github.com/google/nccl-plugin-gpudirecttcpx/issues/1",
        examples=(
            "NCCL INFO NET/GPUDirectTCPX ver. 3.1.8.",
            "NCCL INFO NET/GPUDirectTCPX : GPUDirectTCPX enable: 1",
            "NCCL INFO Using network GPUDirectTCPX_v7",
        ),
    ),
)
