"""nccl.env's codes: what each finding of the check means, for the report, `explain` and alerts.

Declared here, apart from the probe and the judges, so that both (and checks/logs.py, which names
two of them as causes) import them without importing each other. checks/nccl.py lists them on its
Check; renaming one is a breaking change (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import Code

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
