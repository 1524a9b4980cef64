"""NCCL and the job's logs: the job's NCCL settings (nccl.env), NCCL's own messages in a log,
nccl-tests, and the logs.diagnose check's own codes (what was read, pasted test output).

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import CONFIG, COULD_NOT_DECIDE, GPUDIRECT, INFORMATION, LINK, PROBLEM, Code

# nccl.env: the job's NCCL settings against this node (checks/nccl.py).
NCCL_IB_HCA_NO_MATCH = Code(
    "NCCL_IB_HCA_NO_MATCH",
    "NCCL_IB_HCA names no usable port",
    "NCCL only uses the ACTIVE ports NCCL_IB_HCA selects. An entry that names no device (a typo, a device "
    "renamed by the driver, mlx5_N vs ibpXsY naming) or a port that is down is silently skipped: the job "
    "runs on fewer rails, or with no port at all falls back to TCP sockets (`NET/IB : No device found`).",
    "Name the ACTIVE ports this node has (see `ibstat` / `rdma link`), exactly, in the pod spec:\n"
    "  env:\n  - name: NCCL_IB_HCA\n    value: \"=mlx5_0,mlx5_1\"\n"
    "A leading `=` makes NCCL match names exactly; `^` excludes; `dev:port` picks one port.",
    kind="problem",
)
NCCL_IB_HCA_PREFIX = Code(
    "NCCL_IB_HCA_PREFIX",
    "NCCL_IB_HCA entry is a prefix of other devices",
    "Information: without a leading `=`, NCCL matches NCCL_IB_HCA entries as prefixes: `mlx5_1` also selects (or with "
    "`^` also excludes) mlx5_10, mlx5_11, ... which is rarely what was meant on a node with 10+ HCAs.",
    "Write exact names: `NCCL_IB_HCA==mlx5_0,mlx5_1` (or `^=mlx5_1` to exclude only mlx5_1).",
    kind="info",
)
NCCL_SOCKET_IFNAME_NO_MATCH = Code(
    "NCCL_SOCKET_IFNAME_NO_MATCH",
    "NCCL_SOCKET_IFNAME matches no interface that is up",
    "NCCL bootstraps (and without RDMA, moves all data) over the interfaces NCCL_SOCKET_IFNAME selects. "
    "When none is up, NCCL fails at init with `Bootstrap : no socket interface found` or hangs.",
    "Set it to an interface that exists and is up in the job's network namespace (`ip -br link`); in a pod "
    "without hostNetwork that is usually eth0 (or net1 for a Multus network):\n"
    "  env:\n  - name: NCCL_SOCKET_IFNAME\n    value: \"=eth0\"",
    kind="problem",
)
NCCL_SOCKET_IFNAME_NO_ADDR = Code(
    "NCCL_SOCKET_IFNAME_NO_ADDR",
    "NCCL_SOCKET_IFNAME interfaces have no IP address",
    "NCCL only takes interfaces that carry an IPv4 or IPv6 address: an interface that is up without one "
    "is skipped, and NCCL fails with `Bootstrap : no socket interface found`.",
    "Give the interface an address (`ip addr add <ip>/<prefix> dev <if>`, or the CNI / Multus "
    "NetworkAttachmentDefinition's IPAM), or point NCCL_SOCKET_IFNAME at one that has an address.",
    kind="problem",
)
NCCL_IB_DISABLED_BY_ENV = Code(
    "NCCL_IB_DISABLED_BY_ENV",
    "RDMA disabled by the environment",
    "NCCL_IB_DISABLE=1 (or NCCL_NET=Socket) makes NCCL use TCP sockets although this node has ACTIVE "
    "RDMA ports: collectives run at a fraction of the bandwidth. It is often left over from debugging.",
    "Remove NCCL_IB_DISABLE (and NCCL_NET=Socket) from the job's environment, the image (/etc/nccl.conf) "
    "and the launcher scripts.",
    kind="problem",
)
NCCL_IB_GID_INDEX_BAD = Code(
    "NCCL_IB_GID_INDEX_BAD",
    "NCCL_IB_GID_INDEX does not point at a RoCE v2 GID",
    "On RoCE NCCL addresses the peer with the GID at NCCL_IB_GID_INDEX. If that entry is missing, RoCE v1, "
    "or link-local, connections fail (`ibv_modify_qp failed with 110 Connection timed out`) or stay in "
    "one L2 segment. Indexes differ between hosts when the netdevs' addresses differ.",
    "Set the index of the RoCE v2 GID with the IPv4 address (`show_gids`), or leave NCCL_IB_GID_INDEX unset "
    "on NCCL 2.21+, which picks that GID per port by itself.",
    kind="problem",
)
NCCL_ENV_INVALID = Code(
    "NCCL_ENV_INVALID",
    "NCCL reads a setting differently from how it is written",
    "NCCL parses numeric settings with strtoll: `NCCL_IB_DISABLE=true` is read as 0 and does nothing, "
    "and a value with a trailing unit or typo is cut at the first non-digit.",
    "Write numbers: NCCL_IB_DISABLE=1 or 0.",
    kind="problem",
)
NCCL_MASTER_ADDR_BAD = Code(
    "NCCL_MASTER_ADDR_BAD",
    "MASTER_ADDR / MASTER_PORT malformed",
    "torch.distributed (and NCCL's bootstrap through it) connects every rank to MASTER_ADDR:MASTER_PORT; an "
    "empty or malformed value fails at rendezvous on every rank.",
    "Set MASTER_ADDR to the rank-0 pod's hostname or IP (e.g. the headless service name "
    "`job-master-0.job`) and MASTER_PORT to a port number (1-65535).",
    kind="problem",
)
NCCL_ENV_INFO = Code(
    "NCCL_ENV_INFO",
    "NCCL settings",
    "What NCCL will use on this node with the job's settings.",
    "Nothing to fix.",
    kind="info",
)

NCCL_IB_HCA_UNKNOWN = Code(
    "NCCL_IB_HCA_UNKNOWN",
    "What NCCL_IB_HCA selects is unknown",
    "Could not decide: NCCL_IB_HCA is set but the node's RDMA devices and port states could not be read, so "
    "whether it selects an ACTIVE port is unknown.",
    "Run the check on the node (or in the pod) where /sys/class/infiniband is visible, or record the bundle "
    "with `rdmadoctor collect`.",
    kind="unknown",
)
NCCL_SOCKET_IFNAME_UNKNOWN = Code(
    "NCCL_SOCKET_IFNAME_UNKNOWN",
    "What NCCL_SOCKET_IFNAME selects is unknown",
    "Could not decide: the network interfaces (or the state of the ones NCCL_SOCKET_IFNAME matches) could not "
    "be read, so whether NCCL finds a socket interface that is up is unknown.",
    "Run the check in the job's network namespace (inside the pod), or record the bundle there with "
    "`rdmadoctor collect`.",
    kind="unknown",
)
NCCL_IB_GID_INDEX_UNKNOWN = Code(
    "NCCL_IB_GID_INDEX_UNKNOWN",
    "What NCCL_IB_GID_INDEX points at is unknown",
    "Could not decide: NCCL_IB_GID_INDEX is set but the RDMA devices or the GID tables of the RoCE ports NCCL "
    "uses were not recorded, so whether that index is a RoCE v2 GID is unknown.",
    "Record the GID tables: `show_gids > cmd/show_gids.txt` in the bundle, or use `rdmadoctor collect`.",
    kind="unknown",
)

IWARP_NCCL_IB = Code(
    "IWARP_NCCL_IB",
    "NCCL's IB transport would use an iWARP port",
    "NCCL's IB transport (NET/IB) takes every ACTIVE port whose link layer is InfiniBand or Ethernet and never "
    "looks at the transport type (src/transport/net_ib/init.cc, ncclIbInitDevices), so it lists an iWARP RNIC as "
    "a RoCE device ('NET/IB : Using [0]cxgb4_0:1/RoCE') and init succeeds. The first connection between two nodes "
    "then fails: NCCL creates an RC QP and moves it to RTR and RTS with ibv_modify_qp itself, addressing the peer "
    "by GID index 0 (connect.cc ncclIbQpRtr, ncclIbQpRts, ncclIbGetGidIndex), while an iWARP QP reaches RTS only "
    "through the iWARP connection manager (iw_cm, driven by rdma_cm's rdma_connect / rdma_accept), which NCCL "
    "never calls. The kernel driver answers EINVAL: cxgb4 (T5 and later) refuses the RTR call, irdma and siw the "
    "RTS call. NCCL prints 'NCCL WARN Call to ibv_modify_qp failed with 22 Invalid argument, on dev cxgb4_0:1, "
    "curr state INIT, next state RTR ...' followed by a hint about NCCL_IB_GID_INDEX that does not apply to "
    "iWARP, and the communicator fails with 'unhandled system error' (ncclSystemError): NCCL chose NET/IB at "
    "init and does not fall back to sockets then.",
    "Keep NET/IB off the iWARP ports. With other RDMA ports on the node, name only those:\n"
    "  env:\n  - name: NCCL_IB_HCA\n    value: \"=mlx5_0,mlx5_1\"\n"
    "(or exclude the RNIC: \"^=cxgb4_0\"). With iWARP only, train over TCP on purpose:\n"
    "  env:\n  - name: NCCL_IB_DISABLE\n    value: \"1\"\n  - name: NCCL_SOCKET_IFNAME\n    value: \"=<the RNIC's netdev>\"\n"
    "(the RNIC's netdev is a fast plain NIC for NCCL's sockets), or use a NCCL net plugin over libfabric "
    "(aws-ofi-nccl with FI_PROVIDER=verbs: libfabric's verbs;ofi_rxm connects through rdma_cm, which iWARP "
    "needs; not a path NCCL documents, so test it).",
    kind="problem",
)
NCCL_SOCKET_IFNAME_SLOW = Code(
    "NCCL_SOCKET_IFNAME_SLOW",
    "NCCL's socket interface is slower than the pool expects",
    "When NCCL moves its data over TCP (a socket pool, NCCL_IB_DISABLE, or no usable RDMA port), every byte "
    "between nodes goes through the interfaces NCCL_SOCKET_IFNAME selects, and NCCL spreads its traffic over "
    "all of them: one slow interface (a 1 Gb/s management NIC matched by a prefix, a pod's veth instead of the "
    "ENI) caps the job's bandwidth. The speed is what the kernel reports in /sys/class/net/<if>/speed, the value "
    "NCCL itself reads (net_socket.cc ncclNetSocketGetSpeed).",
    "Point NCCL_SOCKET_IFNAME at the fast interface, exactly:\n"
    "  env:\n  - name: NCCL_SOCKET_IFNAME\n    value: \"=eth0\"\n"
    "`ethtool <if>` shows its negotiated speed; a link that trained below its rating needs its cable or switch "
    "port checked. If the pool's interfaces are slower by design, lower socket_min_gbps in the config.",
    kind="problem",
)
NCCL_SOCKET_IFNAME_MTU_LOW = Code(
    "NCCL_SOCKET_IFNAME_MTU_LOW",
    "NCCL's socket interface MTU below the pool's",
    "NCCL's socket transport sends large messages as TCP streams: with a 1500-byte MTU on a network built for "
    "jumbo frames (socket_min_mtu, usually 9000), each message is cut into six times as many segments and the "
    "CPU cost per byte goes up, which shows at 25 Gb/s and beyond.",
    "`ip link set dev <if> mtu 9000` (persist it in netplan / NetworkManager, or the CNI config for a pod "
    "interface); every hop must allow it. If 1500 is the design, lower socket_min_mtu in the config.",
    kind="problem",
)
NCCL_SOCKET_IFNAME_UNSET = Code(
    "NCCL_SOCKET_IFNAME_UNSET",
    "NCCL picks its socket interfaces itself in a socket pool",
    "NCCL_SOCKET_IFNAME is not set in a pool that trains over TCP: NCCL then uses every interface whose name "
    "starts with 'ib', or else every interface that is up with an address except lo, docker* and virbr* "
    "(src/misc/socket.cc ncclFindInterfaces), and spreads its traffic over all of them: a management or "
    "storage NIC becomes part of the job's network.",
    "Name the fast interface, exactly:\n  env:\n  - name: NCCL_SOCKET_IFNAME\n    value: \"=eth0\"",
    kind="problem",
)
NCCL_SOCKET_SPEED_UNKNOWN = Code(
    "NCCL_SOCKET_SPEED_UNKNOWN",
    "Speed of NCCL's socket interface unknown",
    "Could not decide: the pool expects a minimum speed (socket_min_gbps), and the interface's "
    "/sys/class/net/<if>/speed could not be read or says -1 (virtio-net and many virtual NICs report no speed; "
    "NCCL then assumes 10 Gb/s).",
    "Check the speed by hand (`ethtool <if>`, the cloud's instance type). For virtual NICs that never report "
    "one, set socket_min_gbps = null for that pool and measure with a NCCL test (nccl-tests all_reduce_perf).",
    kind="unknown",
)
NCCL_SOCKET_SPEED_NOT_REPORTED = Code(
    "NCCL_SOCKET_SPEED_NOT_REPORTED",
    "NCCL's socket interface reports no speed (a virtual NIC)",
    "The interface's /sys/class/net/<if>/speed is -1: its driver reports no link speed, as virtio-net and the "
    "elastic NICs a cloud CNI gives pods (Terway ENI) do. NCCL then assumes 10 Gb/s (net_socket.cc "
    "ncclNetSocketGetSpeed) and the pool's socket_min_gbps cannot be compared here. The pool is still usable: "
    "such NICs are what socket-only pools are built on; only the bandwidth is unmeasured.",
    "Measure it between two nodes of the pool, on this interface:\n"
    "  iperf3 -s                                   # on one node\n"
    "  iperf3 -c <peer address> -P 8 -t 10         # on the other: the sum is the usable bandwidth\n"
    "or run nccl-tests across two nodes (`NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME==eth0 all_reduce_perf -b 1G -e 1G`, "
    "busbw); the cloud's instance type states the NIC's rated bandwidth. If the pool's NICs never report a speed, "
    "set socket_min_gbps = null for that pool to leave the speed to those measurements.",
    kind="problem",
)
NCCL_SOCKET_TRANSPORT = Code(
    "NCCL_SOCKET_TRANSPORT",
    "NCCL trains over TCP sockets",
    "Information: NCCL will move the data between nodes over TCP sockets on these interfaces, at this speed and "
    "MTU; in a socket pool (the tcp profile) that is the design, and this is its verdict.",
    "Nothing to fix.",
    kind="info",
)

# NCCL's messages in a job's log (rdmadoctor/logs/kb/nccl.py).
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
NCCL_IB_NO_DEVICE = Code(
    "NCCL_IB_NO_DEVICE",
    "NCCL's IB transport found no usable RDMA device",
    "NCCL looked for verbs devices with an ACTIVE port that NCCL_IB_HCA allows and found none: the "
    "uverbs device is not visible in the pod, the image lacks the provider, every port is down, or "
    "NCCL_IB_HCA names nothing that exists. NCCL then uses TCP sockets between nodes "
    "(NCCL_SOCKET_FALLBACK follows from it).",
    "In the pod: `ibv_devices` must list the HCAs (request rdma/hca in resources.limits, install "
    "ibverbs-providers in the image), `ibstat` must show them ACTIVE, and NCCL_IB_HCA must name them "
    "(`NCCL_IB_HCA=mlx5_0,mlx5_1`) or be unset. `rdmadoctor diagnose LOG --live` names which.",
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

# Codes the knowledge base adds for NCCL messages no check could see.
NCCL_NO_SOCKET_INTERFACE = Code(
    "NCCL_NO_SOCKET_INTERFACE",
    "NCCL found no network interface for its sockets",
    "NCCL needs one IP interface that is up and has an address for its bootstrap (and for the "
    "out-of-band connection of NET/IB, and for all data over NET/Socket). It found none it may use "
    "(NCCL skips lo and docker* unless told otherwise, and only takes what NCCL_SOCKET_IFNAME and "
    "NCCL_SOCKET_FAMILY select): communicator creation fails on that rank.",
    "List what the job's network namespace has: `ip -br addr`. Point NCCL at an interface that is "
    "UP with an address, in the pod spec:\n"
    "  env:\n  - name: NCCL_SOCKET_IFNAME\n    value: \"=eth0\"   # net1 for a Multus network\n"
    "Unset NCCL_SOCKET_FAMILY unless the interface has an address of that family; for `No interface "
    "found in the same subnet`, the address in NCCL_COMM_ID must be reachable from one local subnet.",
    condition=CONFIG,
)
NCCL_BOOTSTRAP_FAILED = Code(
    "NCCL_BOOTSTRAP_FAILED",
    "The ranks could not meet before NCCL could start",
    "Before any data moves, every rank gets NCCL's unique id from rank 0 (through PyTorch's TCPStore "
    "or MPI) and connects to rank 0's bootstrap socket. Here that exchange failed: rank 0 crashed or "
    "hung before publishing the id, the store or rank 0 is unreachable, or a rank got an empty id "
    "(address family 0). The job never starts its first collective.",
    "Look at rank 0's log first: an error there explains the rest. Check MASTER_ADDR/MASTER_PORT "
    "resolve to rank 0 and that the port is open between pods (`rdmadoctor preflight "
    "--wait-for-master`); make every rank run the same NCCL and PyTorch version; raise the store "
    "timeout only when rank 0 is merely slow to start.",
)
NCCL_SOCKET_ERROR = Code(
    "NCCL_SOCKET_ERROR",
    "A TCP connection between ranks failed",
    "NCCL's bootstrap, proxy and NET/Socket connections run over TCP. A connection was refused, "
    "reset, closed by the peer or timed out. Closed and reset connections almost always follow a "
    "peer that already died (look for its first error); a refused or timed-out connect without an "
    "earlier error points to the network: a wrong interface, a firewall or NetworkPolicy, a dead host.",
    "Find the first error on the rank the address belongs to. If there is none, check that the "
    "address is the peer's pod IP on the interface NCCL_SOCKET_IFNAME selects, that pod-to-pod TCP "
    "is allowed on all ports (NCCL picks ephemeral ports), and `ping`/`nc -vz <ip> <port>` between the pods.",
)
NCCL_SYSTEM_ERROR = Code(
    "NCCL_SYSTEM_ERROR",
    "NCCL returned `unhandled system error`",
    "A system or library call NCCL made failed (socket, shared memory, verbs, memory registration); "
    "the call returned ncclSystemError to the framework, which aborts. The string itself never says "
    "which call: the NCCL WARN line before it does.",
    "Read the finding this one follows (the WARN line before it, e.g. a shared-memory or ibv_reg_mr "
    "failure); without one, rerun with `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET` and diagnose that log.",
    one_per_subject=True,
)
NCCL_REMOTE_ERROR = Code(
    "NCCL_REMOTE_ERROR",
    "NCCL returned `remote process exited or there was a network error`",
    "NCCL lost a peer (ncclRemoteError, NCCL >= 2.13): another rank exited or crashed, or the network "
    "between the two failed (an IB work-completion error, a closed socket). This rank is a victim.",
    "Find the rank that failed first (its log ends earliest, or shows the first WARN/traceback) and "
    "diagnose that; if every rank shows only this, look for IB completion errors or port events "
    "(`NET/IB : Got completion`, `port error`) around the same time.",
    one_per_subject=True,
)
NCCL_IB_ASYNC_FATAL = Code(
    "NCCL_IB_ASYNC_FATAL",
    "The HCA reported a fatal asynchronous event",
    "The RDMA device reported a catastrophic error for itself (`local catastrophic error`: firmware "
    "or hardware failure), or for a completion queue or queue pair NCCL uses (`local access violation "
    "work queue error` and the like: a memory access the registration does not allow, a refused work "
    "request; the device itself is fine). The connections on it fail; the job aborts.",
    "For the device's event, drain the node and look at the HCA: `dmesg | grep mlx5` (health syndrome, "
    "command timeouts), `mlxfwmanager --query`, `mlxlink -d <dev>`; it needs a driver restart or a "
    "reboot (`mlxfwreset` for firmware), and the card replaced if it repeats. For a queue's event, read "
    "the peer's completion errors at the same time and rerun without GPUDirect RDMA "
    "(NCCL_NET_GDR_LEVEL=LOC) or the net plugin to find which one breaks.",
    condition=LINK,
)
NCCL_IB_ASYNC_EVENT = Code(
    "NCCL_IB_ASYNC_EVENT",
    "The HCA reported a port or fabric event during the run",
    "NCCL's IB transport logged an asynchronous event that is not fatal by itself: the port became "
    "active again, the LID, P_Key or subnet manager changed, the GID table changed (on RoCE: an IP "
    "address moved), or a client reregistration. Connections made before it can fail afterwards.",
    "Correlate with the switch and subnet-manager logs and `dmesg` at the same time; on RoCE keep the "
    "netdev's IP addresses stable while jobs run (NCCL picks its GID at start). Repeated events on "
    "one port: check the cable and port counters (`perfquery -x`, `mlxlink -d <dev> -c`).",
    condition=LINK,
)
NCCL_IB_MODIFY_QP_FAILED = Code(
    "NCCL_IB_MODIFY_QP_FAILED",
    "ibv_modify_qp failed: a connection between two HCAs could not be set up",
    "To connect two ranks NCCL moves each queue pair to RTR/RTS with the peer's address. `Invalid "
    "argument` (EINVAL) almost always means the GID index NCCL_IB_GID_INDEX forces does not exist or "
    "does not fit the peer; `Connection timed out` (ETIMEDOUT) that the two NICs cannot reach each "
    "other (different rails, routing).",
    "EINVAL: unset NCCL_IB_GID_INDEX (NCCL >= 2.21 picks the RoCE v2 GID itself) or set it to the "
    "index of the RoCE v2 IPv4 GID that `show_gids` lists on every node. ETIMEDOUT: set "
    "NCCL_CROSS_NIC=0 to keep traffic on one rail, and check the rails are wired and routed alike.",
    condition=LINK,
)
NCCL_NET_PLUGIN_LOAD_FAILED = Code(
    "NCCL_NET_PLUGIN_LOAD_FAILED",
    "An NCCL network plugin could not be loaded",
    "A net plugin (libnccl-net*.so: aws-ofi-nccl for EFA, the nccl-rdma-sharp-plugins, Google's "
    "FastSocket/gIB) exists but failed to load (a library it needs is missing, an undefined symbol), "
    "or the plugin NCCL_NET_PLUGIN names was not found. NCCL silently uses its internal IB or socket "
    "transport instead: on EFA that means TCP sockets.",
    "Make the plugin and its dependencies loadable in the image: `ldd /path/libnccl-net.so` shows "
    "what is missing (libfabric for aws-ofi-nccl); add the directory to LD_LIBRARY_PATH, or fix "
    "NCCL_NET_PLUGIN to the plugin's name (`ofi` loads libnccl-net-ofi.so).",
    condition=CONFIG,
)
NCCL_NET_INIT_FAILED = Code(
    "NCCL_NET_INIT_FAILED",
    "NCCL initialised no network transport at all",
    "Neither a plugin, nor NET/IB, nor NET/Socket could be initialised (NCCL >= 2.27 says so): a "
    "communicator that spans nodes cannot be created. Usually no usable socket interface exists.",
    "Look at the messages before it (`NET/Socket : no interface found`, NCCL_NET naming a transport "
    "that is not there); unset NCCL_NET or set it to a transport this node has, and make "
    "NCCL_SOCKET_IFNAME select an interface that is up with an address.",
    condition=CONFIG,
)
NCCL_GDR_DISTANCE = Code(
    "NCCL_GDR_DISTANCE",
    "NCCL will not use GPUDirect RDMA between a GPU and an HCA that are far apart",
    "Information: NCCL checks every GPU against every HCA and turns GPUDirect RDMA off for pairs whose "
    "PCIe distance exceeds NCCL_NET_GDR_LEVEL (PXB by default). On a node with one HCA per GPU this "
    "is expected for all but the near pair; it matters only when a GPU has no near HCA.",
    "Nothing to fix when every GPU's channels show `/GDRDMA`. Otherwise see `rdmadoctor explain "
    "GPU_NIC_FAR`: put GPU and HCA under one PCIe switch, or raise NCCL_NET_GDR_LEVEL only if the "
    "path really supports peer-to-peer.",
    kind=INFORMATION,
)

NCCL_DUPLICATE_GPU = Code(
    "NCCL_DUPLICATE_GPU",
    "Two ranks of one communicator are on the same GPU",
    "NCCL found two ranks on one host using the same CUDA device (the same PCI bus id) and refused to "
    "create the communicator (ncclInvalidUsage): NCCL needs one GPU per rank. The launch maps ranks to "
    "GPUs wrongly: the program never calls torch.cuda.set_device(local_rank), more ranks run per host "
    "than it has GPUs, or CUDA_VISIBLE_DEVICES shows every rank the same single GPU. The network is not "
    "involved.",
    "Give each local rank its own GPU: `torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"]))` before "
    "`init_process_group` (or `device_id=` in PyTorch 2.3+); run at most as many ranks per host as it has "
    "GPUs (torchrun --nproc_per_node, mpirun -npernode); do not set CUDA_VISIBLE_DEVICES to one GPU for "
    "all ranks; in Kubernetes request as many `nvidia.com/gpu` as the pod runs ranks.",
)
NCCL_INVALID_RANK = Code(
    "NCCL_INVALID_RANK",
    "A rank asked for a position outside its communicator",
    "ncclCommInitRank was called with a rank that is negative or not below the communicator's size "
    "(ncclInvalidArgument): the launcher's RANK and WORLD_SIZE disagree (WORLD_SIZE smaller than "
    "nnodes x nproc_per_node, a node-rank offset counted twice, a rank given by hand).",
    "Make every rank's RANK unique in 0..WORLD_SIZE-1 and WORLD_SIZE = nodes x ranks per node: let "
    "torchrun (--nnodes, --nproc_per_node, --node_rank) or the MPI launcher set them instead of the job "
    "script; with a Kubeflow PyTorchJob keep the replica counts and nproc_per_node consistent.",
)
NCCL_SINGLE_HOST = Code(
    "NCCL_SINGLE_HOST",
    "Every rank is on one host: NCCL's network transport carries nothing",
    "Information: NCCL said the job's ranks are all on one host (`nNodes 1`, or every rank local), so "
    "its traffic goes over NVLink, PCIe or shared memory and never over the network. `NET/IB : No device "
    "found` and `Using network Socket` there only say which transport NCCL would use between nodes; "
    "they are not a fallback and cost nothing.",
    "Nothing to fix for this job. Before running it on several hosts, check their RDMA devices "
    "(`rdmadoctor check`, or `rdmadoctor diagnose LOG --live` in the pod).",
    kind=INFORMATION,
)
NCCL_CUDA_FAILED = Code(
    "NCCL_CUDA_FAILED",
    "A CUDA call NCCL made failed",
    "NCCL asked CUDA for memory, a peer mapping, a multicast object or the driver's version, and CUDA "
    "refused (NCCL's `Cuda failure '...'` WARN, then ncclUnhandledCudaError). The network is not the "
    "cause: the GPU, its driver, the ranks' GPU mapping or the job's memory use is.",
    "Follow the finding's fix for the CUDA error it quotes: `out of memory` (the GPU is full when NCCL "
    "allocates its buffers), `invalid device ordinal` (a rank asks for a GPU its process cannot see), "
    "`peer access is not supported` (GPUs of one host cannot map each other: IOMMU, ACS, a VM), "
    "`operation not supported` in NVLS (no NVLink SHARP multicast here), driver version failures (a "
    "driver older than the CUDA the job was built with).",
)
NCCL_GRAPH_SIMPLE_ORDER = Code(
    "NCCL_GRAPH_SIMPLE_ORDER",
    "NCCL found no topology path for one of its search patterns and uses a simple order",
    "Information: NCCL searches the host's GPU/NIC topology for the best rings and trees, pattern by "
    "pattern; for one it found no path and fell back to a simple order. NCCL prints it as a WARN, but "
    "the job goes on; it can cost bandwidth when the simple order crosses slow links (PCIe host "
    "bridges, a CPU interconnect).",
    "Nothing to fix when the job's bandwidth is as expected (nccl-tests' busbw). Otherwise check that "
    "NCCL sees the real topology: `nvidia-smi topo -m`, NCCL_TOPO_DUMP_FILE, and in a VM or container "
    "the PCIe tree (`rdmadoctor topo`).",
    kind=INFORMATION,
)
NCCL_GRAPH_FILE = Code(
    "NCCL_GRAPH_FILE",
    "NCCL was given its rings and trees in a file (NCCL_GRAPH_FILE) instead of searching this machine",
    "NCCL_GRAPH_FILE makes NCCL import its channels from an XML file rather than search the GPU and NIC "
    "topology it sees. A file written for another machine, or for more GPUs than the job has, fails "
    "the communicator (`XML Import Channel : dev N not found`, then ncclSystemError) or makes it run "
    "several times slower. It is meant for experiments; cloud HPC images have set it in /etc/nccl.conf.",
    "Unset NCCL_GRAPH_FILE wherever it is set: the job's environment, /etc/nccl.conf or ~/.nccl.conf "
    "in the image (`grep -r GRAPH_FILE /etc/nccl.conf ~/.nccl.conf`). NCCL_TOPO_FILE, which only "
    "describes the topology, can stay.",
)
NCCL_TOPOLOGY_FAILED = Code(
    "NCCL_TOPOLOGY_FAILED",
    "NCCL could not build this machine's GPU and NIC topology",
    "NCCL reads the PCI tree of the GPUs and NICs from /sys to plan its rings and trees. A path it "
    "could not resolve (/sys hidden or partial in a container, a VM or WSL whose PCI tree is not the "
    "host's, a virtual NIC with no PCI device) or a known NCCL bug in the search stops the communicator "
    "with an internal or system error.",
    "In a container, mount the host's /sys read-only (the default for docker and Kubernetes; not a "
    "masked or fake one); in a VM give NCCL the real topology with NCCL_TOPO_FILE; keep NICs that have "
    "no PCI device out of NCCL_IB_HCA / NCCL_SOCKET_IFNAME; upgrade NCCL past a known bug.",
)
RCCL_HOST_SETUP = Code(
    "RCCL_HOST_SETUP",
    "RCCL says the host is not set up as it needs",
    "RCCL (AMD's NCCL) checks the kernel command line and the environment when it starts and warns "
    "when a setting it relies on is missing: `amd_iommu=on` and `iommu=pt` (without them peer-to-peer "
    "between GPUs and NICs can hang or fail), `HSA_FORCE_FINE_GRAIN_PCIE=1` (needed for RDMA to GPU "
    "memory). Multi-node jobs then hang, fail to connect, or run only with peer-to-peer off.",
    "Add `amd_iommu=on iommu=pt` to the kernel command line of the node (GRUB_CMDLINE_LINUX, then "
    "reboot) and set HSA_FORCE_FINE_GRAIN_PCIE=1 in the job's environment.",
    condition=CONFIG,
)
NCCL_COLLNET_FAILED = Code(
    "NCCL_COLLNET_FAILED",
    "NCCL's in-network reduction (CollNet over SHARP) could not be set up",
    "With NCCL_COLLNET_ENABLE=1 NCCL offloads reductions to the InfiniBand switches (SHARP) through the "
    "nccl-rdma-sharp plugin. The plugin could not get the resources it asked for (a SHARP group, a "
    "streaming-aggregation tree that another communicator of the job holds, the aggregation manager "
    "not reachable), and the communicator fails.",
    "Run without it (NCCL_COLLNET_ENABLE=0) to confirm; then check the SHARP aggregation manager (UFM) and "
    "the trees it grants a job: a job that makes several communicators may need more than one "
    "streaming tree (SHARP_COLL_ENABLE_SAT, the plugin's limits).",
    condition=CONFIG,
)
NCCL_PLUGIN_MISMATCH = Code(
    "NCCL_PLUGIN_MISMATCH",
    "The job's hosts load different NCCL net plugins",
    "NCCL loads a net plugin (libnccl-net.so: the SHARP/HPC-X plugin, aws-ofi-nccl, a cloud's) when it "
    "finds one, else uses its own IB and socket transports. Hosts whose images or library paths differ "
    "end up on different transports; their ranks cannot connect to each other, and the job hangs at "
    "its first collective across them.",
    "Use one image (or one LD_LIBRARY_PATH / NCCL_NET_PLUGIN) on every host: `ls $(dirname $(python -c "
    "'import torch;print(torch.__file__)'))/lib/libnccl-net*` and NCCL's `NET/Plugin` lines show which one "
    "each loads.",
    condition=CONFIG,
)
NCCL_MIXED_LINK_LAYERS = Code(
    "NCCL_MIXED_LINK_LAYERS",
    "NCCL's IB transport uses InfiniBand and RoCE ports together",
    "NCCL lists every ACTIVE RDMA port it may use (`NET/IB : Using [0]mlx5_0:1/IB ... [2]mlx5_2:1/RoCE`). "
    "A RoCE (Ethernet) port among InfiniBand ones, often a storage or management NIC, gets channels of "
    "its own: traffic through it cannot reach the InfiniBand peers, and connecting fails (ibv_modify_qp "
    "`Invalid argument`) or runs over another network.",
    "Keep NCCL on the ports of one fabric: NCCL_IB_HCA=^mlx5_2 (the RoCE one; `^` excludes) or the list of "
    "the InfiniBand ones.",
    condition=CONFIG,
)
NCCL_LOOPBACK = Code(
    "NCCL_LOOPBACK",
    "NCCL's bootstrap or socket interface is the loopback",
    "NCCL found no other interface it may use (NCCL_SOCKET_IFNAME excludes or names none that is up with "
    "an address, or the container has only `lo`) and bound its bootstrap or socket transport to 127.0.0.1: "
    "ranks on other hosts cannot connect to it, and a multi-node job fails at init or hangs. On one host it "
    "is harmless.",
    "Set NCCL_SOCKET_IFNAME to the interface the hosts share (`ip -br addr` in the pod: eth0, net1 for a "
    "Multus network), or fix the one it names; a `^docker0`-style exclusion must still leave one up.",
    condition=CONFIG,
)
NCCL_RANKS_MISMATCH = Code(
    "NCCL_RANKS_MISMATCH",
    "The ranks disagree about what they exchange",
    "A rank received a message of another size than it expected (`Message truncated : received 256 bytes "
    "instead of 4`): the ranks are not running the same thing. During setup (bootstrap.cc) the usual "
    "causes are ranks on different NCCL versions (an image that differs between nodes) or a rank that "
    "joined another job's rendezvous (two jobs on one MASTER_ADDR:MASTER_PORT, a restarted rank meeting "
    "the old ones); during a collective, ranks calling different collectives or sizes, or running with "
    "different NCCL_PROTO / NCCL_ALGO settings. The network is not at fault.",
    "Run every rank from the same image (each rank's `NCCL version` line must be the same) with the same "
    "NCCL_* settings; give each job its own MASTER_PORT; make every rank call the same collectives in the "
    "same order with the same sizes (TORCH_DISTRIBUTED_DEBUG=DETAIL checks that in PyTorch).",
)
LOG_ERROR_UNKNOWN = Code(
    "LOG_ERROR_UNKNOWN",
    "An error line that no row of the knowledge base explains",
    "The job printed an error that rdmadoctor has no pattern for: an NCCL `WARN` line, the NCCL error "
    "PyTorch quotes after `Last error:`, an `ncclInternalError`/`ncclInvalidUsage` result, the last "
    "line of a Python traceback, or any other program's line shaped like a failure (fatal, abort, failed, "
    "error, cannot, a signal, `no ... found`, a non-zero exit). It is still an error: it is quoted with its file and line and takes "
    "its place in the root-cause order (the first error of a log usually explains what follows).",
    "Read the quoted line: it is the job's own account of what failed. Search its words in the NCCL "
    "source (github.com/NVIDIA/nccl) or the framework's, or rerun with NCCL_DEBUG=INFO "
    "NCCL_DEBUG_SUBSYS=INIT,NET for the lines around it; please report it so a row can be added "
    "(`rdmadoctor list-patterns` shows what is known).",
)

# -- NCCL's RAS (src/ras/, 2.24+) and IB port failover (src/transport/net_ib/p2p_resiliency*.cc, 2.29.7+) ----
# Emitted by rdmadoctor.logs.ras (a RAS report: `rdmadoctor run` asks it when the job hangs,
# `diagnose` reads a pasted one) and by the failover rows of rdmadoctor/logs/kb/nccl.py.
JOB_HANG = Code(
    "JOB_HANG",
    "The job stopped making progress while it ran",
    "`rdmadoctor run` saw no output from the job for longer than hang_after_s (or PyTorch's watchdog said a "
    "collective timed out) while the job was still running: a collective waits for a rank that will not come. "
    "Left alone, PyTorch's watchdog kills the job at its timeout (10 minutes by default) and the GPUs idle until then.",
    "Read the findings that follow it: the rank NCCL's RAS names (dead, not answering, behind the others) and "
    "this node's ports and counters at that moment. Then look at that rank's node (`rdmadoctor check` there, "
    "`dmesg | grep -i -e xid -e mlx5`). A job that is silent for long on purpose (a long evaluation, a checkpoint "
    "upload) needs a larger hang_after_s (`--set hang_after_s=1800`).",
)
NCCL_RAS_PROCESS_DEAD = Code(
    "NCCL_RAS_PROCESS_DEAD",
    "NCCL's RAS considers a process of the job dead",
    "The RAS threads of the other processes lost every connection to this one for more than a minute "
    "(RAS_PEER_DEAD_TIMEOUT): it crashed, was killed (the OOM killer, a node that rebooted), or its node "
    "left the network. Every collective that needs its ranks waits for ever.",
    "Look at the named node: the process's exit (the job's log of that rank, `dmesg` for the OOM killer or a "
    "GPU Xid), the node itself (`rdmadoctor check`), its network. Restart the job without that node if it is broken.",
)
NCCL_RAS_RANK_MISSING = Code(
    "NCCL_RAS_RANK_MISSING",
    "A process or rank of the job did not answer NCCL's RAS",
    "RAS asked every process for its communicators and these did not answer in time: the process hangs (its "
    "RAS thread is stuck, the host is overloaded), or the network to its node is broken. Not yet dead: RAS "
    "waits a minute before it says so.",
    "Look at the named node and process: is it alive (`ps`, `py-spy dump --pid PID`), is its node reachable, "
    "does `rdmadoctor check` pass there. Ask RAS again in a minute: a process that stays missing becomes dead.",
)
NCCL_RAS_STRAGGLER = Code(
    "NCCL_RAS_STRAGGLER",
    "Ranks are behind the others in a communicator (stragglers)",
    "NCCL's RAS found the ranks of a communicator at different operation counts: the ranks with the lowest "
    "count have not launched the collective the others wait in. They are the stragglers: their process is "
    "stuck before the collective (data loading, a CPU-side hang, an exception in one rank), or their GPU or "
    "network is slow. The ranks ahead are only waiting for them.",
    "Look at the ranks behind, not the ones ahead: their node's output, their stack (`py-spy dump --pid PID`), "
    "their GPU (`nvidia-smi`), their node (`rdmadoctor check`). With many ranks NCCL's text report names only "
    "the small groups: the JSON report (NCCL 2.28.7+, what `rdmadoctor run` asks for) names every rank.",
)
NCCL_RAS_RANK_ERROR = Code(
    "NCCL_RAS_RANK_ERROR",
    "A rank reported an NCCL error to RAS",
    "A rank's communicator holds an error (an asynchronous error from the network or a peer, or a failed "
    "initialisation): its collectives cannot complete, and the others wait for it. `Remote process error` "
    "means its peer failed first: look for the rank whose error is of another kind.",
    "Read that rank's own output for NCCL's WARN line (`rdmadoctor diagnose` on its log) and check its node "
    "(`rdmadoctor check`): the error names the failing layer (network, CUDA, system).",
)
NCCL_RAS_QUIET = Code(
    "NCCL_RAS_QUIET",
    "NCCL's RAS sees nothing wrong",
    "Every process answered RAS and every communicator is RUNNING with matching operation counts and no "
    "error. Beside a hang or a watchdog timeout that does not clear the job: RAS sees collectives launched, "
    "not completed, so a hang inside a collective (a network path that drops traffic, a GPU kernel that never "
    "ends) looks healthy to it (NVIDIA/nccl#1730).",
    "Nothing to fix in NCCL's view. For a hang, look at the network and the GPUs under the collective: the "
    "node's ports and counters (`rdmadoctor check --sample 10`), `dmesg` for Xid and mlx5 errors, and the "
    "flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT=1).",
    kind=INFORMATION,
)
NCCL_RAS_UNAVAILABLE = Code(
    "NCCL_RAS_UNAVAILABLE",
    "NCCL's RAS could not be asked",
    "rdmadoctor could not get a report from NCCL's RAS socket (by default localhost:28028, NCCL_RAS_ADDR): no "
    "NCCL 2.24+ process listens there (RAS off with NCCL_RAS_ENABLE=0, an older NCCL, no communicator made "
    "yet, another address), or it did not answer in time. Nothing is known about the ranks then; it is not "
    "a sign that they are fine.",
    "Run the job with NCCL 2.24 or later and RAS on (the default; NCCL_RAS_ENABLE=1); when NCCL_RAS_ADDR moves "
    "it, `rdmadoctor run` reads the same variable. `ncclras` (shipped with NCCL) asks it by hand.",
    kind=COULD_NOT_DECIDE,
)
NCCL_IB_PORT_FAILOVER = Code(
    "NCCL_IB_PORT_FAILOVER",
    "NCCL moved traffic off a failed IB device and runs on fewer",
    "With NCCL_IB_RESILIENCY_PORT_FAILOVER=1 (2.29.7+), a work request that failed on one device of a merged "
    "NIC is replayed on the others and that device is no longer used: the job goes on, with the bandwidth of "
    "the devices left. In 2.30, with NCCL_IB_RESILIENCY_PORT_RECOVERY=1, NCCL may bring it back later; "
    "otherwise it stays out until the job restarts. Nothing but this line says so.",
    "Find why the device failed (`rdmadoctor check --sample 10` on the node: the port's state and its link_downed "
    "and symbol_error counters; `dmesg | grep mlx5`) and fix the link (reseat or replace the cable or "
    "transceiver). Until then the job runs slower; restart it once the port is back to use every device.",
)
NCCL_IB_PORT_RECOVERED = Code(
    "NCCL_IB_PORT_RECOVERED",
    "NCCL brought a failed IB device back into use",
    "NCCL 2.30's port recovery (NCCL_IB_RESILIENCY_PORT_RECOVERY=1) found the device working again and "
    "restored its queue pairs: the job runs on every device again.",
    "Nothing to do for the job; the link flapped: watch the port's link_downed counter "
    "(`rdmadoctor check --sample 10`) and replace a cable that flaps again.",
    kind=INFORMATION,
)
NCCL_IB_FAILOVER_FATAL = Code(
    "NCCL_IB_FAILOVER_FATAL",
    "NCCL's port failover could not save the communicator",
    "A second device failed (NCCL fails over one device per communicator), no device is left, or the "
    "completion error is of a kind failover does not handle: the communicator fails with ncclRemoteError and "
    "the job stops.",
    "Check every port of the node (`rdmadoctor check --sample 10`): several failing at once points to the node "
    "(the HCA, its firmware, a switch it shares), not one cable. Replace or drain the node before restarting.",
)

NCCL_NET_COUNT_MISMATCH = Code(
    "NCCL_NET_COUNT_MISMATCH",
    "The ranks' nodes see different numbers of NICs",
    "NCCL 2.30 compares how many network devices each rank's node offers and refuses to build the communicator "
    "when they differ (`Detected mixed local Net device counts across ranks`): a node that lost a NIC (a port down, "
    "a device the pod was not given, NCCL_IB_HCA set differently) would otherwise slow every collective to its rails.",
    "Find the node with fewer NICs (the INFO lines before the WARN name each rank's count: `Rank N has M local Net "
    "devices`), and bring its NICs back (`ibstat`, the pod's RDMA resources, the same NCCL_IB_HCA everywhere). "
    "NCCL_IGNORE_NET_MISMATCH=1 lets the job run on the unequal nodes, slower.",
    condition=CONFIG,
)
NCCL_GCP_NET_PLUGIN = Code(
    "NCCL_GCP_NET_PLUGIN",
    "NCCL runs over GCP's own network plugin (FastSocket or GPUDirect-TCPX)",
    "Information: on Google Cloud VMs without RDMA NICs (A2, A3 High/Mega, G2) NCCL's inter-node transport is a "
    "Google plugin over TCP: FastSocket (many flows over gVNIC) or GPUDirect-TCPX/TCPXO (the NIC writes into GPU "
    "memory over TCP). That is the transport those VMs are built for, not a fallback from InfiniBand; its NICs are "
    "Ethernet interfaces, so NCCL's `GPU Direct RDMA Disabled for HCA` line for each of them says nothing wrong.",
    "Nothing to fix. For the most bandwidth on A3 use GPUDirect-TCPX(O) with every GPU NIC "
    "(NCCL_GPUDIRECTTCPX_SOCKET_IFNAME / NCCL_FASTRAK_IFNAME) rather than FastSocket, as Google's GKE guide sets it up.",
    kind=INFORMATION,
)

# nccl-tests' output (rdmadoctor/logs/kb/nccltests.py).
NCCL_TEST_FAILED = Code(
    "NCCL_TEST_FAILED",
    "An nccl-tests run stopped on an NCCL error",
    "nccl-tests (all_reduce_perf, ...) checks every NCCL call and stops the run at the first that fails, "
    "printing the host, the source line of the test and NCCL's error string. The error string is generic "
    "('internal error', 'unhandled system error', 'remote process exited'): the reason is in NCCL's WARN "
    "lines before it, which rdmadoctor reports as the cause when the log has them.",
    "Run the test again with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (and NCCL_DEBUG_FILE=/tmp/nccl.%h.%p) and "
    "diagnose that log. NCCL 2.18 reported some aborts as 'internal error - please report this issue': update NCCL.",
    condition=CONFIG,
)
NCCL_TEST_WRONG_RESULTS = Code(
    "NCCL_TEST_WRONG_RESULTS",
    "nccl-tests found wrong results",
    "With validation on (-c 1, the default) nccl-tests compares every result buffer with the expected values; "
    "'Out of bounds values : N FAILED' counts the elements that differ. The collective completed but moved or "
    "reduced wrong data: corruption on a GPU, PCIe or NVLink path, broken GPUDirect RDMA (ACS or IOMMU "
    "redirecting peer traffic), or a bug in the NCCL version or a plugin.",
    "Find the pair that corrupts: rerun on each host alone (-g N on one node), then with NCCL_P2P_DISABLE=1, "
    "NCCL_SHM_DISABLE=1 or NCCL_NET_GDR_LEVEL=LOC to take one path out at a time; check ACS "
    "(`lspci -vvv | grep ACSCtl`) and the IOMMU; run the GPUs' own diagnostics (dcgmi diag -r 3).",
    condition=CONFIG,
)

# logs.diagnose's own (checks/logs.py).
LOGS_READ = Code(
    "LOGS_READ",
    "Job logs read",
    "Information: which logs were read (files, bytes, lines) and what NCCL said it uses, so a report with no "
    "log finding still shows the logs were there and how far they were read.",
    "Nothing to fix. For NCCL's transport to show, run the job with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET).",
    kind=INFORMATION,
)
LOG_UNREADABLE = Code(
    "LOG_UNREADABLE",
    "A job log could not be read",
    "Could not decide: a log given to rdmadoctor (a missing file, a directory, binary data, a compressed file cut "
    "short) could not be read, wholly or from some point on; what it would have shown is unknown.",
    "Give the log files themselves (`rdmadoctor diagnose rank0.log rank1.log.gz`, `kubectl logs POD | "
    "rdmadoctor diagnose -`), or record them in a bundle with `rdmadoctor collect --log FILE`.",
    kind=COULD_NOT_DECIDE,
)

LOGS_NOTHING_TO_JUDGE = Code(
    "LOGS_NOTHING_TO_JUDGE",
    "Nothing in the logs could be judged",
    "Could not decide: the text was read, but it holds nothing rdmadoctor recognises (no NCCL line, no "
    "known message, no error line, no traceback, no pasted tool output), so the absence of a finding "
    "says nothing about the job: it is not a pass.",
    "Give the failing rank's log with NCCL's own lines in it: run the job with NCCL_DEBUG=INFO "
    "(NCCL_DEBUG_SUBSYS=INIT,NET is enough for the transport), then `kubectl logs POD | rdmadoctor "
    "diagnose -` for the rank that failed first (or every rank's log). Pasted tool output needs its "
    "prompt line (`$ ibstat`).",
    kind=COULD_NOT_DECIDE,
)

NCCL_TEST_BUSBW_LOW = Code(
    "NCCL_TEST_BUSBW_LOW",
    "nccl-tests' bus bandwidth is far below what the fabric can carry",
    "nccl-tests reports busbw, a bandwidth normalised so that it compares with the hardware's: across nodes "
    "it approaches what each node's NICs carry together (8 ACTIVE 400 Gb/s ports: about 400 GB/s less "
    "protocol overhead, 80-95% of it in practice). A run across nodes that peaks at less than half of that "
    "is not using the fabric fully: NCCL on sockets, without GPUDirect RDMA, on fewer NICs than the node has "
    "(NCCL_IB_HCA), across rails, or a congested or misconfigured network (RoCE without PFC/ECN).",
    "Read the NCCL section of the same run (NCCL_DEBUG=INFO): the network (IB, not Socket), the devices, "
    "GDRDMA on the channel lines. Then test the fabric alone between the two hosts with ib_write_bw on each "
    "NIC pair; with RoCE check PFC/ECN on the switch and the NICs (mlnx_qos -i IFACE).",
    condition=CONFIG,
    kind=PROBLEM,
)

NCCL_NICS_UNUSED = Code(
    "NCCL_NICS_UNUSED",
    "NCCL uses fewer RDMA ports than the node has ACTIVE",
    "NCCL's device list (`NET/IB : Using [0]mlx5_0:1/IB ...`) names the ports its IB transport spreads "
    "channels over; a pasted port list of the same node shows more ACTIVE ports of the same link layer. "
    "Inter-node bandwidth is bounded by the ports NCCL uses: 1 of 4 rails is a quarter of the node's. "
    "NCCL_IB_HCA narrower than the rails, or a pod given only some devices (its rdma/hca resource, "
    "/dev/infiniband), leaves the others idle.",
    "Let NCCL use every rail: unset NCCL_IB_HCA, or list them all (NCCL_IB_HCA=mlx5_0,mlx5_1,...); in a pod "
    "request every device from the RDMA device plugin. If the other ports carry storage or another job on "
    "purpose, nothing to do.",
    condition=CONFIG,
    kind=PROBLEM,
)
