"""GPUs, the NICs near them and the PCIe links between them (gpu.topology, pci.link).

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import COULD_NOT_DECIDE, INFORMATION, PROBLEM, Code

# gpu.topology (checks/gpu.py).
GPU_NIC_FAR = Code(
    "GPU_NIC_FAR",
    "GPU far from its nearest RDMA device",
    "Every GPU should have an HCA on its own PCIe switch (PIX) or at least below the same root port (PXB): "
    "GPUDirect RDMA then moves data between GPU memory and the network without crossing the CPU. Through "
    "a host bridge (PHB), across host bridges (NODE) or across sockets (SYS), NCCL either disables "
    "GPUDirect RDMA for that GPU (NCCL_NET_GDR_LEVEL defaults to PXB) and stages through host memory, or "
    "pushes the traffic through the CPU: inter-node bandwidth of that GPU drops, and a collective runs at "
    "the speed of its slowest GPU. A GPU with NVLink to one that has an HCA near is not flagged where "
    "the input shows the NVLinks (a recorded `nvidia-smi topo -m`): NCCL's PXN (2.12+) sends its data over "
    "NVLink to that GPU, which sends it with GPUDirect RDMA.",
    "Check that no HCA is missing (ib.devices) and that the GPUs and HCAs sit in the slots the platform "
    "pairs (the vendor's PCIe topology or riser map); `rdmadoctor topo` prints the matrix. Make sure "
    "NCCL_IB_HCA does not exclude the near HCA. If the layout is intended (a PCIe server with one NIC per "
    "socket), accept it in the config: gpu_nic_max = \"NODE\" (or \"SYS\").",
    kind=PROBLEM,
)
GPU_COUNT_LOW = Code(
    "GPU_COUNT_LOW",
    "Fewer GPUs than expected",
    "The node shows fewer GPUs on the PCI bus than its profile expects: a GPU fell off the bus, failed "
    "to enumerate after a reset, or is held by another driver (vfio-pci). A job sized for the full node "
    "will not start, or will start on fewer ranks.",
    "Count them: `lspci -d 10de: | grep -i -e 3d -e vga` (AMD: `lspci -d 1002:`), `nvidia-smi -L`. "
    "`dmesg | grep -i -e NVRM -e Xid` shows a GPU that fell off the bus (Xid 79). Try `nvidia-smi -r -i <n>` "
    "or a node reboot; if it stays missing, drain the node for hardware service. If the node really has "
    "fewer GPUs, set expected_gpus in the config.",
    kind=PROBLEM,
)
TOPO_PARSE_ERROR = Code(
    "TOPO_PARSE_ERROR",
    "nvidia-smi topo -m output not readable",
    "The recorded `nvidia-smi topo -m` matrix is malformed (cut off, columns missing, rows of different "
    "lengths): reading it anyway could pair a GPU with the wrong NIC, so it is not used.",
    "Record it again in full: `nvidia-smi topo -m > cmd/nvidia-smi-topo.txt`, or better collect a bundle "
    "with `rdmadoctor collect` (it keeps /sys, from which the matrix is computed).",
    kind=PROBLEM,
)
GPU_COUNT_UNKNOWN = Code(
    "GPU_COUNT_UNKNOWN",
    "GPU count could not be established",
    "The profile expects a number of GPUs (expected_gpus), but the input has no PCI tree in /sys and no "
    "readable `nvidia-smi topo -m`, so how many GPUs the node has cannot be decided.",
    "On the node: `nvidia-smi -L` (AMD: `rocm-smi --showid`) or `lspci -d 10de:`. In a bundle: collect it "
    "with `rdmadoctor collect` (it keeps /sys), or add `nvidia-smi topo -m` as cmd/nvidia-smi-topo.txt.",
    kind=COULD_NOT_DECIDE,
)
GPU_NIC_UNKNOWN = Code(
    "GPU_NIC_UNKNOWN",
    "GPU to RDMA device distance could not be decided",
    "The GPU and the RDMA devices sit below different PCIe host bridges and the platform does not report "
    "their NUMA node (numa_node -1, common in VMs and on some single-socket boards), so NODE (same socket) "
    "and SYS (across sockets) cannot be told apart, and gpu_nic_max (NODE) cannot be judged.",
    "`nvidia-smi topo -m` on the node says NODE or SYS; `cat /sys/bus/pci/devices/<bdf>/numa_node` shows "
    "what the platform reports (enable NUMA / SRAT in the BIOS, or give the VM a NUMA topology). If either "
    "is acceptable, set gpu_nic_max = \"SYS\" in the config.",
    kind=COULD_NOT_DECIDE,
)
GPU_NIC_MAX_INVALID = Code(
    "GPU_NIC_MAX_INVALID",
    "gpu_nic_max is not a topology level",
    "The expectation gpu_nic_max must be one of PIX, PXB, PHB, NODE, SYS (`nvidia-smi topo -m` terms); "
    "with another value the GPU to RDMA device distance cannot be judged.",
    "Fix gpu_nic_max in the config or the --set value, e.g. gpu_nic_max = \"PXB\".",
    kind=COULD_NOT_DECIDE,
)
GPU_NIC_NEAR = Code(
    "GPU_NIC_NEAR",
    "Every GPU has a near RDMA device",
    "Each GPU has an RDMA device at gpu_nic_max (PXB by default) or nearer: GPUDirect RDMA can move data "
    "between GPU memory and the network without crossing the CPU.",
    "Nothing to fix.",
    kind=INFORMATION,
)

# pci.link (checks/pci.py).
PCIE_LINK_DEGRADED = Code(
    "PCIE_LINK_DEGRADED",
    "PCIe link below its capability",
    "The link trained at a lower speed or with fewer lanes than both of its ends support. An x8 link "
    "halves, a Gen4 link on a Gen5 path halves the bandwidth between the device and the rest of the "
    "node: a 400 Gb/s HCA needs Gen5 x16 (or Gen4 x16 for 200 Gb/s) to run at line rate, and GPUDirect "
    "RDMA through the same switch is capped by the slowest link on the path.",
    "Check both ends: `lspci -s <bdf> -vv | grep -e LnkCap -e LnkSta` (as root). Fewer lanes is almost "
    "always physical: reseat the card, check the riser or cable, the slot's bifurcation setting in the "
    "BIOS. A lower speed: the BIOS slot speed setting, a retimer, or signal errors (`dmesg | grep -i aer`); "
    "for an HCA `mlxlink -d <bdf> --port_type PCIE` shows the link's eye and errors. A link that is "
    "still degraded after a cold boot needs hardware service.",
    kind=PROBLEM,
)
PCIE_ACS_ENABLED = Code(
    "PCIE_ACS_ENABLED",
    "ACS redirect on a bridge between a GPU and an HCA",
    "Access Control Services request/completion redirect is on for a PCIe bridge between a GPU and an "
    "HCA: peer-to-peer transactions are sent up to the root complex (and through the IOMMU) instead of "
    "across the switch. GPUDirect RDMA and GPU peer traffic either fail or collapse to a fraction of "
    "their bandwidth; NCCL may hang or fall back to staging through host memory.",
    "Now (until reboot, as root): `setpci -s <bdf> ECAP_ACS+0x6.w=0000` for each bridge reported. For "
    "good: turn ACS off in the BIOS (often 'PCIe ACS Control' or under IOMMU/virtualization settings), or "
    "boot Linux (>= 5.1) with `pci=disable_acs_redir=<bdf>;<bdf>` naming the bridges; the kernel enables "
    "ACS redirect when the IOMMU is on, so bare-metal training nodes usually also run with the IOMMU off "
    "or in passthrough (`intel_iommu=off` / `amd_iommu=off`, or `iommu=pt`).",
    kind=PROBLEM,
)

PCIE_GPU_LINK_IDLE = Code(
    "PCIE_GPU_LINK_IDLE",
    "GPU link at a lower speed while idle",
    "The GPU's PCIe link runs below its maximum speed with all its lanes: GPUs (NVIDIA and AMD) lower "
    "the link speed when idle to save power and raise it under load. This is normal and costs nothing.",
    "Nothing to fix. To see the speed under load: `nvidia-smi -q -d PCIE` while a job runs (Link Gen "
    "Current), or `lspci -s <bdf> -vv | grep LnkSta`.",
    kind=INFORMATION,
)
PCIE_ACS_NO_PEERS = Code(
    "PCIE_ACS_NO_PEERS",
    "ACS redirect on a bridge, with no GPU and HCA pair to affect",
    "A recorded lspci shows ACS request/completion redirect on a PCIe bridge, but the listing has no GPU "
    "and RDMA device pair whose peer-to-peer traffic it could send up to the root complex, so it does "
    "not slow GPUDirect RDMA on this node.",
    "Nothing to fix for RDMA. If GPUs or HCAs are added, see `rdmadoctor explain PCIE_ACS_ENABLED`.",
    kind=INFORMATION,
)
