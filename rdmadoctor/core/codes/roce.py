"""RDMA over Ethernet: RoCE (roce.config) and iWARP (iwarp.config).

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import COULD_NOT_DECIDE, INFORMATION, PROBLEM, Code

# roce.config and iwarp.config (checks/roce.py, checks/iwarp.py); ib.ports names them as the cause
# of a port that is down.
ROCE_NETDEV_DOWN = Code(
    "ROCE_NETDEV_DOWN",
    "RoCE netdev down",
    "A RoCE port is only ACTIVE while its Ethernet netdev is up with a carrier; while it is down the "
    "port is DOWN and NCCL cannot use it.",
    "`ip link set dev <netdev> up`; if it stays down (NO-CARRIER), check the cable and the switch port "
    "(`ethtool <netdev>`, `mlxlink -d <dev>`).",
    kind=PROBLEM,
)
IWARP_NETDEV_DOWN = Code(
    "IWARP_NETDEV_DOWN",
    "iWARP netdev down",
    "An iWARP port is up only while its Ethernet netdev has a carrier: the kernel reports the port DOWN "
    "(physical state Disabled) otherwise (core/device.c iw_query_port). No RDMA connection can be made on it.",
    "`ip link set dev <netdev> up`; if it stays without a carrier (NO-CARRIER in `ip link`), check the cable, "
    "the transceiver and the switch port (`ethtool <netdev>`).",
    kind=PROBLEM,
)
IWARP_NO_IPV4 = Code(
    "IWARP_NO_IPV4",
    "iWARP netdev has no IPv4 address",
    "The kernel keeps an iWARP port in INIT (physical state PortConfigurationTraining) while its netdev has a "
    "carrier but no IPv4 address, and reports it ACTIVE only once it has one (core/device.c iw_query_port). "
    "iWARP connections are TCP connections set up by rdma_cm, which resolves the peer by IP address: without "
    "an address the port carries nothing.",
    "Give the netdev an address: `ip addr add 10.0.0.11/24 dev <netdev>`, and make it persistent (netplan, "
    "NetworkManager, or the CNI / Multus NetworkAttachmentDefinition's IPAM when the netdev is in a pod).",
    kind=PROBLEM,
)

# roce.config (checks/roce.py).
ROCE_NO_V2_GID = Code(
    "ROCE_NO_V2_GID",
    "No routable RoCE v2 GID",
    "RoCE v2 GIDs are derived from the IP addresses of the port's netdev. Without an IPv4 (or global "
    "IPv6) address there is no RoCE v2 GID a peer can route to: NCCL finds no usable GID and falls back "
    "to TCP sockets, or fails with `ibv_modify_qp` errors when NCCL_IB_GID_INDEX points at a missing one.",
    "Give the netdev an address (`ip addr add 10.0.0.11/24 dev <netdev>`, or in netplan / NetworkManager "
    "so it survives a reboot); the kernel adds the RoCE v1 and v2 GIDs for it at once. Check with "
    "`show_gids` or `cat /sys/class/infiniband/<dev>/ports/<port>/gid_attrs/types/*`. If only RoCE v1 GIDs "
    "appear, the RDMA CM default was changed: `cat /sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_mode` "
    "should say `RoCE v2` (`cma_roce_mode -d <dev> -p <port> -m 2`).",
    kind=PROBLEM,
)
NET_MTU_LOW = Code(
    "NET_MTU_LOW",
    "RoCE MTU below 4096",
    "The RoCE path MTU is derived from the netdev MTU (netdev MTU minus ~100 bytes of headers, rounded "
    "down to 256/512/1024/2048/4096). At 1500 the RoCE MTU is 1024: every message is cut into 4x more "
    "packets and large-message bandwidth drops by 10-20%.",
    "Set the netdev MTU to 9000 (`ip link set dev <netdev> mtu 9000`, persistently in netplan / "
    "NetworkManager) and make sure every switch port on the path allows jumbo frames (9216). Then "
    "`ibv_devinfo -d <dev>` shows active_mtu 4096.",
    kind=PROBLEM,
)
ROCE_V2_GID = Code(
    "ROCE_V2_GID",
    "RoCE v2 GID indices",
    "Which GID table entries are RoCE v2, and which one carries the IPv4 address: the value "
    "NCCL_IB_GID_INDEX should take when it is set.",
    "Nothing to fix. Set NCCL_IB_GID_INDEX to the index with the IPv4 address, or leave it unset on "
    "NCCL 2.21+, which picks a RoCE v2 IPv4 GID itself.",
    kind=INFORMATION,
)

ROCE_GIDS_UNKNOWN = Code(
    "ROCE_GIDS_UNKNOWN",
    "RoCE GID table not recorded",
    "The input lists the RoCE port but not its GID table (an `ibstat` or plain `ibv_devinfo` without -v, "
    "or a kernel older than 4.5 without gid_attrs/types): whether the port has a routable RoCE v2 GID, "
    "and which NCCL_IB_GID_INDEX to use, cannot be decided.",
    "Record the table: `show_gids > cmd/show_gids.txt` or `ibv_devinfo -v > cmd/ibv_devinfo.txt`, or "
    "collect a bundle with `rdmadoctor collect`. On the node: "
    "`grep . /sys/class/infiniband/<dev>/ports/<port>/gid_attrs/types/* 2>/dev/null`.",
    kind=COULD_NOT_DECIDE,
)
ROCE_NETDEV_NOT_SEEN = Code(
    "ROCE_NETDEV_NOT_SEEN",
    "RoCE netdev not visible",
    "The RoCE port's Ethernet netdev, or its state, is not visible here: in a pod it usually lives in "
    "the host's (or another) network namespace, and a pasted tool output may not name it. The port "
    "state judged by ib.ports already says whether the link is up (a RoCE port is ACTIVE only while its "
    "netdev is up), so this is information, not a problem.",
    "Nothing to fix. To see it: on the node `rdma link show` names the netdev of each port, and "
    "`ip link show <netdev>` its state; in a bundle add `ibdev2netdev` as cmd/ibdev2netdev.txt.",
    kind=INFORMATION,
)

# iwarp.config (checks/iwarp.py).
IWARP_PORT = Code(
    "IWARP_PORT",
    "iWARP port",
    "Information: this port is iWARP (RDMA over TCP; node_type RNIC), not RoCE, although its link layer is "
    "Ethernet too. What that means for a job:\n"
    "- NCCL: its IB transport (NET/IB) takes the port as a RoCE port and the first connection between two "
    "nodes fails at ibv_modify_qp (see IWARP_NCCL_IB). NCCL jobs keep NET/IB off it: NCCL_IB_HCA naming only "
    "other ports, or NCCL_IB_DISABLE=1 to train over TCP sockets on purpose (the RNIC's netdev works as a plain "
    "fast NIC for that), or a NCCL net plugin over libfabric (aws-ofi-nccl with FI_PROVIDER=verbs, which "
    "connects through rdma_cm; its README says most libfabric providers should work, possibly through a "
    "utility provider such as ofi_rxm; test it before relying on it).\n"
    "- UCX (Open MPI's pml ucx, UCX-based MPICH, Horovod over them): UCX skips every device whose transport "
    "type is not InfiniBand (uct/ib/base/ib_md.c uct_ib_device_is_supported; `UCX_LOG_LEVEL=debug` shows "
    "'unsupported transport type iWARP'), so the job runs over TCP without saying so.\n"
    "- Open MPI 5: iWARP is supported through the ofi MTL and the cm PML over libfabric's verbs;ofi_rxm "
    "(Open MPI docs, tuning-apps/networking/iwarp.rst; the openib BTL that served iWARP before is gone). "
    "libfabric's verbs provider names the fabric 'Ethernet-iWARP' and connects with rdma_cm, which needs "
    "/dev/infiniband/rdma_cm in the container and an IP address on the RNIC's netdev.",
    "Nothing to fix on the node. MPI jobs: `mpirun --mca pml cm --mca mtl ofi -x FI_PROVIDER=verbs ...` "
    "(libfabric layers ofi_rxm over verbs by itself). NCCL jobs: see IWARP_NCCL_IB.",
    kind=INFORMATION,
)
IWARP_CM_MISSING = Code(
    "IWARP_CM_MISSING",
    "iWARP connection manager module not loaded",
    "Every iWARP QP is connected by the iWARP connection manager (iw_cm), which rdma_cm drives for userspace. "
    "Without rdma_cm, librdmacm (libfabric's verbs provider, MPI, `ib_write_bw -R`) cannot connect; without "
    "iw_cm no iWARP connection exists at all. The iWARP drivers depend on iw_cm, so a missing iw_cm usually "
    "means a driver built without it.",
    "`modprobe iw_cm rdma_cm rdma_ucm` and persist them: `printf 'iw_cm\\nrdma_cm\\nrdma_ucm\\n' > "
    "/etc/modules-load.d/iwarp.conf` (rdma-core's kernel-boot rules load them when an iWARP device appears).",
    kind=PROBLEM,
)
IWARP_UNEXPECTED = Code(
    "IWARP_UNEXPECTED",
    "iWARP port where the profile expects another transport",
    "The profile (rdma_transport) expects RoCE or InfiniBand, and this port is iWARP. Its Ethernet link layer "
    "satisfies link_layer = Ethernet, but NCCL's IB transport cannot connect it (IWARP_NCCL_IB): a node like "
    "this in a RoCE pool takes NCCL jobs that fail at their first connection.",
    "Give the pool RoCE-capable NICs, move this node to an iWARP pool (`--profile iwarp`, or rdma_transport = "
    "\"iWARP\" in its [pools.<name>]), or, when the port is not meant for jobs, list it in ignore_ports.",
    kind=PROBLEM,
)
IWARP_NO_PORTS = Code(
    "IWARP_NO_PORTS",
    "No iWARP port where the profile expects one",
    "The profile expects iWARP (rdma_transport = \"iWARP\") and the node has no iWARP port: its RDMA ports are "
    "InfiniBand or RoCE, or it has none.",
    "Check the RNIC is seen and bound (`lspci -d 1425:` for Chelsio; `rdma link` lists every RDMA port with its "
    "netdev); for irdma, the E810 must be in iWARP mode (the irdma module parameter roce_ena=0, the default). "
    "Or give this node the profile of what it has.",
    kind=PROBLEM,
)
