"""MPI launchers and the transports beside NCCL in a job's log: UCX, libfabric (OFI, and
aws-ofi-nccl), NVSHMEM.

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import CONFIG, Code

# MPI launchers and ssh (rdmadoctor/logs/kb/mpi.py).
MPI_LAUNCH_FAILED = Code(
    "MPI_LAUNCH_FAILED",
    "The launcher could not start the job's processes on every node",
    "mpirun (ORTE in Open MPI 4, PRRTE in 5) starts a daemon on each node over ssh (or the cluster's "
    "launcher: Slurm, a Kubernetes MPIJob's launcher pod) and the ranks under it; PMIx carries their "
    "wire-up. A node it could not reach (ssh refused, a key or host name that does not work, a worker "
    "pod not yet resolvable), a daemon that died, a port a firewall blocks or a PMIx that cannot start "
    "stops the job before NCCL runs.",
    "Follow the line the launcher quotes: test `ssh <worker> hostname` from the launcher (key, its mode "
    "0600, the sshd port, the worker's DNS name), check that Open MPI is installed at the same path on "
    "every node, open the ports between the nodes, and for Kubernetes MPIJobs that the worker pods are "
    "Running before the launcher starts.",
    condition=CONFIG,
)

MPI_TRANSPORT_FAILED = Code(
    "MPI_TRANSPORT_FAILED",
    "The MPI library could not start or use its network transport",
    "Each MPI library reaches the fabric through its own layer: Open MPI through a PML (ucx, ob1 with its BTLs: "
    "openib, tcp, vader) or an MTL (ofi, psm2); Intel MPI and MPICH through OFI (libfabric) providers (mlx, verbs, psm3, "
    "tcp); MVAPICH2 through its own verbs channel. When that layer cannot open the NIC, finds no provider, or cannot "
    "create its queues, MPI_Init aborts (or the library drops to a slower path), before or beside NCCL: Horovod, "
    "DeepSpeed and MPIJob launchers use MPI for setup.",
    "Read the lines before it for the device-level reason (a verbs or UCX error, `ulimit -l`, a missing "
    "/dev/infiniband/uverbs*). Check the transport the library picks: `ucx_info -d` (Open MPI's UCX), `fi_info` "
    "(Intel MPI, MPICH: FI_PROVIDER / I_MPI_OFI_PROVIDER), `ibv_devinfo` (an ACTIVE port). To confirm, run once over "
    "TCP (`-mca pml ob1 -mca btl tcp,self,vader`, I_MPI_FABRICS=shm:ofi with FI_PROVIDER=tcp).",
    condition=CONFIG,
)

# UCX (rdmadoctor/logs/kb/ucx.py).
UCX_IB_RESOURCE_FAILED = Code(
    "UCX_IB_RESOURCE_FAILED",
    "UCX could not create an RDMA resource or register memory",
    "UCX (under Open MPI, UCC, RAPIDS) asked the HCA for a completion queue, a queue pair or a memory "
    "registration and the verbs call failed. With `Cannot allocate memory` it is almost always the "
    "locked-memory limit (every queue and registration pins memory); the transport on that device is "
    "then unusable and UCX falls back to TCP or fails the job.",
    "Raise the locked-memory limit for the job: add IPC_LOCK to the container "
    "(securityContext.capabilities.add: [IPC_LOCK]) or run with `ulimit -l unlimited` (LimitMEMLOCK=infinity "
    "for the container runtime, `--ulimit memlock=-1:-1` for docker). Check with `ulimit -l` inside the job.",
    condition=CONFIG,
)

VERBS_REG_MEMORY_LIMITED = Code(
    "VERBS_REG_MEMORY_LIMITED",
    "The RDMA driver lets a process register only part of the memory",
    "Open MPI measured how much memory the HCA driver lets it register and found less than the host has: "
    "the driver's memory-translation tables are sized too small (mlx4_core's log_num_mtt and "
    "log_mtts_per_seg on ConnectX-3 and older), or the locked-memory limit is low. Jobs that register "
    "more run with erratic performance, hang or crash.",
    "Raise the driver's limits so that all memory can be registered (for mlx4_core: `options mlx4_core "
    "log_num_mtt=... log_mtts_per_seg=...` in /etc/modprobe.d, sized as Open MPI's FAQ item on "
    "ib-locked-pages says, then reload the driver) and run with `ulimit -l unlimited`.",
    condition=CONFIG,
)

# libfabric and aws-ofi-nccl (rdmadoctor/logs/kb/ofi.py).
OFI_NO_PROVIDER = Code(
    "OFI_NO_PROVIDER",
    "aws-ofi-nccl found no libfabric provider to use",
    "The libfabric plugin asked libfabric for a provider that can carry NCCL's traffic (EFA on AWS) and got "
    "none: the EFA device is not in the container, libfabric lacks the provider, or FI_PROVIDER names one that "
    "is not there. NCCL then skips the plugin and falls back to its own IB transport or to sockets.",
    "In the pod, request the EFA devices (vpc.amazonaws.com/efa: N in resources.limits) and check "
    "`fi_info -p efa`; use the libfabric of the EFA installer (/opt/amazon/efa) in LD_LIBRARY_PATH; unset a "
    "wrong FI_PROVIDER.",
    condition=CONFIG,
)
OFI_ERROR = Code(
    "OFI_ERROR",
    "aws-ofi-nccl (libfabric) failed",
    "The libfabric plugin reported a failure of a libfabric call (fi_* returning a negative errno: an "
    "endpoint, an address vector, a domain, a completion). The communicator that needed it fails or hangs.",
    "The message names the call and the errno. `Invalid argument` on an endpoint or AV usually means a "
    "libfabric / plugin / EFA driver version mismatch: use the EFA installer's libfabric and the plugin built "
    "for it; `Cannot allocate memory` is the locked-memory limit (IPC_LOCK, `ulimit -l unlimited`).",
    condition=CONFIG,
)

# NVSHMEM (rdmadoctor/logs/kb/nvshmem.py).
NVSHMEM_IBGDA_UNAVAILABLE = Code(
    "NVSHMEM_IBGDA_UNAVAILABLE",
    "NVSHMEM's GPU-initiated RDMA (IBGDA) cannot use a NIC",
    "IBGDA lets GPU threads post RDMA work to the NIC themselves (DeepEP's low-latency kernels need it). "
    "For that the NIC must be an mlx5 device, NVSHMEM must place its queues and buffers in GPU memory "
    "(GPU memory registered with the HCA: nvidia_peermem or DMA-BUF) and the GPU must map the NIC's "
    "doorbell (UAR) pages, which the NVIDIA driver allows only with its PeerMappingOverride option. "
    "A device it cannot use is skipped; without any, IBGDA falls back to the CPU proxy or fails.",
    "For the UAR mapping set the driver option `options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1;\"` "
    "(in /etc/modprobe.d, then reload the driver); for buffers, load nvidia_peermem or use a kernel and driver "
    "with DMA-BUF (NVSHMEM_IB_ENABLE_IBGDA=1 with CUDA 12+); a non-mlx5 NIC (erdma, EFA) cannot do IBGDA: "
    "use NVSHMEM's IBRC/UCX transport instead.",
    condition=CONFIG,
)
NVSHMEM_IBGDA_RESOURCE_FAILED = Code(
    "NVSHMEM_IBGDA_RESOURCE_FAILED",
    "NVSHMEM could not create its GPU-initiated queues on the NIC",
    "IBGDA builds its queue pairs, completion queues and doorbells itself, through mlx5's device-level interface "
    "(mlx5dv / DevX: `mlx5dv_devx_obj_create`, `mlx5dv_devx_alloc_uar`, registered umem), with their buffers in GPU "
    "memory. When one of them cannot be made (the NIC's UAR pages or QPs are used up by many PEs per NIC, the locked-"
    "memory limit, GPU memory the NIC cannot register, an address handle to a peer's GID that does not resolve), "
    "NVSHMEM's setup fails and DeepEP's kernels never start.",
    "Raise the locked-memory limit (`ulimit -l unlimited`, IPC_LOCK in a pod); load nvidia_peermem or use DMA-BUF; "
    "run fewer PEs per NIC or fewer QPs (NVSHMEM_IBGDA_NUM_RC_PER_PE, NVSHMEM_IBGDA_NUM_DCI); for `Unable to create ah` "
    "check the RoCE GID (NVSHMEM_IB_GID_INDEX) and that `ib_write_bw` works between the hosts.",
    condition=CONFIG,
)
