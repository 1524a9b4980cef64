"""Kernel modules (kernel.modules) and the kernel's own log lines (dmesg, journal).

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import COULD_NOT_DECIDE, GPUDIRECT, INFORMATION, LINK, PROBLEM, Code

# kernel.modules (checks/kernel.py).
MOD_MISSING = Code(
    "MOD_MISSING",
    "RDMA kernel module not loaded",
    "Without ib_core/ib_uverbs there is no RDMA device for userspace; without rdma_ucm librdmacm "
    "(UCX, MPI) cannot connect; without the HCA's IB driver (mlx5_ib for ConnectX) the NIC works as "
    "Ethernet only and /sys/class/infiniband stays empty.",
    "Load it now and at every boot:\n"
    "  modprobe <module>\n"
    "  echo <module> >> /etc/modules-load.d/rdma.conf\n"
    "With MLNX_OFED / DOCA-OFED: `/etc/init.d/openibd restart`. With the NVIDIA network operator, its "
    "MOFED driver container loads them: check its pod on the node.",
    kind=PROBLEM,
)
GDR_PEERMEM_MISSING = Code(
    "GDR_PEERMEM_MISSING",
    "GPUDirect RDMA not available (no nvidia_peermem)",
    "GPUDirect RDMA lets the HCA read and write GPU memory directly. It needs nvidia_peermem (or the "
    "old nv_peer_mem), or dma-buf (the open NVIDIA kernel module on kernel >= 5.12). Without it NCCL "
    "stages every transfer through host memory: no 'GDRDMA' in NCCL_DEBUG=INFO and a fraction of the bandwidth.",
    "`modprobe nvidia-peermem` (it ships with the NVIDIA driver >= 470) and persist it: "
    "`echo nvidia-peermem > /etc/modules-load.d/nvidia-peermem.conf`. With the GPU Operator: "
    "`helm upgrade gpu-operator nvidia/gpu-operator -n gpu-operator --reuse-values --set driver.rdma.enabled=true` "
    "(add `--set driver.rdma.useHostMofed=true` when MLNX_OFED is installed on the host).",
    condition=GPUDIRECT,
    kind=PROBLEM,
)
GDR_DMABUF = Code(
    "GDR_DMABUF",
    "GPUDirect RDMA through dma-buf",
    "No nvidia_peermem, but the open NVIDIA kernel module on a kernel >= 5.12 exports GPU memory as "
    "dma-buf, which NCCL >= 2.19 uses for GPUDirect RDMA by default (NCCL_DMABUF_ENABLE=1).",
    "Nothing to do; if NCCL_DEBUG=INFO shows no 'GDRDMA', check NCCL_DMABUF_ENABLE is not 0, or load nvidia-peermem.",
    condition=GPUDIRECT,
    kind=INFORMATION,
)
MODULES_UNKNOWN = Code(
    "MODULES_UNKNOWN",
    "Loaded kernel modules could not be read",
    "Neither /proc/modules, a recorded lsmod nor /sys/module could be read, so whether the RDMA modules "
    "(ib_core, ib_uverbs, rdma_ucm, the HCA's IB driver) and GPUDirect RDMA (nvidia_peermem) are loaded "
    "cannot be decided. This is missing evidence, not a finding about the node.",
    "On the node: `lsmod | grep -e ib_ -e rdma -e mlx -e peermem`. In a bundle: add `lsmod` as "
    "cmd/lsmod.txt, or collect it with `rdmadoctor collect` (it keeps /proc/modules).",
    kind=COULD_NOT_DECIDE,
)

# The kernel's words in a log (rdmadoctor/logs/kb/kernel.py).
NIC_LINK_DOWN = Code(
    "NIC_LINK_DOWN",
    "A network port lost its link while the node was in use",
    "The kernel driver (`mlx5_core ...: Link down`) or NCCL (an IB `port error` event) saw a port go "
    "down: a cable, transceiver or switch-port problem, a switch reboot, or a flapping link. Traffic "
    "on the port stops; NCCL connections over it fail with completion errors or time out.",
    "Check the port now (`ibstat`, `ip link`, `mlxlink -d <dev> -m` for the module and BER, `ethtool -S "
    "<if> | grep -i -e link_down -e phy`) and the switch port's log; reseat or replace the cable or "
    "transceiver. A port that flaps repeatedly should be drained from scheduling until fixed.",
    condition=LINK,
)
MLX5_CMD_TIMEOUT = Code(
    "MLX5_CMD_TIMEOUT",
    "The ConnectX firmware stopped answering driver commands",
    "mlx5_core sent a command to the HCA's firmware and got no completion in time (`... timeout. Will "
    "cause a leak of a command resource`). The device's control plane is broken: creating queues, "
    "registering memory or resetting it hangs or fails, and jobs on the node fail.",
    "Drain the node. Collect `dmesg`, `mlxfwmanager --query` and `devlink health show`; try a firmware "
    "reset (`mlxfwreset -d <bdf> reset`) or a cold reboot, and update the firmware if it is old. If it "
    "comes back, the card needs replacing.",
    condition=LINK,
)
MLX5_HEALTH_ERROR = Code(
    "MLX5_HEALTH_ERROR",
    "A ConnectX device failed its health check",
    "mlx5_core's health poll found the firmware heartbeat stopped (`device's health compromised - "
    "reached miss count`) or the device reported a fatal syndrome (`synd 0x8: unrecoverable hardware "
    "error`, `Fatal error N detected`). The driver resets or disables the device; every RDMA "
    "connection on it is lost.",
    "Drain the node and collect `dmesg` and `devlink health show`. After a reboot check the firmware "
    "(`mlxfwmanager --query`) and the PCIe link (`lspci -vv -s <bdf>`); an `unrecoverable hardware "
    "error` that returns means the card must be replaced.",
    condition=LINK,
)
NIC_TX_TIMEOUT = Code(
    "NIC_TX_TIMEOUT",
    "A network interface's transmit queue stalled",
    "The kernel's netdev watchdog found a transmit queue that sent nothing for seconds (`NETDEV "
    "WATCHDOG ... transmit queue N timed out`) and asks the driver to recover it. mlx5 usually "
    "recovers, but traffic on the interface (RoCE, IPoIB, NCCL's sockets) stalls meanwhile; "
    "repeated timeouts mean a wedged NIC or firmware.",
    "Check for mlx5 health or command-timeout messages around it (`dmesg | grep mlx5`) and `ethtool -S "
    "<if>` for stuck queues; update the NIC firmware and driver. Repeated timeouts: drain the node "
    "and reset the device.",
    condition=LINK,
)
NIC_MODULE_EVENT = Code(
    "NIC_MODULE_EVENT",
    "The NIC reported a cable or transceiver problem",
    "mlx5's port module event says the cable or transceiver was unplugged, or is in error (power budget "
    "exceeded, high temperature, bad or shorted cable, unsupported cable). The port goes down or will "
    "not come up.",
    "Inspect the module: `mlxlink -d <dev> -m` (temperature, power, vendor), `ethtool -m <if>`; reseat "
    "or replace the cable/transceiver, use one the NIC supports, and check the airflow for high "
    "temperature.",
    condition=LINK,
)
PCIE_AER_ERROR = Code(
    "PCIE_AER_ERROR",
    "The kernel reported PCIe bus errors (AER)",
    "PCIe Advanced Error Reporting logged errors on a link. Corrected errors (bad TLPs/DLLPs, receiver "
    "errors, replays) cost bandwidth when they are frequent and often precede a link that trains "
    "down; uncorrected ones (completion timeouts, poisoned TLPs) can take the device (an HCA or a "
    "GPU) off the bus.",
    "Find the device (`lspci -s <bdf>`) and how often it happens (`grep -c AER` in dmesg, "
    "/sys/bus/pci/devices/<bdf>/aer_dev_*); check its link (`lspci -vv -s <bdf> | grep LnkSta`) and "
    "reseat the card or riser. Uncorrected errors on a GPU or HCA: drain the node for hardware service.",
)
GDR_PEERMEM_LOAD_FAILED = Code(
    "GDR_PEERMEM_LOAD_FAILED",
    "nvidia_peermem failed to load",
    "The module that gives the HCA access to GPU memory (GPUDirect RDMA) would not load: it was built "
    "against one RDMA stack (inbox ib_core) and the node runs another (MLNX_OFED/DOCA-OFED's ib_core), "
    "so the kernel rejects its symbols (`Unknown symbol ib_register_peer_memory_client`, `disagrees "
    "about version of symbol`). Without it NCCL stages every transfer through host memory.",
    "Rebuild the NVIDIA driver's kernel modules against the installed OFED (install OFED first, then "
    "the driver; or `dkms remove`/`dkms install` the nvidia module), then `modprobe nvidia_peermem`. "
    "With the GPU Operator set `driver.rdma.enabled=true` and `driver.rdma.useHostMofed=true` when OFED "
    "is on the host. Or skip peermem: DMA-BUF with the open kernel module and kernel >= 5.12.",
    condition=GPUDIRECT,
)
GDR_PEERMEM_INVALID_CONTEXT = Code(
    "GDR_PEERMEM_INVALID_CONTEXT",
    "nvidia-peermem got a free callback for an unknown registration",
    "nvidia-peermem's callback for freed GPU memory found a context it does not know (`ERROR detected "
    "invalid context, skipping further processing`): GPU memory registered with the HCA was released "
    "while, or after, the registration was torn down. Repeated messages go with GPUDirect RDMA "
    "transfers that hang or fail.",
    "Update the NVIDIA driver and the OFED stack to current releases; as a workaround use DMA-BUF "
    "instead of peermem (open kernel module, kernel >= 5.12, NCCL_DMABUF_ENABLE=1) or, to confirm, run "
    "with GPUDirect RDMA off (NCCL_NET_GDR_LEVEL=LOC).",
    condition=GPUDIRECT,
)

GPU_XID = Code(
    "GPU_XID",
    "The NVIDIA driver reported a GPU error (Xid), or a GPU stopped answering",
    "The driver logs an Xid for every GPU error it sees. Some are the application's (13, 31, 43: a kernel "
    "that faulted); others are the hardware's or the driver's: 79 (the GPU fell off the bus: it no "
    "longer answers, and `nvidia-smi` cannot find its handle), 48, 63, 64, 94, 95 (memory ECC), 74 "
    "(NVLink), 92 (high single-bit ECC), 119 and 120 (the GSP firmware). A job on that GPU hangs or "
    "dies, and its peers report NCCL timeouts or remote errors.",
    "Xid 79, 74, 94/95, 48, 119/120: drain the node, reset the GPU (`nvidia-smi -r -i <n>`) or reboot, "
    "and have the GPU checked if it repeats (`nvidia-bug-report.sh`). Xid 13/31/43: the application's "
    "fault; rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel.",
    condition=LINK,
)
