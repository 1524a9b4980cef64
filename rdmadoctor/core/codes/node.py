"""The node and the pod around the RDMA stack: kernel modules (kernel.modules) and the kernel's
log lines, the container's limits (limits.memlock, shm.size), the Node's labels (node.labels)
and what Kubernetes says in a job's log.

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import CONFIG, COULD_NOT_DECIDE, GPUDIRECT, INFORMATION, LINK, PROBLEM, Code

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

# limits.memlock, shm.size (checks/limits.py).
_IPC_LOCK_YAML = (
    "securityContext:\n"
    "  capabilities:\n"
    "    add: [\"IPC_LOCK\"]\n"
)
_RAISE_DEFAULT = (
    "Kubernetes has no ulimit field: pods inherit the container runtime's own limit, so raise it on "
    "every node. containerd:\n"
    "  mkdir -p /etc/systemd/system/containerd.service.d\n"
    "  printf '[Service]\\nLimitMEMLOCK=infinity\\n' > /etc/systemd/system/containerd.service.d/memlock.conf\n"
    "  systemctl daemon-reload && systemctl restart containerd\n"
    "CRI-O: in /etc/crio/crio.conf, [crio.runtime] default_ulimits = [\"memlock=-1:-1\"], then "
    "`systemctl restart crio`. Docker: `docker run --ulimit memlock=-1:-1 ...`."
)

MEMLOCK_LIMITED = Code(
    "MEMLOCK_LIMITED",
    "Locked-memory limit (RLIMIT_MEMLOCK) binds RDMA and is too low",
    "RDMA memory registration (ibv_reg_mr) pins pages, and the kernel counts them against "
    "RLIMIT_MEMLOCK for a process without CAP_IPC_LOCK. A container's default (64 KiB or 8 MiB) "
    "is exhausted at once: ibv_reg_mr fails with ENOMEM and NCCL reports 'Cannot allocate memory' "
    "or 'ibv_reg_mr failed', or falls back to sockets. Seen only when the job's process has a "
    "finite limit below the expectation and does not hold CAP_IPC_LOCK.",
    "Either fix is complete. In the pod, when the container runs as root: add IPC_LOCK, and the "
    "kernel stops applying the limit to RDMA registrations:\n" + _IPC_LOCK_YAML
    + "(Docker: `--cap-add IPC_LOCK`). A non-root container does not get added capabilities in its "
    "effective set, so for it raise the limit instead. " + _RAISE_DEFAULT + "\nIf only the soft limit is low, `ulimit -l unlimited` in "
    "the entrypoint before the launcher raises it.",
    kind="problem",
)
MEMLOCK_UNREADABLE = Code(
    "MEMLOCK_UNREADABLE",
    "Locked-memory limit could not be read",
    "Could not decide: neither /proc/self/limits, a recorded `ulimit -a` nor runtime.json gave "
    "the memlock limit, and the process is not known to hold CAP_IPC_LOCK (which would make the "
    "limit irrelevant for RDMA). Whether ibv_reg_mr can pin memory is unknown.",
    "Run the check inside the training container (`rdmadoctor check --only limits`), or record "
    "the bundle there with `rdmadoctor collect`, which keeps /proc/self/limits and /proc/self/status.",
    kind="unknown",
)
MEMLOCK_BYPASSED_BY_IPC_LOCK = Code(
    "MEMLOCK_BYPASSED_BY_IPC_LOCK",
    "Memlock limit does not bind: the process holds CAP_IPC_LOCK",
    "The memlock limit is below the expectation (or unreadable), but the process that runs the job "
    "holds CAP_IPC_LOCK in its effective set: the kernel does not count RDMA registrations against "
    "RLIMIT_MEMLOCK for it (ib_umem_get in drivers/infiniband/core/umem.c), so ibv_reg_mr is not "
    "limited. This is the usual recipe for pods (IPC_LOCK added, the runtime's default limit kept).",
    "Nothing to fix for RDMA. Keep IPC_LOCK in the pod spec; a process that drops it (another user, "
    "`setpriv`, a non-root entrypoint) would be held to the limit.",
    kind="info",
)
CAP_IPC_LOCK_MISSING = Code(
    "CAP_IPC_LOCK_MISSING",
    "CAP_IPC_LOCK not in the effective capabilities",
    "With CAP_IPC_LOCK the kernel lets RDMA pin memory past RLIMIT_MEMLOCK (ib_umem_get skips the "
    "limit for a capable process); without it every registration counts against the limit. It is "
    "the capability the NVIDIA network operator and most RDMA pod examples add. Seen only when the "
    "capabilities were read and the bit is not set (or the job runs as another user, who does not "
    "inherit it).",
    "Add it to the container:\n" + _IPC_LOCK_YAML
    + "(Docker: `--cap-add IPC_LOCK`). A non-root container only gets it in its effective set when "
    "the process runs as root or the capability is made ambient.",
    kind="problem",
)
CAPS_UNREADABLE = Code(
    "CAPS_UNREADABLE",
    "Capabilities could not be read",
    "Could not decide: the memlock limit is low (or unknown), and whether it binds RDMA depends on "
    "CAP_IPC_LOCK, but no CapEff was found in /proc/self/status or runtime.json (or, for a job that "
    "runs as root under a non-root check, no CapBnd).",
    "Run the check inside the training container, or record the bundle there with `rdmadoctor "
    "collect`, which keeps /proc/self/status.",
    kind="unknown",
)
# The pod-spec lines that give /dev/shm room (SHM_TOO_SMALL's fix; checks/limits.py's remedies).
SHM_YAML = (
    "volumes:\n"
    "- name: dshm\n"
    "  emptyDir: {medium: Memory, sizeLimit: 16Gi}\n"
    "containers:\n"
    "- volumeMounts:\n"
    "  - {name: dshm, mountPath: /dev/shm}\n"
    "(Docker: `--shm-size=16g` or `--ipc=host`)."
)
SHM_TOO_SMALL = Code(
    "SHM_TOO_SMALL",
    "/dev/shm too small",
    "NCCL's shared-memory transport (and its proxy buffers, and PyTorch DataLoader workers) live "
    "in /dev/shm. The container default of 64 MiB is exhausted at once: NCCL fails with "
    "'unhandled system error' (shm_open / posix_fallocate ENOSPC) or the process dies of a bus error.",
    "Mount a memory-backed emptyDir on /dev/shm in the pod spec:\n" + SHM_YAML,
    kind="problem",
)
SHM_NEARLY_FULL = Code(
    "SHM_NEARLY_FULL",
    "/dev/shm nearly full",
    "/dev/shm is big enough but less than half of the expected size is free: files left by earlier "
    "jobs (NCCL segments, DataLoader tensors) fill it, and the next job's shm_open/posix_fallocate "
    "fails with ENOSPC: 'unhandled system error' or a bus error.",
    "Find and remove the leftovers: `ls -la /dev/shm` (`rm /dev/shm/nccl-*` when no job runs), or "
    "restart the pod; if the space is really used, give /dev/shm a larger sizeLimit in the pod spec.",
    kind="problem",
)
SHM_UNREADABLE = Code(
    "SHM_UNREADABLE",
    "/dev/shm size could not be read",
    "Could not decide: /dev/shm is not mounted in this process, or the bundle has neither a shm_size "
    "in runtime.json nor a recorded `df /dev/shm`. Whether NCCL's shared-memory transport has room "
    "is unknown.",
    "Run the check inside the training container, or record the bundle there with `rdmadoctor "
    "collect`; a pasted bundle needs `df -h /dev/shm > cmd/df-shm.txt`.",
    kind="unknown",
)

# node.labels (checks/node.py).
NODE_LABEL_MISSING = Code(
    "NODE_LABEL_MISSING",
    "Node label missing",
    "The node does not carry a label rdmadoctor computes for it. Schedulers and nodeSelectors that "
    "rely on it (rdmadoctor.io/ready=true, feature.node.kubernetes.io/network-rdma.capable=true) skip "
    "the node, or a DaemonSet meant for RDMA nodes does not land on it.",
    "Run the rdmadoctor agent (it publishes the labels), or set it by hand: "
    "`kubectl label node <name> <key>=<value> --overwrite`.",
    kind=PROBLEM,
)
NODE_LABEL_STALE = Code(
    "NODE_LABEL_STALE",
    "Node label out of date",
    "The node carries an rdmadoctor (or NFD RDMA) label whose value no longer matches the node: jobs "
    "are scheduled on a node that lost a port or GPUDirect, or kept off one that was repaired.",
    "`kubectl label node <name> <key>=<value> --overwrite` (or `kubectl label node <name> <key>-` to "
    "remove it), or let the rdmadoctor agent publish the labels.",
    kind=PROBLEM,
)
NODE_OBJECT_UNREADABLE = Code(
    "NODE_OBJECT_UNREADABLE",
    "Node object unreadable",
    "cmd/node.json is not a Node object as `kubectl get node <name> -o json` prints it, so the labels "
    "it carries cannot be compared.",
    "Record it again: `kubectl get node <name> -o json > cmd/node.json`.",
    kind=COULD_NOT_DECIDE,
)
LABEL_INVALID = Code(
    "LABEL_INVALID",
    "Computed label refused",
    "A label value computed from this node's facts breaks the Kubernetes label rules (63 characters, "
    "alphanumerics, '-', '_', '.'); it is left out rather than published half-valid.",
    "Report it with `rdmadoctor collect`: a value from an odd tool output slipped through.",
    kind=PROBLEM,
)
NODE_LABELS = Code(
    "NODE_LABELS",
    "Node labels",
    "The labels rdmadoctor computes for this node.",
    "Nothing to fix.",
    kind=INFORMATION,
)

# Kubernetes' words in a log (rdmadoctor/logs/kb/k8s.py).
K8S_UNSCHEDULABLE = Code(
    "K8S_UNSCHEDULABLE",
    "The training pod cannot be scheduled: no node has what it requests free",
    "The scheduler found no node with the requested resources free (`Insufficient rdma/hca`, "
    "`Insufficient nvidia.com/gpu`), or a gang scheduler (Volcano) cannot place the whole gang or the "
    "queue's quota is smaller than the job. The pods stay Pending and the job never starts.",
    "`kubectl describe node <n>` shows each node's Allocatable and Allocated resources: a resource at 0 "
    "everywhere means its device plugin offers nothing (see RDMA_DEVICE_PLUGIN_EMPTY); otherwise other "
    "pods hold it, or the request is larger than one node. For Volcano, the queue's capability must "
    "include every resource the job requests.",
    condition=CONFIG,
)
RDMA_DEVICE_PLUGIN_EMPTY = Code(
    "RDMA_DEVICE_PLUGIN_EMPTY",
    "The RDMA (or SR-IOV) device plugin offers no device on this node",
    "The device plugin found no device matching its resource's selectors, or the devices it matched "
    "lack what it needs (the RDMA character devices under /dev/infiniband, RDMA modules not loaded): "
    "the node advertises 0 of the resource, and pods that request it stay Pending.",
    "Check the node side first: `ls /dev/infiniband` (uverbs*, rdma_cm), `lsmod | grep -e ib_uverbs "
    "-e rdma_ucm`; then the plugin's selectors (vendors, deviceIDs, ifNames, drivers) against `lspci "
    "-nn` and `ip link`: a VF binds to mlx5_core, an ifName must exist on the node.",
    condition=CONFIG,
)
POD_NETWORK_FAILED = Code(
    "POD_NETWORK_FAILED",
    "The pod's secondary network (Multus, SR-IOV, macvlan) could not be attached",
    "The pod's sandbox could not be created because a CNI plugin failed to attach the network the "
    "job's RDMA traffic uses: no VF was allocated to it, the CNI binary is missing on the node, the "
    "IP pool is exhausted, or the network type does not fit the interface (macvlan on IPoIB).",
    "Read the CNI's words in the event: request the SR-IOV resource the NetworkAttachmentDefinition "
    "names (its k8s.v1.cni.cncf.io/resourceName), install the CNI plugin binaries on every node "
    "(/opt/cni/bin), free or widen the whereabouts range, use ipoib-cni for IPoIB.",
    condition=CONFIG,
)
NODE_DRIVER_FAILED = Code(
    "NODE_DRIVER_FAILED",
    "The node's RDMA or GPU driver could not be installed, loaded or bring up its device",
    "Either the network operator's OFED/DOCA driver container (or the EFA, GPU operator equivalents) could "
    "not build, download or load the kernel modules for this node's kernel, or the kernel driver itself "
    "failed to bring up a function (mlx5_core's `probe of <bdf> failed`): the node has no RDMA device from "
    "it until it does, and NCCL and MPI use the rest, or TCP.",
    "A driver container: read its log (`kubectl logs -n <operator-namespace> <driver-pod>`); a kernel with "
    "no prebuilt driver needs its headers and package repositories reachable from the container (or a "
    "precompiled image for this kernel); a module that fails to load conflicts with an inbox one "
    "(blacklist it, see the operator's docs). A failed probe on the host: `dmesg | grep mlx5_core` names "
    "the step; check the firmware against the driver (`mlxfwmanager --query`, the driver's release "
    "notes), then reload (`modprobe -r mlx5_ib mlx5_core && modprobe mlx5_core`) or cold-boot the node.",
    condition=CONFIG,
)
